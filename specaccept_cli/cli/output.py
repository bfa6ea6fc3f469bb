"""Where the commands' output goes: stdout, files written atomically, the GitHub step summary.

A failed write (full disk, EIO) becomes an OutputError here, so the group reports it like any
other domain error; EPIPE stays BrokenPipeError, which the group turns into a quiet exit.
Only the standard library and click at import: `specaccept check` uses this module.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Literal

import click

from specaccept_cli.cli.destinations import (
    abandon_stdout,
    input_identities,
    opened,
    refuse_same_files,
    target,
    unwritable,
    write_all,
    write_to,
)
from specaccept_cli.errors import ChecksFailed, OutputError, SpecacceptError
from specaccept_cli.text import CommandFence, json_commands_escaped, runner_reads, visible

if TYPE_CHECKING:
    from specaccept_cli.verdict import Findings
    from specaccept_cli.verdict.checks import Issue
    from specaccept_cli.views.terminal import QuietPipeConsole


class _Stdout:
    """What became of stdout in this command: side outputs may need the run to go on without it.

    `| head -1` closes stdout early. When nothing else depends on the run, that ends it quietly
    (BrokenPipeError reaches the group); when a --summary-out, --html, --quarantine or --github
    report is still to be written, stdout is dropped and the run goes on to write them.
    """

    def __init__(self) -> None:
        self.outlived = False  # side outputs outlive a closed stdout
        self.gone = False  # the reader closed it: later output is dropped

    def drop(self) -> None:
        self.gone = True
        abandon_stdout()


STDOUT = _Stdout()


@contextlib.contextmanager
def side_outputs_outlive_stdout(enabled: bool) -> Iterator[None]:
    """Within the block, with `enabled`, a closed stdout stops only what goes to stdout (see `_Stdout`)."""
    STDOUT.outlived, STDOUT.gone = enabled, False
    try:
        yield
    finally:
        STDOUT.outlived, STDOUT.gone = False, False


# What stdout carries, for the one guard each form has against forged CI workflow commands when
# the GitHub Actions runner reads it (`text.runner_reads`): text for people is escaped by its view
# already; JSON writes a `##[` as `##\u005b` (the same value); CSV, which has no escape, is fenced.
Form = Literal["text", "json", "csv"]


def _runner_guard(raw: IO[bytes], form: Form) -> Form:
    """`form` when the runner reads `raw` as its log and the form needs a guard there, else "text"."""
    if form == "text":
        return form
    try:
        descriptor = raw.fileno()
    except (OSError, ValueError, AttributeError):
        return "text"
    return form if runner_reads(descriptor) else "text"


class CheckedOutput:
    """A binary output written whole (short writes continued); a failed write (full disk, EIO) is an
    OutputError, and EPIPE stays BrokenPipeError unless side outputs outlive stdout.

    stdout in a GitHub Actions job is the runner's log: `form` says how data in it is kept from
    being read as a workflow command (see `Form`); `end` closes a CSV's fence.
    """

    def __init__(self, raw: IO[bytes], name: str = "output", stdout: bool = False, form: Form = "text") -> None:
        self.raw = raw
        self.name = name
        self.stdout = stdout
        self.guard = _runner_guard(raw, form) if stdout else "text"
        self.fence = CommandFence() if self.guard == "csv" else None

    def _failed(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write {self.name}: {exc.strerror or exc}")

    def _closed(self) -> None:
        if not (self.stdout and STDOUT.outlived):
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
        STDOUT.drop()

    def write(self, data: bytes) -> int:
        if self.stdout and STDOUT.gone:
            return len(data)
        size = len(data)
        if self.guard == "json":
            data = json_commands_escaped(data)
        elif self.fence is not None:
            data = self.fence.before(data) + data
        try:
            write_all(self.raw, data)
        except BrokenPipeError:
            self._closed()
        except OSError as exc:
            raise self._failed(exc) from None
        return size

    def end(self) -> None:
        """Close a CSV's command fence, if one was opened (see `text.CommandFence`)."""
        if self.fence is not None and self.fence.token is not None:
            fence, self.fence = self.fence, None  # the closing line is no data to fence
            self.write(fence.end())
            self.fence = fence

    def flush(self) -> None:
        if self.stdout and STDOUT.gone:
            return
        try:
            self.raw.flush()
        except BrokenPipeError:
            self._closed()
        except OSError as exc:
            raise self._failed(exc) from None


