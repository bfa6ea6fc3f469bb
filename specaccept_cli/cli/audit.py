"""`specaccept audit`: the main job."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

import click
from msgspec.structs import replace

from specaccept_cli.cli.audit_options import AUDIT_OPTION_GROUPS, NO_RULE_FIELD, AuditOptions, audit_options
from specaccept_cli.cli.hints import GATE_OPTIONS, hinted, warning_text
from specaccept_cli.cli.options import GroupedCommand, window_spec
from specaccept_cli.cli.output import (
    CheckedOutput,
    StderrConsole,
    binary_stdout,
    check_step_summary,
    check_writable,
    conclude_findings,
    describe_inputs,
    output_file,
    printing_to_stdout,
    refuse_outputs_that_are_inputs,
    side_outputs_outlive_stdout,
    write_file,
    write_stdout,
)
from specaccept_cli.cli.ways_out import FIELD_OPTIONS, field_options
from specaccept_cli.errors import UsageError
from specaccept_cli.text import shown_name, visible

if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence

    from specaccept_cli.pipeline.request import ReadRequest
    from specaccept_cli.read.sources import Source
    from specaccept_cli.read.storage import Storage
    from specaccept_cli.rule.batch import FieldSpec
    from specaccept_cli.summary.evaluate import Plan, RunSink
    from specaccept_cli.summary.provenance import Provenance
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.verdict import Findings, GateSpec, VerdictEntry
    from specaccept_cli.verdict.checks import Issue
    from specaccept_cli.views.progress import RichProgress


@click.command(
    cls=GroupedCommand,
    option_groups=AUDIT_OPTION_GROUPS,
    short_help="Recompute and summarise accepted lengths of logged runs.",
)
@audit_options
def audit(**options: Any) -> None:
    """Recompute accepted lengths for every run in INPUT... and summarise them.

    INPUT is a JSONL file (optionally gzip/bz2/xz/zstd-compressed), a Parquet file,
    a directory of Parquet or JSONL shards, an s3:// or gs:// object or prefix, or - for stdin
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
      kubectl logs -f deploy/vllm | specaccept audit --follow --every 30s --min-alpha 0.6
    """
    run_audit(AuditOptions(**options))


Renderer = Callable[["Findings", "Sequence[str]"], None]  # draws the findings of the inputs named


def run_audit(
    options: AuditOptions, renderers: Sequence[Renderer] = (), outputs: Sequence[tuple[str, str]] = ()
) -> None:
    """Check the options, read every source through the per-batch stage, conclude, render, then exit.

    `renderers` draw the findings besides the -o output (`report` passes its HTML page), before
    the checks' exit status.
    """
    from specaccept_cli.read.sources import expand_inputs

    paths = _input_paths(options)
    fields, plan = _reading_plan(options)
    # Read the baseline before the logs: a bad baseline should not cost a long audit. (Without one, the
    # summary files' module is imported once the reading has begun, not on the way to it.)
    baseline = options.baseline
    baseline_summary = None
    if baseline is not None:
        from specaccept_cli.summary.files import read_summary_file, summary_of

        baseline_summary = summary_of(read_summary_file(baseline), shown_name(baseline))
    # A path that does not exist is a mistake in the command: exit 2 before reading, whatever --on-error.
    sources = expand_inputs(paths, _storage(options))
    # So is an output that would overwrite an input, or that cannot be written: found now, not after
    # reading the whole input (and not after the input is gone).
    refuse_outputs_that_are_inputs(
        [
            ("--quarantine", options.quarantine),
            ("--summary-out", options.summary_out),
            ("--html", options.html_path),
            *outputs,
            ("$GITHUB_STEP_SUMMARY", os.environ.get("GITHUB_STEP_SUMMARY") or None if options.github else None),
        ],
        _local_inputs(sources, baseline),
        stdin=any(source.is_stdin for source in sources),
        stdout=options.output is not None,
    )
    if options.summary_out is not None:
        check_writable(options.summary_out, "--summary-out")
    if options.html_path is not None:
        check_writable(options.html_path, "HTML report")
    if options.github:
        check_step_summary()
    if options.output in ("jsonl", "csv") and not options.follow:
        _refuse_engine_output(sources, options)

    # `| head` may close stdout early: the summary, report and quarantine asked for are still written.
    side_outputs = (options.summary_out, options.html_path, options.quarantine, options.github or None)
    from specaccept_cli.cli.live import live_stop

    outlive = any(output is not None for output in side_outputs)
    with side_outputs_outlive_stdout(outlive), live_stop(options.follow) as stop:
        _audit(options, paths, sources, fields, plan, baseline_summary, renderers, stop)


def _local_inputs(sources: list[Source], baseline: str | None) -> list[str]:
    """The files on this machine that the audit reads (an output must not be one of them)."""
    local = [str(source.path) for source in sources if source.path is not None]
    local += [
        source.remote.url[len("file://") :]
        for source in sources
        if source.remote is not None and source.remote.url.lower().startswith("file://")
    ]
    return local + ([baseline] if baseline is not None else [])


def _audit(
    options: AuditOptions,
    paths: list[str],
    sources: list[Source],
    fields: FieldSpec,
    plan: Plan,
    baseline_summary: Summary | None,
    renderers: Sequence[Renderer],
    stop: threading.Event | None = None,
) -> None:
    """Read, show, write the side outputs, conclude: the audit once its options and outputs are checked.

    A live audit (`stop` given) whose reading ended in an error shows and writes what it read, then raises it.
    """
    baseline = options.baseline
    stderr = StderrConsole()
    failure: BaseException | None = None
    added: tuple[VerdictEntry, ...] = ()  # what a live read adds to the verdict (a failing endpoint)
    with _quarantine_file(options.quarantine) as quarantine:
        if options.watch_urls:
            from specaccept_cli.cli.live import watch_read

            assert stop is not None
            summary, failure, added = watch_read(options, gate_spec(options), plan, stderr, stop)
        elif options.follow:
            from specaccept_cli.cli.live import follow_read

            assert stop is not None
            summary, failure, added = follow_read(
                options, gate_spec(options), paths, fields, plan, quarantine, stderr, stop
            )
        else:
            summary = _read(options, sources, fields, plan, quarantine, stderr)

    from specaccept_cli.verdict import conclude

    findings = conclude(summary, baseline_summary, gate_spec(options), max_groups=options.max_groups)
    if options.watch_urls:
        from specaccept_cli.pipeline.live import watched_verdict

        findings = replace(findings, verdict=watched_verdict(findings.verdict, ()) + added)
    elif added:
        findings = replace(findings, verdict=findings.verdict + added)
    warnings = () if findings.comparison is None else findings.comparison.warnings
    # A summary file holds the sampler tally only when --check-sampler asked for it: shown, not saved.
    saved = summary if options.check_sampler else replace(summary, sampler=None)
    provenance = None
    if options.summary_out is not None or options.output == "json":
        # The field the runs were clustered by, named or found in the first row, is a setting of the summary.
        found = None if summary.clusters is None else summary.clusters.field
        provenance = _provenance(options, sources, fields, replace(plan, cluster_field=found, detect_clusters=False))
    _show(options, findings, saved, warnings, stderr, provenance)

    markdown = None
    if options.github:
        from specaccept_cli.views.markdown import markdown_report

        markdown = markdown_report(findings, words=hinted, gate_names=GATE_OPTIONS)
    if options.html_path is not None:
        write_report(options.html_path, findings, options.cost_ratio, paths)
    for render in renderers:
        render(findings, paths)
    if failure is not None:  # what was read is reported above; the error that ended the reading exits 2
        raise failure
    where = describe_inputs(paths)
    conclude_findings(findings, markdown, where, f"baseline {baseline}; {where}", warnings)


def gate_spec(options: AuditOptions) -> GateSpec:
    """The thresholds and levels of audit's checks, from its options."""
    from specaccept_cli.verdict import GateSpec

    return GateSpec(
        min_alpha=options.min_alpha,
        min_tokens_per_pass=options.min_tokens_per_pass,
        min_acceptance_rate=options.min_acceptance_rate,
        max_drop=options.max_drop,
        significance=options.significance,
        max_mismatches=options.max_mismatches,
        strict_sampler=options.check_sampler,
        strict_drift=options.check_drift,
        max_errors=options.max_errors,
        allow_empty=options.allow_empty,
        strict_bounds=options.strict_bounds,
        tree=options.tree,
    )


