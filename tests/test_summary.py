"""Summary: additive state. Two summaries add up to the summary of both inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.files import summary_from_object, summary_object
from specaccept_cli.summary.state import Summary


def outcome_summary(seed: int, runs: int) -> tuple[Summary, list[tuple[np.ndarray, ...]]]:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 12, size=runs)
    offsets = np.zeros(runs + 1, dtype=np.int64)
    np.cumsum(k, out=offsets[1:])
    n = int(offsets[-1])
    arrays = (offsets, rng.random(n), 1.0 - rng.random(n), rng.random(n))
    return Summary.of_outcome(accept_prefix_batch(*arrays)), [arrays]


def split(arrays: tuple[np.ndarray, ...], cut: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    offsets, p, q, r = arrays
    token_cut = int(offsets[cut])
    left = (offsets[: cut + 1], p[:token_cut], q[:token_cut], r[:token_cut])
    right = (offsets[cut:] - token_cut, p[token_cut:], q[token_cut:], r[token_cut:])
    return left, right


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 300), st.data())
def test_summary_of_parts_adds_up_to_the_whole(seed: int, runs: int, data: st.DataObject) -> None:
    whole, (arrays,) = outcome_summary(seed, runs)
    cut = data.draw(st.integers(0, runs))
    left, right = split(arrays, cut)
    parts = Summary.of_outcome(accept_prefix_batch(*left)) + Summary.of_outcome(accept_prefix_batch(*right))
    assert parts == whole
    assert summary_object(parts) == summary_object(whole)
    assert Summary() + whole == whole


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


def test_round_trip_through_dict() -> None:
    whole, _ = outcome_summary(7, 500)
    assert summary_from_object(summary_object(whole)) == whole
    assert summary_from_object(summary_object(Summary())) == Summary()


def test_from_dict_rejects_other_objects() -> None:
    import pytest

    with pytest.raises(ValueError, match="schema"):
        summary_from_object({"schema": "other/1"})
    with pytest.raises(ValueError, match="incomplete"):
        summary_from_object({"schema": "specaccept.summary/1", "state": {}})
    bad = summary_object(Summary())
    bad["state"]["joint_counts"] = [[2, 3, 1]]
    with pytest.raises(ValueError, match="impossible"):
        summary_from_object(bad)


def test_standard_errors_by_hand() -> None:
    # runs (k, a): (2, 2) e=2, (2, 0) e=1, (2, 1) e=2 -> A = 3, E = 5, alpha = 0.6
    counts = np.zeros((3, 3), dtype=np.int64)
    for k, a in [(2, 2), (2, 0), (2, 1)]:
        counts[k, a] += 1
    summary = Summary(counts=counts)
    residuals = [2 - 0.6 * 2, 0 - 0.6 * 1, 1 - 0.6 * 2]
    expected = (3 / 2 * sum(d * d for d in residuals)) ** 0.5 / 5
    assert estimate(summary).alpha_standard_error is not None
    assert abs(estimate(summary).alpha_standard_error - expected) < 1e-12
    # a + 1 = 3, 1, 2: sample variance 1, n = 3
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
