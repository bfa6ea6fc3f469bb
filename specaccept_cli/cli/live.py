"""Live audits: `audit --follow` on a stream that never ends, and `specaccept watch` on /metrics endpoints.

Every period the running summary is judged as a finished audit would be (its estimates, the gates and
the drift test over the periods so far), then drawn: a Rich view redrawn in place on a terminal, or one
`specaccept.interval/1` JSON record per period, flushed at once. EOF, SIGINT and SIGTERM end the stream
normally: the caller then prints the final summary and applies the gates, as `ping` prints its
statistics on Ctrl-C. SIGHUP ends it as SIGTERM does. A second stop signal more than `SAME_STOP_SECONDS`
after the first quits at once; one within that moment is the same request (GNU `timeout` signals the child,
then its group, and a terminal's Ctrl-C may reach a pipeline twice).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click
from msgspec import Struct, field

from specaccept_cli.cli.output import StderrConsole, write_stdout
from specaccept_cli.errors import UsageError

if TYPE_CHECKING:
    from specaccept_cli.pipeline.live import Endpoints, Judged, Tick
    from specaccept_cli.verdict import GateSpec

DEFAULT_EVERY = "10s"
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
SAME_STOP_SECONDS = 1.0  # a second stop signal within this moment of the first is the same request


def parse_every(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    from specaccept_cli.cli.options import bounded_duration, shown_value

    if value is None:
        return None
    try:
        seconds = bounded_duration(value)
    except ValueError as exc:
        if "longer than" in str(exc):
            raise click.BadParameter(str(exc)) from None
        raise click.BadParameter(f"{shown_value(value)} is not a duration such as 10s, 1m or 1h") from None
    if seconds < 1:
        raise click.BadParameter("must be at least 1s")
    return seconds


def every_option(default: str) -> Callable[[Any], Any]:
    return click.option(
        "--every",
        default=default,
        show_default=True,
        metavar="DURATION",
        callback=parse_every,
        help="How often a live audit shows an interval (10s, 1m, ...).",
    )


def alert_option(command: Any) -> Any:
    return click.option(
        "--alert",
        is_flag=True,
        help="Live: one line on stderr (and a GitHub annotation with --github) when a gate or the drift test "
        "changes state.",
    )(command)


@contextlib.contextmanager
def stopping_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP end the stream normally (`stop`); another one later quits at once.

    One within `SAME_STOP_SECONDS` of the first is the same request, not a second one. A SIGHUP ignored
    when the run began (`nohup`) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    first: list[float] = []

    def handler(signum: int, frame: object) -> None:
        now = time.monotonic()
        if not first:
            first.append(now)
            stop.set()
            return
        if now - first[0] <= SAME_STOP_SECONDS:  # the same request, sent twice (to the child, then its group)
            return
        signal.signal(signum, signal.SIG_DFL)  # a second request: die of it now
        os.kill(os.getpid(), signum)

    previous = {
        number: signal.signal(number, handler)
        for number in STOP_SIGNALS
        if number == signal.SIGINT or signal.getsignal(number) != signal.SIG_IGN
    }
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


class Alerts(Struct):
    """The verdict's gate and drift entries as last seen, to tell when one changes state."""

    github: bool = False
    states: dict[str, bool] = field(default_factory=dict)

    def update(self, judged: Judged, stderr: StderrConsole, say: Callable[[str], None] | None = None) -> None:
        """`say` writes an alert line (default: stderr); the live view passes its own, printing above itself."""
        from specaccept_cli.cli.hints import hinted
        from specaccept_cli.text import visible, workflow_command

        now: dict[str, tuple[bool, str]] = {}
        for entry in judged.findings.verdict:
            if entry.check == "gate":
                metric = entry.issue.metric if entry.issue is not None else entry.text.split(" ", 1)[0]
                now[f"gate {metric}"] = (entry.status == "ok", hinted(entry))
            elif entry.check == "drift" and judged.drift is not None:
                now["drift"] = (entry.status == "ok", hinted(entry))
        for name, (passed, text) in now.items():
            before = self.states.get(name)
            self.states[name] = passed
            if before is passed or (before is None and passed):  # no change; a first state that is fine is no news
                continue
            word = "passes again" if passed else "FAILS"
            line = visible(f"specaccept: alert: {name} {word}: {text}")
            if say is not None:
                say(line)
            else:
                stderr.console.file.write(line + "\n")
                stderr.console.file.flush()
            if self.github and not passed:
                sys.stdout.write(workflow_command("warning", text, title=f"specaccept {name}") + "\n")
                sys.stdout.flush()


