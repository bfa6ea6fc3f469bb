"""The `specaccept` group: the one place where domain errors become messages and exit codes.

Exit status: 0 ok, 1 a gate failed, 2 usage or input error (an output that cannot be written
included, stderr too); interrupted (Ctrl-C, SIGTERM, SIGHUP), it cleans up (workers stopped,
temporary files removed) and then dies of that signal, as the shell convention asks (a shell shows
status 128 + the signal's number: 130, 143, 129). A live audit (`audit --follow`, `watch`) is the
exception: those signals are how it is meant to end, so it prints its summary and exits 0 or 1 (`cli/live.py`).
Each command lives in its own module and loads only when it runs (heavy modules such as
numpy, pyarrow and rich are imported inside the commands that need them), so
`specaccept check` starts about as fast as click itself. Shared options are in
`options.py`, output helpers in `output.py`.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import sys
from typing import Any, NoReturn

import click

from specaccept_cli.cli.destinations import abandon_stdout as _abandon_stdout
from specaccept_cli.errors import ChecksFailed, InputError, OutputError, SpecacceptError
from specaccept_cli.text import visible
from specaccept_cli.version import __version__

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130
_WRITE_ERRORS = {errno.ENOSPC, errno.EFBIG, *((errno.EDQUOT,) if hasattr(errno, "EDQUOT") else ())}

# Signals that end a run the way Ctrl-C does, and the line that says which one did.
ENDING_SIGNALS = {
    signal.SIGINT: "interrupted",
    signal.SIGTERM: "terminated (SIGTERM)",
    **({signal.SIGHUP: "hung up (SIGHUP)"} if hasattr(signal, "SIGHUP") else {}),
}


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is, so that everything Ctrl-C cleans up is cleaned up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Ending:
    """How this run ends beyond its exit status: the signal it must die of, a stderr that failed."""

    signum: int | None = None
    stderr_failed = False


ENDING = _Ending()


def _error_line(message: str) -> None:
    """One line on stderr; a stderr that cannot take it (`2>/dev/full`, a hung-up terminal) makes the
    run end with status 2, without a traceback no one could read."""
    from specaccept_cli.read.storage import redacted

    try:
        click.echo(f"specaccept: {visible(redacted(message))}", err=True)
    except (OSError, ValueError):
        ENDING.stderr_failed = True


def _flush_stdout() -> None:
    """Deliver what is already buffered (complete records), or give up on stdout quietly."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        _abandon_stdout()


def _quiet_broken_pipe() -> NoReturn:
    """stdout was closed by the reader (`| head`): stop quietly, like other Unix filters."""
    _abandon_stdout()
    raise SystemExit(EXIT_OK)


# Commands that load only when they run (`specaccept check` must start about as fast as click itself).
LAZY_COMMANDS = {
    "audit": "specaccept_cli.cli.audit:audit",
    "check": "specaccept_cli.cli.check:check",
    "diff": "specaccept_cli.cli.summaries:diff",
    "merge": "specaccept_cli.cli.summaries:merge",
    "plan": "specaccept_cli.cli.plan:plan",
    "simulate": "specaccept_cli.cli.models:simulate",
    "expect": "specaccept_cli.cli.models:expect",
    "report": "specaccept_cli.cli.report:report",
    "watch": "specaccept_cli.cli.watch:watch",
}


def _quoted_safely(exc: click.ClickException) -> None:
    """A usage error quotes arguments back (`No such option '--x'`), and an argument may be a file name
    from a glob: made visible like every message (click types the attribute final, hence `vars`)."""
    vars(exc)["message"] = visible(exc.message)


