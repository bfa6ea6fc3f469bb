"""The command line's words for the verdict: which option each check answers to, and the stderr lines.

The core says what failed as data (`checks.Issue`) and in its own words (`VerdictEntry.text`);
only here does a failure name the `--flag` that set its threshold or that would change it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specaccept_cli.text import shown_threshold
from specaccept_cli.verdict.checks import MIN_UNITS, Issue

if TYPE_CHECKING:
    from specaccept_cli.verdict import Findings, VerdictEntry
    from specaccept_cli.verdict.checks import Comparison, GateResult

GATE_OPTIONS = {
    "alpha": "--min-alpha",
    "tokens_per_pass": "--min-tokens-per-pass",
    "acceptance_rate": "--min-acceptance-rate",
}
# check (or (check, kind)) -> the option that sets its threshold or makes it fail
OPTIONS: dict[str | tuple[str, str], str | None] = {
    "baseline": "--max-drop",
    "drift": "--check-drift",
    "server": "--max-mismatches",
    "sampler": "--check-sampler",
    "skipped": "--max-errors",
    "intervals": "--cluster-field",
    "input": None,  # an empty input: no option changes what it holds
    ("skipped", "no_valid_run"): "--allow-empty",
    ("baseline", "unclustered"): "--cluster-field",
    ("baseline", "k_mix"): None,
    ("baseline", "underpowered"): None,
    ("gate", "inconclusive"): "--strict-bounds",
    ("baseline", "inconclusive"): "--strict-bounds",
    ("intervals", "engine_intervals"): None,
    ("intervals", "rates_only"): None,  # no option clusters an engine's aggregate lines
    ("intervals", "duplicate_lines"): "--keep-duplicate-lines",  # counts them, were they real intervals
    ("intervals", "since_start"): None,
    ("intervals", "too_wide"): None,  # only input that logs more pins the figure down
    ("baseline", "cluster_fields_differ"): None,
    "log": None,  # an impossible log: no option sets a threshold for it
    ("log", "all_accepted"): "--p-field",  # swapped fields are the likeliest cause: name the option that picks p
    ("log", "p_at_most_q"): "--p-field",
    ("log", "mean_p_over_q"): "--p-field",
    ("tree", "maybe_tree"): "--tree",  # the server's speculative_eagle_topk, num_steps, num_draft_tokens
}


def option_of(entry: VerdictEntry) -> str | None:
    """The option a verdict entry answers to (None for the i.i.d. check, which no option gates)."""
    issue = entry.issue
    if entry.check == "gate" and issue is not None and issue.metric is not None and issue.kind != "inconclusive":
        return GATE_OPTIONS[issue.metric]
    if issue is not None and (entry.check, issue.kind) in OPTIONS:
        return OPTIONS[entry.check, issue.kind]
    return OPTIONS.get(entry.check)


def hinted(entry: VerdictEntry) -> str:
    """A verdict entry with its option, for the command line's views: "alpha = 0.7 is below 0.8 (--min-alpha)"."""
    option = option_of(entry)
    return entry.text if option is None or entry.status == "ok" else f"{entry.text} ({option})"


