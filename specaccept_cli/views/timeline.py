"""Alpha over the log, for the terminal: one line of bars, one per window, and the drift verdict.

Windows whose 95% interval leaves out the whole-log alpha are drawn red and marked with `^` on the
line below (so the mark survives NO_COLOR and a log file).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from specaccept_cli.summary.clusters import ClusterTally
from specaccept_cli.summary.windows import WindowTally, describe_position, duration_text, excludes, window_estimates
from specaccept_cli.views.format import number
from specaccept_cli.views.rows import drift_line

BARS = "▁▂▃▄▅▆▇█"


def bar_levels(values: list[float | None]) -> list[int | None]:
    """Each value as one of len(BARS) levels between the smallest and the largest (None stays None)."""
    present = [value for value in values if value is not None]
    if not present:
        return [None for _ in values]
    low, high = min(present), max(present)
    span = high - low
    top = len(BARS) - 1
    return [None if value is None else (top if span == 0 else round(top * (value - low) / span)) for value in values]


def window_width_text(tally: WindowTally) -> str:
    if tally.unit == "runs":
        return f"{tally.width:,} runs in input order"
    return f"{duration_text(tally.width)} of {tally.time_field}"


def timeline_view(
    tally: WindowTally, alpha: float | None, significance: float = 0.01, clusters: ClusterTally | None = None
) -> RenderableType:
    """The bars, their range, the marks, and the drift test's verdict at `significance` (--significance);
    `clusters` (--cluster-field) makes the test cluster-robust."""
    rows = window_estimates(tally, clusters)
    title = Text(f"Alpha over the log ({len(rows)} windows of {window_width_text(tally)})", style="bold")
    if not rows:
        return Group(title, Text("no runs", style="dim"))
    levels = bar_levels([row.alpha for row in rows])
    bars, marks = Text(), Text()
    for row, level in zip(rows, levels):
        outside = excludes(row, alpha)
        bars.append(" " if level is None else BARS[level], style="red" if outside else "cyan")
        marks.append("^" if outside else " ")
    present = [row.alpha for row in rows if row.alpha is not None]
    scale = Text(
        f"from {describe_position(tally, rows[0].start)} to {describe_position(tally, rows[-1].end - 1)}; "
        f"alpha {number(min(present))} (▁) to {number(max(present))} (█); whole log {number(alpha)}; "
        "^ = window whose 95% interval excludes it",
        style="dim",
    )
    parts: list[RenderableType] = [title, bars]
    if marks.plain.strip():
        parts.append(marks)
    parts += [scale, drift_verdict(tally, significance, clusters)]
    return Group(*parts)


def drift_verdict(tally: WindowTally, significance: float, clusters: ClusterTally | None = None) -> Text:
    drifted, sentence = drift_line(tally, significance, clusters)
    return Text(sentence, style="dim" if drifted is None else "bold red" if drifted else "green")
