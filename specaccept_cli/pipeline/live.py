"""Live: a stream that never ends, or a server's /metrics, summarised interval by interval as it arrives.

One thread reads (a followed stream through the ordinary per-batch stage, or scrapes of endpoints
through the ordinary Prometheus reader) and hands `Evaluated` blocks over a bounded queue; the
calling thread folds them into the current interval and, every `every` seconds, hands a `Tick` (the
interval just ended, the running total, the recent intervals) to its caller. Stopping (EOF, a
signal: `stop` set) ends the reading; the last, partial interval is ticked and the total returned,
so a stopped follow is summarised like a finished audit.

Memory stays flat however long it runs: the total is the additive `Summary` (its windows, one per
interval by arrival time, merge in pairs past `MAX_WINDOWS`, as any time-windowed audit's do), and
only the last `RECENT` intervals are kept apart. The drift test then runs over the windows kept:
every interval while there are fewer than the cap, older ones merged pairwise after that.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO

import numpy as np
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.errors import InputError, Reason, UsageError, Why
from specaccept_cli.pipeline.clusters import ClusterDetection
from specaccept_cli.read.follow import FollowedStream
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.read.sources import (
    SCAN,
    Format,
    OpenSource,
    Reading,
    Source,
    detect_format,
    find_known_line,
    read_opened,
    sniff_compression,
)
from specaccept_cli.summary.estimates import Estimates, estimate
from specaccept_cli.summary.evaluate import Evaluated, Plan, add_up, evaluate_batch
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.windows import Drift, WindowSpec, WindowTally
from specaccept_cli.verdict import Findings, GateSpec, conclude
from specaccept_cli.verdict.checks import GateResult
from specaccept_cli.verdict.findings import VerdictEntry

RECENT = 20  # intervals kept apart for the view (alpha over the recent intervals)
QUEUE_BLOCKS = 64  # evaluated blocks in flight between the reader and the ticker: backpressure, not growth
ARRIVAL = "arrival time"  # the time field of live windows: when a run was read, not a field of the rows
STOP_GRACE_SECONDS = 15.0  # how long a stop waits for the reader to hand over what it already read


class Interval(Struct, frozen=True):
    """What arrived between `start` and `end` (Unix seconds)."""

    index: int
    start: float
    end: float
    summary: Summary


class EndpointState(Struct, frozen=True):
    """One scraped endpoint as last seen: up, or failing since `failures` scrapes, with the reason."""

    url: str
    scrapes: int = 0
    failures: int = 0  # consecutive failed scrapes (0: the last one worked)
    failed_total: int = 0
    error: str | None = None
    resets: int = 0
    last_success: float | None = None


class Tick(Struct, frozen=True):
    """One period's record: the interval just ended and everything up to its end."""

    interval: Interval
    total: Summary
    recent: tuple[Interval, ...]
    final: bool
    endpoints: tuple[EndpointState, ...] = ()
    notes: tuple[str, ...] = ()


def live_windows(every: int) -> WindowSpec:
    """Windows of live runs: one per period, by arrival time."""
    return WindowSpec(time_field=ARRIVAL, width=every)


class Judged(Struct, frozen=True):
    """One tick judged: the period's own numbers, and everything so far concluded as a finished audit is.

    Every live view (the screen, the records, the alerts) draws this; nothing is computed twice.
    """

    tick: Tick
    interval: Estimates
    findings: Findings
    skipped_rows: int = 0
    recent_alphas: tuple[float | None, ...] = ()

    @property
    def total(self) -> Estimates:
        return self.findings.numbers

    @property
    def gates(self) -> tuple[GateResult, ...]:
        return self.findings.gates

    @property
    def drift(self) -> Drift | None:
        return self.findings.drift

    @property
    def drifting(self) -> bool | None:
        """Whether the drift test finds alpha moving (None: not testable yet)."""
        entries = [entry for entry in self.findings.verdict if entry.check == "drift"]
        if self.drift is None or not entries:
            return None
        return any(entry.status != "ok" for entry in entries)


