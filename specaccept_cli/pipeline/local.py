"""A `ReadRequest` read in this process (JSONL parsed on a pool of its workers when `jobs` > 1).

It opens each source once (`read.open_source`), reads it here or on the pool
(`pipeline.parallel`), applies the per-batch stage (`summary.evaluate`), hands per-run results
to an optional sink in input order, and returns one `Summary` that includes whatever the error
policy skipped: nothing comes back through a side channel.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from msgspec.structs import replace

from specaccept_cli.errors import Problem, Reason, UsageError, Why
from specaccept_cli.pipeline.clusters import ClusterDetection
from specaccept_cli.pipeline.parallel import default_jobs, evaluate_sources
from specaccept_cli.pipeline.request import ReadRequest
from specaccept_cli.read.sources import ProgressHook
from specaccept_cli.rule.batch import absent_from_both
from specaccept_cli.rule.validate import did_you_mean
from specaccept_cli.summary.evaluate import Evaluated, RunSink, add_up
from specaccept_cli.summary.state import Summary

SHOWN_KEYS = 12  # keys listed when a field is not found


def summarise_here(
    request: ReadRequest, *, sink: RunSink | None = None, progress: ProgressHook | None = None
) -> Summary:
    """Every run of the request's inputs, summarised in this process (see `pipeline.summarise`)."""
    if request.jobs is None:
        request = replace(request, jobs=default_jobs())
    clusters = ClusterDetection()  # with no plan.cluster_field: the first row's request field, if any
    absent: dict[str, tuple[str, ...]] | None = None  # extra fields no row read so far has

    def tracked(results: Iterator[Evaluated]) -> Iterator[Evaluated]:
        nonlocal absent
        for result in results:
            if result.runs:  # a part without runs (what the error policy skipped, an engine series' end) read no row
                absent = result.absent if absent is None else absent_from_both(absent, result.absent)
            yield result

    results = evaluate_sources(request, progress, keep_runs=sink is not None, clusters=clusters)
    summary = clusters.with_ids(
        add_up(tracked(results), sink, request.plan.group_by, request.plan.windows), clusters.run_id
    )
    if request.require_fields and summary.runs and absent:
        raise UsageError(field_not_found(*next(iter(absent.items()))))
    return summary


def field_not_found(name: str, keys: Sequence[str]) -> Problem:
    """A field no row has (a typo, most likely), with the closest keys the rows do have (the nearest one, when
    there is one, is the way out, named already)."""
    hint = did_you_mean(name, keys)
    shown = ", ".join(keys[:SHOWN_KEYS]) + (", ..." if len(keys) > SHOWN_KEYS else "")
    why = Why(Reason.ABSENT_FIELD, about=name, named=bool(hint))
    return Problem(f"no row has the field '{name}'{hint} (a row has: {shown or 'no keys'})", why)
