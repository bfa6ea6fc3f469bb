"""The HTML report: one self-contained file with headline cards, plots and the engine conventions.

No script and nothing fetched: a `Content-Security-Policy: default-src 'none'` meta tag (inline
styles allowed), inline SVG only, so the file opens the same from a disk, a CI artifact or an
e-mail. Every plot is a `<figure data-plot="...">` with a one-line caption saying how to read it,
and every mark has a hover `<title>`. The page is a pure function of the summary: the same input
gives the same bytes (no date, no random ids), so it can be compared with a golden file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specaccept_cli.rule.vectorized import THRESHOLD_BINS
from specaccept_cli.summary.conventions import DEFINITIONS
from specaccept_cli.summary.estimates import Z_95, Estimates
from specaccept_cli.summary.identified import BOUNDED
from specaccept_cli.summary.probability import kolmogorov_sf
from specaccept_cli.summary.server import MAX_MATRIX_COUNT, RULES, ReportedTally, SamplerTally
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.windows import WindowTally, describe_position, excludes
from specaccept_cli.version import __version__
from specaccept_cli.views.format import MISSING, interval, number
from specaccept_cli.views.rows import (
    AuditTable,
    alpha_text,
    engine_table,
    rule_table,
    runs_text,
    tokens_per_pass_text,
    tree_alpha_text,
    verdict_word,
)
from specaccept_cli.views.svg import Axis, Chart, text
from specaccept_cli.views.timeline import window_width_text

if TYPE_CHECKING:
    from specaccept_cli.summary.advice import RuleAdvice
    from specaccept_cli.verdict import Findings
    from specaccept_cli.verdict.checks import Comparison

MAX_GROUPS = 20  # groups drawn, largest first
MAX_GROUP_LINES = 6  # groups drawn as their own line in the per-position plot

CSP = "default-src 'none'; style-src 'unsafe-inline'"

STYLE = """

