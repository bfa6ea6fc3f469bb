"""The estimates of a summary: by hand on small logs, and against `simulate`, whose truth is known."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.simulate import simulate
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.files import summary_object
from specaccept_cli.summary.probability import student_t_quantile
from specaccept_cli.summary.state import Summary
from tests.helpers import (
    MODEL_ROWS,
    summary_json,
)


def test_counters_by_hand() -> None:
    # runs: (k=3, a=1), (k=2, a=2), (k=0, a=0), (k=4, a=0)
    counts = np.zeros((5, 5), dtype=np.int64)
    for k, a in [(3, 1), (2, 2), (0, 0), (4, 0)]:
        counts[k, a] += 1
    summary = Summary(counts=counts)
    assert summary.runs == 4
    assert summary.drafted_tokens == 9
    assert summary.accepted_tokens == 3
    assert summary.examined_tokens == 2 + 2 + 0 + 1
    assert estimate(summary).alpha == 3 / 5
    assert estimate(summary).acceptance_rate == 3 / 9
    assert estimate(summary).tokens_per_pass == 7 / 4
    assert summary.max_k == 4


def test_empty_summary_has_no_rates() -> None:
    summary = Summary()
    assert summary.runs == 0
    assert estimate(summary).alpha is None and estimate(summary).acceptance_rate is None
    assert estimate(summary).tokens_per_pass is None and estimate(summary).expected_alpha is None


def test_standard_errors_by_hand() -> None:
    # runs (k, a): (2, 2) e=2, (2, 0) e=1, (2, 1) e=2 -> A = 3, E = 5, alpha = 0.6
    counts = np.zeros((3, 3), dtype=np.int64)
    for k, a in [(2, 2), (2, 0), (2, 1)]:
        counts[k, a] += 1
    summary = Summary(counts=counts)
    residuals = [2 - 0.6 * 2, 0 - 0.6 * 1, 1 - 0.6 * 2]
    # CR2: each squared residual over 1 - its run's leverage, examined / E = 2/5, 1/5, 2/5
    leverages = [2 / 5, 1 / 5, 2 / 5]
    expected = sum(d * d / (1 - h) for d, h in zip(residuals, leverages)) ** 0.5 / 5
    assert estimate(summary).alpha_standard_error is not None
    assert abs(estimate(summary).alpha_standard_error - expected) < 1e-12
    # a + 1 = 3, 1, 2: sample variance 1, n = 3 (equal runs: CR2's 1 / (1 - 1/3) is the G/(G-1) of the sample variance)
    assert estimate(summary).tokens_per_pass_standard_error is not None
    assert abs(estimate(summary).tokens_per_pass_standard_error - (1 / 3) ** 0.5) < 1e-12
    single = Summary(counts=np.array([[0, 0], [0, 1]], dtype=np.int64))
    assert estimate(single).alpha_standard_error is None and estimate(single).tokens_per_pass_standard_error is None


def test_alpha_standard_error_matches_spread_over_simulated_logs() -> None:
    """The over-runs standard error agrees with the actual spread of alpha across independent logs."""
    from specaccept_cli.simulate import simulate

    alphas, errors = [], []
    for seed in range(40):
        total = Summary()
        for chunk in simulate(2000, 0.7, 1, 8, seed):
            total = total + Summary.of_outcome(accept_prefix_batch(chunk.offsets, chunk.p, chunk.q, chunk.r))
        alphas.append(estimate(total).alpha)
        errors.append(estimate(total).alpha_standard_error)
    spread = float(np.std(alphas, ddof=1))
    assert 0.7 * spread < float(np.mean(errors)) < 1.3 * spread


@pytest.fixture
def hand(tmp_path: Path) -> dict[str, object]:
    """MODEL_ROWS summarised with a cost ratio of 0.1, in the machine format."""
    return summary_json(MODEL_ROWS, tmp_path, "hand", cost_ratio=0.1)


def test_alpha_and_its_interval_by_hand(hand: dict[str, object]) -> None:
    # a = [1, 2, 0], e = [2, 2, 1], alpha = 3/5.
    # residuals a - alpha e = [-0.2, 0.8, -0.6], leverages e / 5 = [0.4, 0.4, 0.2];
    # CR2 var = (0.04 / 0.6 + 0.64 / 0.6 + 0.36 / 0.8) / 5^2 = 1.58333 / 25 = 0.063333.
    # n_eff = 0.6 * 0.4 / 0.063333 = 3.789 (below the 5 examined tokens).
    # Over runs the t keeps runs - 1 = 2 degrees of freedom (Imbens-Kolesar's are for clusters): t(0.975, 2).
    # Wilson's bounds at that quantile, each taken at the rate moved 0.5 / (2 n_eff) outwards.
    assert hand["alpha"] == pytest.approx(0.6)
    assert hand["degrees_of_freedom"] == 2
    assert hand["alpha_degrees_of_freedom"] == 2
    n_eff, t = 0.24 / (1.58333333333333333 / 25), student_t_quantile(0.975, 2)

    def wilson(rate: float, sign: int) -> float:
        c = t * t / n_eff
        return (rate + c / 2) / (1 + c) + sign * t / (1 + c) * math.sqrt(rate * (1 - rate) / n_eff + c / (4 * n_eff))

    shift = 0.5 / (2 * n_eff)
    assert hand["alpha_ci"] == pytest.approx([wilson(0.6 - shift, -1), wilson(0.6 + shift, +1)])
    assert 0.0 < hand["alpha_ci"][0] < 0.6 < hand["alpha_ci"][1] < 1.0  # type: ignore[index]
    assert hand["alpha_ci_method"].startswith("over runs")  # type: ignore[union-attr]


def test_expected_alpha_by_hand(hand: dict[str, object]) -> None:
    # examined tokens only: run 1 tested thresholds [1, 0.25], run 2 [1, 1], run 3 [0.2] -> 3.45 / 5
    assert hand["expected_alpha"] == pytest.approx(3.45 / 5, abs=1e-9)
    assert hand["expected_alpha_drafted"] == pytest.approx(4.45 / 6, abs=1e-9)  # run 1's untested third token too


def test_tokens_per_pass_predicted_by_hand(hand: dict[str, object]) -> None:
    # alpha 0.6: k=3 -> (1 - 0.6^4)/0.4 = 2.176; k=2 -> 1.96; k=1 -> 1.6; mean 5.736 / 3
    assert hand["tokens_per_pass"] == 2.0
    assert hand["tokens_per_pass_predicted"] == pytest.approx(5.736 / 3)
    check = hand["iid_check"]
    assert isinstance(check, dict)
    assert check["difference"] == pytest.approx(2.0 - 5.736 / 3)
    # The difference's delta-method error, run by run: influence
    # (a + 1 - f(alpha, k) - D) / N - m' (a - alpha e) / E, m' = mean over runs of d f / d alpha.
    runs = [(3, 1, 2), (2, 2, 2), (1, 0, 1)]  # (k, a, examined)
    alpha, difference = 0.6, 2.0 - 5.736 / 3
    slope = sum(sum(j * alpha ** (j - 1) for j in range(1, k + 1)) for k, _, _ in runs) / 3
    influence = [
        (a + 1 - sum(alpha**j for j in range(k + 1)) - difference) / 3 - slope * (a - alpha * e) / 5 for k, a, e in runs
    ]
    assert check["standard_error"] == pytest.approx(math.sqrt(3 / 2 * sum(x * x for x in influence)))
    assert check["consistent"] is True
    assert check["verdict"].startswith("no evidence against the i.i.d. model")


def test_per_position_by_hand(hand: dict[str, object]) -> None:
    rows = hand["per_position"]
    assert isinstance(rows, list)
    intervals = [(row.pop("rate_ci"), row.pop("unconditional_rate_ci")) for row in rows]
    # position 3: no rate, and one run drafted it (too few for an interval); the rest hold their rate
    assert intervals[2] == (None, None)
    for row, bounds in zip(rows[:2], intervals[:2]):  # inside [0, 1], of positive width
        for rate, interval in zip((row["rate"], row["unconditional_rate"]), bounds):
            assert interval is not None
            assert 0.0 <= interval[0] <= rate <= interval[1] <= 1.0 and interval[0] < interval[1]
    assert rows == [
        # every run drafts position 1 and tests it; runs 1 and 2 keep it
        {"position": 1, "drafts": 3, "reached": 3, "accepted": 2, "rate": 2 / 3, "unconditional_rate": 2 / 3},
        # runs 1, 2 draft it and both reach it (a >= 1); only run 2 keeps it
        {"position": 2, "drafts": 2, "reached": 2, "accepted": 1, "rate": 1 / 2, "unconditional_rate": 1 / 2},
        # only run 1 drafts it, and it stopped at position 2: never tested
        {"position": 3, "drafts": 1, "reached": 0, "accepted": 0, "rate": None, "unconditional_rate": 0.0},
    ]


def test_accepted_histogram_by_hand(hand: dict[str, object]) -> None:
    assert hand["accepted_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 0}


def test_speedup_and_optimal_k_by_hand(hand: dict[str, object]) -> None:
    # emitted 6 / (drafted 6 * 0.1 + runs 3) = 6 / 3.6
    assert hand["cost_ratio"] == 0.1
    assert hand["speedup"] == pytest.approx(6 / 3.6)
    # alpha 0.6, c 0.1: k=1 1.6/1.1 = 1.4545, k=2 1.96/1.2 = 1.6333, k=3 2.176/1.3 = 1.6738, k=4 2.3056/1.4 = 1.6469
    assert hand["optimal_k"] == 3


def test_every_engine_convention_by_hand(hand: dict[str, object]) -> None:
    assert hand["conventions"] == {
        "vllm": {"acceptance_rate": 3 / 6, "mean_acceptance_length": 2.0, "per_position": [2 / 3, 1 / 3, 0.0]},
        # run 1's third token passes its own test after the rejection: vLLM v0 counts it (4 passing)
        "vllm_v0": {"acceptance_rate": 4 / 6, "system_efficiency": 6 / 9},
        "sglang": {"accept_rate": 6 / 9, "accept_length": 2.0},
        "llama_cpp": {"acceptance_rate": 3 / 6},
        "spec_bench": {"tau": 2.0},
        "eagle": {"per_position": [2 / 3, 1 / 2, None]},
    }


def test_empty_and_single_run_summaries_have_no_interval() -> None:
    empty = summary_object(Summary(), cost_ratio=0.1)
    assert empty["alpha_ci"] is None
    assert empty["tokens_per_pass_predicted"] is None
    assert empty["iid_check"] is None
    assert empty["per_position"] == []
    assert empty["accepted_histogram"] == {"0": 0}
    assert empty["speedup"] is None
    assert empty["optimal_k"] is None
    counts = np.zeros((3, 3), dtype=np.int64)
    counts[2, 1] = 1
    single = Summary(counts=counts)
    assert estimate(single).alpha == 0.5
    assert estimate(single).alpha_ci is None


def test_all_kept_predicts_k_plus_one() -> None:
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[3, 3] = 5
    counts[2, 2] = 5
    summary = Summary(counts=counts)
    assert estimate(summary).alpha == 1.0
    assert estimate(summary).tokens_per_pass_predicted == 3.5  # (4 + 3) / 2
    assert estimate(summary).iid_check is not None and estimate(summary).iid_check.consistent


def simulated_summary(runs: int, alpha: float, k_low: int, k_high: int, seed: int, **kwargs: object) -> Summary:
    summary = Summary()
    for chunk in simulate(runs, alpha, k_low, k_high, seed, **kwargs):  # type: ignore[arg-type]
        summary = summary + Summary.of_outcome(accept_prefix_batch(chunk.offsets, chunk.p, chunk.q, chunk.r))
    return summary


def test_simulated_alpha_08_k4_matches_the_truth() -> None:
    summary = simulated_summary(100_000, 0.8, 4, 4, seed=11)
    low, high = estimate(summary).alpha_ci  # type: ignore[misc]
    assert low <= 0.8 <= high
    assert high - low < 0.01
    assert estimate(summary).expected_alpha == pytest.approx(0.8, abs=0.005)
    assert estimate(summary).tokens_per_pass == pytest.approx(3.3616, abs=0.02)
    assert estimate(summary).tokens_per_pass_predicted == pytest.approx(3.3616, abs=0.02)
    assert estimate(summary).iid_check is not None and estimate(summary).iid_check.consistent
    for row in estimate(summary).per_position:
        assert row.rate == pytest.approx(0.8, abs=0.01)  # i.i.d.: every conditional rate is alpha
        assert row.unconditional_rate == pytest.approx(0.8**row.position, abs=0.01)


def test_position_dependent_acceptance_splits_conditional_from_unconditional() -> None:
    by_position = [0.9, 0.7, 0.5]
    summary = simulated_summary(100_000, 0.0, 4, 4, seed=5, alpha_by_position=by_position)
    rows = estimate(summary).per_position
    truth = [0.9, 0.7, 0.5, 0.5]  # the last value repeats
    reach = 1.0
    for row, alpha in zip(rows, truth):
        # conditional (EAGLE) recovers each position's own probability ...
        assert row.rate == pytest.approx(alpha, abs=0.01)
        # ... unconditional (accepted / drafts) is the product of all up to it
        reach *= alpha
        assert row.unconditional_rate == pytest.approx(reach, abs=0.01)
    assert rows[3].unconditional_rate < 0.2 < rows[3].rate
    # one alpha cannot describe this: the i.i.d. check says so
    assert estimate(summary).iid_check is not None and not estimate(summary).iid_check.consistent


def test_interval_covers_the_true_alpha_95_percent_of_the_time() -> None:
    # 1,000 simulated logs of 100 runs with k in 1..8: the interval should cover alpha = 0.7
    # in ~95% of them; binomial sd at 1,000 logs is 0.7%, so [0.93, 0.97] is a 3-sd band.
    rng = np.random.default_rng(2024)
    covered = 0
    logs = 1000
    for seed in rng.integers(0, 2**32, size=logs).tolist():
        interval = estimate(simulated_summary(100, 0.7, 1, 8, seed=seed)).alpha_ci
        assert interval is not None
        covered += interval[0] <= 0.7 <= interval[1]
    assert 0.93 <= covered / logs <= 0.97


def test_interval_stays_honest_when_runs_share_a_context() -> None:
    # Each run's context sets its own acceptance: 0.3 or 0.97 with equal odds (k = 8). The target
    # is the ratio E[a] / E[examined] over that mixture. Tokens of one run are correlated, so a
    # token-level binomial interval is too narrow; the interval over runs is not.
    k = 8

    def moments(alpha: float) -> tuple[float, float]:
        return sum(alpha**j for j in range(1, k + 1)), sum(alpha**j for j in range(k))

    (a_low, e_low), (a_high, e_high) = moments(0.3), moments(0.97)
    truth = (a_low + a_high) / (e_low + e_high)
    rng = np.random.default_rng(7)
    logs = 1000
    covered = covered_by_tokens = 0
    for _ in range(logs):
        low_runs = int(rng.binomial(100, 0.5))
        summary = simulated_summary(low_runs, 0.3, k, k, seed=int(rng.integers(2**32))) + simulated_summary(
            100 - low_runs, 0.97, k, k, seed=int(rng.integers(2**32))
        )
        low, high = estimate(summary).alpha_ci  # type: ignore[misc]
        covered += low <= truth <= high
        alpha, examined = estimate(summary).alpha, summary.examined_tokens
        assert alpha is not None
        half = 1.959963984540054 * math.sqrt(alpha * (1 - alpha) / examined)
        covered_by_tokens += alpha - half <= truth <= alpha + half
    assert covered / logs >= 0.93
    assert covered_by_tokens / logs <= 0.90  # the test can tell an honest interval from a naive one


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=60))
def test_per_position_and_histogram_equal_counting_run_by_run(pairs: list[tuple[int, int]]) -> None:
    runs = [(k, min(a, k)) for k, a in pairs]
    size = max((k for k, _ in runs), default=0) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    for k, a in runs:
        counts[k, a] += 1
    summary = Summary(counts=counts)
    for row in estimate(summary).per_position:
        j = row.position
        assert row.drafts == sum(k >= j for k, _ in runs)
        assert row.reached == sum(k >= j and a >= j - 1 for k, a in runs)
        assert row.accepted == sum(a >= j for _, a in runs)
    assert len(estimate(summary).per_position) == max((k for k, _ in runs), default=0)
    assert sum(estimate(summary).accepted_histogram.values()) == len(runs)


def test_imbens_kolesar_degrees_of_freedom_match_the_matrix_formula() -> None:
    """The O(G) traces equal tr(CS)^2 / tr((CS)^2) computed with G x G matrices; equal units give G - 1;
    a few units holding most tokens give far fewer (the small-sample corner the study measures)."""
    from specaccept_cli.summary.clusters import Units
    from specaccept_cli.summary.uncertainty import _nonnegative_line, ratio_degrees_of_freedom

    rng = np.random.default_rng(1)
    for count in (3, 5, 12, 40):
        tokens = np.floor(np.exp(rng.uniform(np.log(20), np.log(2001), count)))
        kept = tokens * rng.beta(7, 3, count)
        ratio = kept.sum() / tokens.sum()
        empty = np.zeros((count, 1))
        units = Units(np.ones(count), np.ones(count), kept, tokens, empty, empty, empty)
        found = ratio_degrees_of_freedom(units, kept, tokens, ratio)
        shares = tokens / tokens.sum()
        squares = (kept - ratio * tokens) ** 2 / (1 - shares)
        within, between = _nonnegative_line(np.ones(count), 1 / tokens, squares / tokens**2)
        variances = within * tokens + between * tokens**2
        centring = np.eye(count) - np.outer(shares, np.ones(count))
        product = np.diag(1 / (1 - shares)) @ centring @ np.diag(variances) @ centring.T
        assert found == pytest.approx(np.trace(product) ** 2 / np.trace(product @ product), rel=1e-9)
        assert found is not None and found < count - 1
        equal = np.full(count, 100.0)
        same = Units(np.ones(count), np.ones(count), kept, equal, empty, empty, empty)
        assert ratio_degrees_of_freedom(same, kept, equal, kept.sum() / equal.sum()) == pytest.approx(count - 1)
