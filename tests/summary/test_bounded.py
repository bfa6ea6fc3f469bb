"""Bounded units: additive and exact whatever the split, their rows refused when impossible, their bounds holding
the truth of random requests, and the Imbens-Manski interval's critical value where the paper puts it."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule.requests import RequestRecord
from specaccept_cli.summary.bounded import COLUMNS, BoundedUnits, steps_bounds
from specaccept_cli.summary.clusters import encode_column
from specaccept_cli.summary.identified import bounds_interval
from specaccept_cli.summary.probability import normal_cdf, student_t_quantile
from specaccept_cli.summary.uncertainty import proportion_interval

# --- random requests: steps of (drafted d, accepted a), a <= d <= k --------------------------------------


@st.composite
def request_steps(draw: st.DrawFn, k_max: int = 8) -> tuple[int, list[tuple[int, int]]]:
    k = draw(st.integers(1, k_max))
    drafted = st.integers(1, k)
    steps = draw(st.lists(drafted.flatmap(lambda d: st.tuples(st.just(d), st.integers(0, d))), min_size=1, max_size=40))
    return k, steps


def record_of(k: int, steps: list[tuple[int, int]], written: set[str]) -> RequestRecord:
    """The request as an engine that writes only the `written` figures (of k, steps, histogram) would."""
    histogram = [0] * (k + 1)
    for _, a in steps:
        histogram[a] += 1
    return RequestRecord(
        engine="test",
        fmt="test",
        k=k if "k" in written else None,
        steps=len(steps) if "steps" in written else None,
        accepted=sum(a for _, a in steps),
        drafted=sum(d for d, _ in steps),
        histogram=tuple(histogram) if "histogram" in written else None,
    ).check()


def examined(steps: list[tuple[int, int]]) -> int:
    """Tokens the target tested: each accepted one, and the rejected one where the step stopped short."""
    return sum(min(a + 1, d) for d, a in steps)


WRITTEN = st.sets(st.sampled_from(("k", "steps", "histogram")))


@given(request_steps(), WRITTEN)
def test_examined_bounds_hold_the_truth_of_random_requests(
    request: tuple[int, list[tuple[int, int]]], written: set[str]
) -> None:
    k, steps = request
    record = record_of(k, steps, written)
    bounds = record.examined_bounds()
    assert bounds is not None
    assert record.accepted is not None and record.drafted is not None
    assert record.accepted <= bounds[0] <= examined(steps) <= bounds[1] <= record.drafted


@given(request_steps(), WRITTEN, st.integers(0, 5), st.integers(0, 5))
def test_steps_bounds_hold_the_truth(
    request: tuple[int, list[tuple[int, int]]], written: set[str], below: int, above: int
) -> None:
    k, steps = request
    record = record_of(k, steps, written)
    bounds = record.examined_bounds()
    assert bounds is not None and record.accepted is not None and record.drafted is not None
    count = len(steps)
    low, high = steps_bounds(record.steps, None, record.accepted, record.drafted, bounds, record.k)
    assert low <= count <= high
    if record.steps is not None:
        assert (low, high) == (count, count)
    # a range around the truth (llama.cpp's rounded mean length) narrows the bounds and keeps the truth
    ranged = steps_bounds(None, (count - below, count + above), record.accepted, record.drafted, bounds, record.k)
    assert ranged[0] <= count <= ranged[1] and ranged[1] - ranged[0] <= below + above


def test_steps_bounds_by_hand() -> None:
    # 10 drafted, 4 accepted, k = 4: at least ceil(10 / 4) = 3 steps; examined >= 6 means two rejected steps
    assert steps_bounds(None, None, 4, 10, (6, 8), 4) == (3, 10)
    assert steps_bounds(None, None, 4, 10, (9, 10), 4) == (5, 10)  # five rejections: five steps at least
    assert steps_bounds(7, None, 4, 10, (6, 8), 4) == (7, 7)
    assert steps_bounds(None, None, 0, 0, (0, 0), None) == (0, 0)


# --- bounded units: additive, exact under any split, round trip, refusals -------------------------------

ROW = st.tuples(
    st.integers(0, 5),  # key: few, so requests read in two shards (one key twice) are common
    st.integers(0, 50),  # steps low
    st.integers(0, 20),  # steps high - low
    st.integers(0, 300),  # accepted
    st.integers(0, 40),  # examined low - accepted
    st.integers(0, 40),  # examined high - low
    st.integers(0, 40),  # drafted - examined high
    st.one_of(st.none(), st.lists(st.integers(0, 30), min_size=1, max_size=9)),
)


def unit(row: tuple[Any, ...]) -> BoundedUnits:
    key, steps, more, accepted, low, wide, rest, histogram = row
    examined = (accepted + low, accepted + low + wide)
    drafted = examined[1] + rest
    return BoundedUnits.one(
        key, (steps, steps + more), accepted, drafted, examined, None if histogram is None else tuple(histogram)
    )


def added(rows: list[tuple[Any, ...]]) -> BoundedUnits:
    total = BoundedUnits()
    for row in rows:
        total = total + unit(row)
    return total


def by_hand(rows: list[tuple[Any, ...]]) -> dict[int, list[int]]:
    """Each key's columns summed, in COLUMNS order."""
    sums: dict[int, list[int]] = {}
    for row in rows:
        key, steps, more, accepted, low, wide, rest, _ = row
        values = [steps, steps + more, accepted, accepted + low + wide + rest, accepted + low, accepted + low + wide]
        sums[key] = [a + b for a, b in zip(sums.get(key, [0] * 6), values, strict=True)]
    return sums


