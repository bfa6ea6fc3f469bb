"""The rows every view shows, as plain strings: the Rich tables and the markdown report render the same rows.

No rich here (markdown is written without it). A cell a terminal would colour is a `Marked`
cell: its tone says how, and markdown shows its text alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from msgspec import Struct

from specaccept_cli.rule.registry import DEFAULT_RULE
from specaccept_cli.summary.identified import ASSUMED, BOUNDED, EXACT, UNKNOWN
from specaccept_cli.summary.rule_figures import NO_INTERVALS, OVER_REQUESTS
from specaccept_cli.summary.rules import in_counts
from specaccept_cli.summary.server import RULES
from specaccept_cli.text import shown_against, shown_threshold
from specaccept_cli.views.format import MISSING, interval, number

if TYPE_CHECKING:
    from specaccept_cli.summary.engine import EngineTally
    from specaccept_cli.summary.estimates import Estimates
    from specaccept_cli.summary.rule_figures import RuleFigures, TreeShape
    from specaccept_cli.summary.server import ReportedTally, SamplerTally
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.verdict import Findings, SamplerTest, VerdictEntry
    from specaccept_cli.verdict.checks import Comparison, GateResult, MetricComparison

ALPHA_CAPTION = (
    "alpha = accepted/examined, the chance a tested token is kept (tokens after a rejection are never tested, "
    "so accepted/drafted understates it); tokens per pass = a + 1 per target pass, averaged."
)
PER_POSITION_CAPTION = (
    "rate = accepted / reached: conditional, EAGLE's per-position alpha (under the i.i.d. model every rate is "
    "alpha). unconditional = accepted / drafts of that position (runs with k >= i); vLLM's logged "
    '"Per-position acceptance rate" divides by every draft instead (--conventions): the same only when every '
    "run drafts the same k."
)
SHOWN_EXAMPLES = 10  # mismatching runs listed (the summary keeps more, for -o json)
SHOWN_INTERVALS = 3  # engine intervals listed with what they printed (the summary keeps more, for -o json)


HeadlineRow = tuple[str, list["Cell"]]  # a label and its parts, joined with " · "
Words = Callable[["VerdictEntry"], str]  # a verdict entry as the reader sees it (the command line adds options)
_STATUS_TONES: dict[str, Literal["good", "warn", "bad"]] = {"ok": "good", "warn": "warn", "fail": "bad"}


def entry_text(entry: VerdictEntry) -> str:
    return entry.text


def headline_rows(findings: Findings, words: Words = entry_text) -> list[HeadlineRow]:
    """The answer, before any detail: runs, alpha with its interval, tokens per pass observed against the
    i.i.d. prediction, vLLM's acceptance rate, then the verdict: every check that failed or warns on a line
    of its own, the checks that passed together on the last."""
    numbers = findings.numbers
    runs = runs_text(numbers) + counted_rules_text(findings.summary)
    outside = {} if findings.summary.rules is None else findings.summary.rules.outside_alpha()
    if outside:  # block and tree runs: in the rule tally, not in the counts (the verdict says why)
        runs += f" in alpha; {sum(outside.values()):,} more apart ({', '.join(outside)})"
    rows: list[HeadlineRow] = [("runs", [runs])]
    if not numbers.clustering.over_runs:  # over runs, the verdict warns (in the same words everywhere)
        rows.append(("intervals", [numbers.clustering.describe()]))
    shape = findings.spec.tree
    # A tree's counts: no chain's alpha (the per-depth rates say it), and the engine's rate is over tree nodes.
    alpha = alpha_text(numbers) if shape is None else tree_alpha_text(shape)
    tokens = tokens_per_pass_text(numbers)
    if outside and not numbers.runs:  # block or tree runs alone: their figures, not a chain's dashes
        keep = "keeps" if len(outside) == 1 else "keep"
        alpha = f"not a chain's: {', '.join(outside)} {keep} no per-token rate (see the per-depth rates)"
        tokens = "; ".join(_rule_tokens_text(figures) for figures in findings.rules)
        rows += [("alpha", [alpha]), ("tokens per pass", [tokens])]
        return rows + verdict_rows(findings, words)  # no engine's accepted / drafted: nothing was drafted in a chain
    if findings.rules:  # beside the chain's, each rule's own
        tokens += "; " + "; ".join(_rule_tokens_text(figures) for figures in findings.rules)
    rows += [("alpha", [alpha]), ("tokens per pass", [tokens])]
    rate = f"{number(numbers.acceptance_rate)} accepted / drafted"
    if shape is not None:
        nodes = shape.draft_tokens - 1
        rate = f"{number(numbers.acceptance_rate)} accepted / tree nodes (verify passes x {nodes}), not alpha"
    for label, name in rate_names(findings.summary):
        rows.append((label, [f"{rate} ({name})" if name else rate]))
    return rows + verdict_rows(findings, words)  # fingerprints too: the verdict names each with its evidence


def _rule_tokens_text(figures: RuleFigures) -> str:
    """A rule outside alpha's tokens per pass with its interval: "3.1425 [3.0618, 3.2189] (tree-residual)"."""
    text = number(figures.tokens_per_pass)
    if figures.interval is not None:
        text += f" {interval(figures.interval)}"
    return f"{text} ({figures.name})"


