"""`specaccept audit`: the main job."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any, Literal, cast

import click

from specaccept_cli.cli.options import (
    FiniteFloat,
    WholeNumber,
    check_field_path,
    comparison_options,
    cost_ratio_option,
    field_option,
    gate_options,
    github_option,
    output_option,
    window_options,
    window_spec,
)
from specaccept_cli.cli.output import (
    CheckedOutput,
    StderrConsole,
    atomic_file,
    binary_stdout,
    check_step_summary,
    check_writable,
    conclude_checks,
    describe_inputs,
    printing_to_stdout,
    write_file,
    write_stdout,
)
from specaccept_cli.errors import OutputError, UsageError
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from specaccept_cli.checks import Comparison, GateResult
    from specaccept_cli.read.policy import Mode
    from specaccept_cli.read.sources import Format, Source
    from specaccept_cli.read.storage import Storage
    from specaccept_cli.rule.batch import FieldSpec, RunBatch
    from specaccept_cli.rule.vectorized import BatchOutcome
    from specaccept_cli.summary.estimates import Estimates
    from specaccept_cli.summary.evaluate import Plan, RunColumns, RunSink
    from specaccept_cli.summary.provenance import Provenance
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.views.progress import RichProgress
    from specaccept_cli.views.records import RunPreview


@click.command(short_help="Recompute and summarise accepted lengths of logged runs.")
@click.argument("inputs", nargs=-1, metavar="[INPUT]...")
@output_option(
    ("table", "json", "markdown", "jsonl", "csv"),
    "table: Rich view; json: the summary; markdown: GitHub tables; jsonl/csv: one record per run, streamed.",
)
@click.option(
    "--format",
    "input_format",
    type=click.Choice(
        ["auto", "jsonl", "parquet", "vllm-log", "sglang-log", "sglang-requests", "llamacpp-log", "prometheus"]
    ),
    default="auto",
    show_default=True,
    help="Input format; auto goes by extension, then by content (PAR1 magic means Parquet; server output "
    "holding vLLM, SGLang or llama.cpp metrics lines, or a Prometheus scrape (.prom), is read as engine metrics).",
)
@click.option(
    "--draft-length",
    type=click.IntRange(min=1, max=64),
    default=None,
    metavar="K",
    help="Engine metrics: the server's draft length (num_speculative_tokens) when its lines do not print it.",
)
@field_option("p")
@field_option("q")
@field_option("r")
@click.option(
    "--id-field",
    "id_fields",
    multiple=True,
    callback=check_field_path,
    help="Carry this field (dotted path) into per-run records. Repeatable.",
)
@click.option(
    "--group-by",
    "group_by",
    default=None,
    callback=check_field_path,
    help="Also summarise each value of this field (dotted path) apart.",
)
@click.option(
    "--cluster-field",
    "cluster_field",
    default=None,
    callback=check_field_path,
    help="Runs sharing this field's value (dotted path) are one request: intervals and tests are cluster-robust. "
    "Default: the first row's request_id, request.id, req_id or rid (or an engine payload's request id); "
    "none: intervals over runs, which hold only for a replayed prompt set.",
)
@click.option(
    "--max-groups",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    metavar="N",
    help="With --group-by: show and write the N largest groups, the rest together as 'other' (0: every group).",
)
@cost_ratio_option
@click.option("--conventions", "show_conventions", is_flag=True, help="Show what each engine would report.")
@click.option(
    "--max-rows",
    type=WholeNumber(min=0),
    default=0,
    show_default=True,
    help="Also show the first N runs (with their --id-field values) in the table view.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--reported-field",
    callback=check_field_path,
    help="Dotted path of the accepted count the server reported; recompute, flag and diagnose mismatches.",
)
@click.option(
    "--max-mismatches",
    type=WholeNumber(min=0),
    help="Gate: exit 1 when more runs than this disagree with their reported count.",
)
@click.option(
    "--check-sampler", is_flag=True, help="Test the sampler: calibration and uniformity of r; exit 1 on failure."
)
@click.option(
    "--sampler-significance",
    type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
    default=0.001,
    show_default=True,
    help="A sampler test fails when its p-value is below this.",
)
@click.option(
    "--draft-tokens-field",
    callback=check_field_path,
    help="Greedy logs: dotted path of the drafted token ids (instead of p, q, r).",
)
@click.option(
    "--target-tokens-field",
    callback=check_field_path,
    help="Greedy logs: dotted path of the target's argmax token ids (k, or k + 1 with the bonus).",
)
@gate_options
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
@comparison_options
@github_option
@click.option(
    "--on-error",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="fail: stop at the first bad row (exit 2); skip: leave bad rows out, count them and list them on stderr.",
)
@click.option(
    "--max-errors",
    type=WholeNumber(min=0),
    default=None,
    metavar="N",
    help="With --on-error skip: exit 1 when more than N rows (or sources) were skipped.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="With --on-error skip: exit 0 even when every row was skipped (by default no valid run is exit 1).",
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
    type=WholeNumber(min=1),
    default=DEFAULT_MAX_LINE_BYTES,
    show_default=True,
    metavar="N",
    help="A JSONL line longer than N bytes is a bad row (its bytes are never held in memory).",
)
@click.option(
    "-j",
    "--jobs",
    type=WholeNumber(min=1),
    default=None,
    help="Processes parsing JSONL in parallel (default: the number of usable CPU cores; 1: no worker processes).",
)
@click.option(
    "--scheduler",
    envvar="DASK_SCHEDULER_ADDRESS",
    metavar="ADDRESS",
    default=None,
    help="Run on a Dask cluster: tcp://HOST:PORT, or local[:N] for N worker processes here (needs specaccept[dask]).",
)
@click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="For s3:// and gs:// inputs: endpoint, region, anonymous, ... Repeatable. Never printed.",
)
@window_options
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, allow_dash=False),
    metavar="PATH",
    help="Also write a self-contained HTML report with plots to PATH (as `specaccept report` does).",
)
def audit(**options: Any) -> None:
    """Recompute accepted lengths for every run in INPUT... and summarise them.

    INPUT is a JSONL file (optionally gzip/bz2/xz/zstd-compressed), a Parquet file,
    a directory of Parquet shards, an s3:// or gs:// object or prefix, or - for stdin
    (the default when stdin is a pipe).

    Checks exit 1 when they fail, after the normal output, one line on stderr
    each: the --min-* gates, a --baseline comparison (a significant drop, or a
    metric that cannot be tested), --max-mismatches, --check-sampler and
    --max-errors. A bad row stops the audit
    (exit 2) unless --on-error skip, which counts it and lists it on stderr;
    a non-empty input with no valid run at all is then exit 1 (--allow-empty
    accepts it). A field that no row has (--group-by, --id-field) is exit 2.

    \b
    Examples:
      specaccept audit logs.jsonl.gz
      zcat logs.jsonl.gz | specaccept audit - -o json
      specaccept audit shards/ -o jsonl --id-field request_id | head
      specaccept audit logs.jsonl.gz --min-alpha 0.7 --baseline main.json --summary-out pr.json
      specaccept audit logs.parquet --group-by model --cost-ratio 0.05 --conventions
      specaccept audit --scheduler tcp://scheduler:8786 s3://bucket/logs/2026-11-30/ -o json
    """
    run_audit(AuditOptions(**options))


@dataclass(frozen=True)
class AuditOptions:
    """`audit`'s command line, as Click parsed it."""

    inputs: tuple[str, ...]
    output: Literal["table", "json", "markdown", "jsonl", "csv", "html"]  # html: `report`, nothing on stdout
    input_format: Format
    draft_length: int | None
    p_field: str
    q_field: str
    r_field: str
    id_fields: tuple[str, ...]
    group_by: str | None
    cluster_field: str | None
    max_groups: int
    cost_ratio: float | None
    show_conventions: bool
    max_rows: int
    quiet: bool
    reported_field: str | None
    max_mismatches: int | None
    check_sampler: bool
    sampler_significance: float
    draft_tokens_field: str | None
    target_tokens_field: str | None
    min_alpha: float | None
    min_tokens_per_pass: float | None
    min_acceptance_rate: float | None
    summary_out: str | None
    baseline: str | None
    max_drop: float
    significance: float
    github: bool
    on_error: Mode
    max_errors: int | None
    allow_empty: bool
    quarantine: str | None
    max_line_bytes: int
    jobs: int | None
    scheduler: str | None = None
    storage_options: tuple[str, ...] = ()
    time_field: str | None = None
    window: str | None = None
    check_drift: bool = False
    html_path: str | None = None


