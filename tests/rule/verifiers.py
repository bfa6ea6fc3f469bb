"""Speculative decoding under every rule, vectorized over many independent streams, to test losslessness.

Two Markov language models over a small vocabulary (`tests.specdec.model_pair`: a peaked target and a draft
that agrees with it in part) decode `streams` independent sequences side by side. Each pass drafts from the
draft's own sampling distribution, decides with the rule (the registry's vectorized recompute for chains;
the engine's walk for trees, cross-checked against the registry's), and emits the kept tokens plus one: the
rule's residual at a rejection, the target's bonus token when all are kept. What comes out is counted as
transitions (previous token, token), which for a lossless rule follow the target's transition matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specaccept_cli.rule.registry import rule_named
from specaccept_cli.rule.steps import ChainSteps, TreeSteps, offsets_of
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

    def add(self, previous: Array, token: Array, where: Array | None = None) -> None:
        if where is not None:
            previous, token = previous[where], token[where]
        np.add.at(self.counts, (previous, token), 1)


def draw(rng: np.random.Generator, rows: Array) -> Array:
    """One token per row of (unnormalised, non-negative) weights, by inverse CDF."""
    cumulative = np.cumsum(rows, axis=1)
    u = rng.random(rows.shape[0]) * cumulative[:, -1]
    return np.minimum((cumulative <= u[:, None]).sum(axis=1), rows.shape[1] - 1)


def top_distinct(rng: np.random.Generator, rows: Array, width: int) -> Array:
    """`width` distinct tokens per row drawn without replacement from its weights (Gumbel top-k)."""
    with np.errstate(divide="ignore"):
        keys = np.log(rows) + rng.gumbel(size=rows.shape)
    return np.argsort(-keys, axis=1)[:, :width]


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


# --- chains ------------------------------------------------------------------------------------------------


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
    """Decode until at least `tokens` are emitted under a chain rule (see the module docstring).

    `greedy_draft` drafts the draft's argmax (a one-hot draft, as EAGLE / MTP / n-gram drafting do);
    otherwise tokens are drawn from the draft's distribution. `resample` overrides the rule's own residual:
    "standard" (max(p - q, 0)) or "one-hot" (the target without the rejected draft token).
    """
    verifier = rule_named(rule)
    rng = np.random.default_rng(seed)
    vocab = target.vocab
    P, Q = target.transitions, draft.transitions
    emitted = Emitted(vocab)
    previous = rng.integers(vocab, size=streams)
    every = np.arange(streams)
    offsets = np.arange(streams + 1, dtype=np.int64) * k
    while emitted.tokens < tokens:
        contexts = np.empty((streams, k + 1), dtype=np.int64)
        drafted = np.empty((streams, k), dtype=np.int64)
        contexts[:, 0] = previous
        for j in range(k):
            rows = Q[contexts[:, j]]
            drafted[:, j] = np.argmax(rows, axis=1) if greedy_draft else draw(rng, rows)
            contexts[:, j + 1] = drafted[:, j]
        p = P[contexts[:, :k], drafted]
        q = Q[contexts[:, :k], drafted]
        r = rng.random((streams, k))
        columns: dict[str, Array] = {"p": p.ravel(), "q": q.ravel(), "r": r.ravel()}
        params: dict[str, Array] = {}
        target_draws = np.empty((streams, k + 1), dtype=np.int64)
        if rule in ("sample-match", "argmax"):
            for j in range(k + 1):
                rows = P[contexts[:, j]]
                target_draws[:, j] = np.argmax(rows, axis=1) if rule == "argmax" else draw(rng, rows)
            columns = {"draft_tokens": drafted.ravel(), "target_tokens": target_draws[:, :k].ravel()}
        ratios = np.ones((streams, k + 1))  # ratios[:, j + 1] = w_j, ratios[:, 0] = w_(-1) = 1
        if rule == "block":
            for j in range(k):
                ratios[:, j + 1] = np.minimum(1.0, ratios[:, j] * p[:, j] / q[:, j])
            block_residual = np.full((streams, k), np.nan)
            for j in range(k - 1):
                nxt = contexts[:, j + 1]
                block_residual[:, j] = np.maximum(ratios[:, j + 1, None] * P[nxt] - Q[nxt], 0.0).sum(axis=1)
            columns["residual"] = block_residual.ravel()
        if rule == "typical":
            entropy = -(P * np.log(np.where(P > 0, P, 1.0))).sum(axis=1)
            columns = {"p": p.ravel(), "entropy": entropy[contexts[:, :k]].ravel()}
            params = {"epsilon": np.full(streams, epsilon), "delta": np.full(streams, delta)}
        accepted = verifier.accepted(ChainSteps(offsets, columns, params))
        for j in range(k):  # the kept drafts
            emitted.add(contexts[:, j], drafted[:, j], accepted > j)
        stop = contexts[every, accepted]  # the context of the one token every pass adds
        rows = P[stop].copy()
        rejected = accepted < k
        at = every[rejected]
        kind = resample or {"standard": "standard", "greedy-draft": "one-hot"}.get(rule)
        if kind == "standard":
            rows[at] = np.maximum(P[stop[at]] - Q[stop[at]], 0.0)
        elif kind == "one-hot":
            rows[at, drafted[at, accepted[at]]] = 0.0  # the target without the rejected draft token
        elif rule == "block":
            rows[at] = np.maximum(ratios[at, accepted[at], None] * P[stop[at]] - Q[stop[at]], 0.0)
        if rule in ("sample-match", "argmax"):
            extra = target_draws[every, accepted]  # the target's own token at the stop (or the bonus)
        else:
            empty = rows.sum(axis=1) <= 0.0
            rows[empty] = P[stop[empty]]
            extra = draw(rng, rows) if rule != "typical" else draw(rng, P[stop])
        emitted.add(stop, extra)
        emitted.passes += streams
        if rule == "argmax":
            emitted.greedy_misses += int((extra != np.argmax(P[stop], axis=1)).sum())
            kept = np.arange(k)[None, :] < accepted[:, None]
            emitted.greedy_misses += int((kept & (drafted != np.argmax(P[contexts[:, :k]], axis=2))).sum())
        previous = extra  # the pass's last token is the one it added
    return emitted


# --- trees ---------------------------------------------------------------------------------------------------


@dataclass
class TreeLog:
    """The steps a tree decode logged (nodes in tried order), and the depth the decoder itself accepted."""

    parent: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    columns: dict[str, list[float]] = field(default_factory=dict)
    params: dict[str, list[float]] = field(default_factory=dict)
    depths: list[int] = field(default_factory=list)

    def steps(self) -> TreeSteps:
        dtype = {name: np.int64 if "token" in name else np.float64 for name in self.columns}
        return TreeSteps(
            offsets_of(self.lengths),
            np.array(self.parent, dtype=np.int64),
            {name: np.array(values, dtype=dtype[name]) for name, values in self.columns.items()},
            {name: np.array(values) for name, values in self.params.items()},
        )


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
    log_steps: int = 300,
) -> tuple[Emitted, TreeLog]:
    """Decode under a tree rule: at each depth the walk's current node gets `width` drafted children, tried in
    order; the first kept one is walked into. Only the walked nodes' children are drafted (the others are never
    tested, so they change no decision). The first `log_steps` passes of stream 0.. are logged as tree steps.
    """
    rng = np.random.default_rng(seed)
    vocab = target.vocab
    P, Q = target.transitions, draft.transitions
    emitted = Emitted(vocab)
    log = TreeLog()
    previous = rng.integers(vocab, size=streams)
    every = np.arange(streams)
    while emitted.tokens < tokens:
        context = previous.copy()
        live = np.ones(streams, dtype=bool)
        reached = np.zeros(streams, dtype=np.int64)
        residual = P[context].copy()  # the target (or its residual) at the walk's current node
        node_rows: list[dict[str, Array]] = []  # per (depth, sibling): arrays over streams
        for level in range(depth):
            rows_q = Q[context]
            if rule == "tree-residual":
                children = np.stack([draw(rng, rows_q) for _ in range(width)], axis=1)  # i.i.d. from q
            elif rule == "tree-argmax":
                children = np.argsort(-rows_q, axis=1, kind="stable")[:, :width]
            else:
                children = top_distinct(rng, rows_q, width)
            coin = rng.random(streams)
            target_token = np.argmax(P[context], axis=1) if rule == "tree-argmax" else draw(rng, P[context])
            accumulated = np.zeros(streams)
            chosen = np.full(streams, -1)
            for sibling in range(width):
                token = children[:, sibling]
                trying = live & (chosen < 0)
                p_node = P[context, token]
                record: dict[str, Array] = {"level": np.full(streams, level), "trying": trying.copy()}
                if rule == "tree-residual":
                    p_res = residual[every, token]
                    q_node = rows_q[every, token]
                    r = rng.random(streams)
                    passed = r <= np.minimum(1.0, p_res / q_node)
                    record |= {"p": p_res, "q": q_node, "r": r}
                    fail = trying & ~passed
                    updated = np.maximum(residual[fail] - rows_q[fail], 0.0)
                    totals = updated.sum(axis=1, keepdims=True)
                    residual[fail] = np.where(totals > 0, updated / np.where(totals > 0, totals, 1.0), residual[fail])
                elif rule == "tree-target-cdf":
                    accumulated = np.where(trying, accumulated + p_node, accumulated)
                    passed = (coin <= accumulated / max(threshold_acc, 1e-9)) | (p_node >= threshold_single)
                    record |= {"p": p_node, "coin": coin}
                    fail = trying & ~passed
                    residual[fail, token[fail]] = 0.0  # the kernel removes a rejected child from the target
                else:  # tree-match, tree-argmax: the child equal to the target's token
                    passed = token == target_token
                    record |= {"token": token, "target_token": target_token}
                record["token_id"] = token
                node_rows.append(record)
                chosen = np.where(trying & passed, sibling, chosen)
            kept = live & (chosen >= 0)
            token = children[every, np.maximum(chosen, 0)]
            emitted.add(context, token, kept)
            if rule == "tree-argmax":
                emitted.greedy_misses += int((kept & (token != np.argmax(P[context], axis=1))).sum())
            reached += kept
            stopped = live & ~kept
            # a stop: the rule's residual (tree-match / tree-argmax: the target's own token)
            if rule in ("tree-match", "tree-argmax"):
                extra = target_token
            else:
                rows = residual.copy()
                empty = rows.sum(axis=1) <= 0.0
                rows[empty] = P[context[empty]]
                extra = draw(rng, rows)
            emitted.add(context, extra, stopped)
            if rule == "tree-argmax":
                emitted.greedy_misses += int((stopped & (extra != np.argmax(P[context], axis=1))).sum())
            previous = np.where(stopped, extra, previous)
            live = kept
            context = np.where(kept, token, context)
            residual[kept] = P[context[kept]]
        bonus = np.argmax(P[context], axis=1) if rule == "tree-argmax" else draw(rng, P[context])
        emitted.add(context, bonus, live)
        if rule == "tree-argmax":
            emitted.greedy_misses += int((live & (bonus != np.argmax(P[context], axis=1))).sum())
        previous = np.where(live, bonus, previous)
        emitted.passes += streams
        _log_steps(log, node_rows, reached, width, log_steps, threshold_single, threshold_acc)
    return emitted, log


def _log_steps(
    log: TreeLog,
    node_rows: list[dict[str, Array]],
    reached: Array,
    width: int,
    limit: int,
    threshold_single: float,
    threshold_acc: float,
) -> None:
    """Write the tried nodes of the first streams' passes as tree steps (parent indices in tried order)."""
    for stream in range(min(limit - len(log.depths), reached.shape[0])):
        index_at_level: dict[int, int] = {}  # the last tried node of a level: its kept one, if any
        count = 0
        for record in node_rows:
            if not record["trying"][stream]:
                continue
            level = int(record["level"][stream])
            log.parent.append(index_at_level[level - 1] if level else -1)
            for name, values in record.items():
                if name not in ("level", "trying", "token_id"):
                    log.columns.setdefault(name, []).append(values[stream].item())
            index_at_level[level] = count
            count += 1
        log.lengths.append(count)
        log.params.setdefault("threshold_single", []).append(threshold_single)
        log.params.setdefault("threshold_acc", []).append(threshold_acc)
        log.depths.append(int(reached[stream]))