def counted_rules_text(summary: Summary) -> str:
    """The rules of the runs in alpha, when any is not `standard`: " (argmax)" for a greedy token-id log,
    " (25 standard, 25 argmax)" for a log that mixes them; "" for `standard` runs alone (or none)."""
    tally = summary.rules
    if tally is None:
        return ""
    counted = {name: runs for name, runs in tally.runs_by_rule(summary.runs).items() if in_counts(name)}
    if not counted or set(counted) == {DEFAULT_RULE}:
        return ""
    if len(counted) == 1:
        return f" ({next(iter(counted))})"
    return " (" + ", ".join(f"{runs:,} {name}" for name, runs in counted.items()) + ")"


RATE_NAMES = {
    "vllm": ("vLLM's rate", '"Avg Draft acceptance rate"'),
    "sglang": ("SGLang's accept rate", "spec_accept_rate"),
    "llama.cpp": ("llama.cpp's draft acceptance", '"draft acceptance"'),
    "tensorrt-llm": ("TensorRT-LLM's acceptance rate", "acceptance_rate"),
    "lmdeploy": ("LMDeploy's acceptance rate", "accepted / draft tokens counters"),
    "aiperf": ("AIPerf's draft acceptance rate", "draft_acceptance_rate"),
}


def rate_names(summary: Summary) -> list[tuple[str, str]]:
    """accepted / drafted under each engine's own name: the engines the input came from, or vLLM's for runs."""
    engines = summary.engine.engines if summary.engine is not None else ()
    named = [RATE_NAMES[name] for name in engines if name in RATE_NAMES]
    return named or [("accepted / drafted", "")] if engines else [RATE_NAMES["vllm"]]


def runs_text(numbers: Estimates) -> str:
    """Verify steps: a count, or bounds when the input gives only a rounded mean length."""
    identified = numbers.identified
    if identified is not None and identified.runs_bounds is not None:
        low, high = identified.runs_bounds
        return f"between {low:,} and {high:,} (steps not logged: bounded by the totals)"
    if identified is not None and (
        identified.of("runs") == UNKNOWN or not (identified.exact_units + identified.bounded_units)
    ):
        return MISSING
    return f"{numbers.runs:,}"


def tree_alpha_text(shape: TreeShape) -> str:
    """alpha's line for an engine's tree: none, and where its figures are."""
    return f"not a chain's: a tree ({shape.describe()}), see its per-depth rates"


