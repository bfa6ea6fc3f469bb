"""Engine output -> Summary: metrics lines and Prometheus scrapes through the same front door as runs.

Each interval the engine reported becomes a summary part. An interval whose (k, a) histogram
is exact adds to the counts like logged runs do, so every estimate, interval, gate, baseline
and group works unchanged (r-based results are null: no r was logged). An interval that only
bounds its counts adds its totals and bounds to the `EngineTally`, never to the counts. A line
that looks like metrics but does not parse goes to the error policy like a bad row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace

from specaccept_cli.errors import InputError, OnError
from specaccept_cli.read.jsonl import iter_line_blocks
from specaccept_cli.rule.validate import did_you_mean
from specaccept_cli.summary.bounded import BoundedUnits, steps_bounds
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.evaluate import Evaluated, Plan, cluster_hash
from specaccept_cli.summary.state import CountMatrix, Groups, Summary, label_key
from specaccept_cli.summary.windows import WindowTally, epoch_seconds

if TYPE_CHECKING:  # the engine parsers load only when a source is engine output (they cost ~20 ms)
    from specaccept_cli.read.engines import EngineInterval, LineTally, ScrapeSeries
    from specaccept_cli.read.sources import OpenSource


def evaluate_engine_source(
    opened: OpenSource,
    plan: Plan,
    on_error: OnError,
    series: ScrapeSeries,
    labels: set[str],
    *,
    draft_length: int | None = None,
) -> Iterator[Evaluated]:
    """Every interval of one source of engine output, evaluated, in input order.

    Prometheus sources continue `series` (scrapes across files form one series); the caller
    ends it with `EngineReading.finish` after the last source. `labels` collects every label name met.
    """
    from specaccept_cli.read.engines import LineTally, parse_engine_log

    name = opened.source.name
    lines = _lines(opened, name)
    tally = LineTally()
    if opened.format == "prometheus":
        items: Iterable[EngineInterval | InputError] = series.add(lines, name, tally)
    else:
        parse = parse_engine_log(lines, name, opened.format, k=draft_length)
        items, tally = parse, parse.tally
    yield from _evaluate(items, plan, on_error, labels)
    if not (tally.metrics or tally.bad) and opened.format != "prometheus":
        raise InputError(name, None, f"no {opened.format} metrics lines among its {tally.lines} lines")
    yield _lines_part(tally)


def _lines(opened: OpenSource, name: str) -> Iterator[bytes]:
    """The source's lines, decompressed, in bounded memory; a line over the length limit is dropped
    as it streams and stays counted (as ordinary output: no engine prints metrics lines that long)."""
    for _, block in iter_line_blocks(opened.jsonl_stream(), name):
        for line in block:
            yield b"" if line is None else line


def _evaluate(
    items: Iterable[EngineInterval | InputError], plan: Plan, on_error: OnError, labels: set[str]
) -> Iterator[Evaluated]:
    for item in items:
        if isinstance(item, InputError):
            on_error(item)
            continue
        labels.update(item.labels)
        part = interval_summary(item)
        sequence = None
        if plan.windows is not None and item.counts is not None:
            k, accepted = interval_runs(item.counts)
            if plan.windows.time_field is None:
                sequence = (k, accepted)  # windows of runs, in the order of the intervals
            else:
                moment = interval_time(item.timestamp)
                if moment is None:
                    on_error(InputError(item.source, item.line, _untimed(item.timestamp)))
                    continue
                times = np.full(k.shape[0], moment, dtype=np.float64)
                part = replace(part, windows=WindowTally.of_times(plan.windows, times, k, accepted))
        groups = None
        if plan.group_by is not None:
            groups = Groups.of({label_key(item.labels.get(plan.group_by)): replace(part, windows=None)})
        yield Evaluated(part, part.runs, groups, sequence=sequence)


def interval_runs(counts: CountMatrix) -> tuple[IntArray, IntArray]:
    """An interval's runs as (k, accepted) arrays, each accepted length spread evenly through the interval.

    The engine counted the runs of an interval, not their order; spread evenly, a window of runs
    that cuts an interval takes its share of every accepted length, so windows and the drift test see
    the interval as the homogeneous stretch it is known to be, not a sorted one.
    """
    k_index, a_index = np.nonzero(counts)
    runs = counts[k_index, a_index]
    k = np.repeat(k_index, runs).astype(np.int64)
    accepted = np.repeat(a_index, runs).astype(np.int64)
    # Run j of a cell of n runs sits at (j + 0.5) / n of the interval; sorting by that interleaves the cells.
    within = np.concatenate([(np.arange(n) + 0.5) / n for n in runs.tolist()]) if runs.shape[0] else np.zeros(0)
    order = np.lexsort((accepted, within))
    return k[order], accepted[order]


_VLLM_CLOCK = re.compile(r"^(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)$")


def interval_time(timestamp: str | None, now: datetime | None = None) -> float | None:
    """The interval's time in Unix seconds: ISO-8601 and epoch stamps as they are; vLLM's `MM-DD hh:mm:ss`,
    which has no year, in the latest year that does not put it in the future (UTC, as vLLM's servers log)."""
    if timestamp is None:
        return None
    found = epoch_seconds(timestamp)
    if found is not None:
        return found
    if timestamp.strip().lstrip("-").isdigit():
        return epoch_seconds(int(timestamp))
    clock = _VLLM_CLOCK.match(timestamp.strip())
    if clock is None:
        return None
    now = now or datetime.now(UTC)
    month, day, hour, minute, second = map(int, clock.groups())
    for year in (now.year, now.year - 1, now.year - 4):  # Feb 29 needs a leap year
        try:
            moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        except ValueError:
            continue
        if moment <= now + timedelta(days=1):
            return moment.timestamp()
    return None


def _untimed(timestamp: str | None) -> str:
    if timestamp is None:
        return "this metrics line carries no time stamp, so it cannot go in a window of time (window by runs instead)"
    return f"time stamp {timestamp!r} is not a time"


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


IntArray = npt.NDArray[np.int64]

# Formats whose figures are totals since the server started, repeating the per-request lines' counts.
RUNNING_TOTALS = frozenset({"llamacpp-stats"})


def interval_summary(interval: EngineInterval) -> Summary:
    """One interval as a summary part: exact counts when recovered, else totals and bounds only."""
    said = "; ".join((interval.describe(), *interval.notes))
    common = EngineTally(
        engines=(interval.engine,),
        formats=(interval.fmt,),
        intervals=1,
        examples=(f"{interval.source}:{interval.line}: {said}",),
    )
    if interval.fmt in RUNNING_TOTALS:
        return Summary(engine=replace(common, intervals=0, running_totals=1))
    if interval.counts is not None:
        recovered = replace(common, recovered=1)
        bounds = interval.unassumed_examined_bounds
        if interval.assumes_full_drafts and bounds is not None and interval.examined is not None:
            recovered = replace(
                recovered,
                assumed=1,
                assumed_examined=interval.examined,
                assumed_examined_low=bounds[0],
                assumed_examined_high=bounds[1],
            )
        return Summary(counts=interval.counts, engine=recovered)
    if interval.accepted is None or interval.draft_tokens is None:
        return Summary(engine=replace(common, unquantified=1))
    examined = (
        interval.unassumed_examined_bounds
        or interval.examined_bounds
        or _examined_range(interval.accepted, interval.draft_tokens)
    )
    steps = steps_bounds(
        interval.drafts,
        interval.drafts_bounds or _steps_from_length(interval),
        interval.accepted,
        interval.draft_tokens,
        examined,
        interval.k,
    )
    key = cluster_hash(f"{interval.source}:{interval.line}#{interval.fmt}")
    histogram = interval.accepted_hist
    units = BoundedUnits.one(key, steps, interval.accepted, interval.draft_tokens, examined, histogram)
    return Summary(engine=replace(common, bounded=1, units=units))


def _steps_from_length(interval: EngineInterval) -> tuple[int, int] | None:
    """Steps from a printed mean length (1 + accepted / steps, rounded): llama.cpp prints no step count."""
    bounds, accepted = interval.tokens_per_pass_bounds, interval.accepted
    if bounds is None or accepted is None or not accepted:
        return None
    low, high = bounds
    most = int(accepted / (low - 1.0)) + 1 if low > 1.0 else accepted * 10**6
    fewest = max(1, int(accepted / (high - 1.0))) if high > 1.0 else most
    return (fewest, most)


def _examined_range(accepted: int, draft_tokens: int) -> tuple[int, int]:
    """Examined tokens knowing only the totals: at least one rejection unless every token was accepted."""
    return (accepted + (1 if accepted < draft_tokens else 0), draft_tokens)


class EngineReading:
    """Engine output across the sources of one audit: the Prometheus series continues from file to file."""

    def __init__(self, draft_length: int | None = None) -> None:
        self.draft_length = draft_length
        self.series: ScrapeSeries | None = None  # made when the first engine source is met
        self.labels: set[str] = set()
        self.last_source: str | None = None

    def evaluate(self, opened: OpenSource, plan: Plan, on_error: OnError) -> Iterator[Evaluated]:
        if plan.cluster_field is not None:  # intervals of many requests: no cluster to put their runs in
            raise InputError(
                opened.source.name,
                None,
                f"is {opened.format} output: engine metrics count intervals of many requests, not runs, "
                "so a cluster field has nothing to cluster; audit per-run logs for cluster-robust intervals",
            )
        if self.series is None:
            from specaccept_cli.read.engines import ScrapeSeries

            self.series = ScrapeSeries()
        self.last_source = opened.source.name
        return evaluate_engine_source(opened, plan, on_error, self.series, self.labels, draft_length=self.draft_length)

    def finish(self, plan: Plan, on_error: OnError) -> Iterator[Evaluated]:
        """The interval a lone vLLM scrape gives (counts since the server started), once every source is read;
        then a --group-by label that no interval carried is an error (a typo would make one group "null")."""
        if self.series is None:
            return
        yield from _evaluate(self.series.finish(), plan, on_error, self.labels)
        if plan.group_by is not None and plan.group_by not in self.labels and self.last_source is not None:
            labels = sorted(self.labels)
            hint, known = did_you_mean(plan.group_by, labels), ", ".join(labels) or "none"
            why = f"no interval carries the label {plan.group_by!r} to group by{hint} (labels: {known})"
            raise InputError(self.last_source, None, why)