def run_audit(options: AuditOptions) -> None:
    """Check the options, read every source through the per-batch stage, print, then conclude the checks."""
    from specaccept_cli.read.sources import expand_inputs
    from specaccept_cli.summary.files import read_summary_file, summary_of

    paths = _input_paths(options)
    fields, plan = _reading_plan(options)
    # Read the baseline before the logs: a bad baseline should not cost a long audit.
    baseline = options.baseline
    baseline_summary = None if baseline is None else summary_of(read_summary_file(baseline), baseline)
    # A path that does not exist is a mistake in the command: exit 2 before reading, whatever --on-error.
    sources = expand_inputs(paths, _storage(options))
    # So is an output that cannot be written: found now, not after reading the whole input.
    if options.summary_out is not None:
        check_writable(options.summary_out, "--summary-out")
    if options.html_path is not None:
        check_writable(options.html_path, "HTML report")
    if options.github:
        check_step_summary()
    if options.output in ("jsonl", "csv"):
        _refuse_engine_output(sources, options)

    from specaccept_cli.views.records import RunPreview

    stderr = StderrConsole()
    preview = RunPreview(options.max_rows, tuple(dict.fromkeys(options.id_fields)))
    with _quarantine_file(options.quarantine) as quarantine:
        summary = _read(options, sources, fields, plan, quarantine, preview, stderr)

    from specaccept_cli.checks import check_gates, compare
    from specaccept_cli.summary.estimates import estimate

    if not options.check_sampler and summary.sampler is not None:
        # Shown, not gated or saved: a summary file holds the sampler tally only when --check-sampler asked for it.
        shown, summary = summary, replace(summary, sampler=None)
    else:
        shown = summary
    numbers = estimate(summary)

    thresholds = {
        "min_alpha": options.min_alpha,
        "min_tokens_per_pass": options.min_tokens_per_pass,
        "min_acceptance_rate": options.min_acceptance_rate,
    }
    gates = check_gates(numbers, thresholds)
    comparison = (
        None
        if baseline_summary is None
        else compare(estimate(baseline_summary), numbers, options.max_drop, options.significance)
    )
    provenance = None
    if options.summary_out is not None or options.output == "json":
        # The field the runs were clustered by, named or found in the first row, is a setting of the summary.
        found = None if summary.clusters is None else summary.clusters.field
        provenance = _provenance(options, sources, fields, replace(plan, cluster_field=found, detect_clusters=False))
    _show(options, summary, shown, numbers, gates, comparison, preview, stderr, provenance)

    from specaccept_cli.checks import audit_failures

    markdown = None
    if options.github:
        from specaccept_cli.views.markdown import markdown_report

        markdown = markdown_report(shown, numbers, gates, comparison, options.significance)
    where = describe_inputs(paths)
    audits = audit_failures(summary.reported, summary.sampler, options.max_mismatches)
    if options.max_errors is not None and summary.skipped_rows + summary.skipped_sources > options.max_errors:
        audits.append(_too_many_errors(summary, options.max_errors))
    nothing_valid = not summary.runs and summary.engine is None  # engine metrics may only bound their runs
    if nothing_valid and (summary.skipped_rows or summary.skipped_sources) and not options.allow_empty:
        audits.append(f"no valid run: {_skipped(summary)} (--on-error skip; --allow-empty accepts that)")
    if options.check_drift:
        from specaccept_cli.checks import drift_failure

        audits += drift_failure(summary.windows, options.significance, summary.clusters)
    if options.html_path is not None:
        write_report(options.html_path, summary, numbers, comparison, options.cost_ratio, paths, options.significance)
    conclude_checks(gates, comparison, markdown, where, f"baseline {baseline}; {where}", audits)