def alpha_text(numbers: Estimates) -> str:
    """alpha with its interval, or its bounds over the whole input with their 95% interval and why."""
    identified = numbers.identified
    if identified is not None and identified.of("alpha") == BOUNDED and identified.alpha_bounds is not None:
        low, high = identified.alpha_bounds
        text = f"between {number(low)} and {number(high)}"
        if identified.alpha_bounds_ci is not None:
            text += f" (95%: {number(identified.alpha_bounds_ci[0])}-{number(identified.alpha_bounds_ci[1])})"
        return f"{text}: {identified.reason()}"
    alpha = number(numbers.alpha)
    if numbers.alpha_ci is not None:
        alpha += f", 95% interval {interval(numbers.alpha_ci)}"
    if identified is not None and identified.of("alpha") == ASSUMED:
        alpha += "; exact only if every draft was full"
        if identified.alpha_bounds is not None:
            alpha += f", else in {interval(identified.alpha_bounds)}"
    return alpha


def tokens_per_pass_text(numbers: Estimates) -> str:
    identified = numbers.identified
    if identified is not None and identified.tokens_per_pass_bounds is not None:
        low, high = identified.tokens_per_pass_bounds
        text = f"between {number(low)} and {number(high)}"
        if identified.tokens_per_pass_bounds_ci is not None:
            ci = identified.tokens_per_pass_bounds_ci
            text += f" (95%: {number(ci[0])}-{number(ci[1])})"
        return text
    if numbers.tokens_per_pass is None:
        return MISSING
    text = f"{number(numbers.tokens_per_pass)} observed"
    if numbers.tokens_per_pass_ci is not None and identified is not None and identified.bounded_units:
        return f"{text}, 95% interval {interval(numbers.tokens_per_pass_ci)}"
    if numbers.tokens_per_pass_predicted is None and identified is not None:
        return text
    return f"{text}, {number(numbers.tokens_per_pass_predicted)} predicted (i.i.d.)"


def verdict_rows(findings: Findings, words: Words = entry_text) -> list[HeadlineRow]:
    """The verdict's lines: failures first, then warnings, one a line; what passed, together."""
    rows: list[HeadlineRow] = []
    for status in ("fail", "warn"):
        for entry in findings.verdict:
            if entry.status == status:
                rows.append((status, [Marked(words(entry), _STATUS_TONES[status])]))
    passed = [Marked(words(entry), "good") for entry in findings.verdict if entry.status == "ok"]
    if passed:
        rows.append(("ok", list[Cell](passed)))
    return rows


def verdict_word(findings: Findings, check: str) -> tuple[str, Literal["good", "warn", "bad", "muted"]]:
    """A check's status as one word and its tone, for a card or a cell ("not run" when it did not)."""
    status = findings.status(check)
    if status is None:
        return "not run", "muted"
    return status, _STATUS_TONES[status]


STEP_POSITION_COLUMNS = ("position", "kept", "rate over steps", "conditional rate")
STEP_POSITION_CAPTION = (
    "Over every verify step of the input: kept = steps that accepted at least i drafts (exact, from the "
    'accepted-length histograms); rate over steps = kept / steps, vLLM\'s "Per-position acceptance rate". '
    "The conditional rate kept / reached needs each step's draft length, which totals do not give: bounds."
)


def step_position_rows(numbers: Estimates) -> list[tuple[str, str, str, str]]:
    identified = numbers.identified
    rows = [] if identified is None else identified.step_positions
    return [
        (str(row.position), f"{row.accepted:,}", number(row.rate), interval(row.conditional_bounds)) for row in rows
    ]


def _count(value: int | None, bounds: tuple[int, int] | None = None) -> str:
    """A count, its bounds when only bounded, or MISSING."""
    if value is None or bounds is not None:
        return MISSING if bounds is None else f"{bounds[0]:,} to {bounds[1]:,}"
    return f"{value:,}"


