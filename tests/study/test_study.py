"""The study's fast profile: every interval and test on realistic simulated logs, seeded.

Bands are wide enough for 200 logs (binomial sd of a 95% coverage is 1.5%) and narrow enough
to catch the failures the study exists for: run-level intervals on clustered logs cover ~20%,
the old i.i.d. check never fired, a zero-variance baseline alarmed at p = 1e-48. The deep
profile (`make study`) runs 1,000 logs per case and writes its table to docs/statistics.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specaccept_cli.summary.estimates import estimate
from specaccept_cli.verdict.checks import compare
from tests import payloads as sim
from tests.study.payloads import PAYLOAD_FAST, STEPS, PayloadCase, log_truth, process_truth, run_payload_case
from tests.study.run import (
    FAST,
    PAYLOAD_END,
    PAYLOAD_START,
    Case,
    Outcome,
    planned_power,
    run_case,
    run_defaults,
    run_edge,
    synthetic_detection,
    write_page,
)
from tests.study.scenarios import SCENARIOS

LOGS = FAST.logs


@pytest.fixture(scope="module")
def outcomes() -> dict[Case, Outcome]:
    """The fast profile's cases, seeded apart from the deep profile's logs."""
    return {case: run_case(case, LOGS, seed=1) for case in FAST.cases}


def test_truths_of_known_cases() -> None:
    iid = SCENARIOS["iid"].truth()
    assert iid.alpha == pytest.approx(0.75) and all(rate == pytest.approx(0.75) for rate in iid.rate)
    assert iid.unconditional_rate[0] == pytest.approx(0.75)
    decay = SCENARIOS["position"].truth()
    assert decay.rate[:3] == pytest.approx((0.9, 0.82, 0.75))
    clustered = SCENARIOS["clustered"].truth()
    assert 0.7 < clustered.alpha < 0.8  # tokens of easy requests are examined more: above the Beta mean


def test_intervals_cover_when_runs_are_independent(outcomes: dict[Case, Outcome]) -> None:
    for case in (Case("iid", 1000, False), Case("position", 1000, False)):
        outcome = outcomes[case]
        for name in ("alpha", "tokens_per_pass"):
            assert 0.90 <= outcome.rate(name) <= 0.99, (case, name, outcome.rate(name))
        for name in ("rate", "unconditional_rate"):
            assert 0.91 <= outcome.position_rate(name) <= 0.985, (case, name, outcome.position_rate(name))
        assert outcome.zero_width == 0


def test_cluster_robust_intervals_cover_on_request_clustered_logs(outcomes: dict[Case, Outcome]) -> None:
    outcome = outcomes[Case("clustered", 8000, True)]
    for name in ("alpha", "tokens_per_pass"):
        assert 0.90 <= outcome.rate(name) <= 0.995, (name, outcome.rate(name))
    for name in ("rate", "unconditional_rate"):
        assert 0.90 <= outcome.position_rate(name) <= 0.995, (name, outcome.position_rate(name))
    # ... where intervals over runs cover a fraction of the time: the reason for --cluster-field
    over_runs = outcomes[Case("clustered", 8000, False)]
    assert over_runs.rate("alpha") < 0.5


def test_baseline_false_alarms_stay_near_nominal(outcomes: dict[Case, Outcome]) -> None:
    for case in (Case("iid", 1000, False), Case("position", 1000, False), Case("clustered", 8000, True)):
        outcome = outcomes[case]
        assert outcome.alarm_rate(0.02, 0.01) <= 0.03, case
        assert outcome.alarm_rate(0.0, 0.05) <= 0.12, case
    # without --cluster-field a fresh-prompt comparison of clustered logs cries wolf; it is warned about
    assert outcomes[Case("clustered", 8000, False)].alarm_rate(0.02, 0.01) > 0.1


def test_the_clustered_comparison_warns_without_a_cluster_field() -> None:
    scenario = SCENARIOS["clustered"]
    runs_only = compare(estimate(scenario.summary(4000, 1, False)), estimate(scenario.summary(4000, 2, False)))
    assert any(warning.kind == "unclustered" for warning in runs_only.warnings)
    clustered = compare(estimate(scenario.summary(4000, 1, True)), estimate(scenario.summary(4000, 2, True)))
    assert not any(warning.kind == "unclustered" for warning in clustered.warnings)


def test_iid_check_size_and_power(outcomes: dict[Case, Outcome]) -> None:
    assert outcomes[Case("iid", 1000, False)].iid_rejects / LOGS <= 0.04  # nominal 1%
    assert outcomes[Case("position", 1000, False)].iid_rejects / LOGS >= 0.9  # decay 0.9 -> 0.59 at 1,000 runs


def test_small_logs_near_one_have_no_zero_width_intervals(outcomes: dict[Case, Outcome]) -> None:
    outcome = outcomes[Case("small_99", 50, False)]
    assert outcome.zero_width == 0
    assert outcome.rate("alpha") >= 0.88
    assert outcome.alarm_rate(0.02, 0.01) <= 0.03


def test_the_study_table_goes_between_the_markers_of_its_page(tmp_path: Path) -> None:
    page = tmp_path / "statistics.md"
    page.write_text("before\n<!-- study:start -->\nold\n<!-- study:end -->\nafter\n")
    write_page("| new |", page)
    assert page.read_text() == "before\n<!-- study:start -->\n| new |\n<!-- study:end -->\nafter\n"


def test_the_defaults_cluster_request_logs_and_stay_honest() -> None:
    """Logs written as `specaccept simulate` writes them, read with no flag: clustered by request_id, so the
    intervals cover and neither the baseline gate nor the drift test cries wolf (the deep profile measures
    1,000 logs; these bands hold for 20)."""
    outcome = run_defaults("serving", 2000, 20, seed=2)
    assert outcome.clustered == outcome.logs == 20
    assert outcome.rate("alpha") >= 0.85 and outcome.rate("tokens_per_pass") >= 0.85
    assert outcome.alarm_rate(0.02, 0.01) <= 0.1 and outcome.alarm_rate(0.0, 0.05) <= 0.25
    assert outcome.drift_rate(0.01) <= 0.1 and outcome.drift_rate(0.05) <= 0.2
    assert outcome.windows and outcome.windows_excluding / outcome.windows <= 0.12


def test_plan_predicts_requests_that_detect_the_drop() -> None:
    """At plan's request count the alpha comparison flags the drop about 80% of the time (deep profile: 75-85%)."""
    result = planned_power("serving", 5000, 0.15, reps=16, seed=3)
    assert result.requests_needed > 10 and result.current_runs > 100
    assert 0.5 <= result.power <= 1.0, result


