"""Summary -> Rich renderables and text. Functions return renderables; the command prints once.

Every string that came from data (source names, ids) passes through `data_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from specaccept_cli.audit import RULES
from specaccept_cli.sources import Source
from specaccept_cli.summary import Summary
from specaccept_cli.text import visible

ALPHA_CAPTION = (
    "alpha = accepted/examined, the chance a tested token is kept (tokens after a rejection are never tested, "
    "so accepted/drafted understates it); tokens per pass = a + 1 per target pass, averaged."
)


def data_text(value: object) -> str:
    """A value from the data, safe for Rich markup and the terminal."""
    return escape(visible(value if isinstance(value, str) else str(value)))


def fmt_rate(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@dataclass
class RunPreview:
    """The first `limit` runs, kept for the table view; everything after is only counted."""

    limit: int
    rows: list[tuple[str, int, int, int]] = field(default_factory=list)
    total: int = 0

    def add(self, source: str, lines: Sequence[int], ks: Sequence[int], accepted: Sequence[int]) -> None:
        room = self.limit - len(self.rows)
        if room > 0:
            self.rows += [(source, line, k, a) for line, k, a in zip(lines[:room], ks[:room], accepted[:room])]
        self.total += len(lines)


def runs_table(preview: RunPreview) -> RenderableType:
    table = Table(title="Runs", title_justify="left")
    table.add_column("source:line", overflow="fold")
    for name in ("k", "accepted", "emitted"):
        table.add_column(name, justify="right")
    for source, line, k, a in preview.rows:
        table.add_row(f"{data_text(source)}:{line}", str(k), str(a), str(a + 1))
    more = preview.total - len(preview.rows)
    if more > 0:
        note = Text(f"… and {more:,} more run{'s' if more != 1 else ''} (--max-rows to show more)", style="dim")
        return Group(table, note)
    return table


def summary_view(summary: Summary) -> RenderableType:
    """The aggregate table, with one line under it on what alpha and tokens per pass mean."""
    return Group(summary_table(summary), Text(ALPHA_CAPTION, style="dim"))


def summary_table(summary: Summary) -> Table:
    table = Table(title="Acceptance", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    rows = [
        ("runs", f"{summary.runs:,}", "target passes (drafted runs)"),
        ("drafted tokens", f"{summary.drafted_tokens:,}", "sum of k"),
        ("accepted tokens", f"{summary.accepted_tokens:,}", "sum of a"),
        ("examined tokens", f"{summary.examined_tokens:,}", "tokens actually tested: a + 1, or k if all kept"),
        ("alpha", fmt_rate(summary.alpha), "accepted / examined: per-token acceptance"),
        ("acceptance rate", fmt_rate(summary.acceptance_rate), "accepted / drafted (vLLM's number)"),
        ("mean accepted", fmt_rate(summary.mean_accepted), "a per run"),
        ("tokens per pass", fmt_rate(summary.tokens_per_pass), "(accepted + runs) / runs"),
    ]
    for row in rows:
        table.add_row(*row)
    return table


SHOWN_EXAMPLES = 10


def audit_views(summary: Summary) -> list[RenderableType]:
    """Tables for the audits that were asked for: reported counts and sampler health."""
    views: list[RenderableType] = []
    reported = summary.reported
    if reported is not None:
        table = Table(
            title="Reported counts (a mismatch may be reproduced exactly by several faulty rules)", title_justify="left"
        )
        table.add_column("check")
        table.add_column("runs", justify="right")
        table.add_column("meaning", style="dim")
        table.add_row("compared", f"{reported.runs:,}", "runs with a reported count")
        verdict = "[green]0[/]" if reported.mismatches == 0 else f"[red]{reported.mismatches:,}[/]"
        table.add_row("mismatches", verdict, "reported != recomputed")
        for item in reported.diagnosis():
            table.add_row(f"  {item['rule']}", f"{item['explains']:,}", f"server {RULES[item['rule']]}")
        table.add_row("  unexplained", f"{reported.unexplained:,}", "no known faulty rule reproduces the count")
        views.append(table)
        if reported.examples:
            examples = Table(title="First mismatching runs", title_justify="left")
            examples.add_column("source:line", no_wrap=True)
            for name in ("k", "reported", "recomputed"):
                examples.add_column(name, justify="right")
            examples.add_column("explained by")
            for example in reported.examples[:SHOWN_EXAMPLES]:
                examples.add_row(
                    f"{data_text(example.source)}:{example.line}",
                    str(example.k),
                    str(example.reported),
                    str(example.recomputed),
                    ", ".join(example.rules) or "[dim]unexplained[/]",
                )
            more = reported.mismatches - min(SHOWN_EXAMPLES, len(reported.examples))
            note = f"… and {more:,} more (the first {len(reported.examples)} are in -o json)" if more > 0 else ""
            views.append(Group(examples, Text(note, style="dim")) if note else examples)
    sampler = summary.sampler
    if sampler is not None:
        table = Table(title="Sampler health", title_justify="left")
        for name, justify in (("test", "left"), ("statistic", "right"), ("p-value", "right"), ("verdict", "left")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        tests = (
            ("calibration (z)", sampler.calibration(), "accepted vs sum of min(1, p/q) at examined tokens"),
            ("r uniformity (KS D)", sampler.r_uniformity(), "logged r against U[0, 1)"),
        )
        for name, result, what in tests:
            if result.ok is None:
                verdict = "[dim]no data[/]"
            else:
                verdict = "[green]ok[/]" if result.ok else f"[red]fails at {sampler.significance:g}[/]"
            table.add_row(name, _number(result.statistic), _number(result.p_value), f"{verdict} [dim]{what}[/]")
        views.append(table)
    return views


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def summary_json(summary: Summary) -> bytes:
    return orjson.dumps(summary.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def explain_table(p: Sequence[float], q: Sequence[float], r: Sequence[float], accepted: int) -> RenderableType:
    table = Table(title="Accept test, token by token", title_justify="left")
    for name in ("#", "p", "q", "threshold", "r", "kept?"):
        table.add_column(name, justify="right")
    for i, (p_i, q_i, r_i) in enumerate(zip(p, q, r)):
        threshold = min(1.0, p_i / q_i)
        passes = r_i <= threshold
        if i < accepted:
            verdict = "[green]kept[/]"
        elif i == accepted:
            verdict = "[red]rejected[/]"
        else:
            verdict = "[dim]not examined" + (" (would pass)" if passes else "") + "[/]"
        table.add_row(str(i + 1), f"{p_i:g}", f"{q_i:g}", f"{threshold:.6g}", f"{r_i:g}", verdict)
    k = len(p)
    if k == 0:
        why = "Empty draft: nothing to test; the target pass still emits 1 token."
    elif accepted == k:
        why = f"All {k} drafted tokens kept; the target adds a bonus token: {k + 1} emitted."
    else:
        stop = accepted
        why = (
            f"Token {stop + 1} stopped the run: r = {r[stop]:g} > min(1, p/q) = {min(1.0, p[stop] / q[stop]):.6g}. "
            f"{accepted} accepted, {accepted + 1} emitted (the target resamples token {stop + 1})."
        )
    return Group(table, Text(why))


class RichProgress:
    """Progress on stderr: bytes read of the total for files, runs counted for stdin."""

    def __init__(self, console: Console, sources: list[Source]) -> None:
        sizes = [source.size for source in sources]
        self.total_bytes = sum(s for s in sizes if s is not None) if all(s is not None for s in sizes) else None
        self.done_before = 0  # bytes of the sources already finished
        self.current_size = 0
        self.runs = 0
        self.progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[runs]:,} runs"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("reading", total=self.total_bytes, runs=0)

    def __enter__(self) -> RichProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start_source(self, source: Source) -> None:
        self.done_before += self.current_size
        self.current_size = source.size or 0
        self.progress.update(self.task, description=f"reading {data_text(source.name)}")

    def advance(self, runs: int, position: int | None) -> None:
        self.runs += runs
        completed = None if position is None else self.done_before + position
        self.progress.update(self.task, completed=completed, runs=self.runs)