def summary_rows(summary: Summary, numbers: Estimates) -> list[tuple[str, str, str]]:
    """(metric, formatted value, meaning): the rows every summary view shows (Rich table, markdown)."""
    identified = numbers.identified
    runs_bounds = identified.runs_bounds if identified is not None else None
    examined_bounds = identified.examined_bounds if identified is not None and identified.bounded_units else None
    alpha_row = ("alpha", number(numbers.alpha), "accepted / examined: per-token acceptance")
    alpha_ci_row = ("alpha 95% interval", interval(numbers.alpha_ci), interval_meaning(numbers))
    if identified is not None and identified.of("alpha") == BOUNDED:
        alpha_row = ("alpha bounds", interval(identified.alpha_bounds), identified.reason())
        alpha_ci_row = (
            "  95% interval",
            interval(identified.alpha_bounds_ci),
            "Imbens-Manski: covers alpha, bounds of every unit summed, " + interval_meaning(numbers),
        )
    rows = [
        ("runs", _count(numbers.runs, runs_bounds), "target passes (drafted runs)"),
        ("drafted tokens", f"{numbers.drafted_tokens:,}", "sum of k"),
        ("accepted tokens", f"{numbers.accepted_tokens:,}", "sum of a"),
        (
            "examined tokens",
            _count(numbers.examined_tokens, examined_bounds),
            "tokens actually tested: a + 1, or k if all kept",
        ),
        alpha_row,
        alpha_ci_row,
        (
            "expected alpha",
            number(numbers.expected_alpha),
            "mean of min(1, p/q) over examined tokens: alpha's r-free twin (equal for a lawful sampler)",
        ),
        (
            "  over drafted",
            number(numbers.expected_alpha_drafted),
            "the same over every drafted token: equals alpha only when acceptance ignores the position",
        ),
        ("acceptance rate", number(numbers.acceptance_rate), 'accepted / drafted: vLLM\'s "Avg Draft acceptance rate"'),
        ("mean accepted", number(numbers.mean_accepted), "a per run"),
        ("tokens per pass", number(numbers.tokens_per_pass), "(accepted + runs) / runs"),
        ("  95% interval", interval(numbers.tokens_per_pass_ci), "score interval over the same units as alpha's"),
        (
            "  predicted (i.i.d.)",
            number(numbers.tokens_per_pass_predicted),
            "mean over runs of (1 - alpha^(k+1)) / (1 - alpha)",
        ),
    ]
    if summary.skipped_rows or summary.skipped_sources:
        rows.append(("skipped rows", f"{summary.skipped_rows:,}", "bad rows left out (--on-error skip)"))
        if summary.skipped_sources:
            rows.append(("skipped sources", f"{summary.skipped_sources:,}", "sources abandoned (unreadable)"))
    return rows


def interval_meaning(numbers: Estimates) -> str:
    """What the intervals are over: clusters (cluster-robust) or runs (conditional on these prompts)."""
    if numbers.cluster_field is not None:
        return f"cluster-robust over {numbers.clusters or 0:,} clusters of {numbers.cluster_field} (t, sandwich)"
    return "over runs: holds only for a replayed prompt set (--cluster-field names the request field)"


IID_CAPTION = (
    "Two tests, Holm-combined: observed vs predicted tokens per pass (the prediction's own fit accounted for) and "
    "equal conditional rates across positions. Heterogeneous prompts can mask a decay: easy prompts reach the "
    "later positions, so per-position rates look flatter than any one prompt's."
)


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _numeric_key(key: str) -> float | None:
    """A group key's value when it is a JSON number (as `group_key` writes one), else None."""
    if not _JSON_NUMBER.fullmatch(key):
        return None
    value = float(key)
    return value if math.isfinite(value) else None


def runs_apart(findings: Findings, key: str) -> tuple[int, str]:
    """A shown group's runs outside alpha (block and tree rules) and their tokens per pass, by rule when it holds
    several: (0, "") for a group of counted runs only."""
    groups = findings.summary.groups
    tally = groups[key].rules if groups is not None and key in groups else None
    outside = {} if tally is None else tally.outside_alpha()
    if tally is None or not outside:
        return 0, ""
    if len(outside) == 1:
        return sum(outside.values()), number(tally.tokens_per_pass(next(iter(outside))))
    return sum(outside.values()), ", ".join(f"{name} {number(tally.tokens_per_pass(name))}" for name in outside)


def group_order(sizes: dict[str, int]) -> list[str]:
    """Groups in reading order: by value when every key is a number (k = 1, 2, ..., 10, not 1, 10, 2), else
    largest first; "null" (no value) comes last in the numeric order. Which groups are shown (the
    --max-groups largest) is `summary.state.shown_groups`'s choice."""
    largest = sorted(sizes, key=lambda key: (-sizes[key], key))
    values = {key: _numeric_key(key) for key in largest}
    if all(value is not None for key, value in values.items() if key != "null") and len(values) > ("null" in values):
        return sorted(largest, key=lambda key: (key == "null", values[key] or 0.0, key))
    return largest


