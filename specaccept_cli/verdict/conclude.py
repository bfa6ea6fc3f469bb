"""`conclude(summary, baseline, spec) -> Findings`: every estimate, test, gate and verdict, computed once.

The checks are one function each, in `CHECKS` (the verdict's order): each reads the findings
computed so far and says its entries. A new check (a comparison too weak to see a drop, say) is
one more function here, and every view shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from msgspec.structs import replace

from specaccept_cli.rule.registry import rule_named
from specaccept_cli.verdict.checks import MIN_UNITS, Issue, check_gates, compare
from specaccept_cli.verdict.findings import Findings, GateSpec, SamplerTest, Status, VerdictEntry

if TYPE_CHECKING:
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.verdict.checks import MetricComparison


def conclude(
    summary: Summary, baseline: Summary | None = None, spec: GateSpec | None = None, *, max_groups: int = 0
) -> Findings:
    """The findings of `summary` (against `baseline` when given) under `spec`'s thresholds.

    `max_groups` > 0 estimates only that many groups, the largest, and the rest together (as the
    views and the machine format show them); 0 estimates every group.
    """
    from specaccept_cli.summary.estimates import estimate
    from specaccept_cli.summary.rule_figures import engine_tree_figures, rule_figures
    from specaccept_cli.summary.state import shown_groups
    from specaccept_cli.summary.windows import drift_test, window_estimates

    spec = spec or GateSpec()
    numbers = estimate(summary)
    shown, other = shown_groups(summary, max_groups) if summary.groups is not None else ([], None)
    # Windows hold runs: on input some of whose units give totals only they would be a subset's, so none.
    tally = summary.windows if not numbers.bounded else None
    sampler = summary.sampler
    findings = Findings(
        summary=summary,
        numbers=numbers,
        spec=spec,
        groups=tuple((key, estimate(group)) for key, group in shown),
        other_groups=None if other is None else (other[0], estimate(other[1])),
        windows=() if tally is None else tuple(window_estimates(tally, summary.clusters)),
        drift=None if tally is None else drift_test(tally, summary.clusters),
        gates=tuple(check_gates(numbers, spec.thresholds)),
        comparison=None if baseline is None else compare(estimate(baseline), numbers, spec.max_drop, spec.significance),
        sampler_tests=()
        if sampler is None
        else (SamplerTest("calibration", sampler.calibration()), SamplerTest("r uniformity", sampler.r_uniformity())),
        verdict=(),
        rules=() if summary.rules is None else rule_figures(summary.rules, summary.clusters is not None),
        tree=None if spec.tree is None else engine_tree_figures(summary, spec.tree, numbers.tokens_per_pass_ci),
    )
    return replace(findings, verdict=tuple(entry for check in CHECKS for entry in check(findings)))


def number(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"


def _entry(check: str, status: Status, text: str, issue: Issue | None = None) -> VerdictEntry:
    return VerdictEntry(check, status, text, None if status == "ok" else issue)


def iid_entries(findings: Findings) -> list[VerdictEntry]:
    check = findings.numbers.iid_check
    identified = findings.numbers.identified
    if check is None and identified is not None and not (identified.exact_units + identified.bounded_units):
        return []  # nothing was counted: the verdict says so once
    if check is None and identified is not None and identified.bounded_units:
        return [
            _entry("iid", "ok", "i.i.d. check needs every run's draft and accepted length, which totals do not give")
        ]
    if check is None:
        return [_entry("iid", "ok", "i.i.d. check needs more runs")]
    if check.consistent:
        return [_entry("iid", "ok", "no evidence against the i.i.d. model")]
    p = check.combined_p_value
    shown = "" if p is None else f" (p = {p:.3g})"
    return [_entry("iid", "warn", f"the i.i.d. model does not fit{shown}", Issue("iid", "misfit", p=p))]


def gate_entries(findings: Findings) -> list[VerdictEntry]:
    from specaccept_cli.text import shown_threshold

    entries = []
    for gate in findings.gates:
        issue = Issue("gate", "below", gate.metric, gate.value, gate.threshold)
        threshold = shown_threshold(gate.threshold)
        if gate.value is None and gate.bounds is None:
            text = f"{gate.label} has no value (no runs to estimate it from): its minimum {threshold} fails"
            entries.append(_entry("gate", "fail", text, replace(issue, kind="no_value")))
        elif gate.inconclusive and gate.bounds is not None and gate.identified_bounds is not None:
            low, high = gate.identified_bounds
            text = (
                f"{gate.label} between {low:.6g} and {high:.6g} (95%: {gate.bounds[0]:.6g}-{gate.bounds[1]:.6g}): "
                f"its minimum {threshold} is inside, so the input cannot decide it; per-step counts (or full "
                "drafts) would"
            )
            status: Status = "fail" if findings.spec.strict_bounds else "warn"
            entries.append(_entry("gate", status, text, replace(issue, kind="inconclusive")))
        elif gate.passed and gate.bounds is not None:
            low = gate.bounds[0]
            text = f"{gate.label} is at least {low:.6g} (the bottom of its bounds' 95% interval): {threshold} met"
            entries.append(_entry("gate", "ok", text))
        elif gate.passed:
            entries.append(_entry("gate", "ok", f"{gate.label} = {gate.shown_value} is at least {threshold}"))
        elif gate.bounds is not None:
            text = (
                f"{gate.label} is at most {gate.bounds[1]:.6g} (the top of its bounds' 95% interval), below {threshold}"
            )
            entries.append(_entry("gate", "fail", text, issue))
        else:
            entries.append(_entry("gate", "fail", f"{gate.label} = {gate.shown_value} is below {threshold}", issue))
    return entries


def baseline_entries(findings: Findings) -> list[VerdictEntry]:
    """Three states per metric: no drop beyond the tolerated one; a drop beyond it that is not significant
    (with its p); regressed. A metric that cannot be tested fails."""
    comparison = findings.comparison
    if comparison is None:
        return []
    entries: list[VerdictEntry] = []
    within: list[MetricComparison] = []
    for row in comparison.metrics:
        issue = Issue("baseline", row.verdict, row.metric, row.current, row.baseline, row.p_adjusted)
        if row.verdict == "untestable":
            text = (
                f"{row.label} cannot be compared with the baseline: each side needs a value and at least {MIN_UNITS} "
                f"independent units (baseline {number(row.baseline)} from {row.baseline_runs:,} runs, current "
                f"{number(row.current)} from {row.current_runs:,} runs)"
            )
            entries.append(_entry("baseline", "fail", text, issue))
        elif row.verdict == "inconclusive":
            text = (
                f"{row.label} against the baseline is inconclusive: bounds "
                f"{_bounds(row.baseline_bounds, row.baseline)} -> {_bounds(row.current_bounds, row.current)}; "
                f"the most favourable values show no drop beyond {comparison.max_drop:g}, the least favourable do "
                "(exact per-step counts would decide it)"
            )
            strict: Status = "fail" if findings.spec.strict_bounds else "warn"
            entries.append(_entry("baseline", strict, text, replace(issue, kind="inconclusive")))
        elif row.verdict == "regressed":
            text = (
                f"{row.label} regressed: {_moved(row)}, a drop of more than {comparison.max_drop:g} "
                f"(Holm p = {row.p_adjusted:.3g} < {comparison.significance:g})"
            )
            entries.append(_entry("baseline", "fail", text, issue))
        elif row.beyond_tolerance:
            text = (
                f"{row.label} {_moved(row)}: a drop beyond the tolerated {comparison.max_drop:g}, but not "
                f"significant (Holm p = {row.p_adjusted:.3g}, not below {comparison.significance:g})"
            )
            entries.append(_entry("baseline", "warn", text, replace(issue, kind="drop_not_significant")))
        else:
            within.append(row)
    if within:
        moves = ", ".join(
            f"{row.label} {_change(row)}"
            if row.baseline_bounds is None and row.current_bounds is None
            else f"{row.label} {_bounds(row.baseline_bounds, row.baseline)} -> "
            f"{_bounds(row.current_bounds, row.current)}"
            for row in within
        )
        entries.append(_entry("baseline", "ok", f"no drop beyond {comparison.max_drop:g} from the baseline ({moves})"))
    for warning in comparison.warnings:
        if warning.kind == "cluster_fields_differ":
            base, current = (warning.at or "|").split("|", 1)
            text = f"baseline clustered by {base}, current by {current}: make sure both name the same unit"
            entries.append(_entry("baseline", "warn", text, warning))
        elif warning.kind == "k_mix":
            text = (
                f"the draft lengths differ from the baseline's (total variation {warning.value or 0.0:.2f}): "
                "alpha and tokens per pass move with the mix of k"
            )
            entries.append(_entry("baseline", "warn", text, warning))
        elif warning.kind == "unclustered" and warning.at == "one side":
            text = "one side of the comparison is not clustered by request: its standard errors are over runs"
            entries.append(_entry("baseline", "warn", text, warning))
    units = "requests" if comparison.method.startswith("cluster-robust") else "runs"
    for row in comparison.metrics:
        if row.underpowered and row.minimum_detectable_drop is not None and row.verdict == "ok":
            needed = "" if row.requests_needed is None else f"; that needs about {row.requests_needed:,} {units}"
            text = (
                f"{row.label} comparison is underpowered: with 80% power it flags a drop of "
                f"{row.detectable_drop or 0.0:.2%} or more, not one just beyond the "
                f"tolerated {comparison.max_drop:.2%}{needed}"
            )
            issue = Issue("baseline", "underpowered", row.metric, row.minimum_detectable_drop, comparison.max_drop)
            entries.append(_entry("baseline", "warn", text, issue))
    return entries


def _bounds(bounds: tuple[float, float] | None, value: float | None) -> str:
    if bounds is None:
        return number(value)
    return f"[{number(bounds[0])}, {number(bounds[1])}]"


def fingerprint_entries(findings: Findings) -> list[VerdictEntry]:
    """Evidence that the exact rule was not what accepted the tokens (a synthetic mode, a one-hot draft, ...)."""
    return [
        _entry("fingerprint", "warn", f"{item.code}: {item.evidence}", Issue("fingerprint", item.code))
        for item in findings.numbers.fingerprints
    ]


def rule_entries(findings: Findings) -> list[VerdictEntry]:
    """Runs left out of alpha: block and tree rules keep the longest passing prefix or the deepest node of their
    walk, not a first-rejection scan, so accepted / examined would not be their per-token rate; and an engine's
    counts read as the tree the user named (`tree_entries`)."""
    tally = findings.summary.rules
    outside = {} if tally is None else tally.outside_alpha()
    if tally is None or not outside:
        return tree_entries(findings)
    runs = ", ".join(f"{count:,} {name}" for name, count in outside.items())
    rates = ", ".join(f"{name} {tally.tokens_per_pass(name) or 0.0:.4f}" for name in outside)
    kinds = {rule_named(name).kind for name in outside}
    keeps = " and ".join(
        words
        for kind, words in (
            ("chain", "block verification keeps the longest prefix whose joint test passes"),
            ("tree", "a tree keeps the deepest node of its walk"),
        )
        if kind in kinds
    )
    text = (
        f"{runs} run{'s' if sum(outside.values()) != 1 else ''} left out of alpha: {keeps}, not a first-rejection "
        f"scan, so accepted / examined is not their rate; tokens per pass from their accepted lengths: {rates}"
    )
    issue = Issue("rules", "outside_alpha", value=float(sum(outside.values())))
    return [_entry("rules", "warn", text, issue), *tree_entries(findings)]


def tree_entries(findings: Findings) -> list[VerdictEntry]:
    """The engine's counts read as the tree the user named: a pass deeper than its steps, or no histogram to
    give per-depth rates, says the shape is not the server's (or the input holds no tree's counts)."""
    shape = findings.spec.tree
    if shape is None:
        return maybe_tree_entries(findings)
    figures = findings.tree
    if figures is None:
        text = (
            f"a tree ({shape.describe()}) was named, but the input holds no engine's accepted-depth histogram: "
            "per-depth rates need one (logged tree steps name a tree rule instead)"
        )
        return [_entry("tree", "warn", text, Issue("tree", "no_histogram"))]
    deepest = len(figures.histogram) - 1
    if deepest > shape.steps:
        text = (
            f"a verify pass accepted {deepest} drafts, deeper than the {shape.steps} steps of the tree named "
            f"({shape.describe()}): the shape is not the server's"
        )
        return [_entry("tree", "warn", text, Issue("tree", "too_deep", value=deepest, limit=shape.steps))]
    return []


def maybe_tree_entries(findings: Findings) -> list[VerdictEntry]:
    """SGLang counts that read like a tree's, with no shape named: said with the evidence, since the counts cannot
    prove a tree (`summary.engine.tree_evidence`), and with what would give exact per-depth rates."""
    from specaccept_cli.summary.engine import tree_evidence

    evidence = tree_evidence(findings.summary.engine)
    if evidence is None:
        return []
    text = (
        f"SGLang proposed {evidence.width} drafts per verify pass, but no pass of {evidence.passes:,} kept more than "
        f"{evidence.deepest}: {evidence.reached:,} reached depth {evidence.deepest} and none went deeper (a chain "
        f"of {evidence.width} would keep depth {evidence.deepest + 1} at a rate below "
        f"{evidence.chain_rate_at_most:.2g}, 95%). SGLang counts an EAGLE tree's nodes as it counts a chain's "
        "drafts and writes neither the tree's top-k nor its steps per request, so this reads as a tree the counts "
        "cannot prove, and alpha's bounds assume chains; the server's tree shape gives exact per-depth rates"
    )
    issue = Issue("tree", "maybe_tree", value=float(evidence.width), limit=float(evidence.deepest))
    return [_entry("tree", "warn", text, issue)]


ALL_ACCEPTED = 0.999  # alpha at or above this ...
ALL_ACCEPTED_TOKENS = 1000  # ... over at least this many examined tokens: every drafted token accepted
MIN_LOGGED_TOKENS = 1000  # logged tokens before "on every token" is evidence about the log
MIN_REPEATED_RUNS = 100  # runs before one r at every position is evidence


def log_entries(findings: Findings) -> list[VerdictEntry]:
    """Logs that cannot be right, or very likely are not: each a warning with its evidence.

    The exact rule gives figures for any (p, q, r) it is handed; these say when the values themselves
    betray swapped fields, a placeholder or a draft that is the target (summary.tokens).
    """
    numbers, tally = findings.numbers, findings.summary.tokens
    entries = []
    examined = numbers.examined_tokens
    alpha = numbers.alpha
    if alpha is not None and examined is not None and examined >= ALL_ACCEPTED_TOKENS and alpha >= ALL_ACCEPTED:
        text = (
            f"every drafted token accepted: alpha {alpha:.4f} over {examined:,} examined tokens; "
            "are p and q swapped, or is the draft the target?"
        )
        entries.append(_entry("log", "warn", text, Issue("log", "all_accepted", "alpha", alpha)))
    # The value checks hold only over every logged token: a merged summary from a file without the tally is silent.
    if tally is None or tally.tokens != findings.summary.sampled_tokens or tally.tokens < MIN_LOGGED_TOKENS:
        return entries
    tokens = f"{tally.tokens:,}"
    if tally.p_at_most_q == tally.tokens and tally.p_range[0] != tally.p_range[1]:
        text = (
            f"p <= q on all {tokens} logged tokens: the target never gave a drafted token more probability "
            "than the draft did, so no token is accepted for certain; are p and q swapped?"
        )
        entries.append(_entry("log", "warn", text, Issue("log", "p_at_most_q", value=float(tally.tokens))))
    mean_ratio, limit = tally.mean_ratio(), tally.mean_ratio_limit()
    if mean_ratio is not None and mean_ratio > limit:
        text = (
            f"mean p/q is {mean_ratio:.4f} over {tokens} logged tokens (capped at 2), above the {limit:.4f} "
            "an honest log stays under: a token drawn from the draft has E[p/q] <= 1 for any two models, so "
            "p and q are likely swapped, or the drafted tokens were not sampled from the logged q"
        )
        entries.append(_entry("log", "warn", text, Issue("log", "mean_p_over_q", value=mean_ratio, limit=limit)))
    for name, (low, high) in (("p", tally.p_range), ("q", tally.q_range)):
        if low == high and not (name == "q" and low == 1.0):  # q = 1 throughout is greedy_draft's
            text = f"{name} is {low:.6g} on all {tokens} logged tokens: a constant, not a model's probability"
            entries.append(_entry("log", "warn", text, Issue("log", "constant", value=low, at=name)))
    repeated = tally.r_repeated()
    if repeated is not None and repeated[1] >= MIN_REPEATED_RUNS:
        positions, runs = repeated
        text = (
            f"r is identical across runs: each of {positions:,} draft position{'s' if positions != 1 else ''} "
            f"holds one r value in all {runs:,} runs that drafted it; the uniforms are not drawn afresh for each "
            "run (a generator reseeded per request?), so acceptance was not random"
        )
        entries.append(_entry("log", "warn", text, Issue("log", "r_repeated", value=float(runs))))
    return entries


def _change(row: MetricComparison) -> str:
    return "unchanged" if row.change is None else f"{row.change:+.2%}"


def _moved(row: MetricComparison) -> str:
    change = "" if row.change is None else f" ({row.change:+.2%})"
    return f"{number(row.baseline)} -> {number(row.current)}{change}"


def drift_entries(findings: Findings) -> list[VerdictEntry]:
    from specaccept_cli.summary.windows import MIN_DRIFT_WINDOWS, describe_position

    tally, drift, spec = findings.window_tally, findings.drift, findings.spec
    identified = findings.numbers.identified
    if findings.summary.windows is not None and identified is not None and identified.bounded_units:
        text = f"drift not tested: {identified.reason()}, and a window of runs cannot hold their totals"
        if spec.strict_drift:
            return [_entry("drift", "fail", text, Issue("drift", "untestable"))]
        return [_entry("drift", "ok", text)]
    if drift is None or tally is None:
        if spec.strict_drift:
            text = f"drift cannot be tested: it needs at least {MIN_DRIFT_WINDOWS} windows holding runs"
            return [_entry("drift", "fail", text, Issue("drift", "untestable"))]
        text = f"drift not tested (fewer than {MIN_DRIFT_WINDOWS} windows hold runs)"
        return [_entry("drift", "ok", text)] if findings.windows else []
    where = describe_position(tally, drift.change_at)
    if drift.p_value < spec.significance:
        issue = Issue("drift", "drift", "alpha", drift.statistic, spec.significance, drift.p_value, where)
        issue = replace(issue, before=drift.alpha_before, after=drift.alpha_after)
        text = (
            f"alpha is not constant over the log (p = {drift.p_value:.3g} < {spec.significance:g}): likeliest "
            f"change at {where}, {_alpha(drift.alpha_before)} before, {_alpha(drift.alpha_after)} after"
        )
        return [_entry("drift", "fail" if spec.strict_drift else "warn", text, issue)]
    return [_entry("drift", "ok", f"alpha looks constant over the log (p = {drift.p_value:.3g})")]


def _alpha(value: float | None) -> str:
    return "null" if value is None else f"{value:.4f}"


def server_entries(findings: Findings) -> list[VerdictEntry]:
    reported, limit = findings.reported, findings.spec.max_mismatches
    if reported is None:
        return []
    if not reported.mismatches:
        return [_entry("server", "ok", f"reported counts match ({reported.runs:,} runs)")]
    text = f"{reported.mismatches:,} of {reported.runs:,} reported counts mismatch"
    if reported.headline():
        text += f", {reported.headline()}"
    if reported.all_near_ties():
        text += " (every one a near tie: bf16/fp16 p and q do this with a lawful server)"
    failed = limit is not None and reported.mismatches > limit
    issue = Issue("server", "mismatches", "mismatches", reported.mismatches, None if limit is None else float(limit))
    if failed:
        text += f", more than the {limit:,} allowed"
    return [_entry("server", "fail" if failed else "warn", text, issue)]


def sampler_entries(findings: Findings) -> list[VerdictEntry]:
    sampler = findings.sampler
    if sampler is None:
        return []
    failed = [test for test in findings.sampler_tests if test.result.ok is False]
    if not failed:
        if all(test.result.ok is None for test in findings.sampler_tests):
            return [_entry("sampler", "ok", "sampler: no data")]
        return [_entry("sampler", "ok", "sampler ok")]
    status: Status = "fail" if findings.spec.strict_sampler else "warn"
    return [
        _entry(
            "sampler",
            status,
            f"sampler {test.name} fails: p = {test.result.p_value or 0.0:.3g} < {sampler.significance:g}",
            Issue("sampler", "fails", test.name, test.result.statistic, sampler.significance, test.result.p_value),
        )
        for test in failed
    ]


def skipped_phrase(summary: Summary) -> str:
    """What skipping left out, in words: "3 bad rows", "1 unreadable source", or both."""
    skipped, sources = summary.skipped_rows, summary.skipped_sources
    parts = []
    if skipped or not sources:
        parts.append(f"{skipped:,} bad row{'s' if skipped != 1 else ''}")
    if sources:
        parts.append(f"{sources:,} unreadable source{'s' if sources != 1 else ''}")
    return " and ".join(parts)


def skipped_entries(findings: Findings) -> list[VerdictEntry]:
    """What the input left out; or, when it held nothing at all, that nothing was read."""
    summary, spec = findings.summary, findings.spec
    skipped = summary.skipped_rows + summary.skipped_sources
    if not skipped:
        return empty_entries(findings)
    phrase = skipped_phrase(summary)
    entries = []
    if spec.max_errors is not None and skipped > spec.max_errors:
        issue = Issue("skipped", "too_many", value=skipped, limit=spec.max_errors)
        entries.append(_entry("skipped", "fail", f"skipped {phrase}: more than {spec.max_errors:,}", issue))
    # Engine metrics may only bound their runs; engine input whose every metrics line was skipped holds nothing.
    nothing_valid = (
        not summary.runs
        and (summary.engine is None or not summary.engine.intervals)
        and (summary.rules is None or not summary.rules.runs)
    )
    if nothing_valid and not spec.allow_empty:
        entries.append(
            _entry(
                "skipped", "fail", f"no valid run: skipped {phrase}", Issue("skipped", "no_valid_run", value=skipped)
            )
        )
    if not entries:
        entries.append(_entry("skipped", "warn", f"skipped {phrase}", Issue("skipped", "skipped", value=skipped)))
    return entries


def empty_entries(findings: Findings) -> list[VerdictEntry]:
    """Input that held nothing to read (no bytes, or blank lines only): not a failure, but never a silent `ok`."""
    summary = findings.summary
    if summary.runs or summary.skipped_rows or summary.skipped_sources:
        return []
    if summary.rules is not None and summary.rules.runs:  # block and tree runs, outside the counts
        return []
    engine = summary.engine
    if engine is not None and (engine.intervals or engine.lines):
        return []
    text = "nothing was read: the input holds no rows (it is empty, or blank lines only)"
    return [_entry("input", "warn", text, Issue("input", "empty"))]


# Bounds wider than this cannot be read against a gate or a baseline, whose steps are hundredths of alpha
# (--max-drop 0.02): alpha's bounds over 0.1 apart, tokens per pass's top over 1.25 times its bottom.
TOO_WIDE_ALPHA = 0.1
TOO_WIDE_TOKENS_PER_PASS = 1.25
PINNED_DOWN = "input that logs every verify step pins it down"


def wide_bounds_entries(findings: Findings) -> list[VerdictEntry]:
    """A plain word where a figure's bounds are too wide to act on, and why: the input logs totals only."""
    identified = findings.numbers.identified
    if identified is None:
        return []
    entries = []
    # A tree's counts (GateSpec.tree) are read per depth: alpha's bounds over chains are not its figure.
    alpha = identified.alpha_bounds if findings.spec.tree is None else None
    if alpha is not None and alpha[1] - alpha[0] > TOO_WIDE_ALPHA:
        text = (
            f"alpha is only known to lie between {alpha[0]:.4f} and {alpha[1]:.4f}, too wide to act on: "
            f"{identified.reason()}; {PINNED_DOWN}"
        )
        entries.append(_entry("intervals", "warn", text, Issue("intervals", "too_wide", "alpha")))
    tokens, steps = identified.tokens_per_pass_bounds, identified.runs_bounds
    if tokens is not None and steps is not None and tokens[1] > TOO_WIDE_TOKENS_PER_PASS * tokens[0]:
        text = (
            f"tokens per pass is only known to lie between {tokens[0]:.4f} and {tokens[1]:.4f}, too wide to act on: "
            f"the input gives no count of verify steps, only totals that allow {steps[0]:,} to {steps[1]:,}; "
            + PINNED_DOWN
        )
        entries.append(_entry("intervals", "warn", text, Issue("intervals", "too_wide", "tokens_per_pass")))
    return entries


