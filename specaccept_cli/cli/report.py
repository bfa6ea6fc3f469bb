"""`specaccept report`: the audit as one self-contained HTML file (also `audit --html PATH`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from specaccept_cli.cli.audit import audit, run_audit, write_report
from specaccept_cli.cli.audit_options import AUDIT_OPTION_GROUPS, AuditOptions
from specaccept_cli.cli.options import FIRST_OPTIONS, GroupedCommand
from specaccept_cli.cli.output import check_writable, refuse_outputs_that_are_inputs

if TYPE_CHECKING:
    from specaccept_cli.verdict import Findings

# audit's options that mean nothing for a report: its own output, the table's rows, the per-run columns.
NOT_FOR_REPORTS = {"output", "html_path", "max_rows", "show_conventions", "id_fields", "full"}
# The eight a first report needs (audit's, less what a report has no use for).
REPORT_FIRST_OPTIONS = (
    "html_path",
    "on_error",
    "group_by",
    "cost_ratio",
    "min_alpha",
    "baseline",
    "summary_out",
    "summaries",
)


def _report(html_path: str, summaries: tuple[str, ...], **options: Any) -> None:
    """Audit INPUT... and write the HTML report to -o PATH; the checks exit 1 as in `audit`."""
    if summaries:
        if options["inputs"]:
            raise click.UsageError("give logs (INPUT...) or --summary files, not both")
        _refuse_unused_with_summaries()
        _report_of_summaries(html_path, summaries, options)
        return
    fixed: dict[str, Any] = {
        "output": None,  # nothing on stdout: the page is the report's output
        "html_path": None,
        "max_rows": 0,
        "show_conventions": False,
        "id_fields": (),
        "full": False,
    }
    check_writable(html_path, "HTML report")  # before the reading, as audit checks its outputs

    def page(findings: Findings, sources: Sequence[str]) -> None:
        _say_written(html_path, write_report(html_path, findings, options["cost_ratio"], sources))

    run_audit(AuditOptions(**options, **fixed), renderers=[page], outputs=[("-o", html_path)])


# What a report of saved summaries uses besides them: the rest of audit's options read or check logs.
USED_WITH_SUMMARIES = frozenset(
    ("html_path", "summaries", "inputs", "cost_ratio", "baseline", "max_drop", "significance", "tree", "max_groups")
)


def _refuse_unused_with_summaries() -> None:
    """A usage error naming every option given on the command line that a report of saved summaries would not
    use: an option silently ignored would look applied (`--summary-out`, a gate). One set in the environment
    (DASK_SCHEDULER_ADDRESS) is left alone: it is set for every command, not asked of this one."""
    from click.core import ParameterSource

    context = click.get_current_context()
    unused = [
        param.opts[0]
        for param in context.command.params
        if param.name not in USED_WITH_SUMMARIES
        and context.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE
    ]
    if unused:
        raise click.UsageError(
            f"{', '.join(unused)} {'has' if len(unused) == 1 else 'have'} no effect with --summary: a report of "
            "saved summaries is only drawn (`specaccept merge` adds them, applies gates and writes their sum)"
        )


def _report_of_summaries(html_path: str, paths: tuple[str, ...], options: dict[str, Any]) -> None:
    """The report of saved summaries, added as `merge` adds them (shards audited apart, on other machines).

    Only drawn: the findings' verdict colours the cards, but no check exits 1.
    """
    from specaccept_cli.summary.files import merge_summaries, read_summary_file, summary_of
    from specaccept_cli.verdict import GateSpec, conclude

    baseline = options["baseline"]
    refuse_outputs_that_are_inputs([("-o", html_path)], [*paths, *([baseline] if baseline else [])], stdout=False)
    check_writable(html_path, "HTML report")
    from specaccept_cli.text import shown_name

    merged = merge_summaries([(shown_name(path), read_summary_file(path)) for path in paths])
    summary = summary_of(merged, shown_name(" + ".join(paths)))
    baseline_summary = None if baseline is None else summary_of(read_summary_file(baseline), shown_name(baseline))
    spec = GateSpec(max_drop=options["max_drop"], significance=options["significance"], tree=options.get("tree"))
    findings = conclude(summary, baseline_summary, spec, max_groups=options["max_groups"])
    _say_written(html_path, write_report(html_path, findings, options["cost_ratio"], list(paths)))


def _say_written(path: str, size: int) -> None:
    """The one line a successful report prints (stderr: stdout stays empty), so a run is seen to have done something."""
    from specaccept_cli.text import visible

    click.echo(f"wrote the HTML report to {visible(path)} ({size:,} bytes)", err=True)


report = GroupedCommand(
    "report",
    option_groups=((FIRST_OPTIONS, REPORT_FIRST_OPTIONS), *AUDIT_OPTION_GROUPS[1:]),
    callback=_report,
    params=[
        click.Option(
            ["-o", "--output", "html_path"],
            required=True,
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="PATH",
            help="Where to write the HTML report (written atomically).",
        ),
        click.Option(
            ["--summary", "summaries"],
            multiple=True,
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="PATH",
            help="Draw the report from saved summaries (--summary-out of audits of shards) instead of logs; "
            "repeatable: they add up as `merge` adds them. Only drawn: no gate or check is applied.",
        ),
        *(param for param in audit.params if param.name not in NOT_FOR_REPORTS),
    ],
    short_help="Write the audit as one self-contained HTML file with plots.",
    help="""Audit INPUT... (as `audit` does, with the same options) and write one self-contained HTML
report: headline cards, plots with hover values, and what each engine would report.

The file runs no script and loads nothing (a Content-Security-Policy forbids both): attach it
to an incident or a pull request, or keep it as a CI artifact.

\b
Examples:
  specaccept report logs.jsonl.gz -o report.html
  specaccept report logs.parquet --group-by model --baseline main.json -o report.html
  specaccept report --summary shard-0.json --summary shard-1.json -o report.html""",
)
