"""`specaccept report`: the audit as one self-contained HTML file (also `audit --html PATH`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from specaccept_cli.cli.audit import AuditOptions, audit, run_audit
from specaccept_cli.cli.output import write_file

if TYPE_CHECKING:
    from specaccept_cli.checks import Comparison
    from specaccept_cli.summary.estimates import Estimates
    from specaccept_cli.summary.state import Summary

# audit's options that mean nothing for a report: its own output, the table's rows, the per-run columns.
NOT_FOR_REPORTS = {"output", "html_path", "max_rows", "show_conventions", "id_fields"}


def write_report(
    path: str,
    summary: Summary,
    numbers: Estimates,
    comparison: Comparison | None,
    cost_ratio: float | None,
    sources: Sequence[str],
) -> None:
    """Render the report and write it atomically to `path`."""
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
    write_file(path, render_report(summary, numbers, sources, baseline, cost_ratio).encode())


def _report(html_path: str, **options: Any) -> None:
    """Audit INPUT... and write the HTML report to -o PATH; the checks exit 1 as in `audit`."""
    fixed: dict[str, Any] = {
        "output": "html",
        "html_path": html_path,
        "max_rows": 0,
        "show_conventions": False,
        "id_fields": (),
    }
    run_audit(AuditOptions(**options, **fixed))


report = click.Command(
    "report",
    callback=_report,
    params=[
        click.Option(
            ["-o", "--output", "html_path"],
            required=True,
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="PATH",
            help="Where to write the HTML report (written atomically).",
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
  specaccept report logs.parquet --group-by model --baseline main.json -o report.html""",
)
