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

MAX_LINE_BYTES = 64 << 20  # jsonl.DEFAULT_MAX_LINE_BYTES, kept here so `check` need not import numpy


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


class SpecacceptGroup(click.Group):
    """The one place where domain errors become messages and exit codes."""

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


def _field_option(name: str) -> Any:
    return click.option(
        f"--{name}-field",
        default=name,
        show_default=True,
        callback=_check_field_path,
        help=f"Dotted path of the list of the {FIELD_HELP[name]}.",
    )


def _check_field_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None:
        return value
    values = value if isinstance(value, tuple) else (value,)
    for item in values:
        if item is None:  # an optional path that was not given
            continue
        if not item or any(part == "" for part in item.split(".")):
            raise click.BadParameter(f"{item!r} is not a dotted field path like 'spec.target_p'")
    return value


class _CheckedOutput:
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


def _stdout() -> Any:
    if sys.stdout is None:
        raise OutputError("cannot write output: stdout is closed")
    return _CheckedOutput(sys.stdout.buffer)


@contextlib.contextmanager
def _printing_to_stdout() -> Iterator[None]:
    """Around Rich or click printing to stdout: a failed write is an OutputError, like the byte writers'."""
    _stdout()  # a closed stdout is an error before Rich finds out
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


def _gate_options(command: Any) -> Any:
    gates = [
        ("--min-alpha", FiniteFloat(0.0, 1.0), "Exit 1 unless alpha (accepted / examined) is at least X."),
        ("--min-tokens-per-pass", FiniteFloat(min=1.0), "Exit 1 unless tokens per pass is at least X."),
        ("--min-acceptance-rate", FiniteFloat(0.0, 1.0), "Exit 1 unless accepted / drafted is at least X."),
    ]
    for name, kind, help_text in reversed(gates):
        command = click.option(name, type=kind, metavar="X", default=None, help=help_text)(command)
    return command


def _comparison_options(command: Any) -> Any:
    from specaccept_cli.gates import DEFAULT_MAX_DROP, DEFAULT_SIGNIFICANCE

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


def _github_option(command: Any) -> Any:
    return click.option(
        "--github",
        is_flag=True,
        help="GitHub Actions: append the markdown report to $GITHUB_STEP_SUMMARY; an ::error:: line per failed check.",
    )(command)


