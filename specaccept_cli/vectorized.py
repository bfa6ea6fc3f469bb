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


def accept_prefix_batch(offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray) -> BatchOutcome:
    """Accepted-prefix length of every run, in one pass over the flat token arrays.

    A run's accepted length is the distance from its start to its first failing
    token, or its length when none fails: find all failing token positions once,
    then for each run the first one at or after its start (searchsorted).
    """
    starts = offsets[:-1]
    ends = offsets[1:]
    total = int(offsets[-1]) if offsets.shape[0] else 0
    # In place where possible: fewer token-sized temporaries (each a fresh allocation and its page faults).
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        thresholds = np.divide(p, q)
        np.minimum(thresholds, 1.0, out=thresholds)
    passed = r <= thresholds
    failing = np.flatnonzero(~passed)
    first_failure = np.append(failing, total)[np.searchsorted(failing, starts)]
    accepted = (np.minimum(first_failure, ends) - starts).astype(np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        np.multiply(thresholds, THRESHOLD_SCALE, out=thresholds)
        np.rint(thresholds, out=thresholds)
    fixed = thresholds.astype(np.int64)
    return BatchOutcome(
        k=(ends - starts).astype(np.int64),
        accepted=accepted,
        passing_tokens=int(np.count_nonzero(passed)),
        threshold_sum_fixed=int(fixed.sum(dtype=np.int64)),
    )
