"""Tree rules: `tree-residual`, `tree-target-cdf`, `tree-argmax`, `tree-match`.

A tree step lists its drafted nodes in the order the verifier tried siblings, each with `parent` (-1 for a
node of depth 1). The verifier walks from the last verified token: it tries the current node's children in
order, moves into the first one whose test passes, and stops when none does (or there are none). The
accepted length is the depth of the deepest node on that walk; the pass emits that plus one token.

Engine sources, read in the public repositories:
- `tree-residual`: SpecInfer's multi-step speculative sampling; the EAGLE repository `eagle/model/utils.py`
  (`evaluate_posterior`: siblings tried in order, each `r <= p_res / q`, the target's residual renormalised
  after each rejected sibling); llama.cpp `examples/speculative/speculative.cpp` (`n_seq_dft > 1`). The row
  carries the p (residual) and q each test used, so the test is the seed's r <= min(1, p / q).
- `tree-target-cdf`: SGLang `sgl-kernel/csrc/speculative/speculative_sampling.cuh`,
  `TreeSpeculativeSamplingTargetOnly` (called from `eagle_info.py` with all-zero draft probabilities): one
  coin per parent; `prob_acc += p` over the tried children, child kept iff
  `coin <= prob_acc / threshold_acc || p >= threshold_single` (threshold_acc floored at 1e-9 by its
  launcher); on a stop it samples from the target with the rejected children removed.
- `tree-argmax`: SGLang `sgl-kernel/csrc/speculative/eagle_utils.cu` `VerifyTreeGreedy` (greedy batches): the
  first child equal to the target's argmax (`target_predict` at the parent).
- `tree-match`: TensorRT-LLM `tensorrt_llm/_torch/pyexecutor/sampler.py` `_process_draft_tokens_tree`: every
  root-to-leaf path is compared with the target's sampled tokens (`cumprod` of matches) and the longest
  matched prefix wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from specaccept_cli.rule.batch import IntArray
from specaccept_cli.rule.scalar import threshold as seed_threshold
from specaccept_cli.rule.steps import StepFields, StepParams, TreeSteps, param_column, step_param
from specaccept_cli.rule.vectorized import accept_thresholds

THRESHOLD_ACC_FLOOR = 1e-9  # SGLang's launcher: `fmaxf(threshold_acc, 1e-9f)`

# node index, the earlier-tried siblings' indices (rejected) -> does the node's test pass?
NodeTest = Callable[[int, list[int]], bool]


def walk_depth(parent: Sequence[int], passes: NodeTest) -> int:
    """Depth of the deepest node on the accepted walk (0 when no child of the root passes)."""
    children: dict[int, list[int]] = {}
    for index, value in enumerate(parent):
        children.setdefault(value, []).append(index)
    current, depth = -1, 0
    while True:
        tried: list[int] = []
        chosen = None
        for child in children.get(current, []):
            if passes(child, tried):
                chosen = child
                break
            tried.append(child)
        if chosen is None:
            return depth
        current, depth = chosen, depth + 1


def residual_scalar(parent: Sequence[int], fields: StepFields, params: StepParams) -> int:
    p, q, r = fields["p"], fields["q"], fields["r"]
    return walk_depth(parent, lambda node, tried: r[node] <= seed_threshold(p[node], q[node]))


def target_cdf_scalar(parent: Sequence[int], fields: StepFields, params: StepParams) -> int:
    p, coin = fields["p"], fields["coin"]
    single = step_param(params, "threshold_single", 1.0)
    acc_threshold = max(step_param(params, "threshold_acc", 1.0), THRESHOLD_ACC_FLOOR)

    def passes(node: int, tried: list[int]) -> bool:
        accumulated = 0.0
        for sibling in [*tried, node]:
            accumulated += p[sibling]
        return coin[node] <= accumulated / acc_threshold or p[node] >= single

    return walk_depth(parent, passes)


def token_match_scalar(parent: Sequence[int], fields: StepFields, params: StepParams) -> int:
    """`tree-argmax`: SGLang's `VerifyTreeGreedy` walks into the first child equal to the target's token."""
    token, target = fields["token"], fields["target_token"]
    return walk_depth(parent, lambda node, tried: token[node] == target[node])


def deepest_path(parent: Sequence[int], passes: Sequence[bool]) -> int:
    """Depth of the deepest node whose own test and every ancestor's pass (parents listed before children)."""
    depth = [0] * len(parent)
    whole = [False] * len(parent)
    best = 0
    for node, up in enumerate(parent):
        depth[node] = 1 if up < 0 else depth[up] + 1
        whole[node] = passes[node] and (up < 0 or whole[up])
        if whole[node]:
            best = max(best, depth[node])
    return best


def longest_match_scalar(parent: Sequence[int], fields: StepFields, params: StepParams) -> int:
    """`tree-match`: TensorRT-LLM compares every root-to-leaf path and keeps the longest matched prefix; with
    distinct sibling tokens that is the first-match walk, with a repeated one it may go deeper."""
    token, target = fields["token"], fields["target_token"]
    return deepest_path(parent, [token[node] == target[node] for node in range(len(parent))])


# --- vectorized: per-node tests, the first passing child of each parent, then the walk -----------------


