"""Server output read source by source: engine metrics lines, Prometheus scrapes and per-request payloads.

Each source is read here (`read.engines`, `read.payloads` make the record types of `rule/`) and each
interval or request becomes a summary part in `summary.intervals` and `summary.requests`; this module
only runs the reading: the lines of a source, the Prometheus series that continues from file to file,
the error policy, and the checks that a source held what its format promises.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from specaccept_cli.errors import InputError, OnError, Reason, Why
from specaccept_cli.read.jsonl import iter_line_blocks
from specaccept_cli.rule.validate import did_you_mean
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.evaluate import Evaluated, Plan
from specaccept_cli.summary.intervals import interval_parts, lines_part
from specaccept_cli.summary.requests import request_parts
from specaccept_cli.summary.state import Summary

if TYPE_CHECKING:  # the engine parsers load only when a source is engine output (they cost ~20 ms)
    from specaccept_cli.read.engines import ScrapeSeries
    from specaccept_cli.read.payloads import PayloadTally
    from specaccept_cli.read.sources import OpenSource
    from specaccept_cli.rule.intervals import EngineInterval


def evaluate_engine_source(
    opened: OpenSource,
    plan: Plan,
    on_error: OnError,
    series: ScrapeSeries,
    labels: set[str],
    *,
    draft_length: int | None = None,
    keep_duplicates: bool = False,
) -> Iterator[Evaluated]:
    """Every interval of one source of engine output, evaluated, in input order.

    Prometheus sources continue `series` (scrapes across files form one series); the caller ends it after
    the last source (`EngineReading.finish`, `summary.intervals.closing_parts`). `labels` collects every label
    name met.
    """
    from specaccept_cli.read.engines import LineTally, parse_engine_log
    from specaccept_cli.read.formats import by_name

    name = opened.source.name
    lines = _lines(opened, name)
    tally = LineTally()
    scrape = by_name(opened.format).driver == "scrape"  # scrapes across files form one series
    if scrape:
        items: Iterable[EngineInterval | InputError] = series.add(lines, name, tally)
    else:
        parse = parse_engine_log(lines, name, opened.format, k=draft_length, keep_duplicates=keep_duplicates)
        items, tally = parse, parse.tally
    yield from interval_parts(items, plan, on_error, labels)
    if not (tally.metrics or tally.bad):  # as every engine format: an input with nothing to count says so
        words = f"no {opened.format} metrics lines among its {tally.lines} lines"
        if scrape:
            words += f" (no sample of a speculative-decoding series: {', '.join(SCRAPE_SERIES)})"
        raise InputError(name, None, words, why=Why(Reason.NOTHING_OF_FORMAT, about=opened.format))
    yield lines_part(tally)


# What a scrape is read for (`read.engines.exposition`), named when a scrape holds none of it.
SCRAPE_SERIES = ("vllm:spec_decode_*", "sglang:spec_*", "llamacpp:spec_decode_*", "lmdeploy:spec_decode_*")


def _lines(opened: OpenSource, name: str) -> Iterator[bytes]:
    """The source's lines, decompressed, in bounded memory; a line over the length limit is dropped
    as it streams and stays counted (as ordinary output: no engine prints metrics lines that long)."""
    for _, block in iter_line_blocks(opened.jsonl_stream(), name):
        for line in block:
            yield b"" if line is None else line


class EngineReading:
    """Engine output across the sources of one audit: the Prometheus series continues from file to file."""

    def __init__(self, draft_length: int | None = None, keep_duplicates: bool = False) -> None:
        self.draft_length = draft_length
        self.keep_duplicates = keep_duplicates  # vLLM metrics lines repeated exactly are counted (not dropped)
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
                why=Why(Reason.CLUSTERED_ENGINE),
            )
        if self.series is None:
            from specaccept_cli.read.engines import ScrapeSeries

            self.series = ScrapeSeries()
        self.last_source = opened.source.name
        return evaluate_engine_source(
            opened,
            plan,
            on_error,
            self.series,
            self.labels,
            draft_length=self.draft_length,
            keep_duplicates=self.keep_duplicates,
        )

    def finish(self) -> Iterable[EngineInterval | InputError]:
        """What the series ends with once every source is read: the interval a lone vLLM scrape gives (counts
        since the server started). The caller evaluates it with `summary.intervals.closing_parts`."""
        return () if self.series is None else self.series.finish()


def evaluate_payload_source(opened: OpenSource, plan: Plan, on_error: OnError) -> Iterator[Evaluated]:
    """Every request of one source of payloads, evaluated, in input order; then the source's line counts."""
    from specaccept_cli.read.payloads import parse_payloads

    name = opened.source.name
    parse = parse_payloads(_lines(opened, name), name, opened.format)
    labels: set[str] = {"request_id", "id"}
    yield from request_parts(parse, name, plan, on_error, labels)
    tally = parse.tally
    if not (tally.records or tally.bad or tally.null_payloads):
        nothing = Why(Reason.NOTHING_OF_FORMAT, about=opened.format)
        raise InputError(name, None, f"no {opened.format} payloads among its {tally.lines} lines", why=nothing)
    yield payload_lines_part(tally)
    if plan.group_by is not None and plan.group_by not in labels and tally.records:
        known = ", ".join(sorted(labels))
        hint = did_you_mean(plan.group_by, sorted(labels))
        raise InputError(name, None, f"no request carries the label {plan.group_by!r} to group by{hint} ({known})")


def payload_lines_part(tally: PayloadTally) -> Evaluated:
    engine = EngineTally(
        lines=tally.lines,
        metrics_lines=tally.records,
        ignored_lines=tally.ignored,
        bad_lines=tally.bad,
        null_payloads=tally.null_payloads,
        drift=tuple(tally.drift.messages()),
    )
    return Evaluated(Summary(engine=engine), 0)


def server_output(
    opened: OpenSource, plan: Plan, on_error: OnError, engine: EngineReading
) -> Iterator[Evaluated] | None:
    """The one branch on what a source holds (its format's kind, `read.formats.Kind`).

    Engine intervals and per-request payloads are evaluated here (`engine` carries the Prometheus series
    across sources; the caller ends it: `closing_parts(engine.finish(), ...)`); runs are the caller's to read,
    serially or on workers (None); a saved summary is no log.
    """
    from specaccept_cli.read.formats import Kind

    kind = opened.kind
    if kind is Kind.REQUESTS:  # per-request payloads: the request is the cluster, always
        return evaluate_payload_source(opened, plan, on_error)
    if kind is Kind.INTERVALS:
        return engine.evaluate(opened, plan, on_error)
    if kind is Kind.SUMMARY:
        raise InputError(opened.source.name, None, "is a saved summary, not a log: give it to diff, merge or report")
    return None