def binary_stdout(form: Form = "text") -> CheckedOutput:
    """stdout for writers that stream (per-run records, simulated logs); the caller flushes at the end
    (and calls `end` after CSV)."""
    if sys.stdout is None:
        raise OutputError("cannot write output: stdout is closed")
    return CheckedOutput(sys.stdout.buffer, stdout=True, form=form)


def write_stdout(data: bytes, form: Form = "text") -> None:
    """The whole output of a command, written and flushed (so a failure is reported by the command)."""
    out = binary_stdout(form)
    out.write(data)
    out.end()
    out.flush()


@contextlib.contextmanager
def printing_to_stdout() -> Iterator[None]:
    """Around Rich or click printing to stdout: a failed write is an OutputError, like the byte writers'."""
    binary_stdout()  # a closed stdout is an error before Rich finds out
    if STDOUT.gone:
        return
    try:
        yield
    except BrokenPipeError:
        if not STDOUT.outlived:
            raise
        STDOUT.drop()
    except OSError as exc:
        raise OutputError(f"cannot write output: {exc.strerror or exc}") from None


@contextlib.contextmanager
def output_file(path: str, what: str | None = None) -> Iterator[CheckedOutput]:
    """The output at `path`, written the way its kind asks (`destinations`); a regular file appears or
    changes only when the block ends without an exception. A failure names `what` (default: the path)."""
    name = f"{what} {path}" if what else path
    with contextlib.ExitStack() as stack:
        try:
            raw = stack.enter_context(opened(target(path)))
        except OSError as exc:
            raise OutputError(f"cannot write {name}: {exc.strerror or exc}") from None
        yield CheckedOutput(raw, name)
        try:
            stack.close()  # the rename of a regular file, the close of a device: both can fail
        except OSError as exc:
            raise OutputError(f"cannot write {name}: {exc.strerror or exc}") from None


def write_file(path: str, data: bytes) -> None:
    """`data` to `path` (a `.gz` name gzip-compressed); a failure is one line (exit 2), not a traceback."""
    try:
        write_to(path, lambda handle: write_all(handle, data))
    except OSError as exc:
        raise SpecacceptError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_writable(path: str, option: str) -> None:
    """Before any work: `path` can be written the way its kind asks (see `destinations.unwritable`).

    A missing or read-only directory, a path that is a directory, a full inode table all fail here
    as they would at the end.
    """
    reason = unwritable(target(path))
    if reason is not None:
        raise SpecacceptError(f"cannot write {option} {path}: {reason}")


def refuse_outputs_that_are_inputs(
    outputs: Sequence[tuple[str, str | None]], inputs: Sequence[str], stdin: bool = False, stdout: bool = True
) -> None:
    """Before reading: no output may be an input (or another output); see `destinations.refuse_same_files`."""
    given = [(what, path) for what, path in outputs if path is not None and path != "-"]
    refuse_same_files(given, input_identities(inputs, stdin), stdout)


