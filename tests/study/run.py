"""The seeded study: coverage of every interval, false alarms and power of the baseline test, the i.i.d. check.

`make test` runs the fast profile (tests/study/test_study.py); `make study` runs the deep one
and writes its tables into docs/statistics.md between the study markers (the logged-runs study) and
the payload-study markers (per-request payloads with short drafts, tests/study/payloads.py):

    python -m tests.study.run [--profile deep|fast] [--write-docs] [--only runs|payloads|rules]

and the rule study (block and tree runs in requests, tests/study/rules.py) between the rule-study markers.

Every log is seeded: the same profile gives the same table on every machine.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specaccept_cli.summary.estimates import Estimates, estimate
from specaccept_cli.verdict.checks import compare
from tests.study.payloads import PAYLOAD_DEEP, PAYLOAD_FAST, payload_table
from tests.study.rules import DEEP_LOGS as RULE_DEEP_LOGS
from tests.study.rules import FAST_LOGS as RULE_FAST_LOGS
from tests.study.rules import rule_table
from tests.study.scenarios import SCENARIOS, Scenario

PAGE = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"
START, END = "<!-- study:start -->", "<!-- study:end -->"
PAYLOAD_START, PAYLOAD_END = "<!-- payload-study:start -->", "<!-- payload-study:end -->"
RULE_START, RULE_END = "<!-- rule-study:start -->", "<!-- rule-study:end -->"


@dataclass(frozen=True)
class Case:
    """One row of the coverage table: a scenario at a log size, with or without --cluster-field."""

    scenario: str
    runs: int
    cluster: bool


@dataclass(frozen=True)
class Profile:
    logs: int  # logs per case (consecutive logs pair up for the false-alarm rates)
    cases: tuple[Case, ...]
    power_reps: int
    power_runs: tuple[int, ...]
    power_cases: tuple[tuple[str, bool], ...]  # (scenario, cluster)
    default_logs: int = 0  # logs of the "serving" scenario read with the defaults
    default_runs: int = 4000
    planned_reps: int = 0  # pairs at plan's request count
    planned_baseline_runs: int = 50_000
    planned_drop: float = 0.05
    edge_logs: int = 0  # logs per edge case (EDGE_CASES)
    edge_fingerprint_logs: int = 200
    edge_power_reps: int = 0
    edge_detection_logs: int = 0


@dataclass
class Outcome:
    """Counts over the logs of one case."""

    logs: int = 0
    units: float = 0.0
    covered: dict[str, int] = field(default_factory=lambda: {"alpha": 0, "tokens_per_pass": 0})
    intervals: dict[str, int] = field(default_factory=lambda: {"alpha": 0, "tokens_per_pass": 0})
    zero_width: int = 0
    position_covered: dict[str, int] = field(default_factory=lambda: {"rate": 0, "unconditional_rate": 0})
    position_intervals: dict[str, int] = field(default_factory=lambda: {"rate": 0, "unconditional_rate": 0})
    iid_rejects: int = 0
    pairs: int = 0
    alarms: dict[tuple[float, float], int] = field(default_factory=dict)  # (max_drop, significance) -> alarms

    def rate(self, name: str) -> float:
        return self.covered[name] / max(1, self.intervals[name])

    def position_rate(self, name: str) -> float:
        return self.position_covered[name] / max(1, self.position_intervals[name])

    def alarm_rate(self, max_drop: float, significance: float) -> float:
        return self.alarms.get((max_drop, significance), 0) / max(1, self.pairs)


TESTS = ((0.02, 0.01), (0.02, 0.05), (0.0, 0.01), (0.0, 0.05))


def run_case(case: Case, logs: int, seed: int = 0) -> Outcome:
    scenario = SCENARIOS[case.scenario]
    truth = scenario.truth()
    outcome = Outcome()
    previous: Estimates | None = None
    for index in range(logs):
        numbers = estimate(scenario.summary(case.runs, seed * 1_000_003 + index, case.cluster))
        outcome.logs += 1
        outcome.units += numbers.clusters if numbers.clusters is not None else numbers.runs
        for name, value in (("alpha", truth.alpha), ("tokens_per_pass", truth.tokens_per_pass)):
            bounds = getattr(numbers, f"{name}_ci")
            if bounds is not None:
                outcome.intervals[name] += 1
                outcome.covered[name] += bounds[0] <= value <= bounds[1]
                outcome.zero_width += bounds[0] == bounds[1]
        for row in numbers.per_position:
            for name in ("rate", "unconditional_rate"):
                bounds = getattr(row, f"{name}_ci")
                if bounds is None:
                    continue
                value = getattr(truth, name)[row.position - 1]
                outcome.position_intervals[name] += 1
                outcome.position_covered[name] += bounds[0] <= value <= bounds[1]
                outcome.zero_width += bounds[0] == bounds[1]
        check = numbers.iid_check
        outcome.iid_rejects += check is not None and not check.consistent
        if index % 2 == 1 and previous is not None:  # two fresh logs of the same system
            outcome.pairs += 1
            for max_drop, significance in TESTS:
                comparison = compare(previous, numbers, max_drop, significance)
                regressed = any(row.verdict == "regressed" for row in comparison.metrics)
                key = (max_drop, significance)
                outcome.alarms[key] = outcome.alarms.get(key, 0) + regressed
        previous = numbers
    return outcome


def power(scenario: Scenario, runs: int, cluster: bool, drop: float, reps: int, seed: int = 7) -> float:
    """Share of (baseline, current dropped by `drop`) pairs that regress at --significance 0.01, --max-drop 0."""
    alarms = 0
    for rep in range(reps):
        baseline = estimate(scenario.summary(runs, seed * 7919 + 2 * rep, cluster))
        current = estimate(scenario.summary(runs, seed * 7919 + 2 * rep + 1, cluster, drop=drop))
        comparison = compare(baseline, current, 0.0, 0.01)
        alarms += any(row.verdict == "regressed" for row in comparison.metrics)
    return alarms / reps


# --- the defaults: request-clustered logs read with no flag -------------------------------------------


@dataclass
class DefaultOutcome:
    """Counts over logs read by the defaults: coverage, baseline and drift false alarms, windows' marks."""

    logs: int = 0
    clustered: int = 0  # logs the defaults clustered by request_id
    units: float = 0.0
    covered: dict[str, int] = field(default_factory=lambda: {"alpha": 0, "tokens_per_pass": 0})
    intervals: dict[str, int] = field(default_factory=lambda: {"alpha": 0, "tokens_per_pass": 0})
    pairs: int = 0
    alarms: dict[tuple[float, float], int] = field(default_factory=dict)
    drift_tests: int = 0
    drift_alarms: dict[float, int] = field(default_factory=dict)
    windows: int = 0
    windows_excluding: int = 0  # windows whose interval leaves out the true alpha (nominal 5%)

    def rate(self, name: str) -> float:
        return self.covered[name] / max(1, self.intervals[name])

    def alarm_rate(self, max_drop: float, significance: float) -> float:
        return self.alarms.get((max_drop, significance), 0) / max(1, self.pairs)

    def drift_rate(self, significance: float) -> float:
        return self.drift_alarms.get(significance, 0) / max(1, self.drift_tests)


