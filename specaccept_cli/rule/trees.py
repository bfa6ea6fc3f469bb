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
    """Accepted depth per step from per-node pass flags: one numpy step per depth level, not per node."""
    keys = _parent_keys(steps) if keys is None else keys
    total = int(steps.parent.shape[0])
    steps_count = len(steps)
    ended = total + steps_count  # the key no node has: a walk that found no passing child stays there
    first = np.full(ended + 1, ended, dtype=np.int64)  # first passing child per parent key
    passing = np.flatnonzero(passed)
    np.minimum.at(first, keys[passing], passing)
    current = first[total + np.arange(steps_count, dtype=np.int64)]
    depth = np.zeros(steps_count, dtype=np.int64)
    live = current < total
    while live.any():
        depth += live
        current = first[current]
        live = current < total
    return depth


def residual_batch(steps: TreeSteps) -> IntArray:
    columns = steps.columns
    return walk_batch(steps, columns["r"] <= accept_thresholds(columns["p"], columns["q"]))


def sibling_sums(keys: IntArray, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per node, the sum of `values` over its earlier siblings and itself, added one sibling at a time in tried
    order (as the scalar routine and the engine add them: no prefix-sum subtraction, so the same doubles)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if keys.shape[0] else keys
    rank = np.arange(keys.shape[0]) - np.repeat(starts, np.diff(np.r_[starts, keys.shape[0]]))
    sums = np.empty_like(values)
    sorted_values = values[order]
    running = np.empty_like(sorted_values)
    longest = int(rank.max()) + 1 if rank.shape[0] else 0
    for level in range(longest):
        at = np.flatnonzero(rank == level)
        running[at] = (running[at - 1] if level else 0.0) + sorted_values[at]
    sums[order] = running
    return sums


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
    """`deepest_path` over a batch: depths and whole-path passes propagated one level per numpy step."""
    passed = steps.columns["token"] == steps.columns["target_token"]
    lengths = np.diff(steps.offsets)
    step_of = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    root = steps.parent < 0
    up = np.where(root, 0, steps.offsets[:-1][step_of] + steps.parent)
    depth = np.ones(passed.shape[0], dtype=np.int64)
    whole = passed.copy()
    for _ in range(int(lengths.max()) if lengths.shape[0] else 0):  # a path is no longer than its step's nodes
        deeper = np.where(root, 1, depth[up] + 1)
        wider = passed & (root | whole[up])
        if np.array_equal(deeper, depth) and np.array_equal(wider, whole):
            break
        depth, whole = deeper, wider
    accepted = np.zeros(lengths.shape[0], dtype=np.int64)
    np.maximum.at(accepted, step_of[whole], depth[whole])
    return accepted
