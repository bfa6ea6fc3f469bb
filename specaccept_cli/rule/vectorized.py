"""The accept rule over a whole batch of runs: numpy over Arrow-style offsets, no Python loop per token.

Bit-for-bit the same decisions as `rule.accept_prefix`: both divide in IEEE double,
clamp with min(1, .) and compare with an inclusive `<=` (property-tested).

When it is built, the compiled kernel (`specaccept_cli._rule_c`) makes the same decisions and sums in one
pass over the tokens, without the GIL, and the sampler's tallies in the same pass (`Tallies`); the numpy
code below is the path without it, for per-run sums, and for any batch it declines (property-tested to
give the same outcome, bit for bit).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.native import extension, in_use
from specaccept_cli.rule.batch import FloatArray, IntArray

# Thresholds are summed in fixed point so that summaries of shards add up to exactly
# the summary of the whole, whatever the order (float addition is not associative).
THRESHOLD_SCALE = 2**32
R_HISTOGRAM_BINS = 4096  # bins of r for the sampler's uniformity test
THRESHOLD_BINS = 20  # bins of min(1, p/q) for the reliability plot: [0, 0.05), ..., [0.95, 1]


class Tallies(Struct, frozen=True):
    """The sampler's token tallies (`summary.server.SamplerTally`): made by the compiled kernel in the rule's own
    pass, or by numpy when asked for (`accept_prefix_batch(..., tallies=True)`)."""

    examined_tokens: int
    variance_fixed: int  # sum of rint(t (1 - t) 2^32) over examined tokens
    r_histogram: IntArray  # every token by its bin of r
    threshold_bins: IntArray  # [examined, kept] examined tokens per bin of t
    # sum of rint(t 2^32) over examined tokens: the outcome's examined_threshold_sum_fixed, kept here as well
    # because the outcome of greedy runs drops its threshold sums (`BatchOutcome.without_thresholds`).
    expected_fixed: int = 0


class BatchOutcome(Struct, frozen=True):
    """What the rule decided for each run of a batch, plus token-level sums for the summary."""

    k: IntArray  # drafted tokens per run
    accepted: IntArray  # accepted-prefix length per run, 0 <= a <= k
    passing_tokens: int  # tokens that pass their own test, also after a rejection
    threshold_sum_fixed: int  # sum of min(1, p/q) over drafted tokens, times THRESHOLD_SCALE
    sampled_tokens: int  # tokens with a logged (p, q, r); 0 for greedy logs
    # sum of min(1, p/q) over examined tokens only (a + 1 per run, or k when all kept), times THRESHOLD_SCALE:
    # the r-free counterpart of alpha (tokens after a rejection are never tested and have another mean).
    examined_threshold_sum_fixed: int = 0
    # The two token sums run by run, when asked for (`per_run`): to split an outcome by group, or to
    # count passes after a rejection per run. Two passes over the tokens that most audits do not need.
    passing_per_run: IntArray | None = None
    threshold_fixed_per_run: IntArray | None = None
    examined_threshold_fixed_per_run: IntArray | None = None
    tallies: Tallies | None = None  # from the compiled kernel, when it ran

    def without_thresholds(self) -> BatchOutcome:
        """The outcome of greedy runs: nothing p/q- or r-based was logged, so no threshold sums."""
        per_run, examined_per_run = self.threshold_fixed_per_run, self.examined_threshold_fixed_per_run
        return replace(
            self,
            threshold_sum_fixed=0,
            sampled_tokens=0,
            examined_threshold_sum_fixed=0,
            threshold_fixed_per_run=None if per_run is None else np.zeros_like(per_run),
            examined_threshold_fixed_per_run=None if examined_per_run is None else np.zeros_like(examined_per_run),
        )


def prefix_sums(values: npt.NDArray[np.integer[Any]] | npt.NDArray[np.bool_]) -> IntArray:
    """[0, v0, v0 + v1, ...]: exact integer running sums, from which any run's sum is one subtraction."""
    prefix = np.zeros(values.shape[0] + 1, dtype=np.int64)
    np.cumsum(values, dtype=np.int64, out=prefix[1:])
    return prefix