def run_defaults(scenario_name: str, runs: int, logs: int, seed: int = 0) -> DefaultOutcome:
    """`logs` seeded logs of a request-clustered scenario, each written as JSONL and read with no flag."""
    import tempfile

    from specaccept_cli.summary.windows import drift_test, window_estimates

    scenario = SCENARIOS[scenario_name]
    truth = scenario.truth()
    outcome = DefaultOutcome()
    previous: Estimates | None = None
    with tempfile.TemporaryDirectory(prefix="specaccept-study-") as directory:
        for index in range(logs):
            summary = scenario.summary_by_default(runs, seed * 1_000_003 + index, Path(directory))
            numbers = estimate(summary)
            outcome.logs += 1
            outcome.clustered += numbers.cluster_field == "request_id"
            outcome.units += numbers.clusters or numbers.runs
            for name, value in (("alpha", truth.alpha), ("tokens_per_pass", truth.tokens_per_pass)):
                bounds = getattr(numbers, f"{name}_ci")
                if bounds is not None:
                    outcome.intervals[name] += 1
                    outcome.covered[name] += bounds[0] <= value <= bounds[1]
            if summary.windows is not None:
                drift = drift_test(summary.windows, summary.clusters)
                if drift is not None:
                    outcome.drift_tests += 1
                    for significance in (0.01, 0.05):
                        alarms = outcome.drift_alarms.get(significance, 0) + (drift.p_value < significance)
                        outcome.drift_alarms[significance] = alarms
                for window in window_estimates(summary.windows, summary.clusters):
                    if window.alpha_ci is not None:
                        outcome.windows += 1
                        outcome.windows_excluding += not window.alpha_ci[0] <= truth.alpha <= window.alpha_ci[1]
            if index % 2 == 1 and previous is not None:
                outcome.pairs += 1
                for max_drop, significance in TESTS:
                    comparison = compare(previous, numbers, max_drop, significance)
                    regressed = any(row.verdict == "regressed" for row in comparison.metrics)
                    outcome.alarms[max_drop, significance] = outcome.alarms.get((max_drop, significance), 0) + regressed
            previous = numbers
    return outcome


