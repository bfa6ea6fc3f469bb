"""The summary, gates and baseline comparison as GitHub-flavoured markdown (`-o markdown`, `--github`).

No rich here: markdown goes to a file or a CI step summary, and renders the same rows as the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from specaccept_cli.summary.windows import MIN_DRIFT_WINDOWS
from specaccept_cli.text import safe_text
from specaccept_cli.views import rows as shared

if TYPE_CHECKING:
    from specaccept_cli.verdict import Findings
    from specaccept_cli.verdict.checks import Comparison

# `<` and `&` could open HTML or an entity; `|` ends a cell; a backslash or backtick could undo the rest.
_MARKDOWN_ESCAPES = str.maketrans(
    {"|": "\\|", "<": "&lt;", "&": "&amp;", "\\": "\\\\", "`": "\\`", "[": "\\[", "]": "\\]", "!": "\\!"}
)


def markdown_cell(text: str) -> str:
    """A table cell that cannot break the table or inject HTML: control characters shown, pipes escaped."""
    return safe_text(text).translate(_MARKDOWN_ESCAPES)


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()) -> str:
    header = "| " + " | ".join(markdown_cell(name) for name in columns) + " |"
    rule = "|" + "|".join("--:" if name in right else "---" for name in columns) + "|"
    body = ["| " + " | ".join(markdown_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join([header, rule, *body])


def markdown_report(
    findings: Findings | None,
    comparison: Comparison | None = None,
    words: shared.Words = shared.entry_text,
    gate_names: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The findings (their headline and verdict, tables, gates and baseline comparison) as GitHub-flavoured
    markdown, ending with a newline; a bare `comparison` (two saved summaries, with its `notes`) without."""
    parts = []
    if findings is not None:
        summary, numbers = findings.summary, findings.numbers
        comparison = findings.comparison
        parts += [
            "### specaccept",
            "\n".join(
                f"- **{label}**: " + " · ".join(markdown_cell(_text(part)) for part in cells)
                for label, cells in shared.headline_rows(findings, words)
            ),
            "### Acceptance",
            markdown_table(
                ("metric", "value", "meaning"),
                shared.summary_rows(summary, numbers),
                right=("value",),
            ),
            shared.ALPHA_CAPTION,
        ]
        if summary.errors:
            rows = [
                (f"{error.source}" + ("" if error.line is None else f":{error.line}"), error.message)
                for error in summary.errors
            ]
            skipped = summary.skipped_rows + summary.skipped_sources
            more = skipped - len(rows)
            parts += [
                "### Skipped input",
                markdown_table(("source:line", "problem"), rows),
                *([f"… and {more:,} more (the summary keeps the first {len(rows)})."] if more > 0 else []),
            ]
        parts += _markdown_audits(findings)
        if len(findings.windows) >= MIN_DRIFT_WINDOWS:
            parts += ["### Over the log", shared.drift_line(findings)[1]]
        if findings.gates:
            parts += [
                "### Gates",
                markdown_table(
                    shared.GATE_COLUMNS, shared.gate_rows(findings.gates, gate_names), right=("threshold", "value")
                ),
            ]
    if comparison is not None:
        numeric = ("baseline", "current", "change", "z", "p", "Holm p")
        if findings is not None:
            notes = [words(entry) for entry in findings.entries("baseline") if entry.status == "warn"]
        parts += [
            "### Baseline comparison",
            markdown_table(shared.COMPARISON_COLUMNS, shared.comparison_rows(comparison), right=numeric),
            shared.comparison_rule(comparison),
            *(f"**Warning:** {markdown_cell(note)}" for note in notes),
        ]
    return "\n\n".join(parts) + "\n"


def _markdown_audits(findings: Findings) -> list[str]:
    """The server audits as markdown, so a CI step summary shows why --max-mismatches or --check-sampler failed."""
    parts: list[str] = []
    for table in shared.audit_tables(findings):
        if table.heading is not None:
            parts.append(f"### {table.heading}")
        rows = [[_text(cell) for cell in row.cells] for row in table.rows]
        parts.append(markdown_table(table.columns, rows, right=table.right))
    return parts


def _text(cell: shared.Cell) -> str:
    """A cell as markdown shows it: a marked cell's text alone."""
    return cell if isinstance(cell, str) else cell.text