def _parent_keys(steps: TreeSteps) -> IntArray:
    """A key per node naming its parent across the batch: the parent's global index, or total + step for -1."""
    lengths = np.diff(steps.offsets)
    step_of = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    total = int(steps.parent.shape[0])
    keys: IntArray = np.where(steps.parent < 0, total + step_of, steps.offsets[:-1][step_of] + steps.parent)
    return keys


def walk_batch(steps: TreeSteps, passed: npt.NDArray[np.bool_], keys: IntArray | None = None) -> IntArray:
    """Accepted depth per step from per-node pass flags: one numpy step per depth level, over the walks still
    going (so a batch costs its nodes plus the depths walked, not its steps times its deepest walk)."""
    keys = _parent_keys(steps) if keys is None else keys
    total = int(steps.parent.shape[0])
    steps_count = len(steps)
    ended = total + steps_count  # the key no node has: a walk that found no passing child stays there
    first = np.full(ended + 1, ended, dtype=np.int64)  # first passing child per parent key
    passing = np.flatnonzero(passed)
    np.minimum.at(first, keys[passing], passing)
    depth = np.zeros(steps_count, dtype=np.int64)
    walking = np.arange(steps_count, dtype=np.int64)
    current = first[total + walking]
    while walking.shape[0]:
        live = current < total
        walking, current = walking[live], current[live]
        depth[walking] += 1
        current = first[current]
    return depth


def residual_batch(steps: TreeSteps) -> IntArray:
    columns = steps.columns
    return walk_batch(steps, columns["r"] <= accept_thresholds(columns["p"], columns["q"]))


def sibling_sums(keys: IntArray, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per node, the sum of `values` over its earlier siblings and itself, added one sibling at a time in tried
    order (as the scalar routine and the engine add them: no prefix-sum subtraction, so the same doubles).

    The first few siblings of every parent are added one rank at a time over the whole batch; a parent with
    more children than that has the rest added by `np.cumsum` (a sequential accumulate: the same doubles) over
    its own run, so a node list of any width costs time linear in its length.
    """
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    count = keys.shape[0]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if count else keys
    widths = np.diff(np.r_[starts, count])
    rank = np.arange(count) - np.repeat(starts, widths)
    sorted_values = values[order]
    running = np.empty_like(sorted_values)
    by_rank = np.argsort(rank, kind="stable")  # the nodes of rank 0, then of rank 1, ...: one slice per rank
    bounds = np.searchsorted(rank[by_rank], np.arange(_RANKS_AT_ONCE + 1))
    for level in range(min(_RANKS_AT_ONCE, int(widths.max()) if count else 0)):
        at = by_rank[bounds[level] : bounds[level + 1]]
        running[at] = (running[at - 1] if level else 0.0) + sorted_values[at]
    for start, width in zip(starts[widths > _RANKS_AT_ONCE].tolist(), widths[widths > _RANKS_AT_ONCE].tolist()):
        tail = slice(start + _RANKS_AT_ONCE - 1, start + width)  # from the last sibling already summed
        running[tail] = np.cumsum(np.r_[running[tail.start], sorted_values[tail.start + 1 : tail.stop]])
    sums = np.empty_like(values)
    sums[order] = running
    return sums


_RANKS_AT_ONCE = 32  # siblings added a rank at a time across the batch before wider parents go one by one


def target_cdf_batch(steps: TreeSteps) -> IntArray:
    columns = steps.columns
    keys = _parent_keys(steps)
    lengths = np.diff(steps.offsets)
    single = np.repeat(param_column(steps.params, "threshold_single", 1.0, len(steps)), lengths)
    acc_threshold = np.maximum(param_column(steps.params, "threshold_acc", 1.0, len(steps)), THRESHOLD_ACC_FLOOR)
    accumulated = sibling_sums(keys, np.asarray(columns["p"], dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        passed = (columns["coin"] <= accumulated / np.repeat(acc_threshold, lengths)) | (columns["p"] >= single)
    return walk_batch(steps, passed, keys)


def token_match_batch(steps: TreeSteps) -> IntArray:
    return walk_batch(steps, steps.columns["token"] == steps.columns["target_token"])


def longest_match_batch(steps: TreeSteps) -> IntArray:
    """`deepest_path` over a batch: from the passing depth-1 nodes, one level at a time into the passing
    children of the nodes reached, so each node is visited once."""
    passed = steps.columns["token"] == steps.columns["target_token"]
    lengths = np.diff(steps.offsets)
    step_of = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    keys = _parent_keys(steps)
    order = np.argsort(keys, kind="stable")  # nodes grouped by parent key: node n's children are a slice
    sorted_keys = keys[order]
    nodes = np.arange(passed.shape[0], dtype=np.int64)
    child_start = np.searchsorted(sorted_keys, nodes, side="left")
    child_end = np.searchsorted(sorted_keys, nodes, side="right")
    accepted = np.zeros(lengths.shape[0], dtype=np.int64)
    reached = np.flatnonzero(passed & (steps.parent < 0))
    depth = 0
    while reached.shape[0]:
        depth += 1
        accepted[step_of[reached]] = depth  # every level reached is deeper than the one before
        counts = child_end[reached] - child_start[reached]
        within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        children = order[np.repeat(child_start[reached], counts) + within]
        reached = children[passed[children]]
    return accepted