@dataclass(frozen=True)
class PlannedPower:
    """`specaccept plan`'s request count for a drop, and the power a seeded study achieves at it."""

    drop: float
    baseline_runs: int
    requests_needed: int
    current_runs: int
    power: float  # share of pairs whose alpha comparison regressed (--max-drop 0, --significance 0.01)
    reps: int


def planned_power(scenario_name: str, baseline_runs: int, drop: float, reps: int, seed: int = 11) -> PlannedPower:
    """Plan from one baseline, then `reps` fresh (baseline, current of the planned size, dropped) pairs.

    Every log is read by the defaults. The current log's runs are the planned requests times the
    scenario's mean runs per request; the achieved power is the alpha comparison's rate of regressing.
    """
    import tempfile

    from specaccept_cli.verdict.checks import plan_requests

    scenario = SCENARIOS[scenario_name]
    assert scenario.requests is not None, "power is planned in requests"
    low, high = scenario.requests.runs
    per_request = (low + high) / 2
    with tempfile.TemporaryDirectory(prefix="specaccept-study-") as directory:
        folder = Path(directory)
        planning = estimate(scenario.summary_by_default(baseline_runs, seed * 7919, folder))
        needed = plan_requests(planning, drop, 0.0, 0.01)[0].requests_needed
        assert needed is not None, "the planning baseline is too small for this drop"
        current_runs = round(needed * per_request)
        regressed = 0
        for rep in range(reps):
            base = seed * 7919 + 2 * rep + 1
            baseline = estimate(scenario.summary_by_default(baseline_runs, base, folder))
            current = estimate(scenario.summary_by_default(current_runs, base + 1, folder, drop=drop))
            regressed += compare(baseline, current, 0.0, 0.01).metrics[0].verdict == "regressed"
    return PlannedPower(drop, baseline_runs, needed, current_runs, regressed / reps, reps)