def _input_paths(options: AuditOptions) -> list[str]:
    """The inputs to read (stdin when none is given and stdin is a pipe), after the usage checks."""
    from specaccept_cli.read.sources import STDIN

    if options.watch_urls:
        return []
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
    _check_follow_options(options)
    if options.baseline is None:
        ctx = click.get_current_context()
        for name in ("max_drop", "significance"):
            if name == "significance" and options.check_drift:  # the drift test's level too
                continue
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
                raise click.UsageError(f"--{name.replace('_', '-')} applies to a comparison: give --baseline too")
    return paths


def _check_follow_options(options: AuditOptions) -> None:
    ctx = click.get_current_context()
    if not options.follow:
        for name in ("every", "alert"):
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
                raise click.UsageError(f"--{name} applies to a live audit: give --follow too")
        return
    if options.scheduler is not None:
        raise click.UsageError("--follow reads one stream here; --scheduler is for files and objects")


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
        times=(options.time_field,) if options.time_field else (),
        draft_tokens=options.draft_tokens_field,
        target_tokens=options.target_tokens_field,
        rule=options.rule,
        rule_field=None if options.rule_field == NO_RULE_FIELD else options.rule_field,
    )
    # For the way out of a missing field (`cli.ways_out`): which option names each path.
    named_by = {"--p-field": fields.p, "--q-field": fields.q, "--r-field": fields.r}
    if fields.draft_tokens is not None and fields.target_tokens is not None:
        named_by = {"--draft-tokens-field": fields.draft_tokens, "--target-tokens-field": fields.target_tokens}
    named_by.update((f"--id-field {name}", name) for name in options.id_fields)
    options_of_extras = (
        ("--group-by", options.group_by),
        ("--reported-field", reported_field),
        ("--time-field", options.time_field),
        ("--cluster-field", cluster_field),
    )
    named_by.update((option, name) for option, name in options_of_extras if name is not None)
    context = click.get_current_context(silent=True)
    if context is not None:
        context.meta[FIELD_OPTIONS] = field_options(named_by)
    # Per-run records alone need no groups; a summary that is printed or saved does.
    per_run_only = options.output in ("jsonl", "csv") and options.summary_out is None and not options.follow
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
        first_runs=options.max_rows if _shows_first_runs(options) else 0,
        run_ids=tuple(dict.fromkeys(options.id_fields)) or None,
    )
    return fields, plan