@given(st.lists(ROW, max_size=30), st.data())
def test_units_add_and_merge_to_the_whole_however_split(rows: list[tuple[Any, ...]], data: st.DataObject) -> None:
    whole = added(rows)
    cut = data.draw(st.integers(0, len(rows)))
    halves = added(rows[:cut]) + added(rows[cut:])
    assert halves == whole
    assert halves.to_dict() == whole.to_dict()
    # every key once, its columns the sums of its rows
    rows_out = whole.rows
    assert rows_out.keys.tolist() == sorted(by_hand(rows))
    for index, key in enumerate(rows_out.keys.tolist()):
        assert [int(getattr(rows_out, name)[index]) for name in COLUMNS] == by_hand(rows)[key]
    assert whole.without_histogram == sum(row[-1] is None for row in rows)
    size = max((len(row[-1]) for row in rows if row[-1] is not None), default=0)
    histogram = [sum(row[-1][a] for row in rows if row[-1] is not None and a < len(row[-1])) for a in range(size)]
    assert list(whole.histogram) == histogram
    for name in COLUMNS:
        assert whole.total(name) == sum(values[COLUMNS.index(name)] for values in by_hand(rows).values())


def test_many_parts_are_combined_and_stay_exact() -> None:
    rows = [(index % 7, 3, 1, 10, 2, 1, 4, [1, 2]) for index in range(200)]  # > 64 parts: combined as added
    whole = added(rows)
    assert len(whole.parts) <= 64
    assert whole.units == 7 and whole.total("accepted") == 2000 and whole.histogram == (200, 400)


@given(st.lists(ROW, max_size=30))
def test_to_dict_from_dict_round_trip(rows: list[tuple[Any, ...]]) -> None:
    whole = added(rows)
    back = BoundedUnits.from_dict(whole.to_dict())
    assert back == whole
    assert back.to_dict() == whole.to_dict()
    assert back + back == whole + whole


def _row_dict(**columns: int) -> dict[str, Any]:
    values = {"steps_low": 2, "steps_high": 3, "accepted": 5, "drafted": 9, "examined_low": 6, "examined_high": 7}
    values.update(columns)
    units = BoundedUnits.one(
        1,
        (values["steps_low"], values["steps_high"]),
        values["accepted"],
        values["drafted"],
        (values["examined_low"], values["examined_high"]),
        (1, 1, 1),
    )
    return units.to_dict()


@pytest.mark.parametrize(
    "columns",
    [
        {"steps_low": 4},  # steps low above high
        {"examined_low": 8},  # examined low above high
        {"accepted": 7},  # more accepted than examined at least
        {"drafted": 6},  # examined at most more than drafted
    ],
)
def test_from_dict_refuses_impossible_rows(columns: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="inconsistent rows"):
        BoundedUnits.from_dict(_row_dict(**columns))


def test_from_dict_refuses_bad_counts_and_keys() -> None:
    good = _row_dict()
    assert BoundedUnits.from_dict(good).total("accepted") == 5
    for change in (
        {"units": -1},
        {"units": 1.0},
        {"without_histogram": -1},
        {"histogram": [1, -1]},
        {"histogram": "1"},
    ):
        with pytest.raises(ValueError):
            BoundedUnits.from_dict({**good, **change})
    two = (BoundedUnits.one(1, (1, 1), 1, 2, (2, 2), None) + BoundedUnits.one(2, (1, 1), 1, 2, (2, 2), None)).to_dict()
    assert BoundedUnits.from_dict(two).units == 2
    with pytest.raises(ValueError, match="shape"):  # a key column of the wrong length
        BoundedUnits.from_dict({**two, "keys": encode_column(np.array([3], dtype=np.uint64))})
    with pytest.raises(ValueError, match="distinct"):
        BoundedUnits.from_dict({**two, "keys": encode_column(np.array([3, 3], dtype=np.uint64))})


def test_a_request_read_twice_without_a_histogram_round_trips() -> None:
    """Two rows of one key are one unit, both counted as without a histogram: the file audit writes reads back
    (it did not: from_dict refused without_histogram > units, and `merge` refused the summary)."""
    twice = BoundedUnits.one(9, (3, 3), 4, 10, (6, 8), None) + BoundedUnits.one(9, (2, 2), 1, 5, (2, 3), None)
    assert twice.units == 1 and twice.without_histogram == 2
    back = BoundedUnits.from_dict(twice.to_dict())
    assert back == twice and back.total("drafted") == 15 and not back.histogram_complete


# --- the Imbens-Manski interval -----------------------------------------------------------------------


