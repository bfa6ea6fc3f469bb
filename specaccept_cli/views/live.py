"""The live view: one screen redrawn in place every period (never scrolling), drawn from a judged tick."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from specaccept_cli.text import safe_text
from specaccept_cli.views.format import number
from specaccept_cli.views.interval import moment
from specaccept_cli.views.rows import alpha_text, runs_text, tokens_per_pass_text
from specaccept_cli.views.timeline import BARS, bar_levels

if TYPE_CHECKING:
    from specaccept_cli.pipeline.live import Judged


LIVE_GROUPS = 8  # groups shown live, the largest first (the records carry every group the summary shows)


def _strip(values: list[float | None]) -> str:
    return "".join(" " if level is None else BARS[level] for level in bar_levels(values))


def live_view(judged: Judged, source: str) -> RenderableType:
    """Headline with its verdict, alpha over the recent periods, per-position rates, drift, every gate."""
    tick, total, current = judged.tick, judged.total, judged.interval
    problems = [entry for entry in judged.findings.verdict if entry.status != "ok"]
    if problems:
        verdict = Text()
        for number_, entry in enumerate(problems):
            style = "bold red" if entry.status == "fail" else "yellow"
            verdict.append(("" if number_ == 0 else "\n") + f"{entry.status}  {safe_text(entry.text)}", style=style)
    else:
        verdict = Text("ok   every check passes so far", style="bold green")
    title = Text.assemble(
        ("specaccept live ", "bold"),
        (safe_text(source), "cyan"),
        f"  period {tick.interval.index + 1}, up to {moment(tick.interval.end)}",
    )
    unit = (
        f"over {total.clusters:,} requests ({total.cluster_field})"
        if total.clusters is not None and total.cluster_field
        else "over runs"
    )
    head = Table.grid(padding=(0, 2))
    head.add_column(justify="right", style="bold")
    head.add_column()
    head.add_row("verdict", verdict)
    head.add_row("total", f"{runs_text(total)} runs  alpha {alpha_text(total)} {unit}")
    head.add_row("", f"tokens per pass {tokens_per_pass_text(total)}")
    head.add_row("this period", f"{runs_text(current)} runs  alpha {alpha_text(current)}")
    if judged.findings.summary.engine is not None and total.acceptance_rate is not None:
        # What the engine itself shows (vLLM's 'Avg Draft acceptance rate'): accepted / drafted, beside alpha.
        head.add_row("engine's rate", f"{total.acceptance_rate:.1%} accepted / drafted (the server's own figure)")
    alphas = list(judged.recent_alphas)
    shown = [value for value in alphas if value is not None]
    span = f"  {min(shown):.3f}..{max(shown):.3f}" if shown else ""
    head.add_row(f"last {len(alphas)}", _strip(alphas) + span)
    positions = [row for row in total.per_position if row.rate is not None][:16]
    if positions:
        head.add_row("per position", _strip([row.rate for row in positions]) + f"  positions 1..{len(positions)}")
    drift = judged.drift
    if drift is None:
        head.add_row("drift", "needs 3 periods with runs")
    else:
        style = "red" if judged.drifting else ""
        head.add_row("drift", Text(f"p = {drift.p_value:.3g} over {drift.windows} periods", style=style))
    for gate in judged.gates:
        if gate.inconclusive:
            mark = Text("undecided", style="yellow")  # bounds straddle the floor
        else:
            mark = Text("pass", style="green") if gate.passed else Text("FAIL", style="bold red")
        head.add_row(gate.label, Text.assemble(mark, f"  {number(gate.value)} vs {gate.threshold:g}"))
    if judged.skipped_rows:
        head.add_row("skipped", f"{judged.skipped_rows:,} bad rows (listed at the end)")
    parts: list[RenderableType] = [title, head]
    if judged.findings.groups:
        groups = Table(show_edge=False, pad_edge=False, box=None)
        for name in ("group", "runs", "alpha (95% interval)", "tokens per pass"):
            groups.add_column(name, justify="left" if name == "group" else "right")
        for name, numbers in judged.findings.groups[:LIVE_GROUPS]:
            groups.add_row(safe_text(name), runs_text(numbers), alpha_text(numbers), tokens_per_pass_text(numbers))
        hidden = len(judged.findings.groups) - LIVE_GROUPS + (judged.findings.other_groups or (0,))[0]
        if hidden > 0:
            groups.add_row(f"... {hidden:,} more", "", "", "")
        parts.append(groups)
    if tick.endpoints:
        endpoints = Table(show_edge=False, pad_edge=False, box=None)
        for name in ("endpoint", "state", "scrapes", "failed", "resets"):
            endpoints.add_column(name)
        for state in tick.endpoints:
            up = state.failures == 0 and state.scrapes > 0
            word = Text("up", style="green") if up else Text(safe_text(state.error or "no scrape yet"), style="red")
            endpoints.add_row(
                safe_text(state.url), word, str(state.scrapes), str(state.failed_total), str(state.resets)
            )
        parts.append(endpoints)
    for note in tick.notes[-3:]:
        parts.append(Text(safe_text(note), style="yellow"))
    return Group(*parts)