def _shows_first_runs(options: AuditOptions) -> bool:
    """The first screen shows the first runs; `-o json` only when --max-rows is given, so that by default it
    stays the summary a file holds (a `merge` or `--baseline` input, the same bytes from every reading path).
    A live audit shows periods instead."""
    if options.follow or not options.max_rows:
        return False
    if options.output == "table":
        return True
    ctx = click.get_current_context(silent=True)
    given = ctx is not None and ctx.get_parameter_source("max_rows") is click.core.ParameterSource.COMMANDLINE
    return options.output == "json" and given


def _read(
    options: AuditOptions,
    sources: list[Source],
    fields: FieldSpec,
    plan: Plan,
    quarantine: CheckedOutput | None,
    stderr: StderrConsole,
) -> Summary:
    """Every source through the front door, in order; per-run records stream out as they come."""
    from specaccept_cli.errors import SpecacceptError, WorkerDied
    from specaccept_cli.pipeline import summarise

    request = _read_request(options, sources, fields, plan, quarantine)

    def run(sink: RunSink | None = None) -> Summary:
        if request.scheduler is not None:
            return _read_on_cluster(request, sink)

        def read(progress: RichProgress | None) -> Summary:
            try:
                return summarise(request, sink=sink, progress=progress)
            except WorkerDied as exc:
                raise SpecacceptError(f"{exc}; try again with --jobs 1") from None

        if not options.quiet and stderr.is_terminal:
            from specaccept_cli.views.progress import RichProgress

            with RichProgress(stderr.console, sources) as progress:
                return read(progress)
        return read(None)

    if options.output in ("jsonl", "csv"):
        from specaccept_cli.views.records import CsvWriter, JsonlWriter

        column_names = ("reported", "mismatch") if options.reported_field else ()
        out = binary_stdout("json" if options.output == "jsonl" else "csv")
        writer = (JsonlWriter if options.output == "jsonl" else CsvWriter)(
            out, tuple(dict.fromkeys(options.id_fields)), column_names
        )
        try:
            summary = run(writer.write)
            out.end()  # a CSV's command fence closes before any annotation is written
        except BaseException:
            with contextlib.suppress(OSError, SpecacceptError):
                out.end()
            raise
        writer.close()
        _refuse_engine_output_read(summary, options)
        return summary
    return run()


