"""Click commands: parse, call the core, print once, map errors to exit codes.

Exit status: 0 ok, 1 a gate failed, 2 usage or input error, 130 interrupted.
Heavy modules (numpy, pyarrow, rich) are imported inside the commands that need
them, so `specaccept check` starts about as fast as click itself.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO, Any, NoReturn

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


def _write_failed(exc: OSError) -> str:
    return f"cannot write output: {exc.strerror or exc}"


# Commands that load only when they run (`specaccept check` must start about as fast as click itself).
LAZY_COMMANDS = {
    "audit": "specaccept_cli.cli.audit:audit",
    "diff": "specaccept_cli.cli.summaries:diff",
    "merge": "specaccept_cli.cli.summaries:merge",
    "simulate": "specaccept_cli.cli.models:simulate",
    "expect": "specaccept_cli.cli.models:expect",
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


@click.group(cls=SpecacceptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specaccept")
def cli() -> None:
    """Audit speculative-decoding acceptance logs with the exact accept-prefix rule.

    Token i of a draft is kept iff r[i] <= min(1, p[i]/q[i]); the scan stops at the
    first rejection, and a target pass emits a + 1 tokens.
    """


FIELD_HELP = {
    "p": "target model's probabilities of the drafted tokens (e.g. spec.target_p)",
    "q": "draft model's probabilities of the drafted tokens (e.g. spec.draft_q)",
    "r": "uniform draws of the accept test (e.g. spec.uniform)",
}


def field_option(name: str) -> Any:
    return click.option(
        f"--{name}-field",
        default=name,
        show_default=True,
        callback=check_field_path,
        help=f"Dotted path of the list of the {FIELD_HELP[name]}.",
    )


def check_field_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None:
        return value
    values = value if isinstance(value, tuple) else (value,)
    for item in values:
        if item is None:  # an optional path that was not given
            continue
        if not item or any(part == "" for part in item.split(".")):
            raise click.BadParameter(f"{item!r} is not a dotted field path like 'spec.target_p'")
    return value


class CheckedOutput:
    """A binary output where a failed write (full disk, EIO) is an OutputError; EPIPE stays BrokenPipeError."""

    def __init__(self, raw: IO[bytes], name: str = "output") -> None:
        self.raw = raw
        self.name = name

    def _failed(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write {self.name}: {exc.strerror or exc}")

    def write(self, data: bytes) -> int:
        try:
            return self.raw.write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self.raw.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None


def binary_stdout() -> Any:
    if sys.stdout is None:
        raise OutputError("cannot write output: stdout is closed")
    return CheckedOutput(sys.stdout.buffer)


@contextlib.contextmanager
def printing_to_stdout() -> Iterator[None]:
    """Around Rich or click printing to stdout: a failed write is an OutputError, like the byte writers'."""
    binary_stdout()  # a closed stdout is an error before Rich finds out
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(_write_failed(exc)) from None


class FiniteFloat(click.FloatRange):
    """A float in a range; unlike click.FloatRange, nan and inf are refused (nan compares false to any bound)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def gate_options(command: Any) -> Any:
    gates = [
        ("--min-alpha", FiniteFloat(0.0, 1.0), "Exit 1 unless alpha (accepted / examined) is at least X."),
        ("--min-tokens-per-pass", FiniteFloat(min=1.0), "Exit 1 unless tokens per pass is at least X."),
        ("--min-acceptance-rate", FiniteFloat(0.0, 1.0), "Exit 1 unless accepted / drafted is at least X."),
    ]
    for name, kind, help_text in reversed(gates):
        command = click.option(name, type=kind, metavar="X", default=None, help=help_text)(command)
    return command


def comparison_options(command: Any) -> Any:
    from specaccept_cli.checks import DEFAULT_MAX_DROP, DEFAULT_SIGNIFICANCE

    options = [
        click.option(
            "--max-drop",
            type=FiniteFloat(0.0, 1.0, max_open=True),
            default=DEFAULT_MAX_DROP,
            show_default=True,
            metavar="FRACTION",
            help="Relative drop from the baseline tolerated before a metric can regress.",
        ),
        click.option(
            "--significance",
            type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
            default=DEFAULT_SIGNIFICANCE,
            show_default=True,
            metavar="P",
            help="A drop beyond --max-drop regresses only when its one-sided p-value is below P.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def github_option(command: Any) -> Any:
    return click.option(
        "--github",
        is_flag=True,
        help="GitHub Actions: append the markdown report to $GITHUB_STEP_SUMMARY; an ::error:: line per failed check.",
    )(command)


def conclude_checks(
    gates: Any,
    comparison: Any,
    github_markdown: str | None,
    gate_context: str,
    regression_context: str,
    audits: list[str] | None = None,
) -> None:
    """After the output: one stderr line per failed check, the GitHub report when asked for, exit 1 on failure.

    The contexts (which inputs, which baseline) go into the GitHub annotations only, which are
    read away from the log; the stderr lines sit right under the command that produced them.
    """
    failed_gates = [result.message() for result in gates if not result.passed]
    regressions = (
        []
        if comparison is None
        else [row.message(comparison.max_drop, comparison.significance) for row in comparison.failures]
    )
    if github_markdown is not None:
        annotations = [("specaccept gate", f"{message} ({gate_context})") for message in failed_gates]
        annotations += [("specaccept regression", f"{message} ({regression_context})") for message in regressions]
        annotations += [("specaccept audit", f"{message} ({gate_context})") for message in audits or []]
        _report_to_github(github_markdown, annotations)
    failures = [f"gate failed: {message}" for message in failed_gates] + regressions + list(audits or [])
    if failures:
        raise ChecksFailed(failures)


def describe_inputs(paths: list[str], shown: int = 3) -> str:
    names = ["stdin" if path == "-" else path for path in paths]
    more = len(names) - shown
    listed = ", ".join(names[:shown])
    return f"input {listed}" + (f" and {more} more" if more > 0 else "")


def _report_to_github(markdown: str, annotations: list[tuple[str, str]]) -> None:
    """Append `markdown` to the job's step summary (when the runner set $GITHUB_STEP_SUMMARY) and print
    one `::error::` workflow command per failed check, on stderr so stdout stays the command's output.
    """
    from specaccept_cli.text import workflow_command

    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            with open(step_summary, "a", encoding="utf-8") as handle:
                handle.write(markdown + "\n")
        except OSError as exc:
            raise SpecacceptError(f"cannot append to $GITHUB_STEP_SUMMARY ({step_summary}): {exc.strerror}") from None
    for title, message in annotations:
        click.echo(workflow_command("error", message, title=title), err=True)


def write_atomically(path: str, write: Any) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    import gzip

    with atomic_file(path) as raw:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
                write(packed)
        else:
            write(raw)


@contextlib.contextmanager
def atomic_file(path: str) -> Iterator[IO[bytes]]:
    """A binary file that appears at `path` only when the block ends without an exception."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".specaccept-", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; the result should look like any new file
    try:
        with os.fdopen(fd, "wb") as raw:
            yield raw
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write_file(path: str, data: bytes) -> None:
    """`data` to `path` atomically; a path that cannot be written is an input error (exit 2), not a traceback."""
    try:
        write_atomically(path, lambda handle: handle.write(data))
    except OSError as exc:
        raise SpecacceptError(f"cannot write {path}: {exc.strerror or exc}") from None