def critical(bounds: tuple[float, float], error: float, df: int | None) -> float:
    interval = bounds_interval(bounds, (error, error), df, ceiling=None)
    assert interval is not None
    return (bounds[0] - interval[0]) / error


def test_bounds_interval_is_two_sided_at_zero_width_and_one_sided_when_wide() -> None:
    assert critical((0.5, 0.5), 0.01, 10**6) == pytest.approx(1.959964, abs=1e-4)
    assert critical((0.5, 0.5), 0.01, 9) == pytest.approx(student_t_quantile(0.975, 9), abs=1e-9)
    assert critical((0.3, 0.7), 0.01, 10**6) == pytest.approx(1.644854, abs=1e-4)
    assert critical((0.3, 0.7), 0.01, 9) == pytest.approx(student_t_quantile(0.95, 9), abs=1e-6)
    # in between, c solves Phi(c + width / s) - Phi(-c) = 0.95 (Imbens and Manski 2004, eq. 6)
    c = critical((0.50, 0.51), 0.01, 10**6)
    assert normal_cdf(c + 1.0) - normal_cdf(-c) == pytest.approx(0.95, abs=1e-6)
    assert 1.645 < c < 1.96
    assert bounds_interval((0.5, 0.6), (0.01, 0.01), None, ceiling=1.0) is None


@given(
    st.floats(0.3, 0.9),  # low - c s stays above 0, where the interval is floored
    st.lists(st.floats(0.0, 0.3), min_size=2, max_size=6, unique=True),
    st.floats(1e-4, 0.05),
    st.integers(2, 10**5),
)
def test_bounds_interval_narrows_its_critical_value_as_the_bounds_widen(
    low: float, widths: list[float], error: float, df: int
) -> None:
    values = [critical((low, low + width), error, df) for width in sorted(widths)]
    assert all(later <= earlier + 1e-9 for earlier, later in itertools.pairwise(values))
    assert all(student_t_quantile(0.95, df) - 1e-6 <= c <= student_t_quantile(0.975, df) + 1e-6 for c in values)
    for width in widths:
        interval = bounds_interval((low, low + width), (error, 2 * error), df, ceiling=1.0)
        assert interval is not None
        assert 0.0 <= interval[0] <= low and min(1.0, low + width) <= interval[1] <= 1.0
        wider = bounds_interval((low, low + width), (2 * error, 4 * error), df, ceiling=1.0)
        assert wider is not None and wider[0] <= interval[0] and wider[1] >= interval[1]


def test_bounds_interval_covers_at_the_level_when_the_value_sits_on_a_bound() -> None:
    """The interval's promise, checked by simulation: normal estimates of bounds [0.5, 0.5 + w] with error s,
    the value at the lower bound; coverage >= 95% at every width, about 95% at zero and when wide."""
    rng = np.random.default_rng(5)
    error = 0.01
    for width in (0.0, 0.005, 0.01, 0.02, 0.1):
        draws = 20_000
        lows = 0.5 + error * rng.standard_normal(draws)
        highs = 0.5 + width + error * rng.standard_normal(draws)
        c = critical((0.5, 0.5 + width), error, 10**6)
        covered = np.mean((lows - c * error <= 0.5) & (highs + c * error >= 0.5))
        assert covered >= 0.94, (width, covered)
        if width in (0.0, 0.1):
            assert covered == pytest.approx(0.95, abs=0.01), (width, covered)


@given(st.floats(0.01, 0.99), st.floats(1e-4, 0.1), st.integers(10, 10**6), st.integers(1, 10**4))
def test_bounds_of_a_rate_that_meet_give_the_interval_of_the_exact_rate(
    rate: float, error: float, tokens: int, df: int
) -> None:
    """With `tokens`, the ends are the exact path's score ends at the IM critical value: bounds that meet give
    exactly the interval an exact alpha of that rate and error has."""
    exact = proportion_interval(rate, error, tokens, df + 1, df)
    assert exact is not None
    met = bounds_interval((rate, rate), (error, error), df, 1.0, tokens=(tokens, tokens))
    assert met == pytest.approx(exact, rel=1e-9, abs=1e-12)  # c by bisection, the t quantile by its own


@given(
    st.floats(0.05, 0.9),
    st.floats(0.0, 0.3),
    st.floats(1e-4, 0.05),
    st.floats(1e-4, 0.05),
    st.integers(50, 10**5),
    st.integers(2, 10**4),
)
def test_score_ends_hold_the_bounds_and_stay_inside_zero_one(
    low: float, width: float, s_low: float, s_high: float, tokens: int, df: int
) -> None:
    high = min(1.0, low + width)
    interval = bounds_interval((low, high), (s_low, s_high), df, 1.0, tokens=(tokens, tokens))
    assert interval is not None
    assert 0.0 <= interval[0] < low and high <= interval[1] <= 1.0
    assert high < interval[1] or high == 1.0
    wider = bounds_interval((low, high), (2 * s_low, 2 * s_high), df, 1.0, tokens=(tokens, tokens))
    assert wider is not None and wider[0] <= interval[0] and wider[1] >= interval[1]