@cli.command()
@click.argument("inputs", nargs=-1, metavar="[INPUT]...")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "markdown", "jsonl", "csv"]),
    default="table",
    show_default=True,
    help="table: Rich view; json: the summary; markdown: GitHub tables; jsonl/csv: one record per run, streamed.",
)
@click.option(
    "--format",
    "input_format",
    type=click.Choice(["auto", "jsonl", "parquet"]),
    default="auto",
    show_default=True,
    help="Input format; auto goes by extension, then by content (PAR1 magic means Parquet).",
)
@_field_option("p")
@_field_option("q")
@_field_option("r")
@click.option(
    "--id-field",
    "id_fields",
    multiple=True,
    callback=_check_field_path,
    help="Carry this field (dotted path) into per-run records. Repeatable.",
)
@click.option(
    "--group-by",
    "group_by",
    default=None,
    callback=_check_field_path,
    help="Also summarise each value of this field (dotted path) apart.",
)
@click.option(
    "--cost-ratio",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Draft step time / target step time: adds the speedup and the best k.",
)
@click.option("--conventions", "show_conventions", is_flag=True, help="Show what each engine would report.")
@click.option(
    "--max-rows", type=click.IntRange(min=0), default=20, show_default=True, help="Runs shown in the table view."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--reported-field",
    callback=_check_field_path,
    help="Dotted path of the accepted count the server reported; recompute, flag and diagnose mismatches.",
)
@click.option(
    "--max-mismatches",
    type=click.IntRange(min=0),
    help="Gate: exit 1 when more runs than this disagree with their reported count.",
)
@click.option(
    "--check-sampler", is_flag=True, help="Test the sampler: calibration and uniformity of r; exit 1 on failure."
)
@click.option(
    "--sampler-significance",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.001,
    show_default=True,
    help="A sampler test fails when its p-value is below this.",
)
@click.option(
    "--draft-tokens-field",
    callback=_check_field_path,
    help="Greedy logs: dotted path of the drafted token ids (instead of p, q, r).",
)
@click.option(
    "--target-tokens-field",
    callback=_check_field_path,
    help="Greedy logs: dotted path of the target's argmax token ids (k, or k + 1 with the bonus).",
)
@_gate_options
@click.option(
    "--summary-out",
    type=click.Path(dir_okay=False, allow_dash=False),
    metavar="PATH",
    help="Also write the summary JSON to PATH (atomically), whatever -o is: a later baseline or merge input.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, allow_dash=False),
    metavar="PATH",
    help="Compare alpha and tokens per pass with this summary JSON; exit 1 on a significant drop.",
)
@_comparison_options
@_github_option
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="fail: stop at the first bad row (exit 2); skip: leave bad rows out, count them and list them on stderr.",
)
@click.option(
    "--max-errors",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="With --on-error skip: exit 1 when more than N rows (or sources) were skipped.",
)
@click.option(
    "--quarantine",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    metavar="PATH",
    help="With --on-error skip: write the raw lines of skipped rows to PATH.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1),
    default=MAX_LINE_BYTES,
    show_default=True,
    metavar="N",
    help="A JSONL line longer than N bytes is a bad row (its bytes are never held in memory).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Processes parsing JSONL in parallel (default: the number of usable CPU cores; 1: no worker processes).",
)
def audit(
    inputs: tuple[str, ...],
    output: str,
    input_format: str,
    p_field: str,
    q_field: str,
    r_field: str,
    id_fields: tuple[str, ...],
    group_by: str | None,
    cost_ratio: float | None,
    show_conventions: bool,
    max_rows: int,
    quiet: bool,
    reported_field: str | None,
    max_mismatches: int | None,
    check_sampler: bool,
    sampler_significance: float,
    draft_tokens_field: str | None,
    target_tokens_field: str | None,
    min_alpha: float | None,
    min_tokens_per_pass: float | None,
    min_acceptance_rate: float | None,
    summary_out: str | None,
    baseline: str | None,
    max_drop: float,
    significance: float,
    github: bool,
    on_error: str,
    max_errors: int | None,
    quarantine: str | None,
    max_line_bytes: int,
    jobs: int | None,
) -> None:
    """Recompute accepted lengths for every run in INPUT... and summarise them.

    INPUT is a JSONL file (optionally gzip/bz2/xz/zstd-compressed), a Parquet file,
    a directory of Parquet shards, or - for stdin (the default when stdin is a pipe).

    Gates (--min-*) and a --baseline comparison exit 1 when they fail, after the
    normal output; each failure is one line on stderr. A bad row stops the audit
    (exit 2) unless --on-error skip, which counts it and lists it on stderr.

    \b
    Examples:
      specaccept audit logs.jsonl.gz
      zcat logs.jsonl.gz | specaccept audit - -o json
      specaccept audit shards/ -o jsonl --id-field request_id | head
      specaccept audit logs.jsonl.gz --min-alpha 0.7 --baseline main.json --summary-out pr.json
      specaccept audit logs.parquet --group-by model --cost-ratio 0.05 --conventions
    """
    from specaccept_cli.batch import FieldSpec
    from specaccept_cli.parallel import default_jobs, evaluate_source
    from specaccept_cli.pipeline import AuditPlan, summarise_evaluated
    from specaccept_cli.policy import ErrorPolicy
    from specaccept_cli.sources import STDIN, expand_inputs
    from specaccept_cli.summary_files import read_summary_file, summary_of

    paths = list(inputs)
    if not paths:
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise click.UsageError("no input: give a file or directory, or pipe rows into stdin (or use -)")
        paths = [STDIN]
    if paths.count(STDIN) > 1:
        raise click.UsageError("stdin (-) can be read only once")
    if (draft_tokens_field is None) != (target_tokens_field is None):
        raise click.UsageError("greedy logs need both --draft-tokens-field and --target-tokens-field")
    if draft_tokens_field is not None and check_sampler:
        raise click.UsageError("--check-sampler needs logged (p, q, r); greedy logs have none")
    if max_mismatches is not None and reported_field is None:
        raise click.UsageError("--max-mismatches needs --reported-field")
    if on_error == "fail":
        for name, value in (("--max-errors", max_errors), ("--quarantine", quarantine)):
            if value is not None:
                raise click.UsageError(f"{name} applies to --on-error skip")
    id_fields = tuple(dict.fromkeys(id_fields))
    extras = (*id_fields, *(name for name in (group_by, reported_field) if name is not None))
    fields = FieldSpec(
        p=p_field,
        q=q_field,
        r=r_field,
        extras=tuple(dict.fromkeys(extras)),
        draft_tokens=draft_tokens_field,
        target_tokens=target_tokens_field,
    )
    # Per-run records alone need no groups; a summary that is printed or saved does.
    grouping = None if output in ("jsonl", "csv") and summary_out is None else group_by
    plan = AuditPlan(
        group_by=grouping,
        reported_field=reported_field,
        check_sampler=check_sampler,
        sampler_significance=sampler_significance,
    )
    column_names = ("reported", "mismatch") if reported_field else ()
    if baseline is None:
        ctx = click.get_current_context()
        for name in ("max_drop", "significance"):
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
                raise click.UsageError(f"--{name.replace('_', '-')} applies to a comparison: give --baseline too")
    # Read the baseline before the logs: a bad baseline should not cost a long audit.
    baseline_summary = None if baseline is None else summary_of(read_summary_file(baseline), baseline)

    # A path that does not exist is a mistake in the command: exit 2 before reading, whatever --on-error.
    sources = expand_inputs(paths)
    policy = ErrorPolicy(on_error)  # type: ignore[arg-type]

    workers = jobs or default_jobs()

    def evaluated(progress: Any, keep_runs: bool) -> Any:
        for source in sources:
            batches = evaluate_source(
                source,
                fields,
                policy,
                input_format,  # type: ignore[arg-type]
                max_line_bytes,
                progress,
                jobs=workers,
                keep_runs=keep_runs,
                plan=plan,
            )
            yield from policy.guard(batches)

    from rich.console import Console

    from specaccept_cli import render

    stderr = Console(stderr=True)
    show_progress = not quiet and stderr.is_terminal

    def run(sink: Any = None) -> Any:
        if show_progress:
            with render.RichProgress(stderr, sources) as progress:
                return summarise_evaluated(evaluated(progress, sink is not None), sink, plan.group_by)
        return summarise_evaluated(evaluated(None, sink is not None), sink, plan.group_by)

    preview = render.RunPreview(max_rows)
    with _quarantine_file(quarantine) as policy.quarantine:
        if output in ("jsonl", "csv"):
            from specaccept_cli.records import CsvWriter, JsonlWriter

            writer = (JsonlWriter if output == "jsonl" else CsvWriter)(_stdout(), id_fields, column_names)
            summary = run(writer.write)
            writer.close()
        elif output == "table" and max_rows:

            def keep(batch: Any, outcome: Any, columns: Any) -> None:
                preview.add(batch.source, batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist())

            summary = run(keep)
        else:
            summary = run()
    summary = summary + policy.summary()

    from specaccept_cli.gates import check_gates, compare
    from specaccept_cli.summary_files import json_bytes

    # The one summary object: --summary-out writes it, -o json prints it (plus the checks' results).
    summary_object = summary.to_dict(cost_ratio)
    if summary_out is not None:
        _write_file(summary_out, json_bytes(summary_object))
    thresholds = {
        "min_alpha": min_alpha,
        "min_tokens_per_pass": min_tokens_per_pass,
        "min_acceptance_rate": min_acceptance_rate,
    }
    gates = check_gates(summary, thresholds)
    comparison = None if baseline_summary is None else compare(baseline_summary, summary, max_drop, significance)

    if output == "json":
        data = dict(summary_object)
        if gates:
            data["gates"] = [result.to_dict() for result in gates]
        if comparison is not None:
            data["comparison"] = comparison.to_dict()
        out = _stdout()
        out.write(json_bytes(data))
        out.flush()
    elif output == "markdown":
        out = _stdout()
        out.write(render.markdown_report(summary, gates, comparison).encode())
        out.flush()
    elif output == "table":
        with _printing_to_stdout():
            console = render.QuietPipeConsole()
            if max_rows:
                console.print(render.runs_table(preview))
            console.print(render.summary_view(summary, cost_ratio=cost_ratio, conventions=show_conventions))
            for view in render.audit_views(summary):
                console.print(view)
            if gates:
                console.print(render.gates_view(gates))
            if comparison is not None:
                console.print(render.comparison_view(comparison))
    if summary.skipped_rows or summary.skipped_sources:
        stderr.print(render.skipped_table(summary))

    markdown = render.markdown_report(summary, gates, comparison) if github else None
    where = _describe_inputs(paths)
    from specaccept_cli.audit import audit_failures

    audits = audit_failures(summary.reported, summary.sampler, max_mismatches)
    if max_errors is not None and policy.skipped > max_errors:
        audits.append(_too_many_errors(policy, max_errors))
    _conclude_checks(gates, comparison, markdown, where, f"baseline {baseline}; {where}", audits)