def check_step_summary() -> None:
    """Before any work: the GitHub step summary (when the runner set one) can be appended to."""
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not step_summary:
        return
    try:
        with open(step_summary, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise _cannot_append(step_summary, exc) from None


def _cannot_append(step_summary: str, exc: OSError) -> SpecacceptError:
    return SpecacceptError(
        f"cannot append to $GITHUB_STEP_SUMMARY ({step_summary}): {exc.strerror}; the step summary is left as it was"
    )


def describe_inputs(paths: list[str], shown: int = 3) -> str:
    names = ["stdin" if path == "-" else path for path in paths]
    more = len(names) - shown
    listed = ", ".join(names[:shown])
    return f"input {listed}" + (f" and {more} more" if more > 0 else "")


# Warnings said on stderr too, where CI logs look: an undecided gate that passes, metrics lines dropped as repeats.
SAID_ON_STDERR = ("inconclusive", "duplicate_lines")


def conclude_findings(
    findings: Findings,
    github_markdown: str | None,
    gate_context: str,
    regression_context: str,
    warnings: Sequence[Issue] = (),
) -> None:
    """After the output: one stderr line per failed check, the GitHub report when asked for, exit 1 on failure.

    `warnings` are the comparison's (and the command line's own hints about it), said on stderr once.
    The contexts (which inputs, which baseline) go into the GitHub annotations only, which are
    read away from the log; the stderr lines sit right under the command that produced them.
    """
    from specaccept_cli.cli.hints import failure_line, hinted, warning_text

    for warning in warnings:  # they may quote a file name or a group key: shown like every message
        click.echo(visible(f"specaccept: warning: {warning_text(warning)}"), err=True)
    for entry in findings.verdict:
        if entry.status == "warn" and entry.issue is not None and entry.issue.kind in SAID_ON_STDERR:
            click.echo(visible(f"specaccept: warning: {hinted(entry)}"), err=True)
    failed = [entry for entry in findings.verdict if entry.status == "fail"]
    lines = [failure_line(findings, entry) for entry in failed]
    if github_markdown is not None:
        # In the verdict's words, as the step summary and every view say them, with the option they answer to.
        annotations = []
        for entry in failed:
            title = {"gate": "specaccept gate", "baseline": "specaccept regression"}.get(
                entry.check, "specaccept audit"
            )
            context = regression_context if entry.check == "baseline" else gate_context
            annotations.append(("error", title, f"{hinted(entry)} ({context})"))
        annotations += [
            ("warning", f"specaccept {entry.check}", f"{hinted(entry)} ({gate_context})")
            for entry in findings.verdict
            if entry.status == "warn"
        ]
        unwritten = report_to_github(github_markdown, annotations)
        if unwritten is not None:  # the gates' lines and exit 1 come first: a failed gate is what the job must see
            if not lines:
                raise unwritten
            lines.append(str(unwritten))
    if lines:
        raise ChecksFailed(lines)


def report_to_github(markdown: str, annotations: list[tuple[str, str, str]]) -> SpecacceptError | None:
    """Append `markdown` to the job's step summary (when the runner set $GITHUB_STEP_SUMMARY) and print
    one `::error::` workflow command per failed check (`::warning::` per warning), on stderr so stdout
    stays the command's output.

    The report is appended whole or not at all (`append_whole`): a step summary that cannot take it (a
    full disk) is left as it was, and the error is returned, for the caller to report after the gates;
    the annotations are printed either way.
    """
    from specaccept_cli.text import workflow_command

    unwritten = None
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            append_whole(step_summary, (markdown + "\n").encode())
        except OSError as exc:
            unwritten = _cannot_append(step_summary, exc)
    for command, title, message in annotations:
        click.echo(workflow_command(command, message, title=title), err=True)
    return unwritten


def append_whole(path: str, data: bytes) -> None:
    """Append `data` to the file at `path`, all of it or none: after a failed write (ENOSPC, EDQUOT, EIO)
    the file is cut back to its length before, so a reader never sees half of `data`."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        before = os.fstat(descriptor).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, before)
            raise
    finally:
        os.close(descriptor)


class StderrConsole:
    """Rich's console on stderr, made (and rich imported) the first time something is shown there.

    `-o json` into a pipe shows nothing on stderr when all goes well, so it never pays for rich.
    """

    def __init__(self) -> None:
        self._console: QuietPipeConsole | None = None

    @property
    def console(self) -> QuietPipeConsole:
        if self._console is None:
            from specaccept_cli.views.terminal import QuietPipeConsole

            self._console = QuietPipeConsole(stderr=True)
        return self._console

    @property
    def is_terminal(self) -> bool:
        """Rich's answer, asked only when it could be yes: Rich sees a terminal only on a TTY,
        with TTY_COMPATIBLE=1 or with a non-empty FORCE_COLOR."""
        environment = os.environ
        if not (_is_a_tty(sys.stderr) or environment.get("TTY_COMPATIBLE") == "1" or environment.get("FORCE_COLOR")):
            return False
        return self.console.is_terminal


def _is_a_tty(stream: object) -> bool:
    """isatty() as Rich asks it: a closed stderr (`2>&-`: None) or one whose isatty fails is no terminal."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed file
        return False