def since_start_entries(findings: Findings) -> list[VerdictEntry]:
    """One scrape alone counts since the server started: say so where the figures are, not only under --full."""
    engine = findings.summary.engine
    if engine is None or not engine.lone_scrapes:
        return []
    text = (
        "one scrape: its counts are since the server started (or its counters were reset), not over a span of "
        "your choosing; two scrapes give the interval between them"
    )
    return [_entry("intervals", "warn", text, Issue("intervals", "since_start"))]


def interval_entries(findings: Findings) -> list[VerdictEntry]:
    numbers = findings.numbers
    identified = numbers.identified
    entries = [*since_start_entries(findings), *wide_bounds_entries(findings)]
    if identified is not None and identified.rates_only:
        units = identified.exact_units + identified.bounded_units + identified.rates_only
        text = (
            f"{identified.rates_only:,} of {units:,} {identified.unit}s print rates only, no token counts: they are "
            "in no figure" + ("" if identified.exact_units + identified.bounded_units else ", so nothing is measured")
        )
        entries.append(_entry("intervals", "warn", text, Issue("intervals", "rates_only")))
    engine = findings.summary.engine
    if engine is not None and engine.duplicate_lines:
        repeated = engine.duplicate_lines
        text = (
            f"{repeated:,} metrics line{'s' if repeated != 1 else ''} repeated an earlier one exactly (time stamp "
            "and process included): taken for a log shipper's duplicate, dropped, not counted twice"
        )
        entries.append(_entry("intervals", "warn", text, Issue("intervals", "duplicate_lines", value=repeated)))
    return entries + _clustering_entries(findings)


def _clustering_entries(findings: Findings) -> list[VerdictEntry]:
    numbers = findings.numbers
    if numbers.runs < 2:
        return []
    if numbers.cluster_field is not None:  # the headline says over which requests
        return []
    if findings.summary.engine is not None and findings.summary.clusters is None:
        text = (
            "intervals are over runs: engine metrics lines count intervals of many requests, which cannot be "
            "told apart, so they hold only for a replayed prompt set"
        )
        return [_entry("intervals", "warn", text, Issue("intervals", "engine_intervals"))]
    text = "intervals are over runs, not requests: they hold only for a replayed prompt set"
    return [_entry("intervals", "warn", text, Issue("intervals", "unclustered"))]


CHECKS: tuple[Callable[[Findings], list[VerdictEntry]], ...] = (
    gate_entries,
    baseline_entries,
    server_entries,
    sampler_entries,
    skipped_entries,
    drift_entries,
    iid_entries,
    log_entries,
    rule_entries,
    fingerprint_entries,
    interval_entries,
)
