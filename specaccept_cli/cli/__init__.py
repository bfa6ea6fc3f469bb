"""The `specaccept` group: the one place where domain errors become messages and exit codes.

Exit status: 0 ok, 1 a gate failed, 2 usage or input error; interrupted (Ctrl-C), it cleans up and
then dies of SIGINT, as the shell convention asks (a shell shows status 130).
Each command lives in its own module and loads only when it runs (heavy modules such as
numpy, pyarrow and rich are imported inside the commands that need them), so
`specaccept check` starts about as fast as click itself. Shared options are in
`options.py`, output helpers in `output.py`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import click

from specaccept_cli import __version__
from specaccept_cli.errors import ChecksFailed, InputError, OutputError, SpecacceptError
from specaccept_cli.text import visible

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130


def _error_line(message: str) -> None:
    click.echo(f"specaccept: {visible(message)}", err=True)


def _abandon_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's final flush of stdout cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout to redirect
        pass


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
    "simulate": "specaccept_cli.cli.models:simulate",
    "expect": "specaccept_cli.cli.models:expect",
    "report": "specaccept_cli.cli.report:report",
}


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

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
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
        except KeyboardInterrupt:
            _flush_stdout()
            _error_line("interrupted")
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except OSError as exc:  # a last resort: reads and writes are named where they happen
            _abandon_stdout()
            reason = exc.strerror or str(exc)
            _error_line(f"{exc.filename}: {reason}" if exc.filename else f"I/O error: {reason}")
            ctx.exit(EXIT_INPUT)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The version, and which JSONL reader is in use (jsonl_fast, with numpy, is imported only here)."""
    if value and not ctx.resilient_parsing:
        from specaccept_cli.read.jsonl_fast import reader_name

        click.echo(f"specaccept, version {__version__}\nJSONL reader: {reader_name()}")
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


def _die_of_sigint() -> None:
    """End the way an interrupted Unix program does: killed by SIGINT, not exiting 130.

    A calling shell tells the two apart: only a child killed by SIGINT stops a loop such as
    `for f in *.jsonl; do specaccept audit "$f"; done`. Everything was cleaned up on the way here
    (temporary files removed, workers stopped, stdout flushed, the message written); where the signal cannot end the
    process (no SIGINT on this platform), the caller exits 130 instead.
    """
    import signal

    sigint = getattr(signal, "SIGINT", None)
    if sigint is None or not hasattr(os, "kill"):  # pragma: no cover - POSIX has both
        return
    signal.signal(sigint, signal.SIG_DFL)
    os.kill(os.getpid(), sigint)


def main() -> None:
    # numpy's OpenBLAS starts a thread per core at import, and they spin: about 0.1 CPU-second of every
    # command, and in every worker, for linear algebra specaccept never does. One thread, unless the user
    # says otherwise; set before anything imports numpy.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        cli(prog_name="specaccept")
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED:
            _die_of_sigint()
        raise