def _input_paths(options: AuditOptions) -> list[str]:
    """The inputs to read (stdin when none is given and stdin is a pipe), after the usage checks."""
    from specaccept_cli.read.sources import STDIN

    paths = list(options.inputs)
    if not paths:
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise click.UsageError("no input: give a file or directory, or pipe rows into stdin (or use -)")
        paths = [STDIN]
    if paths.count(STDIN) > 1:
        raise click.UsageError("stdin (-) can be read only once")
    if (options.draft_tokens_field is None) != (options.target_tokens_field is None):
        raise click.UsageError("greedy logs need both --draft-tokens-field and --target-tokens-field")
    if options.draft_tokens_field is not None and options.check_sampler:
        raise click.UsageError("--check-sampler needs logged (p, q, r); greedy logs have none")
    if options.max_mismatches is not None and options.reported_field is None:
        raise click.UsageError("--max-mismatches needs --reported-field")
    if options.on_error == "fail":
        for name, value in (
            ("--max-errors", options.max_errors),
            ("--quarantine", options.quarantine),
            ("--allow-empty", options.allow_empty or None),
        ):
            if value is not None:
                raise click.UsageError(f"{name} applies to --on-error skip")
    if options.scheduler is not None:
        _check_cluster_options(options, paths)
    if options.baseline is None:
        ctx = click.get_current_context()
        for name in ("max_drop", "significance"):
            if name == "significance" and options.check_drift:  # the drift test's level too
                continue
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
                raise click.UsageError(f"--{name.replace('_', '-')} applies to a comparison: give --baseline too")
    return paths


