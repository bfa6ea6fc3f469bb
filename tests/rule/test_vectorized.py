"""The vectorized rule against the scalar rule and the reference routine: worked examples, edge cases, properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule import vectorized
from specaccept_cli.rule.scalar import accept_prefix
from specaccept_cli.rule.vectorized import THRESHOLD_SCALE, accept_prefix_batch
from specaccept_cli.summary.server import SamplerTally
from tests.helpers import (
    spec_accept,
)

SEED_CASES = [
    (([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2]), 1),  # token 2 rejected; token 3 would pass
    (([0.5, 0.5], [0.5, 0.5], [0.3, 0.9]), 2),
    (([0.9, 0.9], [0.3, 0.3], [0.99, 0.99]), 2),  # ratio >= 1 always accepts
    (([0.5], [1.0], [0.5]), 1),  # inclusive boundary
    (([0.1], [0.9], [0.5]), 0),  # first token rejected
    (([], [], []), 0),  # empty draft
]


def batch_of(runs: list[tuple[list[float], list[float], list[float]]]) -> tuple[np.ndarray, ...]:
    lengths = [len(p) for p, _, _ in runs]
    offsets = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = [np.array([x for run in runs for x in run[i]], dtype=np.float64) for i in range(3)]
    return (offsets, *flat)


def test_seed_examples_scalar_and_vectorized() -> None:
    runs = [case for case, _ in SEED_CASES]
    expected = [answer for _, answer in SEED_CASES]
    assert [accept_prefix(*case) for case in runs] == expected
    assert [spec_accept(*case) for case in runs] == expected
    outcome = accept_prefix_batch(*batch_of(runs))
    assert outcome.accepted.tolist() == expected
    assert outcome.k.tolist() == [3, 2, 2, 1, 1, 0]


def test_passing_tokens_counts_passes_after_a_rejection() -> None:
    outcome = accept_prefix_batch(*batch_of([SEED_CASES[0][0]]))
    assert outcome.accepted.tolist() == [1]
    assert outcome.passing_tokens == 2  # tokens 1 and 3 pass their own test


def test_threshold_sum_is_fixed_point_of_min_one_ratio() -> None:
    outcome = accept_prefix_batch(*batch_of([SEED_CASES[0][0]]))
    assert outcome.threshold_sum_fixed == round(1.0 * THRESHOLD_SCALE) + round(0.25 * THRESHOLD_SCALE) + THRESHOLD_SCALE


def test_empty_batch() -> None:
    outcome = accept_prefix_batch(np.zeros(1, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0))
    assert outcome.accepted.shape == (0,)
    assert outcome.passing_tokens == 0


probability = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


positive = st.floats(min_value=5e-324, max_value=1.0, allow_nan=False)


@st.composite
def runs_strategy(draw: st.DrawFn) -> list[tuple[list[float], list[float], list[float]]]:
    runs = []
    for _ in range(draw(st.integers(0, 12))):
        k = draw(st.integers(0, 64))
        p = draw(st.lists(probability, min_size=k, max_size=k))
        q = draw(st.lists(positive, min_size=k, max_size=k))
        tie_mask = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        r_draws = draw(st.lists(probability, min_size=k, max_size=k))
        # Ties: r exactly equal to the threshold, the inclusive boundary.
        r = [min(1.0, p[i] / q[i]) if tie_mask[i] else r_draws[i] for i in range(k)]
        runs.append((p, q, r))
    return runs


@given(runs_strategy())
def test_vectorized_equals_scalar_equals_seed(runs: list[tuple[list[float], list[float], list[float]]]) -> None:
    outcome = accept_prefix_batch(*batch_of(runs))
    scalar = [accept_prefix(*run) for run in runs]
    assert outcome.accepted.tolist() == scalar
    assert scalar == [spec_accept(*run) for run in runs]
    passing = sum(r[i] <= min(1.0, p[i] / q[i]) for p, q, r in runs for i in range(len(p)))
    assert outcome.passing_tokens == passing
    # min(1, p/q) over the examined tokens only (a + 1, or k when all kept), in fixed point, run by run
    examined = [
        sum(round(min(1.0, p[i] / q[i]) * THRESHOLD_SCALE) for i in range(min(a + 1, len(p))))
        for (p, q, _), a in zip(runs, scalar)
    ]
    assert outcome.examined_threshold_sum_fixed == sum(examined)
    per_run = accept_prefix_batch(*batch_of(runs), per_run=True)
    assert per_run.examined_threshold_fixed_per_run is not None
    assert per_run.examined_threshold_fixed_per_run.tolist() == examined


@given(st.data())
def test_float32_inputs_agree_after_widening(data: st.DataObject) -> None:
    """Parquet float32 columns are widened to float64 before the rule, exactly as Python does."""
    k = data.draw(st.integers(1, 16))
    p32 = np.array(data.draw(st.lists(probability, min_size=k, max_size=k)), dtype=np.float32)
    q32 = np.array(data.draw(st.lists(positive.filter(lambda x: x > 1e-30), min_size=k, max_size=k)), dtype=np.float32)
    r32 = np.array(data.draw(st.lists(probability, min_size=k, max_size=k)), dtype=np.float32)
    p, q, r = (a.astype(np.float64) for a in (p32, q32, r32))
    offsets = np.array([0, k], dtype=np.int64)
    assert accept_prefix_batch(offsets, p, q, r).accepted.tolist() == [spec_accept(p.tolist(), q.tolist(), r.tolist())]


# --- the compiled kernel against the numpy path -------------------------------------------------------

KERNEL = vectorized.rule_kernel()
OUTCOME_FIELDS = ("passing_tokens", "threshold_sum_fixed", "sampled_tokens", "examined_threshold_sum_fixed")


def _numpy_outcome(
    monkeypatch: pytest.MonkeyPatch, *arrays: np.ndarray, tallies: bool = False
) -> vectorized.BatchOutcome:
    with monkeypatch.context() as patch:
        patch.setattr(vectorized, "rule_kernel", lambda: False)
        return accept_prefix_batch(*arrays, tallies=tallies)


@given(runs_strategy())
def test_compiled_kernel_equals_the_numpy_path(runs: list[tuple[list[float], list[float], list[float]]]) -> None:
    """Every decision and sum, and the sampler's tallies, bit for bit: the kernel's one pass and numpy's."""
    if not KERNEL:
        pytest.skip("the compiled kernel is not built")
    arrays = batch_of(runs)
    with pytest.MonkeyPatch.context() as patch:
        expected = _numpy_outcome(patch, *arrays)
        expected_tally = SamplerTally.of_batch(_numpy_outcome(patch, *arrays, tallies=True))
    compiled = accept_prefix_batch(*arrays)
    assert compiled.tallies is not None and expected.tallies is None
    assert compiled.k.tolist() == expected.k.tolist() and compiled.accepted.tolist() == expected.accepted.tolist()
    assert [getattr(compiled, name) for name in OUTCOME_FIELDS] == [getattr(expected, name) for name in OUTCOME_FIELDS]
    assert SamplerTally.of_batch(compiled) == expected_tally