class TickHandler:
    """Draws each tick: interval records on stdout, or a live view on the terminal; alerts on stderr."""

    def __init__(
        self,
        *,
        spec: GateSpec,
        records: bool,
        live_view: bool,
        alert: bool,
        github: bool,
        stderr: StderrConsole,
        source: str,
        skipped: Callable[[], int] = lambda: 0,
    ) -> None:
        self.spec = spec
        self.skipped = skipped
        self.records, self.alerts = records, (Alerts(github) if alert else None)
        self.stderr = stderr
        self.source = source
        self.live: Any = None
        if live_view:
            from rich.live import Live

            from specaccept_cli.views.terminal import QuietPipeConsole

            # Nothing else may write to the terminal while the view is drawn (it would leave stale lines above
            # the last frame): alerts are printed through the view, which draws them above itself.
            self.live = Live(console=QuietPipeConsole(), auto_refresh=False, transient=False, vertical_overflow="crop")
            self.live.start()

    def __call__(self, tick: Tick) -> None:
        from specaccept_cli.pipeline.live import judge

        judged = judge(tick, self.spec, self.skipped())
        if self.records:
            from specaccept_cli.views.interval import interval_line

            write_stdout(interval_line(judged), "json")
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
        if self.live is not None:
            from specaccept_cli.views.live import live_view

            self.live.update(live_view(judged, self.source), refresh=True)
        if self.alerts is not None:
            self.alerts.update(judged, self.stderr, self._say_above if self.live is not None else None)

    def _say_above(self, line: str) -> None:
        from rich.text import Text

        self.live.console.print(Text(line, style="yellow"), soft_wrap=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def check_follow_inputs(paths: list[str], output: str) -> None:
    if len(paths) != 1:
        raise click.UsageError("--follow follows one input: a file (followed as tail -F does) or - for stdin")
    if output == "csv":
        raise click.UsageError("--follow writes interval records (-o jsonl), a table or a final JSON; not csv")


def follow_stream(path: str, stop: threading.Event, max_line_bytes: int | None = None) -> tuple[Any, Any]:
    """The followed stream of `path` ("-": stdin) and its `Source`; lines are held whole up to the longest read."""
    from pathlib import Path

    from specaccept_cli.read.follow import HOLD_BYTES, FollowedStream
    from specaccept_cli.read.sources import STDIN, Source

    hold = HOLD_BYTES if max_line_bytes is None else max_line_bytes + 1

    if path == STDIN:
        if sys.stdin is None:
            raise UsageError("stdin is closed")
        return FollowedStream("<stdin>", stop, fd=sys.stdin.fileno(), hold=hold), Source("<stdin>", None, None)
    target = Path(path)
    if target.is_dir():
        raise click.UsageError(f"{path} is a directory: --follow follows one text file or stdin")
    from specaccept_cli.text import shown_name

    stream = FollowedStream(shown_name(path), stop, path=target, hold=hold)
    return stream, Source(shown_name(path), target, None)


def waiting_note(message: str, stderr: StderrConsole) -> None:
    from specaccept_cli.text import visible

    stderr.console.file.write(f"specaccept: {visible(message)}\n")
    stderr.console.file.flush()


def unfinished_note(stream: Any, stderr: StderrConsole) -> None:
    """Say what a stop left unread: a line still being written is not a bad line, and not silently dropped."""
    from specaccept_cli.text import visible

    if stream.unfinished_bytes:
        line = f"specaccept: stopped with an unfinished last line ({stream.unfinished_bytes} bytes) not read"
        stderr.console.file.write(visible(line) + "\n")
    for note in stream.events.notes:
        stderr.console.file.write(visible(f"specaccept: {note}") + "\n")


@contextlib.contextmanager
def live_stop(live: bool) -> Iterator[threading.Event | None]:
    """For a live audit, the event a stop signal sets, with the signals caught until the command has ended.

    They stay caught while the final summary is written: the same signal sent twice (GNU `timeout`
    signals the child, then its group) must not cut it short.
    """
    if not live:
        yield None
        return
    stop = threading.Event()
    with stopping_on_signals(stop):
        yield stop


def follow_read(
    options: Any,
    spec: GateSpec,
    paths: list[str],
    fields: Any,
    plan: Any,
    quarantine: Any,
    stderr: StderrConsole,
    stop: threading.Event,
) -> tuple[Any, BaseException | None, tuple[Any, ...]]:
    """`audit --follow`: the one input read live until EOF, a stop signal or a read error.

    Returns the whole summary, the error that ended the reading (None: EOF or a stop), so that what
    was read before a read error is still reported, and the verdict entries it adds (none).
    """
    from specaccept_cli.pipeline import skipped_input
    from specaccept_cli.pipeline.live import check_follow_plan, follow_producer, run_live
    from specaccept_cli.read.policy import ErrorPolicy
    from specaccept_cli.read.sources import Reading

    check_follow_inputs(paths, options.output)
    check_follow_plan(plan)
    stream, source = follow_stream(paths[0], stop, options.max_line_bytes)
    if stderr.is_terminal:  # what a stream of start-up lines is waited on for; into a pipe, nothing is said
        stream.announce = lambda message: waiting_note(message, stderr)
    policy = ErrorPolicy(options.on_error, quarantine)
    reading = Reading(fields, options.input_format, options.max_line_bytes)
    producer = follow_producer(
        stream, source, reading, plan, policy, options.draft_length, options.keep_duplicate_lines
    )
    handler = tick_handler(options, spec, source.name, stderr, lambda: policy.skipped_rows)
    try:
        end = run_live(producer, plan, options.every, stop, handler)
    finally:
        handler.close()
        unfinished_note(stream, stderr)
    return end.total + skipped_input(policy), end.failure, ()


def tick_handler(
    options: Any, spec: GateSpec, source: str, stderr: StderrConsole, skipped: Callable[[], int]
) -> TickHandler:
    """Records on stdout (-o jsonl, or a table that is not on a terminal), or the live view on a terminal."""
    on_terminal = options.output == "table" and _stdout_is_terminal()
    return TickHandler(
        spec=spec,
        records=options.output == "jsonl" or (options.output == "table" and not on_terminal),
        live_view=on_terminal and not options.quiet,
        alert=options.alert,
        github=options.github,
        stderr=stderr,
        source=source,
        skipped=skipped,
    )


def _stdout_is_terminal() -> bool:
    from specaccept_cli.views.terminal import QuietPipeConsole

    return bool(QuietPipeConsole().is_terminal)


def watch_read(
    options: Any, spec: GateSpec, plan: Any, stderr: StderrConsole, stop: threading.Event
) -> tuple[Any, BaseException | None, tuple[Any, ...]]:
    """`watch`: the endpoints scraped every period until a stop signal; the whole summary, an error, and a
    warning in the verdict for each endpoint that is failing at the end or never answered."""
    from specaccept_cli.pipeline import skipped_input
    from specaccept_cli.pipeline.live import Endpoints, endpoint_verdict, run_live, watch_producer
    from specaccept_cli.read.policy import ErrorPolicy

    policy = ErrorPolicy("skip")
    endpoints = Endpoints(options.watch_urls)
    producer = watch_producer(
        options.watch_urls,
        dict(options.headers),
        options.every,
        plan,
        policy,
        endpoints,
        timeout=options.timeout,
        attempts=options.retries + 1,
    )
    shown = ", ".join(state.url for state in endpoints.snapshot())
    handler = tick_handler(options, spec, shown, stderr, lambda: policy.skipped_rows)
    try:
        end = run_live(producer, plan, options.every, stop, handler, state=lambda: {"endpoints": endpoints.snapshot()})
    finally:
        handler.close()
    from specaccept_cli.text import visible

    for state in endpoints.snapshot():
        if state.failed_total:
            line = f"specaccept: {state.url}: {state.failed_total} of {state.scrapes} scrapes failed" + (
                f" (last: {state.error})" if state.error else ""
            )
            stderr.console.file.write(visible(line) + "\n")
    return (
        end.total + skipped_input(policy),
        end.failure or _never_answered(shown, endpoints),
        endpoint_verdict(endpoints.snapshot()),
    )


def _never_answered(shown: str, endpoints: Endpoints) -> BaseException | None:
    """A watch that read nothing at all is no pass: when no endpoint ever gave a scrape that could be read
    (refused, timed out, an error status, a broken page), the watch ends with exit 2 after its summary."""
    from specaccept_cli.errors import InputError

    states = endpoints.snapshot()
    if any(state.last_success is not None for state in states):
        return None
    tried = sum(state.scrapes for state in states)
    if len(states) == 1:  # the endpoint's own line, just before this one, gives its last error
        where, what, check = shown, "the endpoint", "the URL, and that the server is up and serves its metrics there"
    else:
        where, what = "watch", f"its {len(states)} endpoints"
        check = "the URLs, and that the servers are up and serve their metrics there"
    return InputError(
        where, None, f"no scrape of {what} could be read ({tried:,} tried): nothing was measured; check {check}"
    )