GATE_COLUMNS = ("gate", "threshold", "value", "result")


def gate_rows(results: Sequence[GateResult], names: Mapping[str, str] | None = None) -> list[tuple[str, str, str, str]]:
    """(gate, threshold, value, result); a gate is named by `names` (the command line's options) or its label."""
    return [
        (
            result.label if names is None else names[result.metric],
            shown_threshold(result.threshold),
            number(None) if result.value is None else shown_against(result.value, result.threshold),
            "passed" if result.passed else "failed",
        )
        for result in results
    ]


COMPARISON_COLUMNS = ("metric", "baseline", "current", "change", "z", "p", "Holm p", "detectable", "verdict")


def comparison_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    """(metric, baseline, current, change, z, p, Holm-adjusted p, detectable drop, verdict) for every metric.

    The detectable drop is the whole relative drop the comparison flags with 80% power (--max-drop and the
    noise beyond it, as the verdict says it); when the part beyond is more than --max-drop, the units
    (requests, or runs) that would bring it down to --max-drop follow it.
    """
    return [
        (
            row.label,
            number(row.baseline) if row.baseline_bounds is None else interval(row.baseline_bounds),
            number(row.current) if row.current_bounds is None else interval(row.current_bounds),
            number(row.change, "+.2%"),
            number(row.z, "+.2f"),
            number(row.p, ".3g"),
            number(row.p_adjusted, ".3g"),
            _detectable(row),
            row.verdict,
        )
        for row in comparison.metrics
    ]


def _detectable(row: MetricComparison) -> str:
    shown = number(row.detectable_drop, ".2%")
    if row.underpowered:
        shown += " (underpowered" + ("" if row.requests_needed is None else f": {row.requests_needed:,} needed") + ")"
    return shown


def comparison_rule(comparison: Comparison) -> str:
    """The rule in one sentence (our own text: used as is in markdown, so no `<`, `|` or backticks)."""
    floor = 1 - comparison.max_drop
    return (
        f"z = standard errors of current above the tolerated floor {floor:g} x baseline, {comparison.method}; "
        f"p = one-sided p-value of 'current >= floor' (Student t); Holm p adjusts it for testing two metrics; "
        f"regressed when Holm p is below {comparison.significance:g}, i.e. the drop exceeds "
        f"--max-drop {comparison.max_drop:g} beyond noise; untestable (exit 1, not a regression) when a side has "
        "too few runs or clusters."
    )


# --- the server audits -------------------------------------------------------------------


class Marked(NamedTuple):
    """A cell a terminal colours by its tone, with an optional dim `note` after it; markdown shows `text` alone."""

    text: str
    tone: Literal["good", "warn", "bad", "muted"]
    note: str = ""


Cell = str | Marked


class AuditRow(NamedTuple):
    cells: tuple[Cell, ...]
    nested: bool = False  # a breakdown of the row above: a terminal indents it


class AuditTable(Struct, frozen=True):
    """One audit table: `title` heads it in a terminal, `heading` (when set) in markdown; `note` follows it
    in a terminal only; numbers in the `right` columns are right-aligned in both."""

    title: str
    heading: str | None
    columns: tuple[str, ...]
    right: tuple[str, ...]
    rows: list[AuditRow]
    note: str = ""


def audit_tables(findings: Findings, full: bool = True) -> list[AuditTable]:
    """Tables for the audits that were asked for: reported counts (and the first mismatches), sampler health.

    Not `full`: sampler health only when it was asked for or did not pass (the headline says "sampler ok").
    """
    summary = findings.summary
    tables: list[AuditTable] = []
    if summary.reported is not None:
        tables += _reported_tables(summary.reported)
    sampler_shown = full or findings.spec.strict_sampler or findings.status("sampler") != "ok"
    if summary.sampler is not None and sampler_shown:
        tables.append(_sampler_table(summary.sampler, findings.sampler_tests))
    if summary.engine is not None:
        tables.append(engine_table(findings.numbers, summary.engine))
    tables += [rule_table(figures) for figures in findings.rules]
    if findings.tree is not None:
        tables.append(rule_table(findings.tree))
    return tables