# --- per-request payloads with short drafts (tests/study/payloads.py) ----------------------------------


def test_payload_truths_are_the_generators() -> None:
    """The process truth in closed form: by hand at k = 1, and what a log of 6,000 requests realises."""
    one = process_truth(PayloadCase("aiperf", 1, 0.0, k=1))
    assert one.alpha == pytest.approx(0.7) and one.tokens_per_pass == pytest.approx(1.7)
    assert one.acceptance_rate == pytest.approx(0.7)
    for case in (PayloadCase("aiperf", 6000, 0.3, k=8, spread=1.0), PayloadCase("aiperf", 6000, 0.02, k=2)):
        truth = process_truth(case)
        log = log_truth(sim.requests(1, case.requests, case.k, STEPS, case.spread, case.ragged))
        assert log.alpha == pytest.approx(truth.alpha, abs=0.01)
        assert log.tokens_per_pass == pytest.approx(truth.tokens_per_pass, abs=0.05)
        assert log.acceptance_rate == pytest.approx(truth.acceptance_rate, abs=0.01)


@pytest.mark.parametrize("case", PAYLOAD_FAST.cases, ids=lambda case: f"{case.shape}-{case.requests}")
def test_payload_bounds_hold_the_truth_and_the_whole_input_is_exact(case: PayloadCase) -> None:
    """Every log: the whole-input figures equal its truth and its bounds hold its alpha; the bounds' 95%
    interval covers the process's alpha (deep profile: 1,000 logs; this band holds for 60)."""
    logs = PAYLOAD_FAST.logs_of(case)
    outcome = run_payload_case(case, logs, seed=1)
    assert outcome.logs == logs and outcome.requests_bounded > 0
    assert outcome.exact_equal == logs, outcome.exact_failures
    assert outcome.bounds_hold == logs
    assert outcome.intervals == logs and outcome.covers_log == logs
    assert outcome.covers_process / logs >= 0.85
    assert outcome.tokens_intervals == logs and outcome.tokens_covered / logs >= 0.85