body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;margin:24px auto;max-width:1180px;
padding:0 16px;overflow-wrap:anywhere}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}.meta{color:#59636e;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #d1d9e0;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:20px}.card span{color:#59636e;font-size:12px}.good{color:#1a7f37}
.bad{color:#cf222e}.muted{color:#59636e}.plots{display:flex;flex-wrap:wrap;gap:18px}
figure{margin:0;border:1px solid #d1d9e0;border-radius:8px;padding:8px;max-width:100%;box-sizing:border-box}
figure svg{max-width:100%;height:auto}
figcaption{color:#59636e;font-size:12px;max-width:560px;margin-top:4px}
table{border-collapse:collapse;font-size:13px;display:block;max-width:100%;overflow-x:auto}
td,th{border-bottom:1px solid #d1d9e0;padding:3px 10px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}svg text{font-family:system-ui,sans-serif}
.tick{font-size:11px;fill:#59636e}.axis{font-size:12px;fill:#1f2328}
.chart-title{font-size:13px;font-weight:600;fill:#1f2328}.grid{stroke:#eef1f4}.frame{fill:none;stroke:#afb8c1}
.observed{fill:#4c78a8}.observed-line{fill:none;stroke:#4c78a8;stroke-width:2}.predicted{fill:#f58518}
.predicted-line{fill:none;stroke:#f58518;stroke-width:2;stroke-dasharray:5 3}
.whole{fill:none;stroke:#54a24b;stroke-width:1.5;stroke-dasharray:6 3}
.band{fill:#4c78a8;fill-opacity:.18;stroke:none}.whisker{fill:none;stroke:#1f2328;stroke-width:1.2}
.outside{fill:#e45756}.change{fill:none;stroke:#e45756;stroke-width:2}
.floor{fill:none;stroke:#e45756;stroke-width:1.5;stroke-dasharray:4 3}
.diagonal{fill:none;stroke:#8c959f;stroke-dasharray:4 3}.cell{fill:#4c78a8}.cell-agree{fill:#54a24b}
.key{stroke:none}.group0{fill:none;stroke:#4c78a8;stroke-width:1.6}
.group1{fill:none;stroke:#f58518;stroke-width:1.6}.group2{fill:none;stroke:#54a24b;stroke-width:1.6}
.group3{fill:none;stroke:#e45756;stroke-width:1.6}.group4{fill:none;stroke:#72b7b2;stroke-width:1.6}
.group5{fill:none;stroke:#b279a2;stroke-width:1.6}.warn{color:#9a6700}
.verdict{list-style:none;padding:0;margin:12px 0 0}.verdict li{margin:2px 0}.verdict b{display:inline-block;width:3em}
li.fail b{color:#cf222e}li.warn b{color:#9a6700}li.ok b{color:#1a7f37}
.legend{color:#59636e;font-size:12px;margin:4px 0 0}
.swatch{display:inline-block;width:18px;height:3px;vertical-align:middle;margin:0 4px 0 10px}
.g0{background:#4c78a8}.g1{background:#f58518}.g2{background:#54a24b}.g3{background:#e45756}.g4{background:#72b7b2}
.g5{background:#b279a2}.count{font-size:10px;fill:#1f2328}
"""


def render_report(findings: Findings, sources: Sequence[str], cost_ratio: float | None = None) -> str:
    """The whole page as text, drawn from the findings (the drift verdicts at their significance)."""
    summary, numbers = findings.summary, findings.numbers
    # A plot is drawn only when there is something to draw (an empty log still gets its page).
    figures = []
    if numbers.examined_tokens:
        figures.append(_figure("histogram", histogram_chart(summary, numbers), caption=HISTOGRAM_CAPTION))
        caption = POSITIONS_CAPTION
        lines = findings.groups[:MAX_GROUP_LINES]
        if lines:
            caption += f" Thin coloured lines: the conditional rates of the {len(lines)} largest groups (key below)."
        figures.append(
            _figure("positions", positions_chart(findings), group_key([key for key, _ in lines]), caption=caption)
        )
        if findings.windows:
            figures.append(_figure("timeline", timeline_chart(findings), caption=TIMELINE_CAPTION))
        if findings.groups:
            figures.append(_figure("groups", *groups_charts(findings), caption=GROUPS_CAPTION))
    else:
        figures.append('<p class="muted">No tokens were examined: there is nothing to plot.</p>')
    compared = [] if findings.comparison is None else baseline_charts(findings.comparison)
    if compared:
        figures.append(_figure("baseline", *compared, caption=BASELINE_CAPTION))
    if summary.reported is not None and summary.reported.runs:
        figures.append(_figure("server", *server_charts(summary.reported), caption=SERVER_CAPTION))
    if summary.sampler is not None and summary.sampler.examined_tokens:
        figures.append(_figure("sampler", *sampler_charts(summary.sampler), caption=SAMPLER_CAPTION))
    names = ", ".join(sources) or "stdin"
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>specaccept report: {text(names)}</title><style>{STYLE}</style></head><body>\n",
            f'<h1>Speculative-decoding acceptance</h1><p class="meta">{text(names)} · specaccept {__version__}</p>\n',
            cards(findings, cost_ratio),
            verdict_list(findings),
            '<h2>Plots</h2><div class="plots">\n',
            "\n".join(figures),
            "</div>\n",
            "" if summary.engine is None else audit_table_html(engine_table(findings.numbers, summary.engine)),
            "".join(audit_table_html(rule_table(figures)) for figures in findings.rules),
            "" if findings.tree is None else audit_table_html(rule_table(findings.tree)),
            "<h2>What each engine would report</h2>\n",
            conventions_table(numbers),
            "</body></html>\n",
        ]
    )


def _figure(plot_id: str, *charts: str, caption: str) -> str:
    return f'<figure data-plot="{plot_id}">{"".join(charts)}<figcaption>{text(caption)}</figcaption></figure>'


# --- headline cards ---------------------------------------------------------------------------


def _card(label: str, value: str, detail: str, tone: str = "") -> str:
    css = f' class="{tone}"' if tone else ""
    return f'<div class="card"><span>{text(label)}</span><b{css}>{text(value)}</b><span>{text(detail)}</span></div>'


def cards(findings: Findings, cost_ratio: float | None) -> str:
    """The headline numbers, then one card per check that ran, coloured by its verdict."""
    numbers = findings.numbers
    check = numbers.iid_check
    identified = numbers.identified
    apart = not numbers.runs and bool(findings.rules)  # block or tree runs alone: no chain's figures at all
    if findings.spec.tree is not None:  # a tree's counts: no chain's alpha (its per-depth table says it)
        alpha_card = _card("alpha (accepted / examined)", MISSING, tree_alpha_text(findings.spec.tree))
    elif apart:
        names = ", ".join(figures.name for figures in findings.rules)
        alpha_card = _card("alpha (accepted / examined)", MISSING, f"not a chain's: {names}; see the per-depth rates")
    elif identified is not None and identified.of("alpha") == BOUNDED:
        alpha_card = _card(
            "alpha (accepted / examined), bounds", interval(identified.alpha_bounds), alpha_text(numbers)
        )
    else:
        alpha_card = _card(
            "alpha (accepted / examined)", number(numbers.alpha), f"95% interval {interval(numbers.alpha_ci)}"
        )
    chain_tokens = (
        _card(
            "tokens per pass",
            number(numbers.tokens_per_pass, ".3f"),
            f"95% interval {interval(numbers.tokens_per_pass_ci)}; i.i.d. model predicts "
            f"{number(numbers.tokens_per_pass_predicted, '.3f')}",
        )
        if identified is None or identified.tokens_per_pass_bounds is None
        else _card(
            "tokens per pass, bounds", interval(identified.tokens_per_pass_bounds), tokens_per_pass_text(numbers)
        )
    )
    parts = [
        alpha_card,
        *(() if apart else (chain_tokens,)),
        *(
            _card(
                f"tokens per pass, {figures.name}",
                number(figures.tokens_per_pass, ".3f"),
                f"95% interval {interval(figures.interval)}; {figures.runs:,} runs, not in alpha",
            )
            for figures in findings.rules
        ),
        _card(
            "i.i.d. check",
            MISSING if check is None else "fits" if check.consistent else "misfit",
            MISSING if check is None or check.combined_p_value is None else f"p = {check.combined_p_value:.3g}",
            "" if check is None else "good" if check.consistent else "bad",
        ),
        _card(
            "runs",
            runs_text(numbers),
            f"{numbers.drafted_tokens:,} drafted, {numbers.accepted_tokens:,} accepted"
            + "".join(f"; {figures.runs:,} {figures.name} runs apart" for figures in findings.rules),
        ),
    ]
    for check_name, label in CARDS:
        entries = findings.entries(check_name)
        if not entries:
            continue
        word, tone = verdict_word(findings, check_name)
        shown = [entry for entry in entries if entry.status != "ok"] or list(entries)
        parts.append(_card(label, word, "; ".join(entry.text for entry in shown), TONES[tone]))
    if cost_ratio is not None:
        if findings.spec.tree is None and (numbers.runs or not findings.rules):  # chain runs were counted
            parts.append(_card("speedup", number(numbers.speedup(cost_ratio), ".3f"), f"cost ratio {cost_ratio:g}"))
        parts += [advice_card(advice) for advice in findings.advice(cost_ratio)]
    return '<div class="cards">' + "".join(parts) + "</div>\n"


def advice_card(advice: RuleAdvice) -> str:
    """A rule outside alpha at the cost ratio: its observed speedup (at most, where the draft passes are the
    deepest accepted) and its best depth by its own model, or why block has none."""
    value = number(advice.speedup, ".3f")
    if advice.speedup_bound != "exact":
        value = f"at most {value}"
    detail = f"cost ratio {advice.cost_ratio:g}, {advice.draft_passes:.4g} draft passes per verify pass"
    if advice.model == "tree" and advice.best is not None:
        best = advice.depths[advice.best - 1]
        detail += (
            f"; best depth {advice.best} of the {advice.known_depth} known ({best.tokens_per_pass:.3f} tokens per "
            f"pass, speedup {best.speedup:.3f}); deeper is not known"
        )
    elif advice.model != "tree":
        detail += "; decisions are joint, so its best k is not in these runs: the chain model is its floor"
    return _card(f"speedup, {advice.name}", value, detail)


CARDS = (
    ("gate", "gates"),
    ("baseline", "baseline"),
    ("server", "reported counts"),
    ("sampler", "sampler"),
    ("drift", "drift over the log"),
    ("skipped", "skipped input"),
)
TONES = {"good": "good", "warn": "warn", "bad": "bad", "muted": "muted"}


def verdict_list(findings: Findings) -> str:
    """The verdict in the words every view uses: what failed, then what warns, then what passed."""
    order = {"fail": 0, "warn": 1, "ok": 2}
    items = [
        f'<li class="{entry.status}"><b>{entry.status}</b> {text(entry.text)}</li>'
        for entry in sorted(findings.verdict, key=lambda entry: order[entry.status])
    ]
    return '<ul class="verdict">' + "".join(items) + "</ul>\n"


def audit_table_html(table: AuditTable) -> str:
    """A table the terminal and markdown show too (views.rows), as HTML: every cell escaped."""
    head = "".join(f"<th>{text(name)}</th>" for name in table.columns)
    rows = [f"<h2>{text(table.heading or table.title)}</h2>\n<table><tr>{head}</tr>"]
    for row in table.rows:
        cells = []
        for name, cell in zip(table.columns, row.cells, strict=True):
            shown = cell if isinstance(cell, str) else cell.text
            css = ' class="num"' if name in table.right else ""
            cells.append(f"<td{css}>{text(shown)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="muted">{text(table.note)}</p>' if table.note else ""
    return "".join(rows) + "</table>\n" + note + "\n"


def conventions_table(numbers: Estimates) -> str:
    rows = ["<table><tr><th>engine</th><th>metric</th><th>value</th><th>definition</th></tr>"]
    alpha = number(numbers.alpha)
    rows.append(f'<tr><td>specaccept</td><td>alpha</td><td class="num">{alpha}</td><td>accepted / examined</td></tr>')
    for engine, metrics in numbers.conventions.items():
        for metric, value in metrics.items():
            shown = ", ".join(number(v, ".3f") for v in value) if isinstance(value, list) else number(value)
            definition = DEFINITIONS.get((engine, metric), "")
            rows.append(
                f'<tr><td>{text(engine)}</td><td>{text(metric)}</td><td class="num">{text(shown)}</td>'
                f"<td>{text(definition)}</td></tr>"
            )
    return "".join(rows) + "</table>\n"


# --- 1. accepted lengths ----------------------------------------------------------------------

HISTOGRAM_CAPTION = (
    "Runs by accepted length: bars are observed, dots what the i.i.d. model predicts at the fitted alpha for the "
    "same mix of draft lengths. Bars above the dots at 0 and at k mean runs that are all easy or all hard."
)


def predicted_histogram(summary: Summary, alpha: float | None) -> list[float]:
    """Expected runs by accepted length under the i.i.d. model: a < k with alpha^a (1 - alpha), a = k with alpha^k."""
    size = summary.max_k + 1
    expected = [0.0] * size
    if alpha is None:
        return expected
    for k, runs in enumerate(summary.runs_by_k.tolist()[:size]):
        for a in range(k):
            expected[a] += runs * alpha**a * (1.0 - alpha)
        if runs:
            expected[k] += runs * alpha**k
    return expected


def histogram_chart(summary: Summary, numbers: Estimates) -> str:
    observed = [float(numbers.accepted_histogram[key]) for key in sorted(numbers.accepted_histogram, key=int)]
    predicted = predicted_histogram(summary, numbers.alpha)
    top = max([*observed, *predicted, 1.0]) * 1.08
    chart = Chart(
        Axis.linear(-0.5, len(observed) - 0.5, "accepted length a"), Axis.linear(0, top, "runs"), "Accepted length"
    )
    chart.x.ticks = [(float(a), str(a)) for a in range(len(observed))] if len(observed) <= 33 else chart.x.ticks
    runs = max(1, numbers.runs)
    for a, (count, expect) in enumerate(zip(observed, predicted)):
        hover = f"a = {a}: {count:,.0f} runs ({count / runs:.1%}); i.i.d. predicts {expect:,.1f}"
        chart.rect(a - 0.38, a + 0.38, 0.0, count, "observed", hover)
        chart.point(a, expect, "predicted", hover)
    chart.legend = [("observed", "observed"), ("predicted", "i.i.d. prediction")]
    return chart.svg()


# --- 2. per position --------------------------------------------------------------------------

POSITIONS_CAPTION = (
    "Per draft position: the conditional rate (accepted / reached, with 95% bars) against the flat alpha line, and "
    "the unconditional rate (accepted / drafts) against alpha^position. Under the i.i.d. model points sit on lines."
)


def positions_chart(findings: Findings) -> str:
    numbers = findings.numbers
    rows = numbers.per_position
    chart = Chart(
        Axis.linear(0.5, max(1, len(rows)) + 0.5, "draft position"), Axis.linear(0.0, 1.0, "rate"), "Per position"
    )
    chart.x.ticks = [(float(row.position), str(row.position)) for row in rows] if len(rows) <= 33 else chart.x.ticks
    alpha = numbers.alpha
    if alpha is not None:
        chart.horizontal(alpha, "whole", f"alpha = {alpha:.4f}")
        powers = [(float(row.position), alpha**row.position) for row in rows]
        chart.line(powers, "predicted-line", "alpha^position")
    for row in rows:
        if row.unconditional_rate is not None:
            chart.point(
                row.position,
                row.unconditional_rate,
                "predicted",
                f"position {row.position}: unconditional {row.unconditional_rate:.4f} "
                f"({row.accepted:,} / {row.drafts:,})",
                2.8,
            )
        if row.rate is None:
            continue
        # The estimate's own interval: over runs or clusters, never a token-level binomial band.
        low, high = row.rate_ci if row.rate_ci is not None else (row.rate, row.rate)
        hover = (
            f"position {row.position}: rate {row.rate:.4f} ({row.accepted:,} / {row.reached:,} reached), "
            f"95% {interval(row.rate_ci)}"
        )
        chart.error_bar(row.position, low, high, "whisker", hover)
        chart.point(row.position, row.rate, "observed", hover)
    chart.legend = [("observed", "conditional"), ("predicted", "unconditional")]
    for index, (key, group) in enumerate(findings.groups[:MAX_GROUP_LINES]):
        line = [(float(row.position), row.rate) for row in group.per_position if row.rate is not None]
        chart.line([(x, y) for x, y in line if y is not None], f"group{index}", f"group {key}: conditional rate")
    return chart.svg()


def group_key(names: Sequence[str]) -> str:
    """Which coloured line is which group, written out under the plot (no hovering needed)."""
    if not names:
        return ""
    items = "".join(f'<span class="swatch g{index}"></span>{text(name)}' for index, name in enumerate(names))
    return f'<p class="legend">groups: {items}</p>'


# --- 3. over the log --------------------------------------------------------------------------

TIMELINE_CAPTION = (
    "Alpha window by window with its 95% band; the dashed line is the whole log's alpha, the vertical line the "
    "likeliest change point (red when the drift test finds one, grey when not). Red dots are windows whose "
    "interval excludes the whole-log alpha."
)


def timeline_chart(findings: Findings) -> str:
    tally, rows, alpha = findings.window_tally, findings.windows, findings.numbers.alpha
    assert tally is not None, "a timeline needs windows"
    start, end = rows[0].start, rows[-1].end
    x_axis = Axis.linear(float(start), float(end), "time (UTC)" if tally.unit == "seconds" else "run")
    if tally.unit == "seconds":
        x_axis.ticks = [(value, _clock(tally, int(value))) for value, _ in x_axis.ticks]
    else:
        x_axis.ticks = [(value, f"{int(value) + 1:,}") for value, _ in x_axis.ticks]
    lows = [row.alpha_ci[0] for row in rows if row.alpha_ci is not None]
    highs = [row.alpha_ci[1] for row in rows if row.alpha_ci is not None]
    values = [row.alpha for row in rows if row.alpha is not None]
    low = max(0.0, min([*lows, *values, alpha or 1.0]) - 0.02)
    high = min(1.0, max([*highs, *values, alpha or 0.0]) + 0.02)
    chart = Chart(
        x_axis, Axis.linear(low, high, "alpha"), f"Alpha over the log (windows of {window_width_text(tally)})"
    )
    with_interval = [row for row in rows if row.alpha_ci is not None]
    middles = [(row.start + row.end) / 2 for row in with_interval]
    chart.band(
        [(x, row.alpha_ci[1]) for x, row in zip(middles, with_interval) if row.alpha_ci is not None],
        [(x, row.alpha_ci[0]) for x, row in zip(middles, with_interval) if row.alpha_ci is not None],
        "band",
        "95% interval of each window",
    )
    chart.line([((row.start + row.end) / 2, row.alpha) for row in rows if row.alpha is not None], "observed-line")
    if alpha is not None:
        chart.horizontal(alpha, "whole", f"whole log: alpha = {alpha:.4f}")
    for row in rows:
        if row.alpha is None:
            continue
        hover = (
            f"{describe_position(tally, row.start)} to {describe_position(tally, row.end - 1)}: alpha {row.alpha:.4f} "
            f"{interval(row.alpha_ci)}, {row.runs:,} runs, {row.tokens_per_pass:.3f} tokens per pass"
        )
        chart.point((row.start + row.end) / 2, row.alpha, "outside" if excludes(row, alpha) else "observed", hover, 3.0)
    drift = findings.drift
    if drift is not None:
        significant = drift.p_value < findings.spec.significance
        chart.vertical(
            float(drift.change_at),
            "change" if significant else "diagonal",
            ("" if significant else "not significant: ")
            + f"likeliest change at {describe_position(tally, drift.change_at)} (p = {drift.p_value:.3g}): "
            f"alpha {number(drift.alpha_before)} before, {number(drift.alpha_after)} after",
        )
    return chart.svg()


def _clock(tally: WindowTally, seconds: int) -> str:
    stamp = describe_position(tally, seconds)  # 2026-11-30T14:05:00Z
    return stamp[11:16] if tally.width < 86400 else stamp[:10]


# --- 4. groups --------------------------------------------------------------------------------

GROUPS_CAPTION = (
    "Groups side by side (largest first): alpha with its 95% interval, and tokens per pass observed against the "
    "i.i.d. prediction. A group whose bars differ is one that does not fit a single per-token rate."
)


def groups_charts(findings: Findings) -> tuple[str, str]:
    """Groups as rows (names are data, on the vertical axis where long ones fit): alpha, and tokens per pass."""
    ordered = findings.groups[:MAX_GROUPS]
    names = [key for key, _ in reversed(ordered)]  # the largest group at the top
    numbers = [group for _, group in reversed(ordered)]
    height = 90 + 20 * len(names)
    rows = Axis.categories(names, "")
    ends = [end for group in numbers if group.alpha_ci is not None for end in group.alpha_ci]
    ends += [group.alpha for group in numbers if group.alpha is not None]
    low, high = max(0.0, min(ends, default=0.0) - 0.03), min(1.0, max(ends, default=1.0) + 0.03)
    alphas = Chart(Axis.linear(low, high, "alpha"), rows, "Alpha by group", width=420, height=height, left=96)
    tokens_top = max(
        [1.0, *(n.tokens_per_pass or 0.0 for n in numbers), *(n.tokens_per_pass_predicted or 0.0 for n in numbers)]
    )
    tokens = Chart(
        Axis.linear(0.0, tokens_top * 1.08, "tokens per pass"),
        rows,
        "Tokens per pass",
        width=420,
        height=height,
        left=96,
    )
    for index, (name, group) in enumerate(zip(names, numbers)):
        if group.alpha is not None:
            hover = f"{name}: alpha {group.alpha:.4f} {interval(group.alpha_ci)}, {group.runs:,} runs"
            if group.alpha_ci is not None:
                alphas.line([(group.alpha_ci[0], index), (group.alpha_ci[1], index)], "whisker", hover)
            alphas.point(group.alpha, index, "observed", hover, 5.0)
        observed, predicted = group.tokens_per_pass, group.tokens_per_pass_predicted
        hover = f"{name}: {number(observed, '.3f')} tokens per pass observed, {number(predicted, '.3f')} predicted"
        if observed is not None:
            tokens.rect(0.0, observed, index, index + 0.4, "observed", hover)
        if predicted is not None:
            tokens.rect(0.0, predicted, index - 0.4, index, "predicted", hover)
    tokens.legend = [("observed", "observed"), ("predicted", "predicted")]
    return alphas.svg(), tokens.svg()


# --- 5. baseline ------------------------------------------------------------------------------

BASELINE_CAPTION = (
    "Baseline against current with 95% intervals; the dashed red line is the tolerated floor, (1 - max drop) x "
    "baseline. A metric regresses when the current value is significantly below the floor."
)


def baseline_charts(comparison: Comparison) -> list[str]:
    charts = []
    for row in comparison.metrics:
        label, base, current = row.label, row.baseline, row.current
        base_error, current_error = row.baseline_standard_error, row.current_standard_error
        if base is None or current is None:
            continue
        verdict = "drop, not significant" if row.verdict == "ok" and row.beyond_tolerance else row.verdict
        floor = (1.0 - comparison.max_drop) * base
        spans = [(base, base_error or 0.0), (current, current_error or 0.0)]
        low = min([floor, *(value - Z_95 * error for value, error in spans)])
        high = max(value + Z_95 * error for value, error in spans)
        pad = (high - low) * 0.15 or 0.05
        chart = Chart(
            Axis.categories(["baseline", "current"], verdict),
            Axis.linear(low - pad, high + pad, label),
            f"{label}: {verdict}",
            width=300,
        )
        chart.horizontal(floor, "floor", f"tolerated floor {floor:.4f}")
        for index, (name, (value, error)) in enumerate(zip(("baseline", "current"), spans)):
            hover = f"{name}: {label} {value:.4f} ± {Z_95 * error:.4f}"
            chart.error_bar(index, value - Z_95 * error, value + Z_95 * error, "whisker", hover)
            chart.point(index, value, "observed" if verdict == "ok" or index == 0 else "outside", hover, 6.0)
        charts.append(chart.svg())
    return charts


# --- 6. server audits -------------------------------------------------------------------------

SERVER_CAPTION = (
    "Reported against recomputed accepted counts (darker: more runs; green: they agree), and how many mismatching "
    "runs each known rule reproduces exactly (a run may be explained by several)."
)


def server_charts(reported: ReportedTally) -> tuple[str, str]:
    pairs = reported.pairs
    size = max([1, *(max(a, b) + 1 for a, b in pairs)])
    heat = Chart(
        Axis.linear(-0.5, size - 0.5, "recomputed accepted count"),
        Axis.linear(-0.5, size - 0.5, "reported count"),
        "Reported x recomputed",
        width=480,
        height=360,
        right=76,
    )
    largest = max(pairs.values(), default=1)
    for (recomputed, count), runs in pairs.items():
        shown = f"{count}+" if count == MAX_MATRIX_COUNT else str(count)
        css = "cell-agree" if recomputed == count else "cell"
        heat.marks.append(f'<g opacity="{_shade(runs, largest):.2f}">')
        heat.rect(
            recomputed - 0.45,
            recomputed + 0.45,
            count - 0.45,
            count + 0.45,
            css,
            f"recomputed {recomputed}, reported {shown}: {runs:,} runs",
        )
        heat.marks.append("</g>")
        if size <= MAX_COUNTED_CELLS:  # the counts, written in the cells while they fit
            x, y = heat.px(recomputed, count)
            heat.marks.append(
                f'<text class="count" x="{x:.1f}" y="{y + 3:.1f}" text-anchor="middle">{_short_count(runs)}</text>'
            )
    heat.marks.append(shade_scale(heat, largest))
    diagnosis = reported.diagnosis()
    names = [item["rule"] for item in diagnosis] + ["unexplained"]
    values = [item["explains"] for item in diagnosis] + [reported.unexplained]
    bars = Chart(
        Axis.linear(0.0, max([1, *values]) * 1.08, f"mismatching runs (of {reported.mismatches:,})"),
        Axis.categories(names, ""),
        "Which rule explains them",
        width=460,
        height=260,
        left=150,
    )
    bars.y.ticks = [(float(index), name) for index, name in enumerate(names)]
    for index, (name, value) in enumerate(zip(names, values)):
        what = RULES.get(name, "no known rule reproduces the count")
        bars.rect(
            0.0,
            float(value),
            index - 0.35,
            index + 0.35,
            "observed" if name != "unexplained" else "predicted",
            f"{name}: {value:,} runs ({what})",
        )
    return heat.svg(), bars.svg()


MAX_COUNTED_CELLS = 12  # accepted counts 0..11: beyond that, the counts are in the hover titles only
SCALE_STEPS = 5


def _shade(runs: int, largest: int) -> float:
    """A cell's opacity: logarithmic in its runs, so one run still shows beside thousands."""
    return 0.15 + 0.85 * math.log1p(runs) / math.log1p(max(1, largest))


def _short_count(runs: int) -> str:
    return f"{runs / 1000:.0f}k" if runs >= 10_000 else f"{runs:,}"


def shade_scale(chart: Chart, largest: int) -> str:
    """The colour scale beside the heatmap: the shades for 1 run up to the largest cell, labelled in runs."""
    x = chart.width - chart.right + 10
    top, bottom = chart.top, chart.height - chart.bottom
    step = (bottom - top) / SCALE_STEPS
    parts = [f'<text class="tick" x="{x}" y="{top - 6}">runs</text>']
    for index in range(SCALE_STEPS):
        fraction = index / (SCALE_STEPS - 1)
        runs = round(math.expm1(fraction * math.log1p(max(1, largest)))) if index else 1
        runs = max(1, runs)
        y = bottom - (index + 1) * step
        parts.append(
            f'<g opacity="{_shade(runs, largest):.2f}"><rect class="cell" x="{x}" y="{y:.1f}" width="14" '
            f'height="{step - 2:.1f}"/></g>'
        )
        parts.append(f'<text class="tick" x="{x + 18}" y="{y + step / 2 + 3:.1f}">{runs:,}</text>')
    return "".join(parts)


# --- 7. sampler health ------------------------------------------------------------------------

SAMPLER_CAPTION = (
    "Sampler health: acceptance at examined tokens in bins of min(1, p/q) against the diagonal a lawful sampler "
    "follows, and ECDF(r) - r with the band inside which a uniform r stays (at --sampler-significance)."
)


def ks_critical(significance: float) -> float:
    """The x with P(K > x) = significance (bisection on Kolmogorov's tail)."""
    low, high = 0.0, 5.0
    for _ in range(80):
        middle = (low + high) / 2
        if kolmogorov_sf(middle) > significance:
            low = middle
        else:
            high = middle
    return high


def sampler_charts(sampler: SamplerTally) -> tuple[str, str]:
    reliability = Chart(
        Axis.linear(0.0, 1.0, "min(1, p/q) at examined tokens"),
        Axis.linear(0.0, 1.0, "accepted share"),
        "Reliability",
        width=420,
    )
    reliability.line([(0.0, 0.0), (1.0, 1.0)], "diagonal", "a lawful sampler accepts with probability min(1, p/q)")
    examined, accepted = sampler.threshold_bins.tolist()
    for index, (tokens, kept) in enumerate(zip(examined, accepted)):
        if not tokens:
            continue
        middle = (index + 0.5) / THRESHOLD_BINS
        share = kept / tokens
        spread = Z_95 * math.sqrt(max(share * (1 - share), 1e-12) / tokens)
        low, high = index / THRESHOLD_BINS, (index + 1) / THRESHOLD_BINS
        hover = f"min(1, p/q) in [{low:.2f}, {high:.2f}): {kept:,} of {tokens:,} kept ({share:.3f})"
        reliability.error_bar(middle, max(0.0, share - spread), min(1.0, share + spread), "whisker", hover)
        reliability.point(middle, share, "observed", hover)
    histogram = sampler.r_histogram
    draws = int(histogram.sum())
    bins = histogram.shape[0]
    step = max(1, bins // 256)
    cumulative = histogram.cumsum()[step - 1 :: step]
    edges = [(index + 1) * step / bins for index in range(cumulative.shape[0])]
    gaps = [(edge, float(count) / draws - edge) for edge, count in zip(edges, cumulative.tolist())] if draws else []
    band = ks_critical(sampler.significance) / math.sqrt(draws) if draws else 0.0
    reach = max([band, *(abs(gap) for _, gap in gaps), 1e-3]) * 1.2
    uniformity = Chart(
        Axis.linear(0.0, 1.0, "r"), Axis.linear(-reach, reach, "ECDF(r) - r"), "Uniformity of r", width=420
    )
    uniformity.band(
        [(0.0, band), (1.0, band)], [(0.0, -band), (1.0, -band)], "band", f"KS band ±{band:.4f} ({draws:,} draws)"
    )
    uniformity.horizontal(0.0, "diagonal")
    uniformity.line(
        [(0.0, 0.0), *gaps], "observed-line", f"largest gap {max((abs(g) for _, g in gaps), default=0.0):.4f}"
    )
    return reliability.svg(), uniformity.svg()
