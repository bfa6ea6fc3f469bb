"""What a server that ran a faulty rule would have reported: each faulty rule's count for every run of a batch.

The faulty rules are those `summary.server.RULES` names (a strict `<`, counting passes after the first
rejection, the greedy-draft rule, a count with the bonus token); each is recomputed here from the batch's
(p, q, r), in one call, with the per-token thresholds it took (the summary reads near ties from them).
"""

from __future__ import annotations

from msgspec import Struct

from specaccept_cli.rule.batch import FloatArray, IntArray, RunBatch
from specaccept_cli.rule.registry import rule_named
from specaccept_cli.rule.steps import ChainSteps
from specaccept_cli.rule.vectorized import BatchOutcome, accept_thresholds, prefix_lengths, run_sums


class FaultyCounts(Struct, frozen=True):
    """Each faulty rule's count per run, and min(1, p/q) per token (the thresholds they were taken at)."""

    counts: dict[str, IntArray]
    thresholds: FloatArray


def faulty_counts(batch: RunBatch, outcome: BatchOutcome) -> FaultyCounts:
    """What each faulty rule would have reported for every run of the batch."""
    thresholds = accept_thresholds(batch.p, batch.q)
    passes = outcome.passing_per_run
    counts = {
        "strict-inequality": prefix_lengths(batch.offsets, batch.r < thresholds),
        "no-prefix-break": passes if passes is not None else run_sums(batch.offsets, batch.r <= thresholds),
        "greedy-draft": rule_named("greedy-draft").accepted(ChainSteps(batch.offsets, {"p": batch.p, "r": batch.r})),
        "bonus-counted": outcome.accepted + 1,
    }
    return FaultyCounts(counts, thresholds)