RULE_COLUMNS = ("runs ending there", "reached", "kept", "rate", "95% interval")


def rule_table(figures: RuleFigures) -> AuditTable:
    """A block or tree rule, outside alpha: its tokens per pass, then per depth d the runs whose accepted length
    (a tree's accepted depth) is d, and the conditional rate: of the runs that reached d - 1, those that kept d."""
    tokens = number(figures.tokens_per_pass)
    if figures.interval is not None:
        tokens += f" {interval(figures.interval)}"
    over = f"{figures.runs:,} run{'' if figures.runs == 1 else 's'}"
    title = f"{figures.name}: {tokens} tokens per pass over {over} (not in alpha)"
    if figures.engine:
        title = f"{figures.name}: {tokens} tokens per pass over {figures.runs:,} verify passes, per depth"
    rows = []
    for depth, runs in enumerate(figures.histogram):
        rate = figures.depth_rates[depth - 1] if depth else None
        rows.append(
            AuditRow(
                (
                    str(depth),
                    f"{runs:,}",
                    "" if rate is None else f"{rate.reached:,}",
                    "" if rate is None else f"{rate.kept:,}",
                    "" if rate is None else number(rate.rate),
                    "" if rate is None else interval(rate.interval),
                )
            )
        )
    columns = ("depth" if figures.tree else "length", *RULE_COLUMNS)
    units = {
        NO_INTERVALS: "no intervals: the runs come in requests, and this summary did not keep this rule's runs "
        "per request",
        OVER_REQUESTS: f"intervals over {figures.requests or 0:,} requests (cluster-robust)",
    }.get(figures.over, f"intervals over {figures.over}")
    note = f"rate at {columns[0]} d: of the runs that reached d - 1 and could go to d, the share that kept d; {units}"
    if figures.engine:
        note = (
            "rate at depth d: of the verify passes that reached d - 1, the share that kept d (exact, from the "
            f"engine's accepted-depth histograms summed over requests); intervals over {figures.over}"
        )
    return AuditTable(title, title, columns, columns, rows, note)


ENGINE_NAMES = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "llama.cpp": "llama.cpp",
    "tensorrt-llm": "TensorRT-LLM",
    "lmdeploy": "LMDeploy",
    "aiperf": "AIPerf",
}


