"""`specaccept report`: the audit as one self-contained HTML file (also `audit --html PATH`)."""

from __future__ import annotations

from typing import Any

import click

from specaccept_cli.cli.audit import AuditOptions, audit, run_audit

# audit's options that mean nothing for a report: its own output, the table's rows, the per-run columns.
NOT_FOR_REPORTS = {"output", "html_path", "max_rows", "show_conventions", "id_fields"}


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