def _show(
    options: AuditOptions,
    findings: Findings,
    saved: Summary,
    warnings: Sequence[Issue],
    stderr: StderrConsole,
    provenance: Provenance | None = None,
) -> None:
    """Print the findings once, in the asked-for form; --summary-out gets the bare summary in any form.

    `saved` is the summary as a file keeps it (without the sampler tests, unless --check-sampler).
    """
    from specaccept_cli.summary.files import json_bytes, summary_object

    summary = findings.summary
    # The machine format only when it is written (with many groups it is most of the work), and once.
    machine = None
    if options.summary_out is not None or options.output == "json":
        machine = summary_object(
            saved,
            options.cost_ratio,
            findings.numbers,
            provenance,
            options.max_groups,
            drift=findings.drift,
            group_numbers=dict(findings.groups),  # estimated for the view already: not again
            groups_as_bytes=True,  # only written
        )
    if options.summary_out is not None and machine is not None:
        write_file(options.summary_out, json_bytes(machine))
    if options.output == "json" and machine is not None:
        write_stdout(json_bytes(findings_object(findings, machine, warnings)), "json")
    elif options.output == "markdown":
        from specaccept_cli.views.markdown import markdown_report

        write_stdout(markdown_report(findings, words=hinted, gate_names=GATE_OPTIONS).encode())
    elif options.output == "table":
        _show_table(options, findings)
    if summary.skipped_rows or summary.skipped_sources:
        from specaccept_cli.views.terminal import skipped_table

        stderr.console.print(skipped_table(summary))
    for drift in () if summary.engine is None else summary.engine.drift:  # payload fields no reader knows, once
        click.echo(f"specaccept: warning: {visible(drift)}", err=True)


def _show_table(options: AuditOptions, findings: Findings) -> None:
    """The first screen (headline with the verdict, compact tables, the timeline strip); --full adds the rest."""
    from specaccept_cli.views import terminal as render
    from specaccept_cli.views.rows import headline_rows

    # A live audit whose stdout is not a terminal wrote JSON lines there, the final record the summary:
    # the human view of it goes to stderr, so stdout stays JSON lines to the end.
    to_stderr = options.follow and not render.QuietPipeConsole().is_terminal
    with printing_to_stdout():
        console = render.QuietPipeConsole(stderr=True) if to_stderr else render.QuietPipeConsole()
        console.print(render.headline(headline_rows(findings, hinted)))
        if findings.first_runs is not None and findings.first_runs.total:  # engine metrics have no runs
            console.print(render.runs_table(findings.first_runs))
        console.print(
            render.summary_view(
                findings, cost_ratio=options.cost_ratio, conventions=options.show_conventions, full=options.full
            )
        )
        for view in render.audit_views(findings, options.full):
            console.print(view)
        if findings.windows:  # engine metrics have intervals, not runs
            from specaccept_cli.views.timeline import timeline_view

            console.print(timeline_view(findings))
        if findings.gates:
            console.print(render.gates_view(findings.gates, GATE_OPTIONS))
        if findings.comparison is not None:
            console.print(render.comparison_view(findings.comparison))


def findings_object(findings: Findings, machine: dict[str, Any], warnings: Sequence[Issue]) -> dict[str, Any]:
    """`-o json`: the summary object with the first runs and the verdict before its `provenance` and `state`
    (still the last keys when no gate or baseline was asked for), then the gates and the comparison, as always."""
    tail = next(key for key in ("provenance", "state") if key in machine)  # they stay the last keys
    data: dict[str, Any] = {}
    for key, value in machine.items():
        if key == tail:
            if findings.first_runs is not None:  # a bounded preview (--max-rows), an addition to the summary's keys
                from specaccept_cli.views.records import first_runs_object

                data["first_runs"] = first_runs_object(findings.first_runs)
            if findings.tree is not None and findings.spec.tree is not None:  # the engine's tree, per depth
                data["tree"] = {"shape": findings.spec.tree.to_dict()} | findings.tree.to_dict()
                cost_ratio = machine.get("cost_ratio")
                if cost_ratio is not None:  # the tree's advice by its own model, beside the chain's keys
                    data["tree"]["advice"] = findings.advice(cost_ratio)[-1].to_dict()
            data["verdict"] = findings.verdict_list()
        data[key] = value
    if findings.gates:
        data["gates"] = [
            {"option": GATE_OPTIONS[gate.metric], "metric": gate.metric, "threshold": gate.threshold}
            | {"value": gate.value, "passed": gate.passed}
            for gate in findings.gates
        ]
    if findings.comparison is not None:
        data["comparison"] = replace(findings.comparison, warnings=tuple(warnings)).to_dict(warning_text)
    return data