def _number(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"


def gate_message(gate: GateResult) -> str:
    option, threshold = GATE_OPTIONS[gate.metric], shown_threshold(gate.threshold)
    if gate.bounds is not None:
        low, high = gate.bounds
        if gate.inconclusive:
            return (
                f"{gate.label} is between {low:.6g} and {high:.6g} (the 95% interval of its bounds): {option} "
                f"{threshold} lies inside, undecided (--strict-bounds fails it)"
            )
        if gate.passed:
            return (
                f"{gate.label} is at least {low:.6g} (the bottom of its bounds' 95% interval): {option} {threshold} met"
            )
        return f"{gate.label} is at most {high:.6g} (the top of its bounds' 95% interval), below {option} {threshold}"
    if gate.value is None:
        return f"{gate.label} has no value (no runs to estimate it from); {option} {threshold} fails"
    relation = "is at least" if gate.passed else "is below"
    return f"{gate.label} = {gate.shown_value} {relation} {option} {threshold}"


def comparison_message(comparison: Comparison, metric: str) -> str:
    """A failed comparison's stderr line (regressed, or untestable), naming --max-drop and --significance."""
    row = next(row for row in comparison.metrics if row.metric == metric)
    if row.verdict == "untestable":
        return (
            f"{row.label} untestable (not a regression, not a pass): each side needs a value and at least "
            f"{MIN_UNITS} independent units (baseline {_number(row.baseline)} from {row.baseline_runs} runs, "
            f"current {_number(row.current)} from {row.current_runs} runs)"
        )
    change = "" if row.change is None else f" ({row.change:+.2%})"
    z = "" if row.z is None else f"z = {row.z:.2f}, "
    adjusted = "" if row.p_adjusted is None else f", Holm-adjusted {row.p_adjusted:.3g}"
    test = f"{z}p = {row.p:.3g}{adjusted}"
    moved = f"{_number(row.baseline)} -> {_number(row.current)}{change}"
    if row.verdict == "regressed":
        return (
            f"{row.label} regressed: {moved}, a drop of more than --max-drop {comparison.max_drop:g} at "
            f"--significance {comparison.significance:g} ({test})"
        )
    return f"{row.label}: {moved}, no regression ({test})"


def warning_text(warning: Issue) -> str:
    """A comparison's warning as `-o json` and stderr have always said it."""
    if warning.kind == "unclustered":
        side = "neither side" if warning.at == "neither side" else "one side only"
        return (
            f"standard errors are over runs ({side} has --cluster-field): right for a replayed prompt set, too small "
            "for fresh traffic, where runs of one request share its difficulty; summarise both logs with "
            "--cluster-field (e.g. the request id) or compare on the same prompts"
        )
    if warning.kind == "cluster_fields_differ":
        base, current = (warning.at or "|").split("|", 1)
        return f"baseline clustered by {base}, current by {current}: make sure both name the same unit"
    if warning.kind == "k_mix":
        return (
            f"the draft lengths differ (total variation {warning.value or 0.0:.2f} between the k mixes): alpha and "
            "tokens per pass move with the mix of k, so compare logs drafted at the same k mix"
        )
    if warning.kind == "suggest_cluster_field":
        return f"the input has a '{warning.at}' field: --cluster-field {warning.at} makes the comparison cluster-robust"
    raise ValueError(f"no words for a comparison warning of kind {warning.kind!r}")


def failure_line(findings: Findings, entry: VerdictEntry) -> str:
    """The stderr line of a failed check, as the command line has always printed it."""
    issue = entry.issue
    assert issue is not None, "a failed entry carries its issue"
    if entry.check == "gate" and issue.kind == "inconclusive":
        gate = next(gate for gate in findings.gates if gate.metric == issue.metric)
        return f"gate inconclusive: {gate_message(gate)}"
    if entry.check == "gate":
        gate = next(gate for gate in findings.gates if gate.metric == issue.metric)
        return f"gate failed: {gate_message(gate)}"
    if entry.check == "baseline" and issue.kind == "inconclusive":
        return f"{entry.text} (--strict-bounds)"
    if entry.check == "baseline" and findings.comparison is not None and issue.metric is not None:
        return comparison_message(findings.comparison, issue.metric)
    if entry.check == "server" and findings.reported is not None:
        reported = findings.reported
        headline = reported.headline()
        hint = f"; {headline}" if headline else ""
        named = reported.named()
        if named is not None:
            hint += f"; verdict on {named['rule']}: {named['in_short']}"
        if reported.all_near_ties():
            hint += (
                "; every mismatch is a near tie (r within 1/128 of min(1, p/q)): p and q logged in bf16/fp16 do "
                "this with a lawful server"
            )
        return f"mismatches: {reported.mismatches} > --max-mismatches {findings.spec.max_mismatches}{hint}"
    if entry.check == "sampler":
        return (
            f"sampler {issue.metric}: p = {issue.p or 0.0:.3g} < --sampler-significance {issue.limit or 0.0:g} "
            f"(statistic {issue.value or 0.0:.4g})"
        )
    if entry.check == "drift" and issue.kind == "drift":
        return (
            f"drift: alpha is not constant over the log (p = {issue.p or 0.0:.3g} < --significance "
            f"{issue.limit or 0.0:g}); likeliest change at {issue.at}: {_number(issue.before)} before, "
            f"{_number(issue.after)} after"
        )
    if entry.check == "skipped" and issue.kind == "too_many":
        return f"{entry.text.split(':')[0]}: more than --max-errors {findings.spec.max_errors}"
    if entry.check == "skipped" and issue.kind == "no_valid_run":
        return f"{entry.text} (--on-error skip; --allow-empty accepts that)"
    return entry.text