def _reading_plan(options: AuditOptions) -> tuple[FieldSpec, Plan]:
    """Which fields to read from each row, and what to compute besides the rule."""
    from specaccept_cli.rule.batch import FieldSpec
    from specaccept_cli.summary.clusters import NO_CLUSTERS
    from specaccept_cli.summary.evaluate import Plan

    reported_field = options.reported_field
    own_columns = {"source", "line", "k", "accepted", "emitted", *(("reported", "mismatch") if reported_field else ())}
    for name in options.id_fields:
        if name in own_columns:
            raise click.UsageError(f"--id-field {name!r} would collide with the per-run column of that name")
    cluster_field = None if options.cluster_field in (None, NO_CLUSTERS) else options.cluster_field
    named = (options.group_by, reported_field, options.time_field, cluster_field)
    extras = (*options.id_fields, *(name for name in named if name is not None))
    fields = FieldSpec(
        p=options.p_field,
        q=options.q_field,
        r=options.r_field,
        extras=tuple(dict.fromkeys(extras)),
        counts=(reported_field,) if reported_field else (),
        draft_tokens=options.draft_tokens_field,
        target_tokens=options.target_tokens_field,
    )
    # Per-run records alone need no groups; a summary that is printed or saved does.
    per_run_only = options.output in ("jsonl", "csv") and options.summary_out is None
    plan = Plan(
        group_by=None if per_run_only else options.group_by,
        reported_field=reported_field,
        # The sampler tests cost next to nothing: shown whenever r is logged, a failure gated only when asked.
        check_sampler=options.check_sampler or (options.draft_tokens_field is None and not per_run_only),
        sampler_significance=options.sampler_significance,
        cluster_field=None if per_run_only else cluster_field,
        # No field named: the first row's request field clusters the runs (`pipeline.clusters`).
        detect_clusters=not per_run_only and options.cluster_field != NO_CLUSTERS,
        windows=window_spec(options.time_field, options.window),
    )
    return fields, plan