def test_the_payload_table_goes_between_its_own_markers(tmp_path: Path) -> None:
    page = tmp_path / "statistics.md"
    runs = "<!-- study:start -->\nruns\n<!-- study:end -->\n"
    page.write_text(runs + f"{PAYLOAD_START}\nold\n{PAYLOAD_END}\n")
    write_page("| new |", page, start=PAYLOAD_START, end=PAYLOAD_END)
    assert page.read_text() == runs + "<!-- payload-study:start -->\n| new |\n<!-- payload-study:end -->\n"


def test_few_and_unequal_requests_are_covered_and_quiet() -> None:
    """5 requests of 20-2,000 runs: CR2 with Imbens-Kolesar degrees of freedom covers (the G/(G-1) sandwich with
    G - 1 df covered 75% here); no false alarm, no fingerprint, no impossible-log warning (the deep profile runs
    600 logs a case)."""
    outcome = run_edge("unequal_5", 30, 30, seed=4)
    assert outcome.rate("alpha") >= 0.85 and outcome.rate("tokens_per_pass") >= 0.85, outcome
    assert outcome.alarms.get(0.01, 0) <= 1 and outcome.fingerprinted == 0 and outcome.log_warned == 0


def test_synthetic_modes_are_found_where_the_log_can_show_them() -> None:
    """vLLM's length target shows in any log; fixed rates only where requests hold runs enough to differ."""
    assert synthetic_detection("ten_run", "length", 5) == (1.0, 1.0)
    testable, found = synthetic_detection("ten_run", "rates", 10)
    assert testable == 1.0 and found >= 0.9
    # 20 unequal requests: a few large ones give the power (the exact chi-square tail, from 5 requests on)
    testable, found = synthetic_detection("unequal_20", "rates", 10)
    assert testable >= 0.8 and found >= 0.9
    assert synthetic_detection("one_run", "rates", 5) == (0.0, 0.0)  # one-run requests cannot show it: no claim


def test_the_iid_check_keeps_its_size_with_few_unequal_requests() -> None:
    """Five requests of 20-2,000 runs at one alpha: CR2 with tokens per pass's Imbens-Kolesar degrees of freedom
    rejects about its nominal 1% (the G/(G-1) sandwich with G - 1 df rejected 2.2% over 400 logs, 9 of them)."""
    from tests.study.run import iid_size

    assert iid_size(5, 300) <= 4 / 300


def test_block_and_tree_intervals_over_requests_cover() -> None:
    """Block and tree runs in requests easy or hard as a whole: over requests their intervals cover near 95%;
    the same log read over runs (no cluster field) falls far short, which is why a log of requests is never
    given intervals over runs for them."""
    from tests.study.rules import FAST_LOGS, RULE_CASES, run_rule_case

    for key in ("block_serving", "tree_serving"):
        outcome = run_rule_case(RULE_CASES[key], FAST_LOGS, seed=1)
        assert outcome.tokens_intervals == FAST_LOGS
        assert 0.90 <= outcome.tokens_rate() <= 0.99, (key, outcome.tokens_rate())
        assert 0.90 <= outcome.rates_rate() <= 0.99, (key, outcome.rates_rate())
    over_runs = run_rule_case(RULE_CASES["tree_long_over_runs"], 40, seed=1)
    assert over_runs.tokens_rate() < 0.6 and over_runs.rates_rate() < 0.85