@pytest.mark.parametrize("bad", [math.nan, 1.5, -0.25, math.inf])
def test_compiled_kernel_leaves_values_out_of_range_to_numpy(bad: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """An r or a p outside [0, 1] (a batch nothing has checked): the same outcome as numpy's, whoever decides."""
    if not KERNEL:
        pytest.skip("the compiled kernel is not built")
    offsets = np.array([0, 2, 3], dtype=np.int64)
    q = np.array([0.5, 0.5, 1.0])
    cases = [(np.array([0.5, 0.25, 0.5]), np.array([0.5, bad, 0.1]))]
    if not math.isnan(bad):  # (a nan threshold is a cast numpy itself warns about: checked batches have none)
        cases.append((np.array([0.5, bad, 0.5]), np.full(3, 0.5)))
    for p, r in cases:
        if not 0.0 <= r[1] <= 1.0 or p[1] < 0:  # no r, or no threshold, in [0, 1]: declined
            assert KERNEL.evaluate(offsets, p, q, r) is None
        compiled, expected = accept_prefix_batch(offsets, p, q, r), _numpy_outcome(monkeypatch, offsets, p, q, r)
        assert compiled.accepted.tolist() == expected.accepted.tolist()
        assert [getattr(compiled, name) for name in OUTCOME_FIELDS] == [
            getattr(expected, name) for name in OUTCOME_FIELDS
        ]


def test_compiled_kernel_refuses_what_is_not_a_batch() -> None:
    if not KERNEL:
        pytest.skip("the compiled kernel is not built")
    p = np.array([0.5, 0.5])
    assert KERNEL.evaluate(np.array([0, 3], dtype=np.int64), p, p, p) is None  # offsets beyond the tokens
    assert KERNEL.evaluate(np.array([1, 2], dtype=np.int64), p, p, p) is None  # not starting at 0
    assert KERNEL.evaluate(np.array([0, 2, 1], dtype=np.int64), p, p, p) is None  # not increasing
    with pytest.raises(TypeError):
        KERNEL.evaluate(np.array([0, 2], dtype=np.int64), p.astype(np.float32), p, p)