def _too_many_errors(policy: Any, max_errors: int) -> str:
    what = f"{policy.skipped_rows} bad row{'s' if policy.skipped_rows != 1 else ''}"
    if policy.skipped_sources:
        what += f" and {policy.skipped_sources} unreadable source{'s' if policy.skipped_sources != 1 else ''}"
    return f"skipped {what}: more than --max-errors {max_errors}"


@contextlib.contextmanager
def _quarantine_file(path: str | None) -> Iterator[Any]:
    """The quarantine file, written beside its final path and renamed into place when the audit ends."""
    if path is None:
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(_atomic_file(path))
        except OSError as exc:
            raise OutputError(f"cannot write quarantine file {path}: {exc.strerror or exc}") from None
        yield _CheckedOutput(handle, f"quarantine file {path}")


def _conclude_checks(
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


def _describe_inputs(paths: list[str], shown: int = 3) -> str:
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


def _parse_list(text: str, name: str) -> list[float]:
    """`0.9,0.2,0.8` or `[0.9, 0.2, 0.8]`; `""` and `[]` are an empty draft."""
    import json
    import math

    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError as exc:
            raise click.BadParameter(f"not a JSON array: {exc}", param_hint=f"--{name}") from None
        if not isinstance(items, list):
            raise click.BadParameter("not a JSON array", param_hint=f"--{name}")
    else:
        items = [] if not stripped else [item.strip() for item in stripped.split(",")]
    values = []
    for index, item in enumerate(items):
        try:
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
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
    from specaccept_cli.rule import accept_prefix
    from specaccept_cli.validate import value_problem

    p, q, r = _parse_list(p_text, "p"), _parse_list(q_text, "q"), _parse_list(r_text, "r")
    if not len(p) == len(q) == len(r):
        raise click.UsageError(f"--p, --q and --r have different lengths ({len(p)}, {len(q)}, {len(r)})")
    for name, values in (("p", p), ("q", q), ("r", r)):
        for index, value in enumerate(values):
            problem = value_problem(name, index, value)
            if problem is not None:
                raise click.BadParameter(problem, param_hint=f"--{name}")
    accepted = accept_prefix(p, q, r)
    out = _stdout()
    out.write(b"%d\n" % accepted)
    out.flush()
    if explain:
        from specaccept_cli.render import QuietPipeConsole, explain_table

        with _printing_to_stdout():
            QuietPipeConsole().print(explain_table(p, q, r, accepted))


@cli.command()
@click.option("--runs", type=click.IntRange(min=0), required=True, help="Number of drafted runs.")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0), default=None, help="Per-token acceptance probability.")
@click.option(
    "--alpha-by-position",
    "alpha_by_position_text",
    metavar="A1,A2,...",
    default=None,
    help="Acceptance probability of draft position 1, 2, ... (the last repeats); instead of --alpha.",
)
@click.option("--k", "k_text", required=True, metavar="K|LOW-HIGH", help="Draft length, or a range drawn uniformly.")
@click.option("--seed", type=int, default=None, help="Seed for a reproducible log.")
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="JSONL (stdout by default; .gz compresses) or Parquet (.parquet).",
)
def simulate(
    runs: int,
    alpha: float | None,
    alpha_by_position_text: str | None,
    k_text: str,
    seed: int | None,
    output_path: str,
) -> None:
    """Write honest synthetic logs: each token passes independently with probability ALPHA.

    With --alpha-by-position the probability depends on the token's position in the draft.

    \b
    Examples:
      specaccept simulate --runs 1000 --alpha 0.8 --k 4 --seed 1 -o logs.jsonl
      specaccept simulate --runs 1000 --alpha-by-position 0.9,0.7,0.5 --k 4 -o falling.jsonl
    """
    from specaccept_cli import simulate as sim

    if (alpha is None) == (alpha_by_position_text is None):
        raise click.UsageError("give exactly one of --alpha and --alpha-by-position")
    alpha_by_position = None
    if alpha_by_position_text is not None:
        try:
            alpha_by_position = sim.parse_alpha_list(alpha_by_position_text)
        except ValueError:
            raise click.BadParameter(
                f"{alpha_by_position_text!r} is not a list of probabilities like 0.9,0.7,0.5",
                param_hint="--alpha-by-position",
            ) from None
    try:
        k_low, k_high = sim.parse_k_range(k_text)
    except ValueError:
        raise click.BadParameter(f"{k_text!r} is not a draft length (4) or range (1-8)", param_hint="--k") from None
    chunks = sim.simulate(runs, alpha or 0.0, k_low, k_high, seed, alpha_by_position)
    if output_path.endswith((".parquet", ".pq")):
        sim.write_parquet(chunks, output_path)
        return
    if output_path == "-":
        out = _stdout()
        sim.write_jsonl(chunks, out)
        out.flush()
        return
    _write_atomically(output_path, lambda handle: sim.write_jsonl(chunks, handle))