def judge(tick: Tick, spec: GateSpec, skipped_rows: int = 0) -> Judged:
    """The tick's period estimated on its own, and the total concluded under `spec` (gates, drift, ...).

    A watched endpoint that fails is in the verdict too, as a warning (the figures are not over it).
    """
    findings = conclude(tick.total, None, spec)
    if tick.endpoints:
        findings = replace(findings, verdict=watched_verdict(findings.verdict, tick.endpoints))
    return Judged(
        tick,
        estimate(tick.interval.summary),
        findings,
        skipped_rows,
        tuple(recent_alphas(tick.recent)),
    )


def watched_verdict(verdict: Sequence[VerdictEntry], states: Sequence[EndpointState]) -> tuple[VerdictEntry, ...]:
    """A watch's verdict: the endpoints' own entries say why nothing was read, where an empty total's
    "nothing was read" speaks of a file (empty, or blank lines only)."""
    return tuple(entry for entry in verdict if entry.check != "input") + endpoint_verdict(states)


def endpoint_verdict(states: Sequence[EndpointState]) -> tuple[VerdictEntry, ...]:
    """A warning per endpoint that is failing now or never answered: the totals do not hold what it served."""
    entries: list[VerdictEntry] = []
    for state in states:
        if not state.failures:
            continue
        since = "never answered" if state.last_success is None else f"failing for {state.failures} scrapes"
        entries.append(VerdictEntry("endpoint", "warn", f"{state.url} {since}: {state.error}"))
    return tuple(entries)


class _Failed(Struct, frozen=True):
    """An exception raised by the reading thread, handed to the consumer to raise."""

    error: BaseException


_END = object()
OPENED = object()  # put by a producer once its input is open and its format known


class Ticker:
    """Folds evaluated blocks into intervals of `every` seconds; the total is their sum."""

    def __init__(self, plan: Plan, every: int, clock: Callable[[], float] = time.time) -> None:
        self.plan, self.every, self.clock = plan, every, clock
        self.spec = live_windows(every)
        self.total = Summary(windows=WindowTally.empty(self.spec))
        self.current = self._empty()
        self.recent: deque[Interval] = deque(maxlen=RECENT)
        self.started = clock()
        self.count = 0

    def _empty(self) -> Summary:
        empty = add_up(iter(()), None, self.plan.group_by, None)
        return replace(empty, windows=WindowTally.empty(self.spec))

    def add(self, result: Evaluated, moment: float | None = None) -> None:
        """One evaluated block, placed in the window of the moment it arrived."""
        part = add_up(iter([replace(result, sequence=None)]), None, self.plan.group_by, None)
        windows = WindowTally.empty(self.spec)
        if result.sequence is not None and result.sequence[0].shape[0]:
            k, accepted = result.sequence
            times = np.full(k.shape[0], self.clock() if moment is None else moment, dtype=np.float64)
            windows = WindowTally.of_times(self.spec, times, k, accepted)
        self.current = self.current + replace(part, windows=windows)

    def tick(self, final: bool = False, **extra: object) -> Tick:
        """End the current interval: it joins the total and the recent ones."""
        end = self.clock()
        start = self.recent[-1].end if self.recent else self.started
        interval = Interval(self.count, start, end, self.current)
        self.count += 1
        self.total = self.total + self.current
        self.recent.append(interval)
        self.current = self._empty()
        return Tick(interval, self.total, tuple(self.recent), final, **extra)  # type: ignore[arg-type]


class LiveEnd(Struct, frozen=True):
    """How a live read ended: the total read, and the error that ended the reading (None: EOF or a stop).

    A reading that fails after it began keeps what it read: the caller shows the summary, then the error.
    """

    total: Summary
    failure: BaseException | None = None


