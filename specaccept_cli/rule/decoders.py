"""Honest speculative decoders under every rule of the table, on real small-vocabulary models.

The models are two Markov language models: `target[x]` and `draft[x]` are the next-token distributions after
token x. Many streams decode at once, a target pass at a time. Each pass drafts from the draft's own sampling
distribution (its argmax for `argmax` and `tree-argmax`, or with `greedy_draft`, as EAGLE / MTP / n-gram
drafters do), decides as the engine does, and emits the kept tokens plus one: at a rejection a token from the
rule's residual, for the match rules the target's own token, and after a full draft the bonus token from the
target. The decision is made here, by the pass's own walk (first rejection, block's last passing position, a
tree's first passing child), from the same values the pass logs, so a recompute of the logged steps with the
table (`registry.RULES`) can be checked against it: `simulate --rule` writes these passes, and the
losslessness tests count what they emit.

The residuals resampled at a stop (what keeps a lossless rule's output distributed as the target's):
- `standard`: max(p - q, 0); `block`: max(w P - Q, 0) with the running ratio w before the stop;
- `greedy-draft`: the target without the rejected token (vLLM without draft probabilities);
- `tree-residual`: the running residual max(p_res - q, 0) after every tried sibling was rejected (SpecInfer);
- `tree-target-cdf`: the target without the tried children (SGLang's kernel);
- `typical`: the target itself (Medusa samples the next token from it);
- `sample-match`, `argmax`, `tree-match`, `tree-argmax`: the target's own token at the stop.

Trees are whole: every node above the last level gets `width` children (drawn i.i.d. from the draft for
`tree-residual`, as SpecInfer does; `width` distinct ones, sampled without replacement, for the others; the
draft's top `width` for `tree-argmax`), listed level by level in the order they are tried, so node i of level
l + 1 is child i % width of node i // width of level l.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct

from specaccept_cli.rule.batch import FloatArray, IntArray
from specaccept_cli.rule.steps import ChainSteps, TreeSteps
from specaccept_cli.rule.vectorized import accept_thresholds

BoolArray = npt.NDArray[np.bool_]
CHAIN_RULES = ("standard", "greedy-draft", "sample-match", "block", "typical", "argmax")
TREE_RULES = ("tree-residual", "tree-target-cdf", "tree-argmax", "tree-match")
# Medusa's defaults (`posterior_threshold`, `posterior_alpha`): the typical rule's epsilon and delta.
EPSILON = 0.09
DELTA = 0.3
THRESHOLD_ACC_FLOOR = 1e-9  # SGLang's launcher floors threshold_acc here (as `trees.py` does)


class Pass(Struct):
    """One target pass of every stream: what it started from, what it logged, decided and emitted.

    Stream s emitted `emitted[s, : accepted[s] + 1]`, the first after `previous[s]`, each after the one before.
    """

    previous: IntArray  # (streams,) the last token before the pass
    steps: ChainSteps | TreeSteps  # one logged step per stream, in the rule's row contract
    accepted: IntArray  # (streams,) accepted length (chains) or depth (trees), as this decoder decided
    emitted: IntArray  # (streams, longest + 1)


def draw(rng: np.random.Generator, rows: FloatArray) -> IntArray:
    """One token per row of (unnormalised, non-negative) weights, by inverse CDF."""
    cumulative = np.cumsum(rows, axis=1)
    u = rng.random(rows.shape[0]) * cumulative[:, -1]
    drawn: IntArray = np.minimum((cumulative <= u[:, None]).sum(axis=1), rows.shape[1] - 1)
    return drawn


def top_distinct(rng: np.random.Generator, rows: FloatArray, width: int) -> IntArray:
    """`width` distinct tokens per row drawn without replacement from its weights (Gumbel top-k)."""
    with np.errstate(divide="ignore"):
        keys = np.log(rows) + rng.gumbel(size=rows.shape)
    chosen: IntArray = np.argsort(-keys, axis=1, kind="stable")[:, :width]
    return chosen


def small_models(rng: np.random.Generator, vocab: int = 8, quality: float = 0.5) -> tuple[FloatArray, FloatArray]:
    """A peaked target and a draft that agrees with it to degree `quality` (1: the target itself)."""
    target = rng.dirichlet(np.full(vocab, 0.3), size=vocab)
    noise = rng.dirichlet(np.full(vocab, 1.0), size=vocab)
    draft = quality * target + (1 - quality) * noise
    return target, draft / draft.sum(axis=1, keepdims=True)


def first_failures(passed: BoolArray) -> IntArray:
    """Per row, how many positions from the start pass before the first that does not."""
    failed = ~passed
    length: IntArray = np.where(failed.any(axis=1), failed.argmax(axis=1), passed.shape[1]).astype(np.int64)
    return length


def last_passes(passed: BoolArray) -> IntArray:
    """Per row, the largest j + 1 whose position passes (0 if none): block verification's length."""
    k = passed.shape[1]
    from_end = passed[:, ::-1].argmax(axis=1)
    length: IntArray = np.where(passed.any(axis=1), k - from_end, 0).astype(np.int64)
    return length