def engine_table(numbers: Estimates, engine: EngineTally) -> AuditTable:
    """What the engine printed beside what it means, over the whole input (`Estimates` says how each is known)."""
    identified = numbers.identified
    bounds = identified.alpha_bounds if identified is not None and identified.of("alpha") != EXACT else None
    rate = numbers.acceptance_rate
    alpha = interval(bounds) if bounds is not None else number(numbers.alpha)
    per_pass = numbers.tokens_per_pass
    rows = [
        AuditRow(
            (
                "lines read",
                f"{engine.lines:,}",
                f"{engine.metrics_lines:,} metrics lines, {engine.ignored_lines:,} other server output, "
                f"{engine.bad_lines:,} bad (see skipped input)"
                + (f", {engine.duplicate_lines:,} repeated" if engine.duplicate_lines else ""),
            )
        ),
        AuditRow(
            (
                "intervals",
                f"{engine.intervals:,}",
                f"{engine.recovered:,} exact (their (k, a) histogram is the counts above), {engine.bounded:,} "
                f"bounded, {engine.unquantified:,} with rates only",
            )
        ),
    ]
    if engine.running_totals:
        rows.append(
            AuditRow(
                (
                    "running totals",
                    f"{engine.running_totals:,}",
                    "totals since the server started (llama.cpp statistics): shown below, not added again",
                )
            )
        )
    if engine.assumed:
        rows.append(
            AuditRow(
                (
                    "assumes full drafts",
                    Marked(f"{engine.assumed:,}", "bad"),
                    "intervals exact only if every draft had k tokens (Drafted = k x drafts): the figures fit "
                    "shorter drafts too, so alpha, all intervals, is bounded without that",
                )
            )
        )
    if engine.resets:
        rows.append(AuditRow(("counter resets", Marked(f"{engine.resets:,}", "bad"), "the server restarted")))
    if engine.duplicate_lines:
        rows.append(
            AuditRow(
                (
                    "repeated lines",
                    Marked(f"{engine.duplicate_lines:,}", "bad"),
                    "metrics lines repeating an earlier one exactly, time stamp and process included (a log "
                    "shipper's duplicate): dropped, not counted twice",
                )
            )
        )
    for name in engine.engines:
        rows += _printed_rows(name, rate, per_pass, alpha)
    if bounds is not None:
        rows.append(
            AuditRow(
                (
                    "alpha, all intervals",
                    interval(bounds),
                    "bounds with the intervals whose counts could not be recovered exactly, and without "
                    "assuming full drafts",
                )
            )
        )
    for example in engine.examples[:SHOWN_INTERVALS]:
        where, _, said = example.partition(": ")
        rows.append(AuditRow((where, "", said), nested=True))
    if engine.intervals + engine.running_totals > SHOWN_INTERVALS:
        more = engine.intervals + engine.running_totals - SHOWN_INTERVALS
        rows.append(
            AuditRow(("", "", f"... and {more:,} more intervals (-o json keeps the first {len(engine.examples)})"))
        )
    engines = ", ".join(ENGINE_NAMES.get(name, name) for name in engine.engines) or "no engine"
    return AuditTable(
        title=f"Engine metrics: {engines} ({', '.join(engine.formats) or 'no intervals'})",
        heading=f"Engine metrics: {engines}",
        columns=("figure", "value", "meaning"),
        right=("value",),
        rows=rows,
        note="The engine's figures recomputed over the whole input, exact where the counts pin them down, bounds "
        "where not; r was not logged, so r-based results are empty.",
    )


def _printed_rows(engine: str, rate: float | None, per_pass: float | None, alpha: str) -> list[AuditRow]:
    """The engine's own names for its figures, each with what it measures (each engine's source, see README)."""
    per_token = f"per-token alpha {alpha}"
    if engine == "vllm":
        return [
            AuditRow(("vLLM 'Avg Draft acceptance rate'", number(rate, ".1%"), f"accepted / drafted; {per_token}")),
            AuditRow(("vLLM 'Mean acceptance length'", number(per_pass), "tokens per pass: 1 + accepted / drafts")),
            AuditRow(
                (
                    "vLLM 'Per-position acceptance rate'",
                    "",
                    "accepted at position i / drafts: the unconditional rate of the Per position table",
                )
            ),
        ]
    if engine == "sglang":
        return [AuditRow(("SGLang 'accept len'", number(per_pass), "tokens per pass: (accepted + bonus) / passes"))]
    if engine == "llama.cpp":
        return [AuditRow(("llama.cpp 'draft acceptance'", number(rate, ".5f"), f"accepted / generated; {per_token}"))]
    name = ENGINE_NAMES.get(engine, engine)
    return [
        AuditRow((f"{name} acceptance rate", number(rate), f"accepted / drafted; {per_token}")),
        AuditRow((f"{name} acceptance length", number(per_pass), "tokens per pass: 1 + accepted / steps")),
    ]