def run_live(
    produce: Callable[[Callable[[object], None], threading.Event], None],
    plan: Plan,
    every: int,
    stop: threading.Event,
    on_tick: Callable[[Tick], None],
    *,
    state: Callable[[], dict[str, object]] | None = None,
) -> LiveEnd:
    """Run `produce(put, stop)` on a reading thread and tick every `every` seconds until it ends or `stop`.

    `produce` puts `OPENED` once its input is open (no period is shown before: an input that cannot be
    opened is an error with nothing on stdout before it), then `Evaluated` blocks (and anything else,
    such as `EndpointState`s, which `on_tick` is not told of but `state()` can gather) with `put`. An
    exception it raises before `OPENED` is raised here; one raised after ends the reading: the interval
    read so far is ticked and the exception returned with the total.
    """
    handover: queue.Queue[object] = queue.Queue(QUEUE_BLOCKS)
    draining = threading.Event()  # set once the ticking thread takes nothing more

    def put(item: object) -> None:
        while not draining.is_set():  # blocks while the queue is full: backpressure on the reader
            try:
                handover.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def reader() -> None:
        try:
            produce(put, stop)
        except BaseException as exc:  # handed to the ticking thread, which raises it where the CLI can word it
            put(_Failed(exc))
            return
        put(_END)

    ticker = Ticker(plan, every)
    thread = threading.Thread(target=reader, name="specaccept-live-reader", daemon=True)
    thread.start()
    wall = time.time()  # periods end on whole multiples of `every` (at :00, :10, ... for 10s), as windows do
    deadline = time.monotonic() + (math.floor(wall / every) + 1) * every - wall
    failure: BaseException | None = None
    opened = False
    while True:
        timeout = max(0.0, deadline - time.monotonic())
        try:
            item = handover.get(timeout=min(timeout, 0.2))
        except queue.Empty:
            item = None
        if item is OPENED:
            opened = True
        elif isinstance(item, Evaluated):
            ticker.add(item)
        elif isinstance(item, _Failed):
            failure = item.error
            break
        elif item is _END:
            break
        if stop.is_set() and handover.empty():
            break
        if time.monotonic() >= deadline:
            if opened:
                on_tick(ticker.tick(False, **(state() if state else {})))
            deadline += every
            if deadline < time.monotonic():  # a slow tick (a stopped terminal): start the next period now
                deadline = time.monotonic() + every
    stop.set()
    # What the reader handed over before it saw the stop: it sees it within one poll or one scrape timeout.
    limit = time.monotonic() + STOP_GRACE_SECONDS
    while True:
        try:
            item = handover.get(timeout=0.05)
        except queue.Empty:
            if not thread.is_alive() or time.monotonic() > limit:
                break
            continue
        if item is OPENED:
            opened = True
        elif isinstance(item, Evaluated):
            ticker.add(item)
        elif isinstance(item, _Failed) and failure is None:
            failure = item.error
    draining.set()
    if failure is not None and not opened:
        raise failure
    on_tick(ticker.tick(True, **(state() if state else {})))
    return LiveEnd(ticker.total, failure)


# --- following a stream -------------------------------------------------------------------------


def open_followed(stream: FollowedStream, source: Source, requested: Format) -> OpenSource:
    """A followed stream opened as any text source is: its format told from its first line."""
    head = stream.peek(8)
    if sniff_compression(head) is not None:
        raise InputError(source.name, None, "is compressed: a followed stream is read as text (decompress it first)")
    found = detect_format(source, head, requested, stream.peek)
    if found == "parquet":
        why = Why(Reason.PARQUET_FOLLOWED)
        raise InputError(source.name, None, "is Parquet: only text (JSONL or server output) can be followed", why=why)
    text: BinaryIO = stream  # type: ignore[assignment]
    if found == SCAN:  # start-up lines, no known line yet: wait for one (on a terminal, saying so)
        found, text = find_known_line(source.name, text, stream.announce)
    return OpenSource(source, stream, head, found, None, text)  # type: ignore[arg-type]