def entropies(target: FloatArray) -> FloatArray:
    """The target's entropy (nats) after each token: what Medusa's typical acceptance compares with."""
    logs = np.log(np.where(target > 0, target, 1.0))
    entropy: FloatArray = -(target * logs).sum(axis=1)
    return entropy


def chain_passes(
    rule: str,
    target: FloatArray,
    draft: FloatArray,
    rng: np.random.Generator,
    *,
    streams: int,
    k_low: int,
    k_high: int,
    greedy_draft: bool = False,
    resample: str | None = None,
    epsilon: float = EPSILON,
    delta: float = DELTA,
) -> Iterator[Pass]:
    """Passes of a chain rule without end; each stream's draft length is drawn uniformly from k_low..k_high.

    `resample` replaces the rule's residual ("standard": max(p - q, 0); "one-hot": the target without the
    rejected token), to show what another pairing does (r <= p with max(p - q, 0) is a loss).
    """
    if rule not in CHAIN_RULES:
        raise ValueError(f"{rule!r} is not a chain rule ({', '.join(CHAIN_RULES)})")
    vocab = target.shape[0]
    every = np.arange(streams)
    previous = rng.integers(vocab, size=streams)
    entropy = entropies(target) if rule == "typical" else None
    while True:
        lengths = rng.integers(k_low, k_high + 1, size=streams)  # each stream's draft length this pass
        k = int(lengths.max()) if streams else 0
        inside = np.arange(k)[None, :] < lengths[:, None]  # the positions each stream drafted
        last = np.arange(k)[None, :] == lengths[:, None] - 1
        contexts = np.empty((streams, k + 1), dtype=np.int64)
        drafted = np.empty((streams, k), dtype=np.int64)
        contexts[:, 0] = previous
        for j in range(k):
            rows = draft[contexts[:, j]]
            drafted[:, j] = np.argmax(rows, axis=1) if greedy_draft or rule == "argmax" else draw(rng, rows)
            contexts[:, j + 1] = drafted[:, j]
        p = target[contexts[:, :k], drafted]
        q = draft[contexts[:, :k], drafted]
        columns: dict[str, npt.NDArray[Any]] = {}
        params: dict[str, FloatArray] = {}
        ratios = np.ones((streams, k + 1))  # ratios[:, j + 1] = w_j, ratios[:, 0] = w_(-1) = 1 (block)
        target_tokens = np.empty((streams, k + 1), dtype=np.int64)
        if rule in ("sample-match", "argmax"):
            for j in range(k + 1):
                rows = target[contexts[:, j]]
                target_tokens[:, j] = np.argmax(rows, axis=1) if rule == "argmax" else draw(rng, rows)
            passed = drafted == target_tokens[:, :k]
            columns = {"draft_tokens": drafted[inside], "target_tokens": target_tokens[:, :k][inside]}
            if rule == "sample-match":
                columns["p"] = p[inside]
        elif rule == "typical":
            assert entropy is not None
            position_entropy = entropy[contexts[:, :k]]
            with np.errstate(over="ignore"):
                passed = p > np.minimum(epsilon, delta * np.exp(-position_entropy))
            columns = {"p": p[inside], "entropy": position_entropy[inside]}
            params = {"epsilon": np.full(streams, epsilon), "delta": np.full(streams, delta)}
        else:
            r = rng.random((streams, k))
            columns = {"p": p[inside], "q": q[inside], "r": r[inside]}
            if rule == "standard":
                passed = r <= accept_thresholds(p, q)
            elif rule == "greedy-draft":
                passed = r <= p
            else:  # block: the running ratio, the residual mass at the next position, h from both
                for j in range(k):
                    ratios[:, j + 1] = np.minimum(1.0, ratios[:, j] * p[:, j] / q[:, j])
                residual = np.full((streams, k), np.nan)  # null at each stream's last position
                for j in range(k - 1):
                    following = contexts[:, j + 1]
                    mass = np.maximum(ratios[:, j + 1, None] * target[following] - draft[following], 0.0)
                    residual[:, j] = np.where(j < lengths - 1, mass.sum(axis=1), np.nan)
                denominator = residual + 1.0 - ratios[:, 1:]
                with np.errstate(invalid="ignore", divide="ignore"):
                    inner = np.where(denominator > 0.0, residual / np.where(denominator > 0.0, denominator, 1.0), 1.0)
                passed = r <= np.where(last, ratios[:, 1:], inner)
                columns["residual"] = residual[inside]
        passed &= inside
        accepted = last_passes(passed) if rule == "block" else first_failures(passed)
        accepted = np.minimum(accepted, lengths)
        stop = contexts[every, accepted]  # the context of the one token every pass adds
        if rule in ("sample-match", "argmax"):
            extra = target_tokens[every, accepted]
        else:
            rows = target[stop].copy()
            at = every[accepted < lengths]
            kind = resample or {"standard": "standard", "greedy-draft": "one-hot", "block": "block"}.get(rule)
            if kind == "standard":
                rows[at] = np.maximum(target[stop[at]] - draft[stop[at]], 0.0)
            elif kind == "one-hot":
                rows[at, drafted[at, accepted[at]]] = 0.0
            elif kind == "block":
                rows[at] = np.maximum(ratios[at, accepted[at], None] * target[stop[at]] - draft[stop[at]], 0.0)
            empty = rows.sum(axis=1) <= 0.0
            rows[empty] = target[stop[empty]]
            extra = draw(rng, rows)
        emitted = np.empty((streams, k + 1), dtype=np.int64)
        emitted[:, :k] = drafted
        emitted[every, accepted] = extra
        offsets = np.zeros(streams + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        yield Pass(previous, ChainSteps(offsets, columns, params), accepted, emitted)
        previous = extra


def tree_nodes(width: int, depth: int) -> int:
    """Drafted nodes of a whole tree: width + width^2 + ... + width^depth."""
    return sum(width**level for level in range(1, depth + 1))


def tree_parents(width: int, depth: int) -> IntArray:
    """Each node's parent index (level by level, siblings in tried order; -1 at depth 1)."""
    parents = [-1] * width
    start = 0
    for level in range(2, depth + 1):
        above = width ** (level - 1)
        parents += [start + index // width for index in range(above * width)]
        start += above
    return np.array(parents, dtype=np.int64)


class _Level(Struct):
    """One level of every stream's tree, over (stream x parent) rows and their `width` children."""

    contexts: IntArray  # (streams * parents,) the parents' tokens
    children: IntArray  # (streams * parents, width)
    passed: BoolArray  # (streams * parents, width)
    fields: dict[str, npt.NDArray[Any]]  # (streams * parents, width) each
    stop_rows: FloatArray | None  # (streams * parents, vocab): what a stop at the parent draws from
    stop_tokens: IntArray | None  # (streams * parents,): the match rules' token at a stop


def _tree_level(
    rule: str,
    target: FloatArray,
    draft: FloatArray,
    rng: np.random.Generator,
    contexts: IntArray,
    width: int,
    threshold_single: float,
    threshold_acc: float,
) -> _Level:
    rows_q = draft[contexts]
    n = contexts.shape[0]
    index = np.arange(n)
    if rule == "tree-residual":
        children = np.stack([draw(rng, rows_q) for _ in range(width)], axis=1)  # i.i.d. from q
    elif rule == "tree-argmax":
        children = np.argsort(-rows_q, axis=1, kind="stable")[:, :width]
    else:
        children = top_distinct(rng, rows_q, width)
    if rule == "tree-residual":
        residual = target[contexts].copy()
        p = np.empty((n, width))
        q = np.empty((n, width))
        for sibling in range(width):
            token = children[:, sibling]
            p[:, sibling] = residual[index, token]
            q[:, sibling] = rows_q[index, token]
            updated = np.maximum(residual - rows_q, 0.0)  # what the next sibling is tested against
            totals = updated.sum(axis=1, keepdims=True)
            residual = np.where(totals > 0, updated / np.where(totals > 0, totals, 1.0), residual)
        r = rng.random((n, width))
        passed = r <= accept_thresholds(p, q)
        return _Level(contexts, children, passed, {"p": p, "q": q, "r": r}, residual, None)
    if rule == "tree-target-cdf":
        p = target[contexts[:, None], children]
        coin: FloatArray = rng.random(size=(n,))
        accumulated = np.zeros(n)
        passed = np.empty((n, width), dtype=bool)
        for sibling in range(width):
            accumulated = accumulated + p[:, sibling]
            passed[:, sibling] = (coin <= accumulated / max(threshold_acc, THRESHOLD_ACC_FLOOR)) | (
                p[:, sibling] >= threshold_single
            )
        stop_rows = target[contexts].copy()
        stop_rows[index[:, None], children] = 0.0  # the kernel removes the rejected children from the target
        fields = {"p": p, "coin": np.repeat(coin[:, None], width, axis=1)}
        return _Level(contexts, children, passed, fields, stop_rows, None)
    rows_p = target[contexts]
    target_token = np.argmax(rows_p, axis=1) if rule == "tree-argmax" else draw(rng, rows_p)
    passed = children == target_token[:, None]
    tokens: dict[str, npt.NDArray[Any]] = {
        "token": children,
        "target_token": np.repeat(target_token[:, None], width, axis=1),
    }
    return _Level(contexts, children, passed, tokens, None, target_token)


def tree_passes(
    rule: str,
    target: FloatArray,
    draft: FloatArray,
    rng: np.random.Generator,
    *,
    streams: int,
    width: int,
    depth: int,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> Iterator[Pass]:
    """Passes of a tree rule without end, each over a whole tree of `width` children per node and `depth` levels."""
    if rule not in TREE_RULES:
        raise ValueError(f"{rule!r} is not a tree rule ({', '.join(TREE_RULES)})")
    if width < 1 or depth < 1:
        raise ValueError("a tree has at least one child per node and one level")
    vocab = target.shape[0]
    every = np.arange(streams)
    nodes = tree_nodes(width, depth)
    parent = np.tile(tree_parents(width, depth), streams)
    offsets = np.arange(streams + 1, dtype=np.int64) * nodes
    params = (
        {"threshold_single": np.full(streams, threshold_single), "threshold_acc": np.full(streams, threshold_acc)}
        if rule == "tree-target-cdf"
        else {}
    )
    previous = rng.integers(vocab, size=streams)
    while True:
        levels: list[_Level] = []
        contexts = previous.copy()
        for _ in range(depth):
            level = _tree_level(rule, target, draft, rng, contexts, width, threshold_single, threshold_acc)
            levels.append(level)
            contexts = level.children.reshape(-1)
        # the walk: from the root, into the first passing child of the current node, until none passes
        current = np.zeros(streams, dtype=np.int64)  # the current node's index within its level (root: 0)
        accepted = np.zeros(streams, dtype=np.int64)
        emitted = np.zeros((streams, depth + 1), dtype=np.int64)
        live = np.ones(streams, dtype=bool)
        for depth_index, level in enumerate(levels):
            row = every * (level.contexts.shape[0] // streams) + current  # (stream, parent) row of the level
            passed = level.passed[row]
            kept = live & passed.any(axis=1)
            stopping = live & ~kept
            chosen = passed.argmax(axis=1)
            if level.stop_tokens is not None:
                extra = level.stop_tokens[row]
            else:
                assert level.stop_rows is not None
                rows = level.stop_rows[row].copy()
                empty = rows.sum(axis=1) <= 0.0
                rows[empty] = target[level.contexts[row][empty]]
                extra = draw(rng, rows)
            emitted[stopping, depth_index] = extra[stopping]
            emitted[kept, depth_index] = level.children[row, chosen][kept]
            accepted += kept
            current = np.where(kept, current * width + chosen, current)
            live = kept
        last = levels[-1]
        deepest = last.children.reshape(streams, -1)[every, current]
        rows_p = target[deepest]
        bonus = np.argmax(rows_p, axis=1) if rule == "tree-argmax" else draw(rng, rows_p)
        emitted[live, depth] = bonus[live]
        columns = {
            name: np.concatenate([level.fields[name].reshape(streams, -1) for level in levels], axis=1).reshape(-1)
            for name in levels[0].fields
        }
        yield Pass(previous, TreeSteps(offsets, parent, columns, params), accepted, emitted)
        previous = emitted[every, accepted]
