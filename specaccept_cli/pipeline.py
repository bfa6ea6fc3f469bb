"""source -> batches -> rule -> (per-run records, Summary): the one loop every command shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from specaccept_cli.audit import ReportedTally, SamplerTally, parse_reported
from specaccept_cli.batch import RunBatch
from specaccept_cli.errors import InputError
from specaccept_cli.summary import Summary, group_key
from specaccept_cli.vectorized import BatchOutcome, accept_prefix_batch

# Per-run columns computed beside the rule (e.g. "reported", "mismatch"), for per-run records.
RunColumns = dict[str, npt.NDArray[np.generic]]
RunSink = Callable[[RunBatch, BatchOutcome, RunColumns], None]
OnError = Callable[[InputError], None]


@dataclass(frozen=True)
class AuditPlan:
    """What to compute besides the rule itself."""

    group_by: str | None = None  # also summarise each value of this field apart
    reported_field: str | None = None  # compare the server's reported counts with the rule's
    check_sampler: bool = False  # calibration and r-uniformity tests
    sampler_significance: float = 0.001


def _raise(error: InputError) -> None:
    raise error


def evaluate(batch: RunBatch) -> BatchOutcome:
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)
    if batch.greedy:  # p and q are 0/1 stand-ins, r is not logged: no threshold statistics
        return outcome.without_thresholds()
    return outcome


def summarise(
    batches: Iterable[RunBatch],
    sink: RunSink | None = None,
    plan: AuditPlan | None = None,
    on_error: OnError = _raise,
) -> Summary:
    """Run the rule over every batch, hand each batch's per-run results to `sink`, and add up the summary.

    With `plan.group_by` (a field carried in `RunBatch.extras`), the summary also holds
    one summary per value of that field (see `summary.group_key`).
    """
    plan = plan or AuditPlan()
    group_by = plan.group_by
    summary = Summary()
    groups: dict[str, Summary] = {}
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
        if group_by is not None:
            # Added in place: a batch touches only its own groups, however many there are in all.
            for key, group in split_by_group(outcome, batch.extras[group_by]).items():
                known = groups.get(key)
                groups[key] = group if known is None else known + group
    if group_by is not None:
        summary.group_by, summary.groups = group_by, groups
    return summary


def split_by_group(outcome: BatchOutcome, values: list[object]) -> dict[str, Summary]:
    """One summary per group key of a batch's runs, in order of first appearance.

    Keys are coded in one pass (a dict lookup per run); the joint counts of every group
    then come from one bincount over (code, k, a), and the token sums from exact integer
    scatter-adds: no pass over the runs per group.
    """
    codes_of: dict[str, int] = {}
    codes = np.fromiter(
        (codes_of.setdefault(group_key(value), len(codes_of)) for value in values), dtype=np.int64, count=len(values)
    )
    n_groups = len(codes_of)
    size = int(outcome.k.max()) + 1 if outcome.k.shape[0] else 1
    flat = np.bincount((codes * size + outcome.k) * size + outcome.accepted, minlength=n_groups * size * size)
    counts = flat.astype(np.int64).reshape(n_groups, size, size)
    passing = np.zeros(n_groups, dtype=np.int64)
    np.add.at(passing, codes, outcome.passing_per_run)
    thresholds = np.zeros(n_groups, dtype=np.int64)
    np.add.at(thresholds, codes, outcome.threshold_fixed_per_run)
    sampled = np.zeros(n_groups, dtype=np.int64)
    if outcome.sampled_tokens:  # a batch is sampled or greedy as a whole
        np.add.at(sampled, codes, outcome.k)
    passing_list, threshold_list, sampled_list = passing.tolist(), thresholds.tolist(), sampled.tolist()
    return {
        key: Summary(
            counts=_trim(counts[code]),
            passing_tokens=passing_list[code],
            threshold_sum_fixed=threshold_list[code],
            sampled_tokens=sampled_list[code],
        )
        for key, code in codes_of.items()
    }


def _trim(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The smallest square matrix that holds a group's nonzero counts (a group's k range is often narrow)."""
    drafted = np.flatnonzero(counts.sum(axis=1))
    size = int(drafted[-1]) + 1 if drafted.shape[0] else 1
    return counts[:size, :size].copy()