def follow_producer(
    stream: FollowedStream,
    source: Source,
    reading: Reading,
    plan: Plan,
    policy: ErrorPolicy,
    draft_length: int | None = None,
    keep_duplicates: bool = False,
) -> Callable[[Callable[[object], None], threading.Event], None]:
    """What the reading thread does for `audit --follow`: the stream through the ordinary per-batch stage."""
    from specaccept_cli.pipeline.servers import EngineReading, server_output
    from specaccept_cli.summary.intervals import closing_parts

    # Blocks are evaluated in input order as windows "of runs"; the ticker places them by arrival.
    plan = replace(plan, windows=WindowSpec())

    def produce(put: Callable[[object], None], stop: threading.Event) -> None:
        try:
            opened = open_followed(stream, source, reading.input_format)
            put(OPENED)
            if stop.is_set():
                return
            engine = EngineReading(draft_length, keep_duplicates)
            served = server_output(opened, plan, policy, engine)
            if served is not None:  # server output: intervals or requests, as they arrive
                for result in policy.guard(served):
                    put(result)
                end = closing_parts(engine.finish(), plan, policy, engine.labels, engine.last_source)
                for result in policy.guard(end):
                    put(result)
                return
            # With no cluster field named, the first row's request field clusters the runs: it is read ahead
            # on the stream itself, so the followed stream loses nothing.
            opened, rows, clustered = ClusterDetection().resolve(opened, reading, plan)
            for batch in policy.guard(read_opened(opened, rows, policy)):
                result, errors = evaluate_batch(batch, clustered, keep_runs=False)
                for error in errors:
                    policy(error)
                put(result)
        finally:
            stream.close()

    return produce


def check_follow_plan(plan: Plan) -> None:
    """Live windows are by arrival; a time field of the rows cannot window them as well."""
    if plan.windows is not None and plan.windows.time_field is not None:
        raise UsageError("a followed stream is windowed by arrival time (every period is a window)")


def recent_alphas(recent: Sequence[Interval]) -> list[float | None]:
    """Alpha of each recent interval (None where nothing was examined): the live view's strip."""
    out: list[float | None] = []
    for interval in recent:
        examined = interval.summary.examined_tokens
        out.append(None if not examined else interval.summary.accepted_tokens / examined)
    return out


# --- scraping endpoints -------------------------------------------------------------------------


class Endpoints:
    """The state of every watched endpoint, written by the reading thread, read by the ticking one."""

    def __init__(self, urls: Sequence[str]) -> None:
        from specaccept_cli.read.scrape import shown_url

        self.states = {url: EndpointState(shown_url(url)) for url in urls}

    def snapshot(self) -> tuple[EndpointState, ...]:
        return tuple(self.states.values())

    def succeeded(self, url: str, resets: int, moment: float) -> None:
        state = self.states[url]
        self.states[url] = replace(
            state, scrapes=state.scrapes + 1, failures=0, error=None, resets=state.resets + resets, last_success=moment
        )

    def failed(self, url: str, error: str) -> None:
        state = self.states[url]
        self.states[url] = replace(
            state,
            scrapes=state.scrapes + 1,
            failures=state.failures + 1,
            failed_total=state.failed_total + 1,
            error=error,
        )