class SpecacceptGroup(click.Group):
    """The one place where domain errors become messages and exit codes; commands load lazily."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        import importlib

        module_name, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attribute)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Click's lookup, with the nearest command names on a miss (`audti`: did you mean audit?)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            if name and not name.startswith("-") and exc.message.startswith("No such command"):
                import difflib

                close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
                if close:
                    hint = f" Did you mean {' or '.join(repr(word) for word in close)}?"
                    raise click.UsageError(exc.message + hint, exc.ctx) from None
            raise

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            _quoted_safely(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            _quoted_safely(exc)
            raise
        except ChecksFailed as exc:
            for message in exc.messages:
                _error_line(message)
            ctx.exit(EXIT_GATE)
        except InputError as exc:
            _error_line(str(exc))
            ctx.exit(EXIT_INPUT)
        except OutputError as exc:
            _abandon_stdout()
            _error_line(str(exc))
            ctx.exit(EXIT_INPUT)
        except SpecacceptError as exc:
            _error_line(str(exc))
            ctx.exit(EXIT_INPUT)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP
            received = getattr(exc, "signum", signal.SIGINT)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except MemoryError:
            # Anywhere in a command (a huge cluster tally, a line allowed past memory by --max-line-bytes): the
            # frames holding the allocations are gone by now, and one line needs next to nothing.
            _error_line("out of memory: this input needs more memory than the system allows (see docs/reliability.md)")
            ctx.exit(EXIT_INPUT)
        except OSError as exc:  # a last resort: reads and writes are named where they happen
            _abandon_stdout()
            reason = exc.strerror or str(exc)
            if exc.filename:
                _error_line(f"{exc.filename}: {reason}")
            elif exc.errno in _WRITE_ERRORS:  # only writes fail so: click's own output (`audit --help`)
                _error_line(f"cannot write output: {reason}")
            else:
                _error_line(f"I/O error: {reason}")
            ctx.exit(EXIT_INPUT)
        # Interrupted. Out of the `except` block, the exception and its frames are gone, and with them
        # every generator it stopped: their `finally` blocks have run (worker pools shut down, spool
        # files removed); a cycle among them is collected here. Then the line, then death by the signal.
        import gc

        gc.collect()
        _flush_stdout()
        _error_line(ENDING_SIGNALS.get(received, "interrupted"))
        ENDING.signum = received
        ctx.exit(128 + received)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The version, and which JSONL reader and rule are in use (numpy is imported only here)."""
    if value and not ctx.resilient_parsing:
        from specaccept_cli.read.jsonl_fast import reader_name
        from specaccept_cli.rule.vectorized import kernel_name

        click.echo(f"specaccept, version {__version__}\nJSONL reader: {reader_name()}\nbatch rule: {kernel_name()}")
        ctx.exit()


