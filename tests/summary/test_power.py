"""Power with every comparison: the minimum detectable drop, the requests that would detect --max-drop, and
`specaccept plan`, from the same cluster-robust standard errors the comparison tests with."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.summary.estimates import estimate
from specaccept_cli.verdict import conclude
from specaccept_cli.verdict.checks import compare, detectable_drop, plan_requests, units_needed
from tests.helpers import invoke
from tests.study.scenarios import SCENARIOS

Z_995, Z_80 = 2.5758293035489004, 0.8416212335729143


def test_detectable_drop_and_units_needed_by_hand() -> None:
    # One-sided at 0.005 with 80% power: 3.4175 standard errors of the difference, relative to the baseline.
    drop = detectable_drop(0.8, 0.004, 0.003, 0.005)
    assert drop == pytest.approx((Z_995 + Z_80) * math.hypot(0.004, 0.003) / 0.8)
    at_tolerance = detectable_drop(0.8, 0.004, 0.003, 0.005, max_drop=0.02)
    assert at_tolerance == pytest.approx((Z_995 + Z_80) * math.hypot(0.98 * 0.004, 0.003) / 0.8)
    # Student t with df degrees of freedom asks for more standard errors than the normal.
    assert detectable_drop(0.8, 0.004, 0.003, 0.005, df=10) > 1.15 * drop
    # units_needed inverts it: at that many units the current's error, with the t test's n - 1 degrees of
    # freedom, makes the detectable drop the target, and one unit fewer does not.
    variance = 0.003**2 * 500  # per-unit variance of a current side of 500 units
    needed = units_needed(0.8, 0.004, variance, 0.03, 0.005)
    assert needed is not None
    assert detectable_drop(0.8, 0.004, math.sqrt(variance / needed), 0.005, df=needed - 1) <= 0.03
    assert detectable_drop(0.8, 0.004, math.sqrt(variance / (needed - 1)), 0.005, df=needed - 2) > 0.03
    # Fewer degrees of freedom per unit (unequal units) ask for more units.
    unequal = units_needed(0.8, 0.004, variance, 0.03, 0.005, df_per_unit=0.05)
    assert unequal is not None and unequal > needed
    assert units_needed(0.8, 0.01, variance, 0.03, 0.005) is None  # the baseline alone is too noisy


def test_every_comparison_reports_its_power() -> None:
    scenario = SCENARIOS["serving"]
    baseline = estimate(scenario.summary(20_000, 1, True))
    small, large = estimate(scenario.summary(300, 2, True)), estimate(scenario.summary(20_000, 3, True))
    weak, strong = compare(baseline, small), compare(baseline, large, max_drop=0.05)
    for comparison in (weak, strong):
        data = comparison.to_dict(lambda issue: issue.kind)
        alpha = data["alpha"]
        assert alpha == data["metrics"][0] and set(alpha) >= {"minimum_detectable_drop", "requests_needed"}
        row = comparison.metrics[0]
        assert row.minimum_detectable_drop is not None and row.requests_needed is not None
        level = comparison.significance  # planned at the full level: both metrics drop together
        assert row.baseline is not None and row.baseline_standard_error is not None
        assert row.current_standard_error is not None
        # Near the normal-quantile drop with the current's own spread: Student t and the spread moved to the
        # dropped value (noisier within runs, narrower between requests) shift it by a few percent, no more.
        plain = detectable_drop(
            row.baseline, row.baseline_standard_error, row.current_standard_error, level, comparison.max_drop
        )
        assert plain is not None and 0.9 * plain <= row.minimum_detectable_drop <= 1.15 * plain
    assert (
        weak.metrics[0].underpowered
        and weak.underpowered
        and weak.to_dict(lambda issue: issue.kind)["underpowered"] is True
    )
    assert not strong.metrics[0].underpowered
    assert weak.metrics[0].minimum_detectable_drop > strong.metrics[0].minimum_detectable_drop  # type: ignore[operator]
    # More requests than the weak side had would see --max-drop; the strong side already has them.
    assert small.clusters is not None and weak.metrics[0].requests_needed > small.clusters  # type: ignore[operator]
    # The verdict says so, in every view: a warning with the drop the comparison can see.
    findings = conclude(scenario.summary(300, 2, True), scenario.summary(20_000, 1, True))
    warned = [entry.text for entry in findings.entries("baseline") if entry.status == "warn"]
    assert any(
        text.startswith("alpha comparison is underpowered: with 80% power it flags a drop of") for text in warned
    )


def test_plan_requests_follow_the_baselines_spread() -> None:
    scenario = SCENARIOS["serving"]
    baseline = estimate(scenario.summary(40_000, 5, True))
    plans = plan_requests(baseline, 0.05)
    assert [item.metric for item in plans] == ["alpha", "tokens_per_pass"]
    alpha = plans[0]
    assert alpha.units == "requests" and alpha.baseline_units == baseline.clusters
    assert alpha.requests_needed is not None and alpha.requests_needed_each_side is not None
    assert plan_requests(baseline, 0.10)[0].requests_needed < alpha.requests_needed  # type: ignore[operator]
    with pytest.raises(ValueError, match="must exceed max_drop"):
        plan_requests(baseline, 0.02, max_drop=0.02)


def test_plan_command(tmp_path: Path) -> None:
    log, baseline = tmp_path / "main.jsonl", tmp_path / "main.json"
    args = ["--runs", "20000", "--alpha", "0.7", "--k", "4", "--seed", "1", "--requests", "5-20"]
    assert invoke("simulate", *args, "--request-alpha-beta", "7,3", "-o", str(log)).exit_code == 0
    assert invoke("audit", str(log), "-q", "--summary-out", str(baseline), "-o", "json").exit_code == 0
    text = invoke("plan", "--baseline", str(baseline), "--drop", "0.05")
    assert text.exit_code == 0 and "requests to flag a 5.00% drop with 80% power" in text.stdout
    data = orjson.loads(invoke("plan", "--baseline", str(baseline), "--drop", "0.05", "-o", "json").stdout)
    assert data["schema"] == "specaccept.plan/1" and data["clustering"]["field"] == "request_id"
    assert data["alpha"]["requests_needed"] == data["metrics"][0]["requests_needed"] > 0
    noisy = invoke("plan", "--baseline", str(baseline), "--drop", "0.004", "--max-drop", "0")
    assert noisy.exit_code == 0 and "no number suffices: the baseline alone is too noisy" in noisy.stdout
    refused = invoke("plan", "--baseline", str(baseline), "--drop", "0.02", "--max-drop", "0.02")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "must exceed --max-drop" in refused.stderr
    # plan's --max-drop is audit's (0.02): a drop at or below it is never flagged, whatever the requests.
    default = invoke("plan", "--baseline", str(baseline), "--drop", "0.02")
    assert default.exit_code == 2 and "must exceed --max-drop 0.02" in default.stderr
    missing = invoke("plan", "--baseline", str(tmp_path / "none.json"), "--drop", "0.05")
    assert missing.exit_code == 2 and "none.json" in missing.stderr
    # audit --baseline and diff show the detectable drop in their tables, the Action's markdown too
    shown = invoke("audit", str(log), "--baseline", str(baseline), "-o", "markdown")
    assert "| detectable |" in shown.stdout


def test_the_iid_run_variance_matches_runs_drawn_from_the_model() -> None:
    from specaccept_cli.summary.formulas import alpha_of_tokens_per_pass, run_variance, tokens_per_pass_of

    # k = 1: one Bernoulli token, for both metrics.
    assert run_variance(0.7, (0, 10), "alpha") == pytest.approx(0.21)
    assert run_variance(0.7, (0, 10), "tokens_per_pass") == pytest.approx(0.21)
    # A mix of k 1-8, against 400,000 seeded runs of the i.i.d. model.
    rng = np.random.default_rng(5)
    mix = (0,) + (1,) * 8
    k = rng.integers(1, 9, 400_000)
    accepted = np.minimum(rng.geometric(1 - 0.7, k.shape[0]) - 1, k)
    examined = np.minimum(accepted + 1, k)
    ratio = accepted.sum() / examined.sum()
    score = (accepted - ratio * examined) / examined.mean()
    assert run_variance(0.7, mix, "alpha") == pytest.approx(float(score.var()), rel=0.02)
    assert run_variance(0.7, mix, "tokens_per_pass") == pytest.approx(float(accepted.var()), rel=0.02)
    assert tokens_per_pass_of(0.7, mix) == pytest.approx(1 + float(accepted.mean()), rel=0.01)
    assert alpha_of_tokens_per_pass(tokens_per_pass_of(0.63, mix), mix) == pytest.approx(0.63, abs=1e-9)


def test_a_drop_moves_the_spread_within_runs_and_between_requests_apart() -> None:
    from specaccept_cli.summary.formulas import run_variance
    from specaccept_cli.verdict.checks import dropped_unit_variance

    mix = (0,) + (100,) * 8
    before, after = run_variance(0.73, mix, "alpha"), run_variance(0.73 * 0.9, mix, "alpha")
    assert before is not None and after is not None and after > 1.1 * before  # runs end sooner: noisier
    # One-run requests of one alpha (800 units of 800 runs): the i.i.d. part, all of it.
    assert dropped_unit_variance(mix, "alpha", 0.73, 0.1, before, 800) == pytest.approx(after)
    # Requests of 10 runs (80 units): the i.i.d. part of a unit is a tenth of a run's; the rest is between
    # requests, and shrinks by 0.9^2.
    moved = dropped_unit_variance(mix, "alpha", 0.73, 0.1, 2 * before, 80)
    assert moved == pytest.approx(0.1 * after + 1.9 * before * 0.81)
    # Where the model says nothing (alpha 1, no drafted runs) the spread stays as it was.
    assert dropped_unit_variance(mix, "alpha", 1.0, 0.1, 2.0, 80) == 2.0
    assert dropped_unit_variance((5,), "alpha", 0.7, 0.1, 2.0, 80) == 2.0