def _read(
    options: AuditOptions,
    sources: list[Source],
    fields: FieldSpec,
    plan: Plan,
    quarantine: CheckedOutput | None,
    preview: RunPreview,
    stderr: StderrConsole,
) -> Summary:
    """Every source through the front door, in order; per-run records stream out as they come."""
    from specaccept_cli.pipeline import summarise

    def run(sink: RunSink | None = None) -> Summary:
        if options.scheduler is not None:
            return _read_on_cluster(options, sources, fields, plan, sink, cast("IO[bytes] | None", quarantine))

        def read(progress: RichProgress | None) -> Summary:
            return summarise(
                sources,
                fields,
                plan,
                jobs=options.jobs,
                on_error=options.on_error,
                quarantine=cast("IO[bytes] | None", quarantine),  # the error policy only writes to it
                sink=sink,
                progress=progress,
                input_format=options.input_format,
                max_line_bytes=options.max_line_bytes,
                draft_length=options.draft_length,
            )

        if not options.quiet and stderr.is_terminal:
            from specaccept_cli.views.progress import RichProgress

            with RichProgress(stderr.console, sources) as progress:
                return read(progress)
        return read(None)

    if options.output in ("jsonl", "csv"):
        from specaccept_cli.views.records import CsvWriter, JsonlWriter

        column_names = ("reported", "mismatch") if options.reported_field else ()
        writer = (JsonlWriter if options.output == "jsonl" else CsvWriter)(
            binary_stdout(), tuple(dict.fromkeys(options.id_fields)), column_names
        )
        summary = run(writer.write)
        writer.close()
        _refuse_engine_output_read(summary, options)
        return summary
    if options.output == "table" and options.max_rows and options.scheduler is None:

        def keep(batch: RunBatch, outcome: BatchOutcome, columns: RunColumns) -> None:
            preview.add(batch.source, batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist(), batch.extras)

        return run(keep)
    return run()


def _show(
    options: AuditOptions,
    summary: Summary,
    shown: Summary,
    numbers: Estimates,
    gates: list[GateResult],
    comparison: Comparison | None,
    preview: RunPreview,
    stderr: StderrConsole,
    provenance: Provenance | None = None,
) -> None:
    """Print the summary once, in the asked-for form; --summary-out gets the bare summary in any form.

    `shown` is `summary` with what the views show beyond the saved summary (the sampler tests).
    """
    from specaccept_cli.summary.files import json_bytes, summary_object

    # The machine format only when it is written (with many groups it is most of the work), and once.
    machine = None
    if options.summary_out is not None or options.output == "json":
        machine = summary_object(summary, options.cost_ratio, numbers, provenance, options.max_groups)
    if options.summary_out is not None and machine is not None:
        write_file(options.summary_out, json_bytes(machine))
    if options.output == "json" and machine is not None:
        data = dict(machine)
        if gates:
            data["gates"] = [result.to_dict() for result in gates]
        if comparison is not None:
            data["comparison"] = comparison.to_dict()
        write_stdout(json_bytes(data))
    elif options.output == "markdown":
        from specaccept_cli.views.markdown import markdown_report

        write_stdout(markdown_report(shown, numbers, gates, comparison, options.significance).encode())
    elif options.output == "table":
        from specaccept_cli.views import terminal as render
        from specaccept_cli.views.rows import headline_rows

        with printing_to_stdout():
            console = render.QuietPipeConsole()
            console.print(render.headline(headline_rows(shown, numbers, gates, comparison)))
            if options.max_rows and summary.engine is None and options.scheduler is None:  # runs stay on workers
                console.print(render.runs_table(preview))
            console.print(
                render.summary_view(
                    summary,
                    numbers,
                    cost_ratio=options.cost_ratio,
                    conventions=options.show_conventions,
                    max_groups=options.max_groups,
                )
            )
            for view in render.audit_views(shown):
                console.print(view)
            if summary.windows is not None and len(summary.windows):  # engine metrics have intervals, not runs
                from specaccept_cli.views.timeline import timeline_view

                console.print(timeline_view(summary.windows, numbers.alpha, options.significance, summary.clusters))
            if gates:
                console.print(render.gates_view(gates))
            if comparison is not None:
                console.print(render.comparison_view(comparison))
    if summary.skipped_rows or summary.skipped_sources:
        from specaccept_cli.views.terminal import skipped_table

        stderr.console.print(skipped_table(summary))


def _skipped(summary: Summary) -> str:
    from specaccept_cli.views.rows import skipped_phrase

    return f"skipped {skipped_phrase(summary)}"


def _provenance(options: AuditOptions, sources: list[Source], fields: FieldSpec, plan: Plan) -> Provenance:
    """What the saved summary was made of: every source read, and the settings that changed its numbers.

    The sampler is tested for the view whenever r is logged, but its tally is saved only with
    --check-sampler: the saved summary's setting is the option's.
    """
    from dataclasses import replace

    from specaccept_cli.summary.provenance import Provenance, describe_input, reading_settings

    saved = replace(plan, check_sampler=options.check_sampler)
    return Provenance.now(
        [describe_input(source.name, source.path, source.size) for source in sources],
        reading_settings(fields, saved, options.on_error, options.max_line_bytes),
    )


