"""Engine output -> Summary: metrics lines and Prometheus scrapes through the same front door as runs.

Each interval the engine reported becomes a summary part. An interval whose (k, a) histogram
is exact adds to the counts like logged runs do, so every estimate, interval, gate, baseline
and group works unchanged (r-based results are null: no r was logged). An interval that only
bounds its counts adds its totals and bounds to the `EngineTally`, never to the counts. A line
that looks like metrics but does not parse goes to the error policy like a bad row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from specaccept_cli.errors import InputError, OnError
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.evaluate import Evaluated, Plan
from specaccept_cli.summary.state import Summary, group_key

if TYPE_CHECKING:  # the engine parsers load only when a source is engine output (they cost ~20 ms)
    from specaccept_cli.read.engine_logs import EngineInterval, LineTally, ScrapeSeries
    from specaccept_cli.read.sources import OpenSource


def evaluate_engine_source(
    opened: OpenSource,
    plan: Plan,
    on_error: OnError,
    series: ScrapeSeries,
    *,
    draft_length: int | None = None,
) -> Iterator[Evaluated]:
    """Every interval of one source of engine output, evaluated, in input order.

    Prometheus sources continue `series` (scrapes across files form one series); the caller
    ends it with `finish_series` after the last source.
    """
    from specaccept_cli.read.engine_logs import LineTally, parse_engine_log

    name = opened.source.name
    lines = opened.jsonl_stream()
    tally = LineTally()
    if opened.format == "prometheus":
        items: Iterable[EngineInterval | InputError] = series.add(lines, name, tally)
    else:
        parse = parse_engine_log(lines, name, opened.format, k=draft_length)
        items, tally = parse, parse.tally
    labels: set[str] = set()
    yield from _evaluate(items, plan, on_error, labels)
    if not (tally.metrics or tally.bad) and opened.format != "prometheus":
        raise InputError(name, None, f"no {opened.format} metrics lines among its {tally.lines} lines")
    if plan.group_by is not None and tally.metrics and plan.group_by not in labels:
        known = ", ".join(sorted(labels)) or "none"
        raise InputError(name, None, f"no interval carries the label {plan.group_by!r} to group by (labels: {known})")
    yield _lines_part(tally)


def finish_series(series: ScrapeSeries, plan: Plan, on_error: OnError) -> Iterator[Evaluated]:
    """The interval a lone vLLM scrape gives (counts since the server started), once every source is read."""
    yield from _evaluate(series.finish(), plan, on_error, set())


def _evaluate(
    items: Iterable[EngineInterval | InputError], plan: Plan, on_error: OnError, labels: set[str]
) -> Iterator[Evaluated]:
    for item in items:
        if isinstance(item, InputError):
            on_error(item)
            continue
        labels.update(item.labels)
        part = interval_summary(item)
        groups = None
        if plan.group_by is not None:
            groups = {group_key(item.labels.get(plan.group_by)): part}
        yield Evaluated(part, part.runs, groups)


def _lines_part(tally: LineTally) -> Evaluated:
    """What a source's line counts add: every line read is counted, as metrics, ordinary output or bad."""
    engine = EngineTally(
        lines=tally.lines,
        metrics_lines=tally.metrics,
        ignored_lines=tally.ignored,
        bad_lines=tally.bad,
        resets=tally.resets,
    )
    return Evaluated(Summary(engine=engine), 0)


# Formats whose figures are totals since the server started, repeating the per-request lines' counts.
RUNNING_TOTALS = frozenset({"llamacpp-stats"})


def interval_summary(interval: EngineInterval) -> Summary:
    """One interval as a summary part: exact counts when recovered, else totals and bounds only."""
    common = EngineTally(
        engines=(interval.engine,),
        formats=(interval.fmt,),
        intervals=1,
        examples=(f"{interval.source}:{interval.line}: {interval.describe()}",),
    )
    if interval.fmt in RUNNING_TOTALS:
        return Summary(engine=replace(common, intervals=0, running_totals=1))
    if interval.counts is not None:
        return Summary(counts=interval.counts, engine=replace(common, recovered=1))
    if interval.accepted is None or interval.draft_tokens is None:
        return Summary(engine=replace(common, unquantified=1))
    low, high = interval.examined_bounds or _examined_range(interval.accepted, interval.draft_tokens)
    bounded = replace(
        common,
        bounded=1,
        bounded_accepted=interval.accepted,
        bounded_draft_tokens=interval.draft_tokens,
        bounded_examined_low=low,
        bounded_examined_high=high,
    )
    return Summary(engine=bounded)


def _examined_range(accepted: int, draft_tokens: int) -> tuple[int, int]:
    """Examined tokens knowing only the totals: at least one rejection unless every token was accepted."""
    return (accepted + (1 if accepted < draft_tokens else 0), draft_tokens)


class EngineReading:
    """Engine output across the sources of one audit: the Prometheus series continues from file to file."""

    def __init__(self, draft_length: int | None = None) -> None:
        self.draft_length = draft_length
        self.series: ScrapeSeries | None = None  # made when the first engine source is met

    def evaluate(self, opened: OpenSource, plan: Plan, on_error: OnError) -> Iterator[Evaluated]:
        if self.series is None:
            from specaccept_cli.read.engine_logs import ScrapeSeries

            self.series = ScrapeSeries()
        return evaluate_engine_source(opened, plan, on_error, self.series, draft_length=self.draft_length)

    def finish(self, plan: Plan, on_error: OnError) -> Iterator[Evaluated]:
        return iter(()) if self.series is None else finish_series(self.series, plan, on_error)
