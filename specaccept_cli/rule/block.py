"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025,
arXiv:2403.10444, Algorithm 2), as vLLM runs it with `rejection_sample_method: block` (PR #46781).

Read in vLLM `vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py`:
- `_compute_cumulative_log_p_kernel`: the running ratio w_j = min(1, w_(j-1) p[j] / q[j]), w_(-1) = 1
  (in log space: `log_p = min(log_p + target_logprob - draft_logprob, 0)`);
- `_compute_local_residual_mass_kernel`: the residual mass at the next position,
  sum over x of max(w_j P_(j+1)(x) - Q_(j+1)(x), 0) — the row's `residual[j]`;
- `_rejection_kernel` (the `USE_BLOCK_VERIFICATION` branch): for j < k - 1,
  h_j = residual[j] / (residual[j] + 1 - w_j), and 1 when that denominator is 0; at j = k - 1, h = w_(k-1);
  `accepted_length = where(u <= h, j + 1, accepted_length)` over every j, so the **last** passing position
  wins (the paper scans from the end and stops at the first pass: the same length);
- `_resample_kernel`: a rejection at position tau resamples from max(w_(tau-1) P_tau - Q_tau, 0), normalised
  (w_(-1) = 1); when all k pass, the bonus token comes from the target.

The recompute takes p, q, r and residual as logged, and computes w in IEEE double in the order
`min(1, (w * p) / q)`; the engine works in float32 log space, so a decision within float32 rounding of its
threshold is the one place a recompute can differ from the engine (the row's r then sits on h).
"""

from __future__ import annotations

import numpy as np

from specaccept_cli.rule.batch import FloatArray, IntArray
from specaccept_cli.rule.scalar import threshold as joint_threshold
from specaccept_cli.rule.steps import ChainSteps, StepFields, StepParams


def block_threshold(residual: float, ratio: float) -> float:
    """h for a position before the last: residual / (residual + 1 - w), 1 when the denominator is 0."""
    denominator = residual + 1.0 - ratio
    return residual / denominator if denominator > 0.0 else 1.0


def block_scalar(fields: StepFields, params: StepParams) -> int:
    """The largest j + 1 whose test r[j] <= h_j passes (0 if none): not a first-rejection scan."""
    p, q, r, residual = fields["p"], fields["q"], fields["r"], fields["residual"]
    k = len(p)
    ratio = 1.0
    accepted = 0
    for j in range(k):
        ratio = joint_threshold(ratio * p[j], q[j])  # min(1, (w * p) / q): the seed's test on the joint
        threshold = ratio if j == k - 1 else block_threshold(residual[j], ratio)
        if r[j] <= threshold:
            accepted = j + 1
    return accepted


def running_ratios(offsets: IntArray, p: FloatArray, q: FloatArray) -> FloatArray:
    """w_j for every token: one numpy step per position index (at most the longest draft), not per token."""
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    if lengths.shape[0] and (lengths == lengths[0]).all() and lengths[0] > 0:  # one draft length: a 2-d view
        k = int(lengths[0])
        p2, q2 = p[starts[0] :].reshape(-1, k), q[starts[0] :].reshape(-1, k)
        table = np.empty_like(p2)
        column = np.ones(p2.shape[0])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for j in range(k):
                column = np.minimum(1.0, column * p2[:, j] / q2[:, j])
                table[:, j] = column
        flat: FloatArray = table.reshape(-1)
        return flat
    ratios = np.empty_like(p)
    longest = int(lengths.max()) if lengths.shape[0] else 0
    previous = np.ones(starts.shape[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in range(longest):
            live = lengths > j
            index = starts[live] + j
            current = np.minimum(1.0, previous[live] * p[index] / q[index])
            ratios[index] = current
            previous[live] = current
    return ratios


def block_batch(steps: ChainSteps) -> IntArray:
    offsets = steps.offsets
    p, q, r, residual = (steps.columns[name] for name in ("p", "q", "r", "residual"))
    starts, ends = offsets[:-1], offsets[1:]
    ratios = running_ratios(offsets, p, q)
    final = np.zeros(p.shape[0], dtype=bool)  # each step's last position, tested against w itself
    final[ends[ends > starts] - 1] = True
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = residual + 1.0 - ratios
        inner = np.where(denominator > 0.0, residual / np.where(denominator > 0.0, denominator, 1.0), 1.0)
    passed = np.flatnonzero(r <= np.where(final, ratios, inner))
    # per step, its last passing token: the passing token just before the step's end, if it lies in the step
    before_end = np.searchsorted(passed, ends, side="left") - 1
    candidate = passed[np.maximum(before_end, 0)] if passed.shape[0] else np.full(starts.shape[0], -1)
    inside = (before_end >= 0) & (candidate >= starts)
    accepted: IntArray = np.where(inside, candidate - starts + 1, 0).astype(np.int64)
    return accepted