def watch_producer(
    urls: Sequence[str],
    headers: dict[str, str],
    every: int,
    plan: Plan,
    policy: ErrorPolicy,
    endpoints: Endpoints,
    *,
    timeout: float = 5.0,
    attempts: int = 3,
) -> Callable[[Callable[[object], None], threading.Event], None]:
    """What the reading thread does for `watch`: every endpoint scraped once a period, each its own series.

    The first scrape of an endpoint only starts its series: what is counted is what happened while
    watching (counter differences between scrapes, from the restart after a counter reset). A scrape
    that fails, or that is not a valid Prometheus page, marks the endpoint failing (shown and counted)
    and the next good scrape counts the whole gap, as counters are cumulative.
    """
    from concurrent.futures import ThreadPoolExecutor

    from specaccept_cli.read.engines.prometheus import ScrapeSeries
    from specaccept_cli.read.scrape import Retry, ScrapeError, fetch_with_retries
    from specaccept_cli.rule.intervals import LineTally
    from specaccept_cli.summary.intervals import interval_parts, lines_part

    retry = Retry(attempts=attempts)
    labels: set[str] = set()

    def scrape(url: str, stop: threading.Event) -> bytes | ScrapeError:
        try:
            return fetch_with_retries(url, headers, timeout, retry, stop.wait, budget=every, stop=stop)
        except ScrapeError as error:
            return error

    def follow(url: str, series: ScrapeSeries, put: Callable[[object], None], stop: threading.Event) -> None:
        """One endpoint, every period, on its own schedule: a slow or hung one delays no other."""
        due = time.monotonic()
        shown = endpoints.states[url].url
        number = 0
        while not stop.is_set():
            number += 1
            page = scrape(url, stop)
            if stop.is_set() and isinstance(page, ScrapeError):  # cut by the stop; a whole page is still read
                return
            if isinstance(page, ScrapeError):
                endpoints.failed(url, str(page))
            else:
                problem = page_problem(page)
                tally = LineTally()
                source = f"{shown} (scrape {number})"  # each page's intervals told apart in the engine table
                items = (
                    InputError(source, None, problem) if problem else series.add_page(page_lines(page), source, tally)
                )
                bad = [items] if isinstance(items, InputError) else [i for i in items if isinstance(i, InputError)]
                if bad or isinstance(items, InputError):
                    endpoints.failed(url, _refused(bad[0]))
                else:
                    for result in interval_parts(items, plan, policy, labels):
                        put(result)
                    put(lines_part(tally))  # the page's lines: read, metrics, other output
                    endpoints.succeeded(url, tally.resets, time.time())
            due += every
            if due < time.monotonic():  # a scrape longer than a period: the next one now, not a burst
                due = time.monotonic()
            stop.wait(max(0.0, due - time.monotonic()))

    def produce(put: Callable[[object], None], stop: threading.Event) -> None:
        put(OPENED)
        with ThreadPoolExecutor(max_workers=len(urls), thread_name_prefix="specaccept-scrape") as pool:
            running = [pool.submit(follow, url, ScrapeSeries(), put, stop) for url in urls]
            for one in running:
                one.result()

    return produce


def _refused(error: InputError) -> str:
    where = "" if error.line is None else f" (line {error.line})"
    return f"not a valid scrape{where}: {error.message}"


MAX_PAGE_LINES = 1_000_000  # a /metrics page of more lines is refused before it is read
MAX_PAGE_SERIES = 10_000  # ... and one of more spec-decoding series (vLLM serves 3 + k per model)


def page_problem(page: bytes) -> str | None:
    """Why a /metrics page is refused before it is parsed (None: it is read), counted in C, in no memory.

    A page's memory once parsed follows its spec-decoding series, so they are capped; blank and other
    lines cost only time, so the lines are capped too. A page must end with a line feed, as the
    exposition format says: one that does not was cut inside a line.
    """
    if page and not page.endswith(b"\n"):
        return "the page ends inside a line (cut short?)"
    lines = page.count(b"\n")
    if lines > MAX_PAGE_LINES:
        return f"the page has {lines:,} lines, more than {MAX_PAGE_LINES:,}"
    series = page.count(b":spec_")  # every spec-decoding series name holds it (an upper bound of their number)
    if series > MAX_PAGE_SERIES:
        return f"the page has more than {MAX_PAGE_SERIES:,} spec-decoding series"
    return None


def page_lines(page: bytes) -> Iterator[bytes]:
    """The lines of a page one by one, never a list of them all."""
    start = 0
    while start < len(page):
        end = page.find(b"\n", start)
        if end < 0:
            end = len(page)
        yield page[start:end]
        start = end + 1