def _refuse_engine_output(sources: list[Source], options: AuditOptions) -> None:
    """Engine metrics hold interval counters, not runs: say so before any per-run output starts.

    A pipe given as a path (`<(zcat server.log.gz)`) cannot be looked at without consuming it: it is
    left to `_refuse_engine_output_read` once it has been read.
    """
    from specaccept_cli.read.sources import ENGINE_FORMATS, open_source

    for source in sources:
        if not (source.is_stdin or source.can_reopen):  # peeking at stdin consumes nothing; at a pipe, it would
            continue
        with open_source(source, options.input_format) as opened:
            if opened.format in ENGINE_FORMATS:
                raise UsageError(_no_records(f"{source.name} is {opened.format} output", options.output))


def _refuse_engine_output_read(summary: Summary, options: AuditOptions) -> None:
    """After the read: engine output that only reading could tell (through a pipe given as a path) is refused too."""
    if summary.engine is not None:
        formats = ", ".join(summary.engine.formats) or "engine"
        raise UsageError(_no_records(f"{formats} output was read", options.output))


def _no_records(what: str, output: str) -> str:
    return (
        f"{what}: engine metrics hold interval counters, not runs, so -o {output} has no per-run records "
        "to write; use -o table, json or markdown"
    )


def _too_many_errors(summary: Summary, max_errors: int) -> str:
    return f"{_skipped(summary)}: more than --max-errors {max_errors}"


@contextlib.contextmanager
def _quarantine_file(path: str | None) -> Iterator[CheckedOutput | None]:
    """The quarantine file, written beside its final path and renamed into place when the audit ends."""
    if path is None:
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(atomic_file(path))
        except OSError as exc:
            raise OutputError(f"cannot write quarantine file {path}: {exc.strerror or exc}") from None
        yield CheckedOutput(handle, f"quarantine file {path}")


def _storage(options: AuditOptions) -> Storage | None:
    if not options.storage_options:
        return None
    from specaccept_cli.read.storage import Storage, parse_storage_options

    return Storage(parse_storage_options(options.storage_options))


def _check_cluster_options(options: AuditOptions, paths: list[str]) -> None:
    """What a cluster cannot do: read this process's stdin."""
    from specaccept_cli.read.sources import STDIN

    if STDIN in paths:
        raise click.UsageError("a cluster cannot read stdin (-): give files, directories or URLs with --scheduler")


def _read_on_cluster(
    options: AuditOptions,
    sources: list[Source],
    fields: FieldSpec,
    plan: Plan,
    sink: RunSink | None,
    quarantine: IO[bytes] | None,
) -> Summary:
    """The same summary from a Dask cluster; per-run records and quarantined lines come back in input order.

    (The table's preview of runs is not asked for: it would bring every run back for twenty rows.)
    """
    from specaccept_cli.pipeline import distributed

    assert options.scheduler is not None
    with distributed.connect(options.scheduler) as client:
        return distributed.summarise(
            sources,
            fields,
            plan,
            client=client,
            on_error=options.on_error,
            input_format=options.input_format,
            max_line_bytes=options.max_line_bytes,
            sink=sink,
            quarantine=quarantine,
        )


def write_report(
    path: str,
    summary: Summary,
    numbers: Estimates,
    comparison: Comparison | None,
    cost_ratio: float | None,
    sources: Sequence[str],
    significance: float,
) -> None:
    """Render the report and write it atomically to `path` (drift verdicts at `significance`)."""
    from specaccept_cli.views.html import Baseline, render_report

    baseline = None
    if comparison is not None:
        baseline = Baseline(
            comparison.max_drop,
            [
                (
                    row.label,
                    row.baseline,
                    row.baseline_standard_error,
                    row.current,
                    row.current_standard_error,
                    row.verdict,
                )
                for row in comparison.metrics
            ],
        )
    write_file(path, render_report(summary, numbers, sources, baseline, cost_ratio, significance).encode())