def _parse_list(text: str, name: str) -> list[float]:
    """`0.9,0.2,0.8` or `[0.9, 0.2, 0.8]`; `""` and `[]` are an empty draft."""
    import math

    stripped = text.strip()
    from_json = stripped.startswith("[")
    if from_json:
        import json  # only for this form: the comma form is the quick one

        try:
            items = json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            raise click.BadParameter(f"not a JSON array: {exc}", param_hint=f"--{name}") from None
        if not isinstance(items, list):
            raise click.BadParameter("not a JSON array", param_hint=f"--{name}")
    else:
        items = [] if not stripped else [item.strip() for item in stripped.split(",")]
    values = []
    for index, item in enumerate(items):
        try:
            # A JSON array holds numbers (not numeric strings); the comma form holds plain decimals (no 1_0).
            if isinstance(item, bool) or not isinstance(item, (str, int, float)) or from_json == isinstance(item, str):
                raise ValueError
            if isinstance(item, str) and "_" in item:
                raise ValueError
            value = float(item)
        except (ValueError, OverflowError):
            raise click.BadParameter(f"item {index} ({item!r}) is not a number", param_hint=f"--{name}") from None
        if not math.isfinite(value):
            raise click.BadParameter(f"item {index} ({item!r}) is not a finite number", param_hint=f"--{name}")
        values.append(value)
    return values


@cli.command()
@click.option("--p", "p_text", required=True, metavar="LIST", help="Target probabilities of the drafted tokens.")
@click.option("--q", "q_text", required=True, metavar="LIST", help="Draft probabilities of the drafted tokens.")
@click.option("--r", "r_text", required=True, metavar="LIST", help="Uniform draws, one per token.")
@click.option("--explain", is_flag=True, help="Show the test token by token and what stopped the run.")
def check(p_text: str, q_text: str, r_text: str, explain: bool) -> None:
    """Accepted length of one drafted run; prints the number alone.

    LIST is comma-separated numbers or a JSON array; "" or [] is an empty draft.

    \b
    Example:
      specaccept check --p 0.9,0.2,0.8 --q 0.5,0.8,0.4 --r 0.1,0.5,0.2   # -> 1
    """
    from specaccept_cli.rule.scalar import accept_prefix
    from specaccept_cli.rule.validate import value_problem

    p, q, r = _parse_list(p_text, "p"), _parse_list(q_text, "q"), _parse_list(r_text, "r")
    if not len(p) == len(q) == len(r):
        raise click.UsageError(f"--p, --q and --r have different lengths ({len(p)}, {len(q)}, {len(r)})")
    for name, values in (("p", p), ("q", q), ("r", r)):
        for index, value in enumerate(values):
            problem = value_problem(name, index, value)
            if problem is not None:
                raise click.BadParameter(problem, param_hint=f"--{name}")
    accepted = accept_prefix(p, q, r)
    out = binary_stdout()
    out.write(b"%d\n" % accepted)
    out.flush()
    if explain:
        from specaccept_cli.views.terminal import QuietPipeConsole, explain_table

        with printing_to_stdout():
            QuietPipeConsole().print(explain_table(p, q, r, accepted))


def main() -> None:
    cli(prog_name="specaccept")
