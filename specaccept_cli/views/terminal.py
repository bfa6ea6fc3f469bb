"""Summary -> Rich renderables. Functions return renderables; the command prints once.

The rows shared with markdown come from `rows.py`, numbers are formatted by `format.py`.
Every string that came from data (source names, ids) passes through `data_text`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specaccept_cli.rule.scalar import kept_flags, threshold
from specaccept_cli.summary import formulas
from specaccept_cli.summary.conventions import DEFINITIONS, WHY_THEY_DIFFER
from specaccept_cli.summary.estimates import Estimates
from specaccept_cli.summary.state import group_key
from specaccept_cli.text import safe_text
from specaccept_cli.verdict import skipped_phrase
from specaccept_cli.views import rows as shared
from specaccept_cli.views.format import MISSING, interval, number

if TYPE_CHECKING:
    from specaccept_cli.summary.advice import RuleAdvice
    from specaccept_cli.summary.first_runs import FirstRuns
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.verdict import Findings
    from specaccept_cli.verdict.checks import Comparison, GateResult

MAX_GROUP_ROWS = 1000  # groups shown in the table view, largest first; the rest are one "other" row
BAR_WIDTH = 40


class QuietPipeConsole(Console):
    """A Console that lets a closed pipe (`| head`) reach the command's handler instead of exiting 1.

    Emoji codes are off: a file or group named `:fire:` is text, not a picture.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(emoji=False, **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


TEXT_FLOOR = 6  # a text column is folded down to this width before a numeric column is touched


class FitTable(Table):
    """A Table whose numbers are never cut, however narrow the terminal.

    Rich shrinks every column evenly when a table is too wide, so `2,000` becomes `2,…`. Here the
    right-aligned (numeric) columns keep the width of their widest value and only text columns fold;
    a numeric header wraps at its spaces when that is needed, and when the numbers alone do not fit,
    the columns named in `drop` go, in that order (the least needed first).
    """

    def __init__(self, *args: Any, drop: Sequence[str] = (), **options: Any) -> None:
        super().__init__(*args, **options)
        self.drop = tuple(drop)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from Table.__rich_console__(self._fitted(console, options), console, options)

    def _fitted(self, console: Console, options: ConsoleOptions) -> Table:
        columns = list(self.columns)
        dropping = [name for name in self.drop if any(column.header == name for column in columns)]
        while True:
            table = copy.copy(self)
            table.columns = [copy.copy(column) for column in columns]
            for index, column in enumerate(table.columns):
                column._index = index
                if column.justify != "right" and column.overflow == "ellipsis":
                    column.overflow = "fold"  # text wraps, and a word too long for its column folds: nothing is cut
            if _fix_numeric_widths(table, console, options) or not dropping:
                return table
            name = dropping.pop(0)
            columns = [column for column in columns if column.header != name]


def _fix_numeric_widths(table: Table, console: Console, options: ConsoleOptions) -> bool:
    """Give the numeric columns fixed widths that fit `options.max_width`, if any do: their full header
    on one line, else the header wrapped at its spaces; False when even that does not fit."""
    unlimited = options.update_width(1 << 16)
    fixed = 0
    natural: dict[int, int] = {}
    tight: dict[int, int] = {}
    for index, column in enumerate(table.columns):
        padding = table._get_padding_width(index)
        cells = [Measurement.get(console, unlimited, cell) for cell in column.cells]
        header = Measurement.get(console, unlimited, column.header)
        widest = max((cell.maximum for cell in cells), default=0)
        if column.justify == "right":
            natural[index] = max(widest, header.maximum)
            tight[index] = max(max((cell.minimum for cell in cells), default=0), header.minimum)
            fixed += padding
        else:
            fixed += padding + min(max(widest, header.maximum), TEXT_FLOOR)
    room = options.max_width - table._extra_width - fixed
    for widths in (natural, tight):
        if sum(widths.values()) <= room:
            for index, width in widths.items():
                table.columns[index].width = width
            return True
    return False


def data_text(value: object) -> str:
    """A value from the data, safe for Rich markup, the terminal and CI logs."""
    return escape(safe_text(value))


def runs_table(runs: FirstRuns) -> RenderableType:
    """Each run's accepted length: every run of a small input, the first ones of a large one and how to get all.

    Runs of one source name it in the title (a long path in a column would fold every row in two); runs of
    several have a source column.
    """
    sources = list(dict.fromkeys(source for source, *_ in runs.rows))
    one = len(sources) == 1
    table = FitTable(title=None if one else "Runs", title_justify="left", drop=("emitted",))
    if not one:  # the line has its own column: a folded "source:line" cell could read as another line number
        table.add_column("source", overflow="fold")
    for name in ("line", "k", "accepted", "emitted"):
        table.add_column(name, justify="right")
    for name in runs.id_fields:  # last, as in the per-run records
        table.add_column(data_text(name), overflow="fold")
    for source, line, k, a, ids in runs.rows:
        shown = [data_text(group_key(value)) for value in ids] + [""] * (len(runs.id_fields) - len(ids))
        table.add_row(*(() if one else (data_text(source),)), str(line), str(k), str(a), str(a + 1), *shown)
    parts: list[RenderableType] = (
        [Text(f"Runs of {safe_text(sources[0])}", style="table.title"), table] if one else [table]
    )
    more = runs.more
    if more > 0:
        note = (
            f"… and {more:,} more run{'s' if more != 1 else ''}: -o jsonl or -o csv writes all (--max-rows N shows N)"
        )
        parts.append(Text(note, style="dim"))
    return Group(*parts)


def headline(rows: Sequence[shared.HeadlineRow]) -> RenderableType:
    """The answer in a compact panel: one label and one value per line, verdicts coloured."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, parts in rows:
        grid.add_row(label, " · ".join(_marked(part) for part in parts))
    return Panel(grid, title="specaccept", title_align="left", expand=False)


def summary_view(
    findings: Findings, cost_ratio: float | None = None, conventions: bool = False, full: bool = True
) -> RenderableType:
    """Every aggregate view of one summary, in reading order; the command prints it once.

    Not `full`: the first screen, the per-position strip alone (the headline has said the rest).
    """
    summary, numbers = findings.summary, findings.numbers
    parts: list[RenderableType] = []
    if full:
        parts += [summary_table(summary, numbers), Text(shared.ALPHA_CAPTION, style="dim"), iid_verdict(numbers)]
    if summary.max_k:
        parts += [per_position_table(numbers), histogram_chart(numbers)] if full else [position_strip(numbers)]
    if cost_ratio is not None:
        # A named tree's counts hold nodes, not a chain's k, and runs outside alpha are not in the counts: the
        # chain's table only where chain runs were counted, and each rule's advice by its own model.
        if findings.spec.tree is None and (numbers.runs or not findings.rules):
            parts.append(cost_table(numbers, cost_ratio))
        parts += [advice_table(advice) for advice in findings.advice(cost_ratio)]
    if conventions:
        parts.append(conventions_table(numbers))
    if summary.groups is not None:
        parts.append(groups_table(findings, cost_ratio))
    return Group(*parts)


def position_strip(numbers: Estimates) -> RenderableType:
    """Per position in one compact table: the conditional rate with its interval and the runs that reached it."""
    table = FitTable(title="Per position (--full: every table)", title_justify="left", box=None)
    for name in ("position", "reached", "rate", "95% interval"):
        table.add_column(name, justify="right")
    for row in numbers.per_position:
        table.add_row(str(row.position), f"{row.reached:,}", number(row.rate), interval(row.rate_ci))
    if not numbers.per_position and numbers.identified is not None and numbers.identified.step_positions:
        return step_positions_table(numbers)
    return table


def step_positions_table(numbers: Estimates) -> Table:
    """On input that bounds some units: per position over every step, exact, and the conditional rate's bounds."""
    table = FitTable(title="Per position, over every verify step", title_justify="left", caption_justify="left")
    for name in shared.STEP_POSITION_COLUMNS:
        table.add_column(name, justify="right")
    for cells in shared.step_position_rows(numbers):
        table.add_row(*cells)
    table.caption = shared.STEP_POSITION_CAPTION
    return table


def summary_table(summary: Summary, numbers: Estimates) -> Table:
    table = FitTable(title="Acceptance", title_justify="left", drop=("meaning",))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("meaning", style="dim")
    for row in shared.summary_rows(summary, numbers):
        table.add_row(*(data_text(cell) for cell in row))  # a cluster field's name comes from the data
    return table


def skipped_table(summary: Summary) -> RenderableType:
    """What `--on-error skip` left out: the first errors kept in the summary, for stderr."""
    skipped, sources = summary.skipped_rows, summary.skipped_sources
    title = "Skipped " + skipped_phrase(summary)
    table = FitTable(title=title, title_justify="left")
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


def comparison_view(comparison: Comparison) -> RenderableType:
    """The comparison, every column kept at any width: a row per metric where its words fit, else a column per
    metric (rows instead of columns), else a small table per metric."""
    rows = shared.comparison_rows(comparison)
    styles = {"ok": "green", "regressed": "bold red", "untestable": "yellow", "inconclusive": "yellow"}
    verdicts = [Text(cells[-1], style=styles[row.verdict]) for row, cells in zip(comparison.metrics, rows)]
    wide = Table(title="Baseline comparison", title_justify="left")
    for name in shared.COMPARISON_COLUMNS:
        wide.add_column(name, justify="left" if name in ("metric", "verdict") else "right")
    for cells, verdict in zip(rows, verdicts):
        wide.add_row(*cells[:-1], verdict)
    by_metric = Table(title="Baseline comparison", title_justify="left")
    by_metric.add_column("")
    for cells in rows:
        by_metric.add_column(cells[0], justify="right")
    for index, name in enumerate(shared.COMPARISON_COLUMNS[1:], start=1):
        by_metric.add_row(
            name, *(verdicts[row] if name == "verdict" else cells[index] for row, cells in enumerate(rows))
        )
    stacked = []
    for row, cells in enumerate(rows):
        one = Table(title="Baseline comparison" if row == 0 else None, title_justify="left")
        one.add_column("")
        one.add_column(cells[0], justify="right")
        for index, name in enumerate(shared.COMPARISON_COLUMNS[1:], start=1):
            one.add_row(name, verdicts[row] if name == "verdict" else cells[index])
        stacked.append(one)
    layouts = WordsFit(wide, by_metric, Group(*stacked))
    return Group(layouts, Text(shared.comparison_rule(comparison), style="dim"))  # warnings: stderr, once


class WordsFit:
    """The first of several layouts of the same table whose every word and number fits the width, whole.

    Rich narrows a table that is too wide by shrinking its widest columns, below their longest word if need
    be (`regres`/`sed`), and then every column (`0.78…`). Here a table is drawn only when each column can
    have at least its longest word (`_word_widths`); the last layout is drawn in any case.
    """

    def __init__(self, *layouts: RenderableType) -> None:
        self.layouts = layouts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for layout in self.layouts[:-1]:
            fitted = _word_widths(layout, console, options) if isinstance(layout, Table) else None
            if fitted is not None:
                yield fitted
                return
        last = self.layouts[-1]
        yield _word_widths(last, console, options) or last if isinstance(last, Table) else last


def _word_widths(table: Table, console: Console, options: ConsoleOptions) -> Table | None:
    """A copy of `table` with column widths that give each column at least its longest word (header included),
    the room left shared out up to each one's natural width; None when the longest words alone do not fit."""
    unlimited = options.update_width(1 << 16)
    least: list[int] = []
    most: list[int] = []
    for column in table.columns:
        cells = [Measurement.get(console, unlimited, cell) for cell in (column.header, *column.cells)]
        least.append(max(cell.minimum for cell in cells))
        most.append(max(cell.maximum for cell in cells))
    padding = sum(table._get_padding_width(index) for index in range(len(table.columns)))
    room = options.max_width - table._extra_width - padding
    if sum(least) > room:
        return None
    widths = list(least)
    spare = room - sum(widths)
    for index in sorted(range(len(widths)), key=lambda index: most[index] - least[index]):  # the smallest needs first
        give = min(spare, most[index] - widths[index])
        widths[index] += give
        spare -= give
    fitted = copy.copy(table)
    fitted.columns = [copy.copy(column) for column in table.columns]
    for column, width in zip(fitted.columns, widths):
        column.width = width
    return fitted


def gates_view(results: Sequence[GateResult], names: Mapping[str, str] | None = None) -> RenderableType:
    table = FitTable(title="Gates", title_justify="left")
    for name in shared.GATE_COLUMNS:
        table.add_column(name, justify="right" if name in ("threshold", "value") else "left")
    for result, cells in zip(results, shared.gate_rows(results, names)):
        table.add_row(*cells[:-1], Text(cells[-1], style="green" if result.passed else "bold red"))
    return table


def audit_views(findings: Findings, full: bool = True) -> list[RenderableType]:
    """Tables for the audits that were asked for: reported counts and sampler health."""
    views: list[RenderableType] = []
    for spec in shared.audit_tables(findings, full):
        table = FitTable(title=spec.title, title_justify="left", drop=("meaning",))
        for name in spec.columns:
            table.add_column(
                name,
                justify="right" if name in spec.right else "left",
                style="dim" if name == "meaning" else None,
                overflow="fold" if name in ("source", "figure") else "ellipsis",
                min_width=len("no-prefix-break,") if name == "explained by" else None,
            )
        for row in spec.rows:
            cells = [_marked(cell) for cell in row.cells]
            if row.nested:
                cells[0] = "  " + cells[0]
            table.add_row(*cells)
        views.append(Group(table, Text(spec.note, style="dim")) if spec.note else table)
    return views


_TONES = {"good": "green", "warn": "yellow", "bad": "red", "muted": "dim"}


def _marked(cell: shared.Cell) -> str:
    """A cell as Rich markup: plain text escaped, a Marked cell coloured by its tone."""
    if isinstance(cell, str):
        return data_text(cell)
    markup = f"[{_TONES[cell.tone]}]{data_text(cell.text)}[/]"
    return markup + (f" [dim]{data_text(cell.note)}[/]" if cell.note else "")


def iid_verdict(summary: Estimates) -> Text:
    """One line: does one per-token probability explain the observed tokens per pass?"""
    check = summary.iid_check
    if check is None:
        if summary.bounded:
            reason = "every run's draft and accepted length, which totals do not give"
        else:
            reason = "at least two runs" if summary.runs < 2 else "examined tokens (every draft here is empty)"
        return Text(f"i.i.d. check: needs {reason}.", style="dim")
    z = check.z
    z_text = "inf" if z is None else f"{z:+.1f}"
    detail = f"observed - predicted = {check.difference:+.4f} tokens per pass, z = {z_text}"
    equal = check.equal_rates
    if equal is not None:
        detail += f"; equal rates across {equal.positions} positions: p = {equal.p_value:.3g}"
    if check.consistent:
        return Text(f"i.i.d. check: {check.verdict}: {detail}.", style="green")
    return Text(
        f"i.i.d. check: {check.verdict}: {detail}; acceptance depends on the position or the context "
        "(see the per-position rates).",
        style="bold red",
    )


def per_position_table(summary: Estimates) -> Table:
    table = FitTable(
        title="Per position",
        title_justify="left",
        caption_justify="left",
        drop=("reached", "drafts", "accepted", "unconditional 95%", "rate 95%"),
    )
    for name in ("position", "drafts", "reached", "accepted", "rate", "rate 95%", "unconditional", "unconditional 95%"):
        table.add_column(name, justify="right")
    if not summary.per_position and summary.identified is not None and summary.identified.step_positions:
        return step_positions_table(summary)
    for row in summary.per_position:
        table.add_row(
            str(row.position),
            f"{row.drafts:,}",
            f"{row.reached:,}",
            f"{row.accepted:,}",
            number(row.rate),
            interval(row.rate_ci),
            number(row.unconditional_rate),
            interval(row.unconditional_rate_ci),
        )
    table.caption = (
        f"{shared.PER_POSITION_CAPTION} Intervals {data_text(shared.interval_meaning(summary))}. " + shared.IID_CAPTION
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
        table.add_row(accepted, f"{count:,}", number(count / runs if runs else None, ".3f"), bar)
    return table


def cost_table(summary: Estimates, cost_ratio: float) -> RenderableType:
    """Observed speedup, and the i.i.d. model's tokens per pass and speedup for k around the best."""
    alpha = summary.alpha
    speedup = summary.speedup(cost_ratio)
    head = Text(
        f"Cost ratio c = {cost_ratio:g}: observed speedup sum(a + 1) / sum(k c + 1) = {number(speedup)}",
    )
    if alpha is None:
        return head
    best = formulas.optimal_k(alpha, cost_ratio)
    table = FitTable(title=f"Draft length at alpha = {alpha:.4f}, c = {cost_ratio:g}", title_justify="left")
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


def advice_table(advice: RuleAdvice) -> RenderableType:
    """A rule outside alpha at cost ratio c: its observed speedup (and what it assumes), then, for a tree, the
    tokens per pass and speedup of the tree cut at each depth the input knows, the best marked."""
    c = f"{advice.cost_ratio:g}"
    shown = number(advice.speedup)
    if advice.passes_from == "steps":
        passes = f"{advice.draft_passes:g} draft passes per verify pass (the tree's steps)"
    elif advice.passes_from == "capacity":
        level = "level of each tree" if advice.model == "tree" else "drafted position"
        passes = f"{advice.draft_passes:.4g} draft passes per verify pass on average (one per {level})"
    else:
        shown = f"at most {shown}"
        if advice.model == "tree":
            passes = (
                f"{advice.draft_passes:g} draft passes per verify pass, the deepest depth accepted: each tree is at "
                "least that deep, and a deeper one costs more"
            )
        else:
            passes = (
                f"{advice.draft_passes:g} draft passes per verify pass, the longest length accepted: each draft is "
                "at least that long, and a longer one costs more"
            )
    head = Text(
        f"{advice.name}, c = {c}: observed speedup tokens per pass / (1 + c x draft passes) = {shown}, with {passes}"
    )
    if advice.model != "tree":
        return Group(
            head,
            Text(
                f"{advice.name} decides jointly, so a shorter or longer draft changes its decisions: its best k is "
                "not in these runs. It keeps at least what the chain rule keeps on the same drafts, so the chain "
                "model at their per-token alpha is a floor "
                f"('expect --rule {advice.name} --alpha A --k K' gives it, labelled at least); these runs keep no "
                "per-token alpha.",
                style="dim",
            ),
        )
    table = FitTable(title=f"{advice.name} cut at depth D", title_justify="left")
    for name in ("depth", "tokens per pass", "speedup", ""):
        table.add_column(name, justify="right")
    for row in advice.depths:
        best = row.depth == advice.best
        table.add_row(
            str(row.depth),
            f"{row.tokens_per_pass:.4f}",
            f"{row.speedup:.4f}",
            "best" if best else "",
            style="bold" if best else None,
        )
    note = Text(
        "tokens per pass at D = 1 + the sum over d <= D of c_1 ... c_d (exact: each level is decided from the levels "
        f"above it); speedup = that / (1 + D c), a draft pass per level. Deeper than {advice.known_depth} is not "
        "known from this input.",
        style="dim",
    )
    return Group(head, table, note)


def conventions_table(summary: Estimates) -> RenderableType:
    """Each engine's numbers on these same runs, beside ours."""
    conventions = summary.conventions
    table = FitTable(title="What each engine would report", title_justify="left", drop=("definition",))
    table.add_column("engine")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("definition", style="dim")
    table.add_row("specaccept", "alpha", number(summary.alpha), "accepted / examined")
    for engine, metrics in conventions.items():
        for metric, value in metrics.items():
            shown = ", ".join(number(v, ".3f") for v in value) if isinstance(value, list) else number(value)
            table.add_row(engine, metric, shown, DEFINITIONS.get((engine, metric), ""))
    return Group(table, Text(WHY_THEY_DIFFER, style="dim"))


def groups_table(findings: Findings, cost_ratio: float | None = None) -> RenderableType:
    """One row per group: the largest (--max-groups; 0: all) in reading order, then one "other" row for the rest.

    Group keys are data, escaped.
    """
    table = FitTable(
        title=f"By {data_text(findings.summary.group_by or '')}",
        title_justify="left",
        drop=("predicted", "accept rate", "speedup", "95% interval", "tokens/pass"),
    )
    table.add_column("group", overflow="fold")
    for name in ("runs", "alpha", "95% interval", "accept rate", "tokens/pass", "predicted"):
        table.add_column(name, justify="right")
    if cost_ratio is not None:
        table.add_column("speedup", justify="right")
    table.add_column("i.i.d.?", justify="right")
    estimates = dict(findings.groups)
    apart = {key: shared.runs_apart(findings, key) for key in estimates}
    if any(count for count, _ in apart.values()):  # block and tree runs, outside alpha: their own columns
        table.add_column("apart", justify="right")
        table.add_column("their tokens/pass", justify="right")
    else:
        apart = {}
    sizes = {key: group.runs + (apart[key][0] if apart else 0) for key, group in findings.groups}
    labelled = [(data_text(key), estimates[key], apart.get(key)) for key in shared.group_order(sizes)]
    other = findings.other_groups
    if other is not None:
        labelled.append((f"[italic]other ({other[0]:,} groups)[/]", other[1], (0, "") if apart else None))
    for label, group, outside in labelled:
        row = [
            label,
            f"{group.runs:,}",
            number(group.alpha),
            interval(group.alpha_ci),
            number(group.acceptance_rate),
            number(group.tokens_per_pass),
            number(group.tokens_per_pass_predicted),
        ]
        if cost_ratio is not None:
            row.append(number(group.speedup(cost_ratio)))
        check = group.iid_check
        row.append(MISSING if check is None else "fits" if check.consistent else "[red]misfit[/]")
        if outside is not None:
            row += [f"{outside[0]:,}" if outside[0] else "", outside[1]]
        table.add_row(*row)
    table.caption = "i.i.d.? fits when neither i.i.d. test (tokens per pass, equal rates) rejects at 0.01 (Holm)."
    if apart:
        table.caption += " apart: block and tree runs, outside alpha; their tokens per pass, by rule."
    if other is not None:
        table.caption += f" The {len(findings.groups):,} largest groups (--max-groups); other: the rest together."
    table.caption_justify = "left"
    return table


def expect_table(rows: Sequence[dict[str, float]], best_k: int | None, optimal_k: int | None) -> RenderableType:
    """The calculator's rows, the best k among those listed (by speedup) marked, and the best k of all below.

    A row is `best` only when it is the best of every k; the best of several listed that is not is `best listed`,
    and one k alone is marked nothing: it is the best of one, which the line below would contradict.
    """
    with_speedup = any("speedup" in row for row in rows)

    def mark(k: float) -> str:
        if k != best_k or (k != optimal_k and len(rows) == 1):
            return ""
        return "best" if k == optimal_k else "best listed"

    marks = [mark(row["k"]) for row in rows] if with_speedup else []
    table = FitTable(title="Expected (i.i.d. model)", title_justify="left")
    columns = ("alpha", "k", "tokens per pass", *(("speedup",) if with_speedup else ()), *(("",) if any(marks) else ()))
    for name in columns:
        table.add_column(name, justify="right")
    for index, row in enumerate(rows):
        cells = [f"{row['alpha']:g}", str(row["k"]), f"{row['tokens_per_pass']:.4f}"]
        if with_speedup:
            cells += [f"{row['speedup']:.4f}", *((marks[index],) if any(marks) else ())]
        table.add_row(*cells, style="bold" if marks and marks[index] else None)
    if optimal_k is None:
        note = "Without --cost-ratio a longer draft always yields more tokens per pass; give it to find the best k."
    else:
        note = f"Best k in 1..{formulas.K_MAX} at this alpha and cost ratio: {optimal_k}."
    return Group(table, Text(note, style="dim"))


def explain_table(p: Sequence[float], q: Sequence[float], r: Sequence[float], accepted: int) -> RenderableType:
    table = FitTable(title="Accept test, token by token", title_justify="left")
    for name in ("#", "p", "q", "threshold", "r", "kept?"):
        table.add_column(name, justify="right")
    for i, (p_i, q_i, r_i, passes) in enumerate(zip(p, q, r, kept_flags(p, q, r))):
        if i < accepted:
            verdict = "[green]kept[/]"
        elif i == accepted:
            verdict = "[red]rejected[/]"
        else:
            verdict = "[dim]not examined" + (" (would pass)" if passes else "") + "[/]"
        table.add_row(str(i + 1), f"{p_i:g}", f"{q_i:g}", f"{threshold(p_i, q_i):.6g}", f"{r_i:g}", verdict)
    k = len(p)
    if k == 0:
        why = "Empty draft: nothing to test; the target pass still emits 1 token."
    elif accepted == k:
        why = f"All {k} drafted tokens kept; the target adds a bonus token: {k + 1} emitted."
    else:
        stop = accepted
        why = (
            f"Token {stop + 1} stopped the run: r = {r[stop]:g} > min(1, p/q) = {threshold(p[stop], q[stop]):.6g}. "
            f"{accepted} accepted, {accepted + 1} emitted (the target resamples token {stop + 1})."
        )
    return Group(table, Text(why))
