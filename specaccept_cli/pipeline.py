"""source -> batches -> rule -> (per-run records, Summary): the one loop every command shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from specaccept_cli.batch import RunBatch
from specaccept_cli.summary import Summary
from specaccept_cli.vectorized import BatchOutcome, accept_prefix_batch

if TYPE_CHECKING:
    from specaccept_cli.parallel import Evaluated

RunSink = Callable[[RunBatch, BatchOutcome], None]


def evaluate(batch: RunBatch) -> BatchOutcome:
    return accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)


def summarise(batches: Iterable[RunBatch], sink: RunSink | None = None) -> Summary:
    """Run the rule over every batch, hand each batch's per-run results to `sink`, and add up the summary."""
    summary = Summary()
    for batch in batches:
        outcome = evaluate(batch)
        if sink is not None:
            sink(batch, outcome)
        summary = summary + Summary.of_outcome(outcome)
    return summary


def summarise_evaluated(results: Iterable[Evaluated], sink: RunSink | None = None) -> Summary:
    """Add up blocks the rule has already been applied to (by `parallel.evaluate_source`), in order.

    Per-run results go to `sink`; they must have been kept (`keep_runs`) when a sink is given.
    """
    summary = Summary()
    for result in results:
        if sink is not None:
            assert result.batch is not None and result.outcome is not None, "per-run results were not kept"
            sink(result.batch, result.outcome)
        summary = summary + result.summary
    return summary