def _reported_tables(reported: ReportedTally) -> list[AuditTable]:
    tone: Literal["good", "bad"] = "good" if reported.mismatches == 0 else "bad"
    rows = [
        AuditRow(("compared", f"{reported.runs:,}", "runs with a reported count")),
        AuditRow(("mismatches", Marked(f"{reported.mismatches:,}", tone), "reported != recomputed")),
    ]
    rows += [
        AuditRow(
            (
                item["rule"],
                f"{item['explains']:,}" + (f" ({item['alone']:,} alone)" if "alone" in item else ""),
                f"server {RULES[item['rule']]}",
            ),
            nested=True,
        )
        for item in reported.diagnosis()
    ]
    rows.append(AuditRow(("unexplained", f"{reported.unexplained:,}", "no known rule reproduces the count"), True))
    lowered = reported.lowered_named()
    if lowered is not None:  # one threshold value below 1 reproduces every count, the unexplained ones too
        meaning = f"server {lowered['test']}: reproduces every count, {lowered['alone']:,} of them no rule above does"
        rows.append(AuditRow(("tree-target-cdf", f"{lowered['explains']:,}", meaning), nested=True))
    if reported.several is not None:
        rows.append(AuditRow(("several rules", f"{reported.several:,}", "mismatches more than one rule reproduces")))
    if reported.near_ties is not None:
        note = "deciding r within 1/128 of min(1, p/q): bf16/fp16 p and q flip these with a lawful server"
        rows.append(AuditRow(("near ties", f"{reported.near_ties:,}", note)))
    named = reported.named()
    if named is not None:
        alone = "" if named["alone"] is None else f"{named['alone']:,}"  # the runs only it explains: its evidence
        meaning = f"{named['verdict']}: {named['meaning']}"
        for threshold, (low, high) in named.get("thresholds", {}).items():  # the values every count allows
            meaning += f"; {threshold} in ({low:.4g}, {high:.4g}] reproduces every reported count"
        rows.append(AuditRow((f"verdict: {named['rule']}", alone, meaning)))
    tables = [
        AuditTable(
            title="Reported counts (a mismatch may be reproduced exactly by several rules)",
            heading="Reported counts",
            columns=("check", "runs", "meaning"),
            right=("runs",),
            rows=rows,
        )
    ]
    if reported.examples:
        examples = [
            AuditRow(
                (
                    example.source,
                    str(example.line),
                    str(example.k),
                    str(example.reported),
                    str(example.recomputed),
                    ", ".join(example.rules) or Marked("unexplained", "muted"),
                )
            )
            for example in reported.examples[:SHOWN_EXAMPLES]
        ]
        more = reported.mismatches - min(SHOWN_EXAMPLES, len(reported.examples))
        tables.append(
            AuditTable(
                title="First mismatching runs",
                heading=None,
                columns=("source", "line", "k", "reported", "recomputed", "explained by"),
                right=("line", "k", "reported", "recomputed"),
                rows=examples,
                note=f"… and {more:,} more (the first {len(reported.examples)} are in -o json)" if more > 0 else "",
            )
        )
    return tables


SAMPLER_TESTS = {
    "calibration": (
        "calibration (z)",
        "logged r against min(1, p/q) at examined tokens (the draws, not the server's decisions)",
    ),
    "r uniformity": ("r uniformity (KS D)", "logged r against U[0, 1)"),
}


def _sampler_table(sampler: SamplerTally, tests: Sequence[SamplerTest]) -> AuditTable:
    rows = []
    for test in tests:
        (name, what), result = SAMPLER_TESTS[test.name], test.result
        if result.ok is None:
            verdict = Marked("no data", "muted", what)
        elif result.ok:
            verdict = Marked("ok", "good", what)
        else:
            verdict = Marked(f"fails at {sampler.significance:g}", "bad", what)
        rows.append(AuditRow((name, number(result.statistic, ".4g"), number(result.p_value, ".4g"), verdict)))
    return AuditTable(
        title="Sampler health",
        heading="Sampler health",
        columns=("test", "statistic", "p-value", "verdict"),
        right=("statistic", "p-value"),
        rows=rows,
    )


def drift_line(findings: Findings) -> tuple[bool | None, str]:
    """The drift test in one sentence (the verdict's words, with the test's statistic), and whether alpha
    moved (None: too few windows to test)."""
    drift = findings.drift
    entry = next(iter(findings.entries("drift")), None)
    if drift is None or entry is None:
        from specaccept_cli.summary.windows import MIN_DRIFT_WINDOWS

        return None, f"drift not tested: it needs at least {MIN_DRIFT_WINDOWS} windows holding runs."
    return entry.status != "ok", f"{entry.text}; CUSUM statistic {drift.statistic:.2f}."