def defaults_table(scenario_name: str, runs: int, logs: int, power: PlannedPower | None) -> str:
    """The defaults' study as markdown (a row of coverage and false alarms, then the planned power)."""
    outcome = run_defaults(scenario_name, runs, logs)
    scenario = SCENARIOS[scenario_name]
    lines = [
        "| scenario | runs | clustered by default | requests | alpha | tokens/pass | baseline false alarms "
        "0.01 / 0.05 | (--max-drop 0) | drift false alarms 0.01 / 0.05 | windows excluding the truth |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        f"| {scenario.name} | {runs:,} | {_percent(outcome.clustered / outcome.logs)} | "
        f"{outcome.units / outcome.logs:,.0f} | {_percent(outcome.rate('alpha'))} | "
        f"{_percent(outcome.rate('tokens_per_pass'))} | "
        f"{_percent(outcome.alarm_rate(0.02, 0.01))} / {_percent(outcome.alarm_rate(0.02, 0.05))} | "
        f"{_percent(outcome.alarm_rate(0.0, 0.01))} / {_percent(outcome.alarm_rate(0.0, 0.05))} | "
        f"{_percent(outcome.drift_rate(0.01))} / {_percent(outcome.drift_rate(0.05))} | "
        f"{_percent(outcome.windows_excluding / max(1, outcome.windows))} (nominal 5%) |",
    ]
    text = f"Read with the defaults (no flag), {logs:,} logs:\n\n" + "\n".join(lines)
    if power is not None:
        text += (
            f"\n\nPower at `specaccept plan`'s request count ({power.reps} pairs, every log read by the defaults): "
            f"a {power.drop:.0%} drop, baselines of {power.baseline_runs:,} runs, plan says "
            f"{power.requests_needed:,} requests ({power.current_runs:,} runs): the alpha comparison "
            f"(--max-drop 0, --significance 0.01) flagged {_percent(power.power)} (target 80%)."
        )
    return text


# --- the edges: few and unequal requests, one-run and ten-run requests, as the defaults read them -------

EDGE_CASES = ("unequal_5", "unequal_10", "unequal_20", "one_run", "ten_run", "serving")
EDGE_RUNS = 4000  # runs of a log where the scenario is not a fixed number of requests
SIGNIFICANCES = (0.01, 0.05)


@dataclass
class EdgeOutcome:
    """Coverage, false alarms and fingerprints over the logs of one edge case, read as the defaults read them."""

    logs: int = 0
    units: float = 0.0
    covered: dict[str, int] = field(default_factory=lambda: {"alpha": 0, "tokens_per_pass": 0, "group": 0})
    intervals: dict[str, int] = field(default_factory=lambda: {"alpha": 0, "tokens_per_pass": 0, "group": 0})
    pairs: int = 0
    alarms: dict[float, int] = field(default_factory=dict)  # --max-drop 0 at each significance
    drift_tests: int = 0
    drift_alarms: dict[float, int] = field(default_factory=dict)
    fingerprint_logs: int = 0
    fingerprinted: int = 0
    log_warned: int = 0  # impossible-log warnings (verdict check "log") on the same ordinary logs

    def rate(self, name: str) -> float:
        return self.covered[name] / max(1, self.intervals[name])