def _parse_k_list(text: str) -> list[int]:
    """`4`, `2,4,8`, `1-10` or a mix (`1-3,8`) -> draft lengths in the order given, duplicates dropped."""
    ks: list[int] = []
    for item in text.split(","):
        low_text, dash, high_text = item.strip().partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise click.BadParameter(
                f"{item.strip()!r} is not a draft length (4) or range (1-10)", param_hint="--k"
            ) from None
        if low < 0 or high < low:
            raise click.BadParameter(f"{item.strip()!r} is not a draft length (4) or range (1-10)", param_hint="--k")
        if high - low >= MAX_EXPECT_KS or high > MAX_EXPECT_K:
            raise click.BadParameter(f"draft lengths go up to {MAX_EXPECT_K}", param_hint="--k")
        ks += range(low, high + 1)
    return list(dict.fromkeys(ks))


MAX_EXPECT_K = 1024
MAX_EXPECT_KS = 1025


@cli.command()
@click.option("--alpha", type=click.FloatRange(0.0, 1.0), required=True, help="Per-token acceptance probability.")
@click.option("--k", "k_text", required=True, metavar="K|K1,K2|LOW-HIGH", help="Draft length(s): 4, 2,4,8 or 1-10.")
@click.option(
    "--cost-ratio",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Draft step time / target step time: adds the speedup and the best k.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: Rich view; json: an object for one k, a list for several.",
)
def expect(alpha: float, k_text: str, cost_ratio: float | None, output: str) -> None:
    """Tokens per target pass (and speedup) the i.i.d. model predicts: (1 - alpha^(k+1)) / (1 - alpha).

    \b
    Examples:
      specaccept expect --alpha 0.8 --k 4              # -> 3.3616
      specaccept expect --alpha 0.8 --k 1-10 --cost-ratio 0.05
    """
    from specaccept_cli import formulas

    ks = _parse_k_list(k_text)
    rows = [formulas.expectation(alpha, k, cost_ratio) for k in ks]
    if output == "json":
        import orjson

        out = _stdout()
        out.write(orjson.dumps(rows[0] if len(rows) == 1 else rows, option=orjson.OPT_APPEND_NEWLINE))
        out.flush()
        return
    from specaccept_cli.render import QuietPipeConsole, expect_table

    best_k = None if cost_ratio is None else max(ks, key=lambda k: formulas.expected_speedup(alpha, k, cost_ratio))
    optimal = None if cost_ratio is None else formulas.optimal_k(alpha, cost_ratio)
    with _printing_to_stdout():
        QuietPipeConsole().print(expect_table(rows, best_k, optimal))


