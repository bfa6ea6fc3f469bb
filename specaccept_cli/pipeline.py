"""source -> batches -> rule -> (per-run records, Summary): the one loop every command shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from specaccept_cli.audit import ReportedTally, SamplerTally, parse_reported
from specaccept_cli.batch import RunBatch
from specaccept_cli.errors import InputError
from specaccept_cli.summary import Summary
from specaccept_cli.vectorized import BatchOutcome, accept_prefix_batch

# Per-run columns computed beside the rule (e.g. "reported", "mismatch"), for per-run records.
RunColumns = dict[str, npt.NDArray[np.generic]]
RunSink = Callable[[RunBatch, BatchOutcome, RunColumns], None]
OnError = Callable[[InputError], None]


@dataclass(frozen=True)
class AuditPlan:
    """What to compute besides the rule itself."""

    reported_field: str | None = None  # compare the server's reported counts with the rule's
    check_sampler: bool = False  # calibration and r-uniformity tests
    sampler_significance: float = 0.001


def _raise(error: InputError) -> None:
    raise error


def evaluate(batch: RunBatch) -> BatchOutcome:
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)
    if batch.greedy:  # p and q are 0/1 stand-ins, r is not logged: no threshold statistics
        return replace(outcome, threshold_sum_fixed=0, sampled_tokens=0)
    return outcome


def summarise(
    batches: Iterable[RunBatch],
    sink: RunSink | None = None,
    plan: AuditPlan | None = None,
    on_error: OnError = _raise,
) -> Summary:
    """Run the rule over every batch, hand each batch's per-run results to `sink`, and add up the summary."""
    plan = plan or AuditPlan()
    summary = Summary()
    for batch in batches:
        columns: RunColumns = {}
        reported = None
        if plan.reported_field is not None:
            reported, valid, errors = parse_reported(batch, plan.reported_field)
            if errors:  # rows whose reported count is not a count: bad input like any other
                for error in errors:
                    on_error(error)
                batch, reported = batch.select(valid), reported[valid]
        outcome = evaluate(batch)
        part = Summary.of_outcome(outcome)
        if reported is not None:
            part.reported, check = ReportedTally.of_batch(batch, outcome, reported)
            columns = {"reported": check.reported, "mismatch": check.mismatch}
        if plan.check_sampler:
            part.sampler = SamplerTally.of_batch(batch, outcome, plan.sampler_significance)
        if sink is not None:
            sink(batch, outcome, columns)
        summary = summary + part
    return summary