def run_sums(
    offsets: IntArray,
    values: npt.NDArray[np.integer[Any]] | npt.NDArray[np.bool_],
    lengths: IntArray | None = None,
    prefix: IntArray | None = None,
) -> IntArray:
    """Sum of integer `values` over each run's tokens, or its first `lengths` tokens (exact integer prefix sums)."""
    prefix = prefix_sums(values) if prefix is None else prefix
    ends = offsets[1:] if lengths is None else offsets[:-1] + lengths
    sums: IntArray = prefix[ends] - prefix[offsets[:-1]]
    return sums


def examined_lengths(k: IntArray, accepted: IntArray) -> IntArray:
    """Tokens each run actually tested: a + 1 when it stopped at a rejection, else k."""
    examined: IntArray = np.minimum(accepted + 1, k)
    return examined


def accept_prefix_batch(
    offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray, per_run: bool = False, *, tallies: bool = False
) -> BatchOutcome:
    """Accepted-prefix length of every run, in one pass over the flat token arrays.

    A run's accepted length is the distance from its start to its first failing
    token, or its length when none fails: find all failing token positions once,
    then for each run the first one at or after its start (searchsorted). With `tallies`,
    the outcome carries the sampler's tallies whichever path decided (the kernel makes them anyway).
    """
    outcome = None if per_run else _compiled_outcome(offsets, p, q, r)
    if outcome is None:
        outcome = _numpy_outcome(offsets, p, q, r, per_run)
    if tallies and outcome.tallies is None:  # after the rule's own temporaries are gone
        outcome = replace(outcome, tallies=sampler_tallies(offsets, p, q, r, outcome.k, outcome.accepted))
    return outcome


def _numpy_outcome(offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray, per_run: bool) -> BatchOutcome:
    """The outcome by numpy (the path without the kernel, and the one with per-run sums)."""
    thresholds = accept_thresholds(p, q)
    passed = r <= thresholds
    # In place: one token-sized temporary fewer (each a fresh allocation and its page faults).
    with np.errstate(over="ignore", invalid="ignore"):
        np.multiply(thresholds, THRESHOLD_SCALE, out=thresholds)
        np.rint(thresholds, out=thresholds)
    fixed = thresholds.astype(np.int64)
    k = np.diff(offsets).astype(np.int64)
    accepted = prefix_lengths(offsets, passed)
    running = prefix_sums(fixed)  # one pass gives the total, the examined sums and the per-run sums
    examined_fixed = run_sums(offsets, fixed, examined_lengths(k, accepted), running)
    outcome = BatchOutcome(
        k=k,
        accepted=accepted,
        passing_tokens=int(np.count_nonzero(passed)),
        threshold_sum_fixed=int(running[-1]),
        sampled_tokens=int(p.shape[0]),
        examined_threshold_sum_fixed=int(examined_fixed.sum(dtype=np.int64)),
    )
    if per_run:
        outcome = replace(
            outcome,
            passing_per_run=run_sums(offsets, passed),
            threshold_fixed_per_run=run_sums(offsets, fixed, prefix=running),
            examined_threshold_fixed_per_run=examined_fixed,
        )
    return outcome


def sampler_tallies(
    offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray, k: IntArray, accepted: IntArray
) -> Tallies:
    """The sampler's tallies by numpy, as the kernel makes them. Only the tokens each run examined are looked at
    for the calibration and the reliability bins (one mask built from the runs' starts and ends: a running sum
    of +1 at each start and -1 after each examined prefix); every r is binned for the uniformity test."""
    starts = offsets[:-1]
    drafted = k > 0  # runs with tokens: their starts are distinct, and so are the ends of their prefixes
    marks = np.zeros(p.shape[0] + 1, dtype=np.int8)
    marks[starts[drafted]] += 1
    marks[(starts + examined_lengths(k, accepted))[drafted]] -= 1
    examined = np.cumsum(marks[:-1], dtype=np.int8).view(bool)
    t = accept_thresholds(p[examined], q[examined])
    kept = r[examined] <= t
    bins = np.minimum((r * R_HISTOGRAM_BINS).astype(np.int64), R_HISTOGRAM_BINS - 1)
    return Tallies(
        examined_tokens=int(t.shape[0]),
        variance_fixed=int(np.rint(t * (1.0 - t) * THRESHOLD_SCALE).astype(np.int64).sum()),
        r_histogram=np.bincount(bins, minlength=R_HISTOGRAM_BINS).astype(np.int64),
        threshold_bins=threshold_bin_counts(t, kept),
        expected_fixed=int(np.rint(t * THRESHOLD_SCALE).astype(np.int64).sum()),
    )


