"""Counting what the package's decoders (`specaccept_cli.rule.decoders`) emit, to test losslessness.

Two Markov language models over a small vocabulary (`tests.specdec.model_pair`: a peaked target and a draft
that agrees with it in part) decode `streams` independent sequences side by side, under a rule, with the
decoders `simulate --rule` writes its logs from. What comes out is counted as transitions (previous token,
token), which for a lossless rule follow the target's transition matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specaccept_cli.rule.decoders import Pass, chain_passes, tree_passes
from specaccept_cli.rule.steps import TreeSteps
from specaccept_cli.summary.probability import chi2_sf
from tests.specdec import MarkovLM

Array = np.ndarray


@dataclass
class Emitted:
    """Transitions counted over every stream: counts[previous, token]."""

    vocab: int
    counts: Array = field(init=False)
    greedy_misses: int = 0  # emitted tokens that are not the target's argmax (for the greedy rules)
    passes: int = 0  # target passes (each emits its kept tokens plus one)

    def __post_init__(self) -> None:
        self.counts = np.zeros((self.vocab, self.vocab), dtype=np.int64)

    @property
    def tokens(self) -> int:
        return int(self.counts.sum())

    def add_pass(self, step: Pass, target: MarkovLM) -> None:
        """Count a pass's emitted tokens, each after the one before it (the first after the pass's start)."""
        contexts = np.concatenate([step.previous[:, None], step.emitted[:, :-1]], axis=1)
        emitted = np.arange(step.emitted.shape[1])[None, :] <= step.accepted[:, None]
        previous, token = contexts[emitted], step.emitted[emitted]
        np.add.at(self.counts, (previous, token), 1)
        self.greedy_misses += int((token != np.argmax(target.transitions[previous], axis=1)).sum())
        self.passes += int(step.accepted.shape[0])


def chi_square(emitted: Emitted, target: MarkovLM) -> tuple[float, float, int]:
    """(statistic, p-value, df) of the emitted transitions against the target's, row by row.

    Cells whose expected count is under 5 are pooled into one per row; a token the target gives probability 0
    that was emitted makes the statistic infinite.
    """
    statistic, df = 0.0, 0
    for previous in range(emitted.vocab):
        observed = emitted.counts[previous].astype(np.float64)
        total = observed.sum()
        if total == 0:
            continue
        chance = target.transitions[previous]
        if (observed[chance == 0] > 0).any():
            return math.inf, 0.0, 0
        expected = total * chance
        small = (expected < 5) & (chance > 0)
        big = expected >= 5
        cells_o = list(observed[big]) + ([observed[small].sum()] if small.any() else [])
        cells_e = list(expected[big]) + ([expected[small].sum()] if small.any() else [])
        o, e = np.array(cells_o), np.array(cells_e)
        statistic += float(((o - e) ** 2 / e).sum())
        df += len(cells_o) - 1
    return statistic, chi2_sf(statistic, df), df


def chain_decode(
    rule: str,
    target: MarkovLM,
    draft: MarkovLM,
    *,
    tokens: int,
    k: int = 4,
    streams: int = 4000,
    seed: int = 0,
    greedy_draft: bool = False,
    epsilon: float = 0.3,
    delta: float = 0.6,
    resample: str | None = None,
) -> Emitted:
    """Decode until at least `tokens` are emitted under a chain rule.

    `greedy_draft` drafts the draft's argmax (a one-hot draft, as EAGLE / MTP / n-gram drafting do);
    otherwise tokens are drawn from the draft's distribution. `resample` overrides the rule's own residual:
    "standard" (max(p - q, 0)) or "one-hot" (the target without the rejected draft token).
    """
    emitted = Emitted(target.vocab)
    passes = chain_passes(
        rule,
        target.transitions,
        draft.transitions,
        np.random.default_rng(seed),
        streams=streams,
        k_low=k,
        k_high=k,
        greedy_draft=greedy_draft,
        resample=resample,
        epsilon=epsilon,
        delta=delta,
    )
    while emitted.tokens < tokens:
        emitted.add_pass(next(passes), target)
    return emitted


@dataclass
class TreeLog:
    """The steps of a tree decode's first pass (whole trees, nodes in tried order) and the depths it walked."""

    first: TreeSteps
    depths: list[int]

    def steps(self) -> TreeSteps:
        return self.first


def tree_decode(
    rule: str,
    target: MarkovLM,
    draft: MarkovLM,
    *,
    tokens: int,
    width: int = 2,
    depth: int = 3,
    streams: int = 4000,
    seed: int = 0,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> tuple[Emitted, TreeLog]:
    """Decode under a tree rule until at least `tokens` are emitted; the first pass's steps are kept as a log."""
    emitted = Emitted(target.vocab)
    passes = tree_passes(
        rule,
        target.transitions,
        draft.transitions,
        np.random.default_rng(seed),
        streams=streams,
        width=width,
        depth=depth,
        threshold_single=threshold_single,
        threshold_acc=threshold_acc,
    )
    log = None
    while emitted.tokens < tokens:
        step = next(passes)
        if log is None:
            assert isinstance(step.steps, TreeSteps)
            log = TreeLog(step.steps, step.accepted.tolist())
        emitted.add_pass(step, target)
    assert log is not None
    return emitted, log
