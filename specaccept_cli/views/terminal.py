"""Summary -> Rich renderables and text. Functions return renderables; the command prints once.

Every string that came from data (source names, ids) passes through `data_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from specaccept_cli.checks import Comparison, GateResult
from specaccept_cli.read.sources import Source
from specaccept_cli.summary import formulas
from specaccept_cli.summary.conventions import DEFINITIONS, WHY_THEY_DIFFER
from specaccept_cli.summary.estimates import CONSISTENT_Z, Estimates, estimate
from specaccept_cli.summary.server import RULES
from specaccept_cli.summary.state import Summary
from specaccept_cli.text import safe_text

MAX_GROUP_ROWS = 50  # groups shown in the table view (all are in -o json), largest first
BAR_WIDTH = 40

ALPHA_CAPTION = (
    "alpha = accepted/examined, the chance a tested token is kept (tokens after a rejection are never tested, "
    "so accepted/drafted understates it); tokens per pass = a + 1 per target pass, averaged."
)


class QuietPipeConsole(Console):
    """A Console that lets a closed pipe (`| head`) reach the command's handler instead of exiting 1.

    Emoji codes are off: a file or group named `:fire:` is text, not a picture.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(emoji=False, **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def data_text(value: object) -> str:
    """A value from the data, safe for Rich markup, the terminal and CI logs."""
    return escape(safe_text(value))


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
    # The line has its own column: a folded "source:line" cell could read as another line number.
    table.add_column("source", overflow="fold")
    for name in ("line", "k", "accepted", "emitted"):
        table.add_column(name, justify="right")
    for source, line, k, a in preview.rows:
        table.add_row(data_text(source), str(line), str(k), str(a), str(a + 1))
    more = preview.total - len(preview.rows)
    if more > 0:
        note = Text(f"… and {more:,} more run{'s' if more != 1 else ''} (--max-rows to show more)", style="dim")
        return Group(table, note)
    return table


def fmt_interval(interval: tuple[float, float] | None) -> str:
    return "—" if interval is None else f"[{interval[0]:.4f}, {interval[1]:.4f}]"


def summary_view(
    summary: Summary, numbers: Estimates, cost_ratio: float | None = None, conventions: bool = False
) -> RenderableType:
    """Every aggregate view of one summary, in reading order; the command prints it once."""
    parts: list[RenderableType] = [
        summary_table(summary, numbers),
        Text(ALPHA_CAPTION, style="dim"),
        iid_verdict(numbers),
    ]
    if summary.max_k:
        parts += [per_position_table(numbers), histogram_chart(numbers)]
    if cost_ratio is not None:
        parts.append(cost_table(numbers, cost_ratio))
    if conventions:
        parts.append(conventions_table(numbers))
    if summary.groups is not None:
        parts.append(groups_table(summary, cost_ratio))
    return Group(*parts)


def summary_table(summary: Summary, numbers: Estimates) -> Table:
    table = Table(title="Acceptance", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    for row in summary_rows(summary, numbers):
        table.add_row(*row)
    return table


def summary_rows(summary: Summary, numbers: Estimates) -> list[tuple[str, str, str]]:
    """(metric, formatted value, meaning): the rows every summary view shows (Rich table, markdown)."""
    rows = [
        ("runs", f"{numbers.runs:,}", "target passes (drafted runs)"),
        ("drafted tokens", f"{numbers.drafted_tokens:,}", "sum of k"),
        ("accepted tokens", f"{numbers.accepted_tokens:,}", "sum of a"),
        ("examined tokens", f"{numbers.examined_tokens:,}", "tokens actually tested: a + 1, or k if all kept"),
        ("alpha", fmt_rate(numbers.alpha), "accepted / examined: per-token acceptance"),
        ("alpha 95% interval", fmt_interval(numbers.alpha_ci), "delta method over runs (tokens of a run correlate)"),
        ("expected alpha", fmt_rate(numbers.expected_alpha), "mean of min(1, p/q) over drafted tokens (r-free)"),
        ("acceptance rate", fmt_rate(numbers.acceptance_rate), "accepted / drafted (vLLM's number)"),
        ("mean accepted", fmt_rate(numbers.mean_accepted), "a per run"),
        ("tokens per pass", fmt_rate(numbers.tokens_per_pass), "(accepted + runs) / runs"),
        (
            "  predicted (i.i.d.)",
            fmt_rate(numbers.tokens_per_pass_predicted),
            "mean over runs of (1 - alpha^(k+1)) / (1 - alpha)",
        ),
    ]
    if summary.skipped_rows or summary.skipped_sources:
        rows.append(("skipped rows", f"{summary.skipped_rows:,}", "bad rows left out (--on-error skip)"))
        if summary.skipped_sources:
            rows.append(("skipped sources", f"{summary.skipped_sources:,}", "sources abandoned (unreadable)"))
    return rows


def skipped_table(summary: Summary) -> RenderableType:
    """What `--on-error skip` left out: the first errors kept in the summary, for stderr."""
    skipped, sources = summary.skipped_rows, summary.skipped_sources
    parts = []
    if skipped or not sources:
        parts.append(f"{skipped:,} bad row{'s' if skipped != 1 else ''}")
    if sources:
        parts.append(f"{sources:,} unreadable source{'s' if sources != 1 else ''}")
    title = "Skipped " + " and ".join(parts)
    table = Table(title=title, title_justify="left")
    table.add_column("source:line", overflow="fold")
    table.add_column("problem", overflow="fold")
    for error in summary.errors:
        where = data_text(error.source) + ("" if error.line is None else f":{error.line}")
        table.add_row(where, data_text(error.message))
    shown = len(summary.errors)
    if shown < skipped + sources:
        note = Text(f"… and {skipped + sources - shown:,} more (the summary keeps the first {shown})", style="dim")
        return Group(table, note)
    return table


def fmt_change(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2%}"


def fmt_z(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def fmt_p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def comparison_rule(comparison: Comparison) -> str:
    """The rule in one sentence (our own text: used as is in markdown, so no `<`, `|` or backticks)."""
    floor = 1 - comparison.max_drop
    return (
        f"z = standard errors (over runs) of current above the tolerated floor {floor:g} x baseline; "
        f"p = one-sided p-value of 'current >= floor'; regressed when p is below {comparison.significance:g}, "
        f"i.e. the drop exceeds --max-drop {comparison.max_drop:g} beyond noise."
    )


def comparison_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    """(metric, baseline, current, change, z, p, verdict) for every compared metric."""
    return [
        (
            row.label,
            fmt_rate(row.baseline),
            fmt_rate(row.current),
            fmt_change(row.change),
            fmt_z(row.z),
            fmt_p(row.p),
            row.verdict,
        )
        for row in comparison.metrics
    ]


COMPARISON_COLUMNS = ("metric", "baseline", "current", "change", "z", "p", "verdict")


def comparison_view(comparison: Comparison) -> RenderableType:
    table = Table(title="Baseline comparison", title_justify="left")
    for name in COMPARISON_COLUMNS:
        table.add_column(name, justify="left" if name in ("metric", "verdict") else "right")
    styles = {"ok": "green", "regressed": "bold red", "untestable": "yellow"}
    for row, cells in zip(comparison.metrics, comparison_rows(comparison)):
        table.add_row(*cells[:-1], Text(cells[-1], style=styles[row.verdict]))
    return Group(table, Text(comparison_rule(comparison), style="dim"))


def gate_rows(results: Sequence[GateResult]) -> list[tuple[str, str, str, str]]:
    return [
        (result.option, f"{result.threshold:g}", fmt_rate(result.value), "passed" if result.passed else "failed")
        for result in results
    ]


GATE_COLUMNS = ("gate", "threshold", "value", "result")


def gates_view(results: Sequence[GateResult]) -> RenderableType:
    table = Table(title="Gates", title_justify="left")
    for name in GATE_COLUMNS:
        table.add_column(name, justify="right" if name in ("threshold", "value") else "left")
    for result, cells in zip(results, gate_rows(results)):
        table.add_row(*cells[:-1], Text(cells[-1], style="green" if result.passed else "bold red"))
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
            examples.add_column("source", overflow="fold")
            for name in ("line", "k", "reported", "recomputed"):
                examples.add_column(name, justify="right")
            examples.add_column("explained by", min_width=len("no-prefix-break,"))
            for example in reported.examples[:SHOWN_EXAMPLES]:
                examples.add_row(
                    data_text(example.source),
                    str(example.line),
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


# --- markdown (GitHub-flavoured) ---------------------------------------------------------

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
    summary: Summary | None,
    numbers: Estimates | None = None,
    gates: Sequence[GateResult] = (),
    comparison: Comparison | None = None,
) -> str:
    """The summary, gate results and baseline comparison as GitHub-flavoured markdown (ends with a newline)."""
    parts = []
    if summary is not None:
        parts += [
            "### Acceptance",
            markdown_table(
                ("metric", "value", "meaning"),
                summary_rows(summary, numbers or estimate(summary)),
                right=("value",),
            ),
            ALPHA_CAPTION,
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
        parts += _markdown_audits(summary)
    if gates:
        parts += ["### Gates", markdown_table(GATE_COLUMNS, gate_rows(gates), right=("threshold", "value"))]
    if comparison is not None:
        numeric = ("baseline", "current", "change", "z", "p")
        parts += [
            "### Baseline comparison",
            markdown_table(COMPARISON_COLUMNS, comparison_rows(comparison), right=numeric),
            comparison_rule(comparison),
        ]
    return "\n\n".join(parts) + "\n"


def _markdown_audits(summary: Summary) -> list[str]:
    """The server audits as markdown, so a CI step summary shows why --max-mismatches or --check-sampler failed."""
    parts: list[str] = []
    reported = summary.reported
    if reported is not None:
        rows = [("compared", f"{reported.runs:,}", "runs with a reported count")]
        rows += [("mismatches", f"{reported.mismatches:,}", "reported != recomputed")]
        rows += [
            (item["rule"], f"{item['explains']:,}", f"server {RULES[item['rule']]}") for item in reported.diagnosis()
        ]
        rows += [("unexplained", f"{reported.unexplained:,}", "no known faulty rule reproduces the count")]
        parts += ["### Reported counts", markdown_table(("check", "runs", "meaning"), rows, right=("runs",))]
        if reported.examples:
            examples = [
                (
                    m.source,
                    str(m.line),
                    str(m.k),
                    str(m.reported),
                    str(m.recomputed),
                    ", ".join(m.rules) or "unexplained",
                )
                for m in reported.examples[:SHOWN_EXAMPLES]
            ]
            columns = ("source", "line", "k", "reported", "recomputed", "explained by")
            parts += [markdown_table(columns, examples, right=("line", "k", "reported", "recomputed"))]
    sampler = summary.sampler
    if sampler is not None:
        rows = []
        for name, result in (
            ("calibration (z)", sampler.calibration()),
            ("r uniformity (KS D)", sampler.r_uniformity()),
        ):
            verdict = "no data" if result.ok is None else "ok" if result.ok else f"fails at {sampler.significance:g}"
            rows.append((name, _number(result.statistic), _number(result.p_value), verdict))
        parts += [
            "### Sampler health",
            markdown_table(("test", "statistic", "p-value", "verdict"), rows, right=("statistic", "p-value")),
        ]
    return parts


def iid_verdict(summary: Estimates) -> Text:
    """One line: does one per-token probability explain the observed tokens per pass?"""
    check = summary.iid_check
    if check is None:
        reason = "at least two runs" if summary.runs < 2 else "examined tokens (every draft here is empty)"
        return Text(f"i.i.d. check: needs {reason}.", style="dim")
    z = check.z
    z_text = "inf" if z is None else f"{z:+.1f}"
    detail = f"observed - predicted = {check.difference:+.4f} tokens per pass, z = {z_text}"
    if check.consistent:
        return Text(f"i.i.d. model explains the logs: {detail} (|z| <= {CONSISTENT_Z:g}).", style="green")
    return Text(
        f"i.i.d. model does NOT explain the logs: {detail} (|z| > {CONSISTENT_Z:g}); acceptance depends on "
        "the position or the context (see the per-position rates).",
        style="bold red",
    )


def per_position_table(summary: Estimates) -> Table:
    table = Table(title="Per position", title_justify="left", caption_justify="left")
    for name in ("position", "drafts", "reached", "accepted", "rate", "unconditional"):
        table.add_column(name, justify="right")
    for row in summary.per_position:
        table.add_row(
            str(row.position),
            f"{row.drafts:,}",
            f"{row.reached:,}",
            f"{row.accepted:,}",
            fmt_rate(row.rate),
            fmt_rate(row.unconditional_rate),
        )
    table.caption = (
        "rate = accepted / reached (conditional, EAGLE's); unconditional = accepted / drafts (vLLM's). "
        "Under the i.i.d. model every rate is alpha."
    )
    return table


def histogram_chart(summary: Estimates) -> Table:
    """Runs by accepted length as horizontal bars (the widest bar is BAR_WIDTH cells)."""
    histogram = summary.accepted_histogram
    largest = max(histogram.values(), default=0)
    runs = summary.runs
    table = Table(title="Accepted length", title_justify="left", box=None, pad_edge=False)
    table.add_column("a", justify="right")
    table.add_column("runs", justify="right")
    table.add_column("share", justify="right")
    table.add_column("", no_wrap=True)
    for accepted, count in histogram.items():
        cells = round(BAR_WIDTH * count / largest) if largest else 0
        bar = "█" * cells if cells or not count else "▏"
        table.add_row(accepted, f"{count:,}", fmt_rate(count / runs if runs else None, 3), bar)
    return table


def cost_table(summary: Estimates, cost_ratio: float) -> RenderableType:
    """Observed speedup, and the i.i.d. model's tokens per pass and speedup for k around the best."""
    alpha = summary.alpha
    speedup = summary.speedup(cost_ratio)
    head = Text(
        f"Cost ratio c = {cost_ratio:g}: observed speedup sum(a + 1) / sum(k c + 1) = {fmt_rate(speedup)}",
    )
    if alpha is None:
        return head
    best = formulas.optimal_k(alpha, cost_ratio)
    table = Table(title=f"Draft length at alpha = {alpha:.4f}, c = {cost_ratio:g}", title_justify="left")
    for name in ("k", "tokens per pass", "speedup", ""):
        table.add_column(name, justify="right")
    for k in range(max(1, best - 3), min(formulas.K_MAX, best + 3) + 1):
        mark = "best" if k == best else ""
        table.add_row(
            str(k),
            f"{formulas.expected_tokens_per_pass(alpha, k):.4f}",
            f"{formulas.expected_speedup(alpha, k, cost_ratio):.4f}",
            mark,
            style="bold" if k == best else None,
        )
    return Group(head, table)


def conventions_table(summary: Estimates) -> RenderableType:
    """Each engine's numbers on these same runs, beside ours."""
    conventions = summary.conventions
    table = Table(title="What each engine would report", title_justify="left")
    table.add_column("engine")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("definition", style="dim")
    table.add_row("specaccept", "alpha", fmt_rate(summary.alpha), "accepted / examined")
    for engine, metrics in conventions.items():
        for metric, value in metrics.items():
            shown = ", ".join(fmt_rate(v, 3) for v in value) if isinstance(value, list) else fmt_rate(value)
            table.add_row(engine, metric, shown, DEFINITIONS.get((engine, metric), ""))
    return Group(table, Text(WHY_THEY_DIFFER, style="dim"))


def groups_table(summary: Summary, cost_ratio: float | None = None) -> RenderableType:
    """One row per group (largest first, at most MAX_GROUP_ROWS); group keys are data, escaped."""
    groups = summary.groups or {}
    table = Table(title=f"By {data_text(summary.group_by or '')}", title_justify="left")
    table.add_column("group", overflow="fold")
    for name in ("runs", "alpha", "95% interval", "accept rate", "tokens/pass", "predicted"):
        table.add_column(name, justify="right")
    if cost_ratio is not None:
        table.add_column("speedup", justify="right")
    table.add_column("i.i.d.?", justify="right")
    ordered = sorted(groups.items(), key=lambda item: (-item[1].runs, item[0]))
    for key, state in ordered[:MAX_GROUP_ROWS]:
        group = estimate(state)  # only the groups shown: there may be a great many
        row = [
            data_text(key),
            f"{group.runs:,}",
            fmt_rate(group.alpha),
            fmt_interval(group.alpha_ci),
            fmt_rate(group.acceptance_rate),
            fmt_rate(group.tokens_per_pass),
            fmt_rate(group.tokens_per_pass_predicted),
        ]
        if cost_ratio is not None:
            row.append(fmt_rate(group.speedup(cost_ratio)))
        check = group.iid_check
        row.append("—" if check is None else "fits" if check.consistent else "[red]misfit[/]")
        table.add_row(*row)
    table.caption = f"i.i.d.? fits when |observed - predicted tokens per pass| <= {CONSISTENT_Z:g} standard errors."
    table.caption_justify = "left"
    more = len(ordered) - MAX_GROUP_ROWS
    if more > 0:
        return Group(table, Text(f"… and {more:,} more groups (-o json has them all)", style="dim"))
    return table


def expect_table(rows: Sequence[dict[str, float]], best_k: int | None, optimal_k: int | None) -> RenderableType:
    """The calculator's rows; the best listed k (by speedup) is marked."""
    with_speedup = any("speedup" in row for row in rows)
    table = Table(title="Expected (i.i.d. model)", title_justify="left")
    for name in ("alpha", "k", "tokens per pass", *(("speedup", "") if with_speedup else ())):
        table.add_column(name, justify="right")
    for row in rows:
        cells = [f"{row['alpha']:g}", str(row["k"]), f"{row['tokens_per_pass']:.4f}"]
        best = row["k"] == best_k
        if with_speedup:
            cells += [f"{row['speedup']:.4f}", "best" if best else ""]
        table.add_row(*cells, style="bold" if best else None)
    if optimal_k is None:
        note = "Without --cost-ratio a longer draft always yields more tokens per pass; give it to find the best k."
    else:
        note = f"Best k in 1..{formulas.K_MAX} at this alpha and cost ratio: {optimal_k}."
    return Group(table, Text(note, style="dim"))


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