def _write_atomically(path: str, write: Any) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    import gzip

    with _atomic_file(path) as raw:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
                write(packed)
        else:
            write(raw)


@contextlib.contextmanager
def _atomic_file(path: str) -> Iterator[IO[bytes]]:
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


def _write_file(path: str, data: bytes) -> None:
    """`data` to `path` atomically; a path that cannot be written is an input error (exit 2), not a traceback."""
    try:
        _write_atomically(path, lambda handle: handle.write(data))
    except OSError as exc:
        raise SpecacceptError(f"cannot write {path}: {exc.strerror or exc}") from None


@cli.command()
@click.argument("baseline_path", metavar="BASELINE.json", type=click.Path(dir_okay=False))
@click.argument("current_path", metavar="CURRENT.json", type=click.Path(dir_okay=False))
@_comparison_options
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
    help="table: Rich view; json: the comparison object; markdown: a GitHub table.",
)
@_github_option
def diff(
    baseline_path: str, current_path: str, max_drop: float, significance: float, output: str, github: bool
) -> None:
    """Compare two saved summaries as `audit --baseline` does; exit 1 when a metric regressed.

    \b
    Example:
      specaccept diff main.json pr.json --max-drop 0.02 --significance 0.01
    """
    from specaccept_cli.gates import compare
    from specaccept_cli.summary_files import json_bytes, read_summary_file, summary_of

    baseline = summary_of(read_summary_file(baseline_path), baseline_path)
    current = summary_of(read_summary_file(current_path), current_path)
    comparison = compare(baseline, current, max_drop, significance)

    from specaccept_cli import render

    if output == "json":
        data = {
            "schema": "specaccept.comparison/1",
            "baseline_file": baseline_path,
            "current_file": current_path,
            **comparison.to_dict(),
        }
        out = _stdout()
        out.write(json_bytes(data))
        out.flush()
    elif output == "markdown":
        out = _stdout()
        out.write(render.markdown_report(None, (), comparison).encode())
        out.flush()
    else:
        with _printing_to_stdout():
            render.QuietPipeConsole().print(render.comparison_view(comparison))
    markdown = render.markdown_report(None, (), comparison) if github else None
    _conclude_checks((), comparison, markdown, "", f"baseline {baseline_path}; current {current_path}")


@cli.command()
@click.argument("summaries", nargs=-1, required=True, metavar="SUMMARY.json...", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    help="Where to write the merged summary (stdout by default); written atomically.",
)
def merge(summaries: tuple[str, ...], output_path: str) -> None:
    """Merge summaries of shards into exactly the summary of all of them.

    Counters add, and every estimate is recomputed from the sum. Summaries with
    `groups` merge group by group.

    \b
    Example:
      specaccept merge shard-*.json -o all.json
    """
    from specaccept_cli.summary_files import json_bytes, merge_summaries, read_summary_file

    merged = merge_summaries([(path, read_summary_file(path)) for path in summaries])
    data = json_bytes(merged)
    if output_path == "-":
        out = _stdout()
        out.write(data)
        out.flush()
    else:
        _write_file(output_path, data)


def main() -> None:
    cli(prog_name="specaccept")