def run_edge(name: str, logs: int, fingerprint_logs: int, seed: int = 0, runs: int = EDGE_RUNS) -> EdgeOutcome:
    """`logs` seeded logs of an edge case: every interval against the truth, fresh pairs for the baseline test
    (--max-drop 0), the drift test, and any fingerprint on the first `fingerprint_logs` (all ordinary logs)."""
    from specaccept_cli.summary.state import shown_groups
    from specaccept_cli.summary.windows import drift_test
    from specaccept_cli.verdict.conclude import conclude

    scenario = SCENARIOS[name]
    truth = scenario.truth()
    outcome = EdgeOutcome()
    previous: Estimates | None = None
    for index in range(logs):
        summary = scenario.summary_as_served(runs, seed * 1_000_003 + index)
        numbers = estimate(summary)
        outcome.logs += 1
        outcome.units += numbers.clusters or 0
        for metric, value in (("alpha", truth.alpha), ("tokens_per_pass", truth.tokens_per_pass)):
            bounds = getattr(numbers, f"{metric}_ci")
            if bounds is not None:
                outcome.intervals[metric] += 1
                outcome.covered[metric] += bounds[0] <= value <= bounds[1]
        for _, group in shown_groups(summary, 0)[0]:
            bounds = estimate(group).alpha_ci
            if bounds is not None:
                outcome.intervals["group"] += 1
                outcome.covered["group"] += bounds[0] <= truth.alpha <= bounds[1]
        if summary.windows is not None:
            drift = drift_test(summary.windows, summary.clusters)
            if drift is not None:
                outcome.drift_tests += 1
                for significance in SIGNIFICANCES:
                    outcome.drift_alarms[significance] = outcome.drift_alarms.get(significance, 0) + (
                        drift.p_value < significance
                    )
        if index < fingerprint_logs:
            outcome.fingerprint_logs += 1
            outcome.fingerprinted += bool(numbers.fingerprints)
            outcome.log_warned += any(entry.check == "log" for entry in conclude(summary).verdict)
        if index % 2 == 1 and previous is not None:
            outcome.pairs += 1
            for significance in SIGNIFICANCES:
                regressed = any(
                    row.verdict == "regressed" for row in compare(previous, numbers, 0.0, significance).metrics
                )
                outcome.alarms[significance] = outcome.alarms.get(significance, 0) + regressed
        previous = numbers
    return outcome


def edge_planned_power(name: str, drop: float, reps: int, seed: int = 13, runs: int = 20_000) -> PlannedPower:
    """`_planned_power` of the case; the unequal cases plan from 100 requests and draw the current log at plan's
    count whatever their own count, so they share one measurement (computed once)."""
    scenario = SCENARIOS[name]
    if scenario.unequal is not None:
        name = next(other for other in EDGE_CASES if SCENARIOS[other].unequal is not None)
    return _planned_power(name, drop, reps, seed, runs)


