"""source -> batches -> rule -> (per-run records, Summary): the one loop every command shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from specaccept_cli.batch import RunBatch
from specaccept_cli.summary import Summary, group_key
from specaccept_cli.vectorized import BatchOutcome, accept_prefix_batch

RunSink = Callable[[RunBatch, BatchOutcome], None]


def evaluate(batch: RunBatch) -> BatchOutcome:
    return accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)


def summarise(batches: Iterable[RunBatch], sink: RunSink | None = None, group_by: str | None = None) -> Summary:
    """Run the rule over every batch, hand each batch's per-run results to `sink`, and add up the summary.

    With `group_by` (a field carried in `RunBatch.extras`), the summary also holds one
    summary per value of that field.
    """
    summary = Summary() if group_by is None else Summary.grouped(group_by)
    for batch in batches:
        outcome = evaluate(batch)
        if sink is not None:
            sink(batch, outcome)
        part = Summary.of_outcome(outcome)
        if group_by is not None:
            part.group_by, part.groups = group_by, split_by_group(outcome, batch.extras[group_by])
        summary = summary + part
    return summary


def split_by_group(outcome: BatchOutcome, values: list[object]) -> dict[str, Summary]:
    """One summary per group key of a batch's runs.

    Keys are coded in one pass (a dict lookup per run); the runs of each group are then
    found at once with a stable argsort of the codes, not a scan per group.
    """
    codes_of: dict[str, int] = {}
    codes = np.fromiter(
        (codes_of.setdefault(group_key(value), len(codes_of)) for value in values), dtype=np.int64, count=len(values)
    )
    order = np.argsort(codes, kind="stable")
    bounds = np.zeros(len(codes_of) + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=len(codes_of)), out=bounds[1:])
    return {
        key: Summary.of_outcome(outcome.take(order[bounds[code] : bounds[code + 1]])) for key, code in codes_of.items()
    }
