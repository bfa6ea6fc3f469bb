"""The accept rule over a whole batch of runs: numpy over Arrow-style offsets, no Python loop per token.

Bit-for-bit the same decisions as `rule.accept_prefix`: both divide in IEEE double,
clamp with min(1, .) and compare with an inclusive `<=` (property-tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specaccept_cli.batch import FloatArray, IntArray

# Thresholds are summed in fixed point so that summaries of shards add up to exactly
# the summary of the whole, whatever the order (float addition is not associative).
THRESHOLD_SCALE = 2**32


@dataclass(frozen=True)
class BatchOutcome:
    """What the rule decided for each run of a batch, plus token-level sums for the summary."""

    k: IntArray  # drafted tokens per run
    accepted: IntArray  # accepted-prefix length per run, 0 <= a <= k
    passing_tokens: int  # tokens that pass their own test, also after a rejection
    threshold_sum_fixed: int  # sum of min(1, p/q) over drafted tokens, times THRESHOLD_SCALE
    passing_per_run: IntArray  # the same two sums run by run, so an outcome can be split (--group-by)
    threshold_fixed_per_run: IntArray

    def take(self, runs: IntArray) -> BatchOutcome:
        """The outcome of the runs at the given indices (one group of a batch)."""
        passing = self.passing_per_run[runs]
        thresholds = self.threshold_fixed_per_run[runs]
        return BatchOutcome(
            k=self.k[runs],
            accepted=self.accepted[runs],
            passing_tokens=int(passing.sum(dtype=np.int64)),
            threshold_sum_fixed=int(thresholds.sum(dtype=np.int64)),
            passing_per_run=passing,
            threshold_fixed_per_run=thresholds,
        )


def _per_run_sums(offsets: IntArray, values: IntArray) -> IntArray:
    """Sum of `values` over each run's tokens (exact integer prefix sums; empty runs give 0)."""
    prefix = np.zeros(values.shape[0] + 1, dtype=np.int64)
    np.cumsum(values, dtype=np.int64, out=prefix[1:])
    return prefix[offsets[1:]] - prefix[offsets[:-1]]


def accept_prefix_batch(offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray) -> BatchOutcome:
    """Accepted-prefix length of every run, in one pass over the flat token arrays.

    A run's accepted length is the distance from its start to its first failing
    token, or its length when none fails: find all failing token positions once,
    then for each run the first one at or after its start (searchsorted).
    """
    starts = offsets[:-1]
    ends = offsets[1:]
    total = int(offsets[-1]) if offsets.shape[0] else 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        thresholds = np.minimum(1.0, p / q)
    passed = r <= thresholds
    failing = np.flatnonzero(~passed)
    first_failure = np.append(failing, total)[np.searchsorted(failing, starts)]
    accepted = (np.minimum(first_failure, ends) - starts).astype(np.int64)
    fixed = np.rint(thresholds * THRESHOLD_SCALE).astype(np.int64)
    passing_per_run = _per_run_sums(offsets, passed.astype(np.int64))
    threshold_fixed_per_run = _per_run_sums(offsets, fixed)
    return BatchOutcome(
        k=(ends - starts).astype(np.int64),
        accepted=accepted,
        passing_tokens=int(passing_per_run.sum(dtype=np.int64)),
        threshold_sum_fixed=int(threshold_fixed_per_run.sum(dtype=np.int64)),
        passing_per_run=passing_per_run,
        threshold_fixed_per_run=threshold_fixed_per_run,
    )
