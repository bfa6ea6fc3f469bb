"""source -> batches -> rule -> (per-run records, Summary): the one loop every command shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from specaccept_cli.batch import RunBatch
from specaccept_cli.summary import Summary, group_key
from specaccept_cli.vectorized import BatchOutcome, accept_prefix_batch

RunSink = Callable[[RunBatch, BatchOutcome], None]


def evaluate(batch: RunBatch) -> BatchOutcome:
    return accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)


def summarise(batches: Iterable[RunBatch], sink: RunSink | None = None, group_by: str | None = None) -> Summary:
    """Run the rule over every batch, hand each batch's per-run results to `sink`, and add up the summary.

    With `group_by` (a field carried in `RunBatch.extras`), the summary also holds one
    summary per value of that field (see `summary.group_key`).
    """
    summary = Summary()
    groups: dict[str, Summary] = {}
    for batch in batches:
        outcome = evaluate(batch)
        if sink is not None:
            sink(batch, outcome)
        summary = summary + Summary.of_outcome(outcome)
        if group_by is not None:
            # Added in place: a batch touches only its own groups, however many there are in all.
            for key, part in split_by_group(outcome, batch.extras[group_by]).items():
                known = groups.get(key)
                groups[key] = part if known is None else known + part
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
    passing_list, threshold_list = passing.tolist(), thresholds.tolist()
    return {
        key: Summary(
            counts=_trim(counts[code]), passing_tokens=passing_list[code], threshold_sum_fixed=threshold_list[code]
        )
        for key, code in codes_of.items()
    }


def _trim(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The smallest square matrix that holds a group's nonzero counts (a group's k range is often narrow)."""
    drafted = np.flatnonzero(counts.sum(axis=1))
    size = int(drafted[-1]) + 1 if drafted.shape[0] else 1
    return counts[:size, :size].copy()