def _provenance(options: AuditOptions, sources: list[Source], fields: FieldSpec, plan: Plan) -> Provenance:
    """What the saved summary was made of: every source read, and the settings that changed its numbers.

    The sampler is tested for the view whenever r is logged, but its tally is saved only with
    --check-sampler: the saved summary's setting is the option's.
    """
    from msgspec.structs import replace

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
    from specaccept_cli.read.formats import Kind
    from specaccept_cli.read.sources import open_source

    for source in sources:
        if not (source.is_stdin or source.can_reopen):  # peeking at stdin consumes nothing; at a pipe, it would
            continue
        with open_source(source, options.input_format) as opened:
            if opened.kind is not Kind.RUNS:
                raise UsageError(_no_records(f"{source.name} is {opened.format} output", str(options.output)))


def _refuse_engine_output_read(summary: Summary, options: AuditOptions) -> None:
    """After the read: engine output that only reading could tell (through a pipe given as a path) is refused too."""
    if summary.engine is not None:
        formats = ", ".join(summary.engine.formats) or "engine"
        raise UsageError(_no_records(f"{formats} output was read", str(options.output)))


def _no_records(what: str, output: str) -> str:
    return (
        f"{what}: engine metrics hold interval counters, not runs, so -o {output} has no per-run records "
        "to write; use -o table, json or markdown"
    )


@contextlib.contextmanager
def _quarantine_file(path: str | None) -> Iterator[CheckedOutput | None]:
    """The quarantine file, written beside its final path and renamed into place when the audit ends."""
    if path is None:
        yield None
        return
    with output_file(path, "quarantine file") as handle:
        yield handle


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


def _read_request(
    options: AuditOptions, sources: list[Source], fields: FieldSpec, plan: Plan, quarantine: CheckedOutput | None
) -> ReadRequest:
    """What the audit reads and how: the one request every reading path (here, a pool, a cluster) takes."""
    from specaccept_cli.pipeline.request import ReadRequest

    return ReadRequest(
        tuple(sources),
        fields,
        plan,
        jobs=options.jobs,
        scheduler=options.scheduler,
        on_error=options.on_error,
        quarantine=cast("IO[bytes] | None", quarantine),  # the error policy only writes to it
        input_format=options.input_format,
        max_line_bytes=options.max_line_bytes,
        draft_length=options.draft_length,
        keep_duplicate_lines=options.keep_duplicate_lines,
        storage=_storage(options),
    )


def _read_on_cluster(request: ReadRequest, sink: RunSink | None) -> Summary:
    """The same summary from a Dask cluster; per-run records and quarantined lines come back in input order.

    (The table's preview of runs comes back inside the summary, bounded: `Summary.first_runs`.)
    The core's errors name no option; here they are told in the command's words.
    """
    from specaccept_cli.errors import ExtraMissing, OneProcessOnly
    from specaccept_cli.pipeline import distributed

    assert request.scheduler is not None
    try:
        with contextlib.ExitStack() as stack:
            try:
                client = stack.enter_context(distributed.connect(request.scheduler))
            except ExtraMissing:
                raise
            except UsageError as exc:  # an address that is not one (`local:none`)
                raise UsageError(f"--scheduler {exc}") from None
            return distributed.summarise(request, client=client, sink=sink)
    except ExtraMissing as exc:
        raise UsageError(f"--scheduler needs Dask: pip install 'specaccept[{exc.extra}]'") from None
    except OneProcessOnly as exc:
        raise UsageError(f"{exc}; run without --scheduler") from None


def write_report(path: str, findings: Findings, cost_ratio: float | None, sources: Sequence[str]) -> int:
    """Render the report of the findings and write it atomically to `path`; the bytes written."""
    from specaccept_cli.views.html import render_report

    page = render_report(findings, sources, cost_ratio).encode()
    write_file(path, page)
    return len(page)
