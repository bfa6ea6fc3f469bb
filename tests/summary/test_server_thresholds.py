"""`threshold_bounds`, vectorized over a batch, against a plain reading of tree-target-cdf's test run by run."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.summary.server import THRESHOLDS, threshold_bounds


def reference(p: list[float], r: list[float], reported: int, name: str) -> tuple[float, float]:
    """(low, high]: the values of one threshold (the other at 1) for which `r <= p / acc or p >= single`, scanned
    to the first failure, keeps exactly `reported` tokens."""
    if reported > len(p):
        return 1.0, 0.0
    low, high = 0.0, 1.0
    for j, (pj, rj) in enumerate(zip(p, r)):
        if j < reported and name == "threshold_acc" and rj > 0:
            high = min(high, pj / rj)
        elif j < reported and name == "threshold_single" and rj > pj:
            high = min(high, pj)
        elif j == reported and name == "threshold_acc":
            low = max(low, 2.0 if rj <= 0 or pj >= 1 else pj / rj)
        elif j == reported:
            low = max(low, 2.0 if rj <= pj else pj)
    return min(low, 1.0), high


unit = st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0.0, 1.0)
runs = st.lists(st.tuples(st.lists(st.tuples(unit, unit), max_size=6), st.integers(0, 7)), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(runs)
def test_bounds_equal_the_run_by_run_reading(data: list[tuple[list[tuple[float, float]], int]]) -> None:
    offsets = np.concatenate([[0], np.cumsum([len(tokens) for tokens, _ in data])]).astype(np.int64)
    p = np.array([pj for tokens, _ in data for pj, _ in tokens], dtype=np.float64)
    r = np.array([rj for tokens, _ in data for _, rj in tokens], dtype=np.float64)
    reported = np.array([count for _, count in data], dtype=np.int64)
    found = threshold_bounds(SimpleNamespace(offsets=offsets, p=p, r=r), reported)
    for name in THRESHOLDS:
        for index, (tokens, count) in enumerate(data):
            expected = reference([pj for pj, _ in tokens], [rj for _, rj in tokens], count, name)
            assert (found[name].low[index], found[name].high[index]) == expected


def test_a_server_at_a_threshold_lies_inside_every_runs_interval() -> None:
    rng = np.random.default_rng(0)
    k = rng.integers(1, 7, 500)
    offsets = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
    p, r = rng.random(offsets[-1]), rng.random(offsets[-1])
    kept = r <= np.minimum(1.0, p / 0.8)
    reported = np.array([int(np.cumprod(kept[a:b]).sum()) for a, b in itertools.pairwise(offsets)])
    bounds = threshold_bounds(SimpleNamespace(offsets=offsets, p=p, r=r), reported)["threshold_acc"]
    assert np.all(bounds.low < 0.8) and np.all(bounds.high >= 0.8)
    low, high = bounds.overall
    assert low < 0.8 <= high < 1.0 and bounds.needs_lowering.any()
