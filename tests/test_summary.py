"""Summary: additive state. Two summaries add up to the summary of both inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.summary import Summary
from specaccept_cli.vectorized import accept_prefix_batch


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
    assert parts.to_dict() == whole.to_dict()
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
    assert summary.alpha == 3 / 5
    assert summary.acceptance_rate == 3 / 9
    assert summary.tokens_per_pass == 7 / 4
    assert summary.max_k == 4


def test_empty_summary_has_no_rates() -> None:
    summary = Summary()
    assert summary.runs == 0
    assert summary.alpha is None and summary.acceptance_rate is None
    assert summary.tokens_per_pass is None and summary.expected_alpha is None