def threshold_bin_counts(t: FloatArray, kept: npt.NDArray[np.bool_]) -> IntArray:
    """[examined, accepted] tokens per bin of t = min(1, p/q): what a reliability plot needs."""
    # One count over 2 x THRESHOLD_BINS cells: a kept token's bin is shifted up by THRESHOLD_BINS.
    bins = (t * THRESHOLD_BINS).astype(np.intp)
    np.minimum(bins, THRESHOLD_BINS - 1, out=bins)
    bins += kept * THRESHOLD_BINS
    cells = np.bincount(bins, minlength=2 * THRESHOLD_BINS).astype(np.int64)
    rejected, accepted = cells[:THRESHOLD_BINS], cells[THRESHOLD_BINS:]
    stacked: IntArray = np.stack([rejected + accepted, accepted])
    return stacked


def rule_kernel() -> Any:
    """The compiled rule kernel, or False when it is not built or SPECACCEPT_NO_EXTENSIONS is set."""
    return extension("_rule_c")  # looked for once per process (`native.extension`)


def kernel_name() -> str:
    """Which batch rule is in use, for `--version`."""
    return in_use(rule_kernel(), "numpy", "compiled kernel")


def _compiled_outcome(offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray) -> BatchOutcome | None:
    """The outcome (and the sampler's tallies) by the compiled kernel, or None for the numpy path."""
    kernel = rule_kernel()
    arrays = (offsets, p, q, r)
    if not kernel or offsets.shape[0] == 0 or not all(array.flags.c_contiguous for array in arrays):
        return None
    if offsets.dtype != np.int64 or not all(array.dtype == np.float64 for array in arrays[1:]):
        return None
    found = kernel.evaluate(offsets, p, q, r)
    if found is None:  # a threshold or an r outside [0, 1]: numpy's path decides as it always has
        return None
    accepted, passing, total, examined_tokens, examined_sum, variance, r_bins, t_bins = found
    r_histogram = np.frombuffer(r_bins, dtype=np.int64)
    threshold_bins = np.frombuffer(t_bins, dtype=np.int64).reshape(2, -1)
    tallies = None  # from a kernel built with other bins: none (numpy makes them when they are asked for)
    if threshold_bins.shape == (2, THRESHOLD_BINS) and r_histogram.shape == (R_HISTOGRAM_BINS,):
        tallies = Tallies(examined_tokens, variance, r_histogram, threshold_bins, examined_sum)
    return BatchOutcome(
        k=np.diff(offsets),
        accepted=np.frombuffer(accepted, dtype=np.int64),
        passing_tokens=passing,
        threshold_sum_fixed=total,
        sampled_tokens=int(p.shape[0]),
        examined_threshold_sum_fixed=examined_sum,
        tallies=tallies,
    )


def accept_thresholds(p: FloatArray, q: FloatArray) -> FloatArray:
    """min(1, p/q) per token, in IEEE double like the scalar rule (q = 0 gives inf or nan, never a warning)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        thresholds: FloatArray = np.divide(p, q)
        np.minimum(thresholds, 1.0, out=thresholds)
    return thresholds


def prefix_lengths(offsets: IntArray, passed: npt.NDArray[np.bool_]) -> IntArray:
    """Per run, how many tokens from its start pass before the first one that does not."""
    starts = offsets[:-1]
    ends = offsets[1:]
    total = int(offsets[-1]) if offsets.shape[0] else 0
    failing = np.flatnonzero(~passed)
    first_failure = np.append(failing, total)[np.searchsorted(failing, starts)]
    lengths: IntArray = (np.minimum(first_failure, ends) - starts).astype(np.int64)
    return lengths