@functools.cache
def _planned_power(name: str, drop: float, reps: int, seed: int, runs: int) -> PlannedPower:
    """`reps` times: plan from a fresh baseline log of the case, then draw a current log of plan's request count
    with acceptance scaled by 1 - drop and compare it with that baseline: the share the alpha comparison flags
    (--max-drop 0, --significance 0.01). Each pair plans from its own baseline, as a user does, so the power is
    over the baseline's noise too. A case of a fixed number of requests plans from 100 of them and draws the
    current log's requests from the same sizes. `requests_needed` is the median planned count."""
    from dataclasses import replace as replace_struct

    from specaccept_cli.verdict.checks import plan_requests

    scenario = SCENARIOS[name]
    planning_scenario = scenario
    if scenario.unequal is not None:
        planning_scenario = replace_struct(scenario, unequal=(100, scenario.unequal[1]))
    requests = scenario.requests
    assert requests is not None

    def runs_of(count: int) -> int:  # runs of `count` requests of the scenario's mean size
        return round(count * (requests.runs[0] + requests.runs[1]) / 2)

    regressed, planned, current_runs = 0, [], 0
    for rep in range(reps):
        base = seed * 7919 + 2 * rep + 1
        baseline = estimate(planning_scenario.summary_as_served(runs, base))
        needed = plan_requests(baseline, drop, 0.0, 0.01)[0].requests_needed
        assert needed is not None, "the planning baseline is too small for this drop"
        planned.append(needed)
        if scenario.unequal is not None:
            current_scenario, current_runs = replace_struct(scenario, unequal=(needed, scenario.unequal[1])), 0
        else:
            current_scenario, current_runs = scenario, runs_of(needed)
        current = estimate(current_scenario.summary_as_served(current_runs, base + 1, drop=drop))
        regressed += compare(baseline, current, 0.0, 0.01).metrics[0].verdict == "regressed"
    middle = sorted(planned)[len(planned) // 2]
    typical_runs = 0 if scenario.unequal is not None else runs_of(middle)
    return PlannedPower(drop, runs, middle, typical_runs, regressed / reps, reps)


def synthetic_detection(name: str, mode: str, logs: int, seed: int = 17, runs: int = EDGE_RUNS) -> tuple[float, float]:
    """Share of `logs` logs with the case's requests whose accepted lengths vLLM's synthetic sampler chose that
    show `synthetic_acceptance` (vllm/v1/sample/rejection_sampler.py with rejection_sample_method: synthetic).

    "length": synthetic_acceptance_length 2.6 at k = 4, the minimum-variance schedule [1.0] * int(L - 1) +
    [frac] + [0.0] * ..., so every step accepts 1 or 2 tokens; "rates": synthetic_acceptance_rates
    [0.8, 0.6, 0.45, 0.3], one uniform per step against the unconditional rates, the same for every request.

    Returns (the share of logs that can show the mode, the share of those found). Every log can show a length
    target; fixed rates only where the dispersion test had the power to see real prompts' spread (its gate:
    `fingerprints.Dispersion.powered`), so one-run requests, or a handful of requests, cannot.
    """
    from specaccept_cli.summary.clusters import ClusterTally
    from specaccept_cli.summary.fingerprints import dispersion
    from specaccept_cli.summary.state import Summary

    scenario = SCENARIOS[name]
    found = testable = 0
    for index in range(logs):
        rng = np.random.default_rng(seed * 1_000_003 + index)
        chunks = list(scenario._chunks(runs, scenario.alpha, seed * 1_000_003 + index, None))
        request = np.concatenate([chunk.request for chunk in chunks if chunk.request is not None])
        steps = request.shape[0]
        k = np.full(steps, 4, dtype=np.int64)
        if mode == "length":
            accepted = 1 + (rng.random(steps) < 0.6).astype(np.int64)
        else:
            accepted = (rng.random(steps)[:, None] < np.array([0.8, 0.6, 0.45, 0.3])[None, :]).sum(axis=1)
        counts = np.zeros((5, 5), dtype=np.int64)
        np.add.at(counts, (k, accepted), 1)
        clusters = ClusterTally.of_runs("request_id", request.astype(np.uint64), k, accepted)
        summary = Summary(counts=counts, clusters=clusters)
        if mode == "rates":
            test = dispersion(summary)
            if test is None or not test.powered:
                continue
        testable += 1
        found += any(item.code == "synthetic_acceptance" for item in estimate(summary).fingerprints)
    return testable / logs, found / max(1, testable)


def edges_table(logs: int, fingerprint_logs: int, power_reps: int, detection_logs: int) -> str:
    """The edge cases as markdown: one row each, then detection of the synthetic modes."""
    rows = [edge_row(name, logs, fingerprint_logs, power_reps, detection_logs) for name in EDGE_CASES]
    sizes = [iid_size(count, logs) for count in (5, 10, 20)]
    return edges_text(logs, fingerprint_logs, power_reps, detection_logs, rows, sizes)


def edges_text(
    logs: int, fingerprint_logs: int, power_reps: int, detection_logs: int, rows: list[str], sizes: list[float]
) -> str:
    lines = [
        "| scenario | requests | alpha | tokens/pass | group alpha | baseline false alarms 0.01 / 0.05 | "
        "drift false alarms 0.01 / 0.05 | power at plan's count | fingerprints / log warnings on ordinary logs | "
        "synthetic length / rates found |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        *rows,
    ]
    return (
        f"The edges, read as the defaults read them (clustered by request_id, windows of runs; {logs:,} logs a "
        f"case, fingerprints on the first {fingerprint_logs}; power: {power_reps} pairs at plan's request count "
        "for a 10% drop, 20% for unequal requests, each pair planned from its own baseline (100 requests of the "
        "unequal cases), the median planned count shown; synthetic modes: "
        f"{detection_logs} logs each):\n\n" + "\n".join(lines) + "\n\nThe i.i.d. check's size with "
        "5, 10 and 20 requests of 20-2,000 runs at one alpha (no request effect; nominal 1%, "
        f"{logs:,} logs each): " + " / ".join(_percent(size) for size in sizes) + "."
    )


def edge_row(name: str, logs: int, fingerprint_logs: int, power_reps: int, detection_logs: int) -> str:
    """One edge case's row of the table."""
    outcome = run_edge(name, logs, fingerprint_logs)
    pairs = max(1, outcome.pairs)
    tests = max(1, outcome.drift_tests)
    drop = 0.2 if SCENARIOS[name].unequal is not None else 0.1  # requests of 100x spread need a larger drop
    power = "" if not power_reps else _power_cell(edge_planned_power(name, drop, power_reps))
    detection = ""
    if detection_logs:
        length = synthetic_detection(name, "length", detection_logs)[1]
        testable, found = synthetic_detection(name, "rates", detection_logs)
        rates = f"{_percent(found)} of {_percent(testable)} testable" if testable else "untestable (no power)"
        detection = f"{_percent(length)} / {rates}"
    return (
        f"| {SCENARIOS[name].name} | {outcome.units / max(1, outcome.logs):,.0f} | "
        f"{_percent(outcome.rate('alpha'))} | {_percent(outcome.rate('tokens_per_pass'))} | "
        f"{_percent(outcome.rate('group'))} | "
        f"{_percent(outcome.alarms.get(0.01, 0) / pairs)} / {_percent(outcome.alarms.get(0.05, 0) / pairs)} | "
        f"{_percent(outcome.drift_alarms.get(0.01, 0) / tests)} / "
        f"{_percent(outcome.drift_alarms.get(0.05, 0) / tests)} | {power} | "
        f"{outcome.fingerprinted} / {outcome.log_warned} of {outcome.fingerprint_logs} | {detection} |"
    )


def iid_size(count: int, logs: int, seed: int = 19) -> float:
    """The share of `logs` logs of `count` unequal requests at one alpha (runs truly i.i.d., clustered by
    request as the defaults read them) whose i.i.d. check says "does not fit": its size, nominal 1%."""
    scenario = SCENARIOS[f"unequal_{count}_flat"]
    rejected = checked = 0
    for index in range(logs):
        check = estimate(scenario.summary_as_served(EDGE_RUNS, seed * 1_000_003 + index)).iid_check
        if check is not None:
            checked += 1
            rejected += not check.consistent
    return rejected / max(1, checked)


def _power_cell(power: PlannedPower) -> str:
    return f"{_percent(power.power)} ({power.requests_needed:,} requests, {power.drop:.0%} drop)"


FAST = Profile(  # what `make test` runs (tests/study/test_study.py)
    logs=200,
    cases=(
        Case("iid", 1000, False),
        Case("position", 1000, False),
        Case("clustered", 8000, True),
        Case("clustered", 8000, False),
        Case("small_99", 50, False),
    ),
    power_reps=0,
    power_runs=(),
    power_cases=(),
)  # the defaults' fast checks: tests/study/test_study.py runs `run_defaults` and `planned_power` on few logs

DEEP = Profile(
    logs=1000,
    cases=(
        Case("iid", 2000, False),
        Case("position", 2000, False),
        Case("clustered", 20000, False),
        Case("clustered", 20000, True),
        Case("clustered", 5000, True),
        Case("k_tied", 20000, True),
        Case("small_90", 50, False),
        Case("small_99", 50, False),
        Case("small_99", 200, False),
    ),
    power_reps=100,
    power_runs=(20_000, 200_000),
    power_cases=(("iid", False), ("clustered", True)),
    default_logs=1000,
    default_runs=4000,
    planned_reps=300,
    planned_baseline_runs=20_000,
    edge_logs=2000,
    edge_fingerprint_logs=400,
    edge_power_reps=1000,
    edge_detection_logs=400,
)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(profile: Profile) -> str:
    """The study as markdown: a coverage and false-alarm table, then power."""
    lines = [
        "| scenario | runs | units | alpha | tokens/pass | rate | uncond. | zero-width | "
        "false alarms 0.01 / 0.05 | (--max-drop 0) | i.i.d. check rejects |",
        "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for case in profile.cases:
        outcome = run_case(case, profile.logs)
        units = f"{outcome.units / outcome.logs:,.0f} clusters" if case.cluster else "runs"
        lines.append(
            f"| {SCENARIOS[case.scenario].name} | {case.runs:,} | {units} | {_percent(outcome.rate('alpha'))} | "
            f"{_percent(outcome.rate('tokens_per_pass'))} | {_percent(outcome.position_rate('rate'))} | "
            f"{_percent(outcome.position_rate('unconditional_rate'))} | {outcome.zero_width} | "
            f"{_percent(outcome.alarm_rate(0.02, 0.01))} / {_percent(outcome.alarm_rate(0.02, 0.05))} | "
            f"{_percent(outcome.alarm_rate(0.0, 0.01))} / {_percent(outcome.alarm_rate(0.0, 0.05))} | "
            f"{_percent(outcome.iid_rejects / outcome.logs)} |"
        )
    text = "\n".join(lines)
    if profile.power_reps:
        power_lines = ["| scenario | units | runs | 2% drop | 5% drop |", "|---|---|--:|--:|--:|"]
        for name, cluster in profile.power_cases:
            scenario = SCENARIOS[name]
            for runs in profile.power_runs:
                rates = [power(scenario, runs, cluster, drop, profile.power_reps) for drop in (0.02, 0.05)]
                units = "clusters" if cluster else "runs"
                power_lines.append(
                    f"| {scenario.name} | {units} | {runs:,} | {_percent(rates[0])} | {_percent(rates[1])} |"
                )
        text += (
            f"\n\nPower (--max-drop 0, --significance 0.01, {profile.power_reps} pairs each; a drop scales "
            "every token's acceptance):\n\n" + "\n".join(power_lines)
        )
    if profile.default_logs:
        planned = None
        if profile.planned_reps:
            planned = planned_power(
                "serving", profile.planned_baseline_runs, profile.planned_drop, profile.planned_reps
            )
        text += "\n\n" + defaults_table("serving", profile.default_runs, profile.default_logs, planned)
    if profile.edge_logs:
        text += "\n\n" + edges_table(
            profile.edge_logs, profile.edge_fingerprint_logs, profile.edge_power_reps, profile.edge_detection_logs
        )
    return text


def write_page(text: str, page: Path = PAGE, start: str = START, end: str = END) -> None:
    """Put the table between the page's markers (the rest of the page stays as it is)."""
    content = page.read_text()
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(content):
        raise SystemExit(f"{page}: no {start} ... {end} markers")
    page.write_text(pattern.sub(lambda _: f"{start}\n{text}\n{end}", content))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--profile", choices=("fast", "deep"), default="deep")
    parser.add_argument("--write-docs", action="store_true", help=f"write the table into {PAGE.name}")
    parser.add_argument("--only", choices=("runs", "payloads", "rules"), help="one study only (default: all)")
    args = parser.parse_args(argv)
    deep = args.profile == "deep"
    if args.only in (None, "runs"):
        text = table(DEEP if deep else FAST)
        print(text, flush=True)
        if args.write_docs:
            write_page(text)
    if args.only in (None, "rules"):
        rules = rule_table(RULE_DEEP_LOGS if deep else RULE_FAST_LOGS)
        print(rules, flush=True)
        if args.write_docs:
            write_page(rules, start=RULE_START, end=RULE_END)
    if args.only in (None, "payloads"):
        payloads = payload_table(PAYLOAD_DEEP if deep else PAYLOAD_FAST)
        print(payloads, flush=True)
        if args.write_docs:
            write_page(payloads, start=PAYLOAD_START, end=PAYLOAD_END)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