@click.group(cls=SpecacceptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Audit speculative-decoding acceptance logs with the exact accept-prefix rule.

    Token i of a draft is kept iff r[i] <= min(1, p[i]/q[i]); the scan stops at the
    first rejection, and a target pass emits a + 1 tokens.
    """


def _die_of(signum: int) -> None:
    """End the way an interrupted Unix program does: killed by the signal, not exiting 128 + its number.

    A calling shell tells the two apart: only a child killed by SIGINT stops a loop such as
    `for f in *.jsonl; do specaccept audit "$f"; done`, and a supervisor that sent SIGTERM sees it
    obeyed. Everything was cleaned up on the way here (temporary files removed, workers stopped,
    stdout flushed, the message written); where the signal cannot end the process, the caller
    exits 128 + its number instead.
    """
    if not hasattr(os, "kill"):  # pragma: no cover - POSIX has it
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _raise_terminated(signum: int, frame: object) -> None:
    """SIGTERM and SIGHUP as an exception where the program is; a second one cannot cut its cleanup short."""
    for other in ENDING_SIGNALS:
        if other != signal.SIGINT:
            signal.signal(other, signal.SIG_IGN)
    raise Terminated(signum)


def _handle_ending_signals() -> None:
    """SIGTERM and SIGHUP end a run as Ctrl-C does (their default would leave workers and spool files)."""
    for signum in ENDING_SIGNALS:
        if signum != signal.SIGINT and signal.getsignal(signum) == signal.SIG_DFL:  # an ignored HUP (nohup) stays
            signal.signal(signum, _raise_terminated)


def _delivered(status: object) -> object:
    """The exit status, after what is still buffered for stdout and stderr is written (or cannot be).

    The interpreter would flush them at exit, print a traceback-like complaint no one can read and
    exit 120: here a stdout that cannot be written is the usual one line and status 2 (`--version >
    /dev/full`), and so is a stderr that failed along the way (`2>/dev/full`).
    """
    code = status
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _abandon_stdout()
    except (OSError, ValueError) as exc:
        _abandon_stdout()
        _error_line(f"cannot write output: {getattr(exc, 'strerror', None) or exc}")
        code = EXIT_INPUT
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        ENDING.stderr_failed = True
    if ENDING.stderr_failed:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stderr.fileno())
            os.close(devnull)
        if code in (None, EXIT_OK, EXIT_GATE):
            code = EXIT_INPUT
    return code


def _closed_stderr_held() -> None:
    """`2>&-`: descriptor 2 held by /dev/null opened read-only, and a sys.stderr on it whose writes fail.

    Python starts with sys.stderr None when descriptor 2 is closed: every message, warning and the table
    of skipped rows went nowhere, and the run exited 0. Now a write there fails (EBADF) as one to
    `2>/dev/full` does, so a run with something to report ends with status 2; one with nothing to say is
    unchanged. Holding descriptor 2 also keeps the first file the run opens from becoming it. To
    silence stderr, send it to /dev/null.
    """
    try:
        os.fstat(2)
        return
    except OSError:
        pass
    try:
        held = os.open(os.devnull, os.O_RDONLY)
        if held != 2:
            os.dup2(held, 2)
            os.close(held)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True)
    except OSError:
        return


def main() -> NoReturn:
    """The `specaccept` program: runs the command line and ends the process (`_leave`), never returning.

    Code that runs a command in its own process and carries on afterwards calls `cli` (click's
    `standalone_mode=False`, or its `CliRunner`) or the library (`specaccept_cli.summarise`).
    """
    from specaccept_cli.cli.destinations import whole_writes_on_standard_streams

    # numpy's OpenBLAS starts a thread per core at import, and they spin: about 0.1 CPU-second of every
    # command, and in every worker, for linear algebra specaccept never does. One thread, unless the user
    # says otherwise; set before anything imports numpy.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    whole_writes_on_standard_streams()
    _closed_stderr_held()  # after: a stderr whose every write fails needs no whole writes
    _handle_ending_signals()
    code: object = EXIT_OK
    try:
        cli(prog_name="specaccept")
    except SystemExit as exc:
        code = exc.code
    except OSError as exc:  # a write that click made itself (--version, --help, a usage error) failed
        _abandon_stdout()
        code = EXIT_OK
        if exc.errno != errno.EPIPE:
            _error_line(f"cannot write output: {exc.strerror or exc}")
            code = EXIT_INPUT
    if ENDING.signum is not None:
        _die_of(ENDING.signum)
    _leave(_delivered(code))


def _leave(code: object) -> NoReturn:
    """Exit with `code` without tearing the interpreter down, when nothing is left running.

    Everything the command wrote is written by now (files closed, stdout and stderr flushed by
    `_delivered`). What the interpreter would still do is free every object and module one by one:
    about 40 ms of an audit's 0.6 s, for memory the kernel takes back at once anyway. So the
    atexit handlers run here (temporary files, a capture's recorder), the standard streams are
    flushed once more, and the process ends (`os._exit`, as mypy's fast exit does). With another
    thread or a child process still running, or a flush that fails, the ordinary exit happens
    instead: it waits for them and reports what it must.
    """
    import atexit
    import threading

    status = EXIT_OK if code is None else code
    children = sys.modules.get("multiprocessing")
    busy = threading.active_count() > 1 or (children is not None and bool(children.active_children()))
    if not isinstance(status, int) or isinstance(status, bool) or busy:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        raise SystemExit(code) from None
    os._exit(status)
