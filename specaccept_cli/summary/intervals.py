"""Engine intervals -> Summary: metrics lines and Prometheus scrapes through the same front door as runs.

The intervals come from `read.engines`, read source by source in `pipeline.servers`; this module only
turns each `rule.intervals.EngineInterval` (and a source's `LineTally`) into summary parts.

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
from specaccept_cli.rule.intervals import ONE_SCRAPE
from specaccept_cli.rule.validate import did_you_mean
from specaccept_cli.summary.bounded import BoundedUnits, steps_bounds
from specaccept_cli.summary.clusters import ClusterTally
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.evaluate import Evaluated, Plan, cluster_hash
from specaccept_cli.summary.state import CountMatrix, Groups, Summary, label_key
from specaccept_cli.summary.windows import WindowTally, epoch_seconds

if TYPE_CHECKING:
    from specaccept_cli.rule.intervals import EngineInterval, LineTally


def interval_parts(
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


def closing_parts(
    items: Iterable[EngineInterval | InputError], plan: Plan, on_error: OnError, labels: set[str], source: str | None
) -> Iterator[Evaluated]:
    """The intervals an engine series ends with, once every source is read (`pipeline.servers.EngineReading.finish`);
    then a --group-by label that no interval carried is an error (a typo would make one group "null"). `labels`:
    every label the series' intervals carried; `source`: the last source of engine output (None: there was none)."""
    yield from interval_parts(items, plan, on_error, labels)
    if plan.group_by is not None and plan.group_by not in labels and source is not None:
        known = sorted(labels)
        hint, shown = did_you_mean(plan.group_by, known), ", ".join(known) or "none"
        why = f"no interval carries the label {plan.group_by!r} to group by{hint} (labels: {shown})"
        raise InputError(source, None, why)


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


def lines_part(tally: LineTally) -> Evaluated:
    """What a source's line counts add: every line read is counted, as metrics, ordinary output or bad."""
    engine = EngineTally(
        lines=tally.lines,
        metrics_lines=tally.metrics,
        ignored_lines=tally.ignored,
        bad_lines=tally.bad,
        resets=tally.resets,
        duplicate_lines=tally.duplicates,
    )
    return Evaluated(Summary(engine=engine), 0)


IntArray = npt.NDArray[np.int64]

# Formats whose figures are totals since the server started, repeating the per-request lines' counts.
RUNNING_TOTALS = frozenset({"llamacpp-stats"})
# Lines of one request each (llama.cpp's `slot print_timing` draft acceptance line, tools/server/server-context.cpp):
# every one is a request, the unit the intervals sum over, as with per-request payloads; not an interval of many.
PER_REQUEST_LINES = frozenset({"llamacpp-request", "llamacpp-request-meanlen", "llamacpp-request-perpos"})
REQUEST_FIELD = "request_id"  # the cluster field of per-request input: the name logged runs use by default


def interval_summary(interval: EngineInterval) -> Summary:
    """One interval as a summary part: exact counts when recovered, else totals and bounds only."""
    said = "; ".join((interval.describe(), *interval.notes))
    one_request = interval.fmt in PER_REQUEST_LINES
    common = EngineTally(
        engines=(interval.engine,),
        formats=(interval.fmt,),
        intervals=1,
        requests=1 if one_request else 0,
        lone_scrapes=1 if ONE_SCRAPE in interval.notes else 0,
        examples=(f"{interval.source}:{interval.line}: {said}",),
    )
    if interval.fmt in RUNNING_TOTALS:
        return Summary(engine=replace(common, intervals=0, running_totals=1))
    key = cluster_hash(f"{interval.source}:{interval.line}#{interval.fmt}")
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
        clusters = None
        if one_request:  # the request's runs in its own cluster, as a payload's are
            k, accepted = interval_runs(interval.counts)
            keys = np.full(k.shape[0], key, dtype=np.uint64)
            clusters = ClusterTally.of_runs(REQUEST_FIELD, keys, k, accepted) if k.shape[0] else None
        return Summary(counts=interval.counts, clusters=clusters, engine=recovered)
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
