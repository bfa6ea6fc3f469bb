"""Gates and baseline comparison as pure functions: the drop test by hand, simulated systems, false alarms."""

from __future__ import annotations

import numpy as np
import pytest

from specaccept_cli.cli.hints import comparison_message, warning_text
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.state import Summary
from specaccept_cli.verdict.checks import check_gates, compare, drop_test
from tests.helpers import (
    simulated,
)


def test_check_gates_is_pure_and_ordered() -> None:
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[3, 1] = 1  # one run: k=3, a=1 -> alpha 1/2, tokens per pass 2, acceptance rate 1/3
    results = check_gates(estimate(Summary(counts=counts)), [("acceptance_rate", 0.3), ("alpha", 0.6)])
    assert [(r.metric, r.value, r.passed) for r in results] == [
        ("alpha", 0.5, False),
        ("acceptance_rate", 1 / 3, True),
    ]
    assert check_gates(estimate(Summary(counts=counts)), []) == []
    with pytest.raises(KeyError):
        check_gates(estimate(Summary(counts=counts)), [("min_alpha", 0.6)])  # metrics, not option names


def test_drop_test_by_hand() -> None:
    # max_drop 0: z = (0.9 - 1.0) / sqrt(0.03^2 + 0.04^2) = -0.1 / 0.05 = -2
    z, p = drop_test(1.0, 0.03, 0.9, 0.04, max_drop=0.0)
    assert z == pytest.approx(-2.0)
    assert p == pytest.approx(0.022750131948179, rel=1e-9)
    # max_drop 0.05: floor 0.95; z = (0.9 - 0.95) / sqrt(0.04^2 + 0.95^2 * 0.03^2) = -0.05 / 0.0491146618 = -1.018026
    z, p = drop_test(1.0, 0.03, 0.9, 0.04, max_drop=0.05)
    assert z == pytest.approx(-1.018026, rel=1e-6)
    assert p == pytest.approx(0.154329, rel=1e-4)
    # No variance: certainty either way, z undefined.
    assert drop_test(1.0, 0.0, 0.97, 0.0, max_drop=0.02) == (None, 0.0)
    assert drop_test(1.0, 0.0, 0.99, 0.0, max_drop=0.02) == (None, 1.0)


def test_a_drop_within_max_drop_never_regresses() -> None:
    # 1% down with tiny standard errors: significant, but inside the 2% tolerance.
    z, p = drop_test(1.0, 1e-6, 0.99, 1e-6, max_drop=0.02)
    assert z is not None and z > 0 and p > 0.5


def test_comparison_of_tiny_summaries_is_untestable_and_fails() -> None:
    one_run = np.zeros((3, 3), dtype=np.int64)
    one_run[2, 1] = 1
    comparison = compare(estimate(simulated(100, 0.7, 1)), estimate(Summary(counts=one_run)))
    assert [row.verdict for row in comparison.metrics] == ["untestable", "untestable"]
    assert len(comparison.failures) == 2
    message = comparison_message(comparison, "alpha")
    assert "untestable (not a regression, not a pass)" in message and "at least 2 independent units" in message
    machine = comparison.to_dict(warning_text)
    assert not machine["regressed"] and machine["untestable"]


@pytest.mark.slow
def test_false_alarm_rate_stays_near_the_significance() -> None:
    """Pairs of small logs of the same system, max-drop 0 so only the test decides.

    Over 2,000 pairs the count of p-values under a level is Binomial(2000, level); the
    bounds below are about 3.5 standard deviations either side of the mean.
    """
    pairs = 2000
    p_values: dict[str, list[float]] = {"alpha": [], "tokens_per_pass": []}
    for pair in range(pairs):
        baseline = simulated(300, 0.7, seed=10_000 + pair, k=(1, 6))
        current = simulated(300, 0.7, seed=20_000 + pair, k=(1, 6))
        for row in compare(estimate(baseline), estimate(current), max_drop=0.0, significance=0.05).metrics:
            assert row.p is not None
            p_values[row.metric].append(row.p)
    for values in p_values.values():
        below = np.asarray(values)
        assert 5 <= int((below < 0.01).sum()) <= 36  # mean 20, sd 4.4
        assert 66 <= int((below < 0.05).sum()) <= 134  # mean 100, sd 9.7
        assert 153 <= int((below < 0.1).sum()) <= 247  # mean 200, sd 13.4


@pytest.mark.slow
def test_a_true_drop_of_exactly_max_drop_alarms_at_the_significance() -> None:
    """The boundary of H0: current alpha is exactly (1 - max_drop) x baseline alpha.

    The one-metric test is built so that this worst case for false alarms alarms at the
    nominal rate: Binomial(2000, 0.05) here, bounds about 3.5 standard deviations wide.
    The gate's verdict, Holm-adjusted over both metrics, alarms less often (never more).
    """
    alarms = verdicts = 0
    for pair in range(2000):
        baseline = simulated(300, 0.7, seed=30_000 + pair, k=(1, 6))
        current = simulated(300, 0.7 * 0.95, seed=40_000 + pair, k=(1, 6))
        alpha = compare(estimate(baseline), estimate(current), max_drop=0.05, significance=0.05).metrics[0]
        assert alpha.metric == "alpha" and alpha.p is not None
        alarms += alpha.p < 0.05
        verdicts += alpha.verdict == "regressed"
    assert 66 <= alarms <= 134  # mean 100, sd 9.7
    assert verdicts <= alarms


def test_holm_adjusts_the_smaller_p_twice_and_keeps_the_order() -> None:
    from specaccept_cli.verdict.checks import holm

    assert holm([0.004, 0.03]) == pytest.approx([0.008, 0.03])
    assert holm([0.03, 0.004]) == pytest.approx([0.03, 0.008])
    assert holm([0.02, 0.015]) == pytest.approx([0.03, 0.03])  # step-down: never below the step before
    assert holm([0.7, 0.9]) == [1.0, 1.0]
    assert holm([0.7]) == [0.7]


def test_a_baseline_where_every_token_was_kept_is_not_certainty() -> None:
    """10 runs, all kept: the delta-method standard error is 0. The test must not call that certainty."""
    all_kept = np.zeros((3, 3), dtype=np.int64)
    all_kept[2, 2] = 10
    baseline = estimate(Summary(counts=all_kept))
    assert baseline.alpha == 1.0 and baseline.alpha_standard_error == 0.0
    assert baseline.alpha_ci is not None and baseline.alpha_ci[0] < 0.9 and baseline.alpha_ci[1] == 1.0
    assert (baseline.testing_standard_error("alpha") or 0.0) > 0.02
    current = estimate(simulated(2000, 0.99, seed=5, k=(2, 2)))
    comparison = compare(baseline, current)
    assert [row.verdict for row in comparison.metrics] == ["ok", "ok"]


def test_comparison_warns_about_runs_and_a_different_k_mix() -> None:
    short = estimate(simulated(500, 0.7, seed=1, k=(1, 2)))
    long = estimate(simulated(500, 0.7, seed=2, k=(6, 8)))
    warnings = compare(short, long).warnings
    assert [warning.kind for warning in warnings] == ["unclustered", "k_mix"]  # data, never an option's name
    assert warnings[1].value is not None and warnings[1].value > 0.1
    assert "--cluster-field" in warning_text(warnings[0]) and "k mix" in warning_text(warnings[1])  # the CLI's words
    same_mix = compare(short, estimate(simulated(500, 0.7, seed=3, k=(1, 2)))).warnings
    assert [warning.kind for warning in same_mix] == ["unclustered"]
