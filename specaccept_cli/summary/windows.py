"""Acceptance over the log: windows of time or of runs, and a test of whether alpha stays constant.

A window tally is additive state like the rest of the summary. Each window keeps seven integer
sums over its runs (runs, drafted, accepted, examined, and the sums of a^2, e^2 and a*e that the
interval of a ratio over runs needs), so every window's alpha, interval and tokens per pass derive
from it, and so does the drift test.

- Windows of **time** (`--time-field`) are aligned to the Unix epoch (a 5-minute window starts at a
  multiple of 300 s), so tallies of shards add key by key and merge exactly, in any order.
- Windows of **runs** (no time field) count valid runs in input order: they describe one sequence
  of runs. Adding two such tallies appends the second after the first (inputs one after another),
  which is exact for the inputs of one audit but is an order, not a merge.

The tally holds at most `cap` windows, so memory stays flat: past that, neighbouring windows merge
and the width grows (runs and explicit durations double; automatic durations climb a ladder of
round durations, each a multiple of the last, so merged shards still align). Without `--window`
the cap is AUTO_WINDOWS, giving about 25-50 windows over any log.

The drift test is a CUSUM of run-level residuals, a - alpha * e, summed window by window in log
order. With runs independent, the partial sums scaled by sigma * sqrt(n) follow a Brownian bridge,
whose largest absolute value has Kolmogorov's distribution (see `drift_test`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
from msgspec import Struct

from specaccept_cli.summary import fixed
from specaccept_cli.summary.probability import kolmogorov_sf

if TYPE_CHECKING:
    from specaccept_cli.summary.clusters import ClusterTally

IntArray = npt.NDArray[np.int64]
Unit = Literal["seconds", "runs"]

AUTO_WINDOWS = 50  # automatic widths: at most this many windows (so 25-50 once the log is long enough)
MAX_WINDOWS = 1000  # an explicit --window: at most this many windows before they merge in pairs
FIRST_RUN_WIDTH = 8  # automatic run windows start this wide and double
# Automatic time widths, in seconds: round durations, each a whole multiple of the one before
# (1 s, 5 s, 10 s, 30 s, 1 min, 5 min, 10 min, 30 min, 1 h, 2 h, 6 h, 12 h, 1 day, 1 week; then doubling).
TIME_LADDER = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400, 604800)
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# Columns of `WindowTally.sums`.
RUNS, DRAFTED, ACCEPTED, EXAMINED, SUM_AA, SUM_EE, SUM_AE = range(7)
COLUMNS = ("runs", "drafted", "accepted", "examined", "sum_aa", "sum_ee", "sum_ae")

# Discretely monitored Brownian bridge: the sup over m equally spaced points falls short of the
# continuous sup by about this many sqrt(1/m) (Broadie, Glasserman and Kou's continuity correction).
DISCRETE_MONITORING_SHIFT = 0.5826


class WindowSpec(Struct, frozen=True):
    """How runs fall into windows: by a time field (`width` in seconds) or by input order (`width` in runs).

    `width` None means automatic. The library's `Plan` carries one of these.
    """

    time_field: str | None = None
    width: int | None = None

    @property
    def unit(self) -> Unit:
        return "runs" if self.time_field is None else "seconds"


# The widest windows: 100 years (logged times end in 5138, `epoch_seconds`) and 10**18 runs, so that window
# keys times their width stay within int64. `--window` and `--every` are refused beyond them as they are
# parsed, and a saved summary holding a wider window is refused as it is read.
MAX_WIDTH_SECONDS = 36_500 * 86_400
MAX_WIDTH_RUNS = 10**18


def parse_duration(text: str) -> int:
    """`30s`, `5m`, `1h`, `2d` -> seconds. Raises ValueError on anything else (a whole number and a unit)."""
    cleaned = text.strip().lower()
    unit = DURATION_UNITS.get(cleaned[-1:]) if cleaned else None
    digits = cleaned[:-1]
    if unit is None or not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"{text!r} is not a duration like 30s, 5m, 1h or 1d")
    return int(digits) * unit


def duration_text(seconds: int) -> str:
    """The largest unit that divides `seconds` exactly: 300 -> '5m', 90 -> '90s'."""
    for suffix, size in sorted(DURATION_UNITS.items(), key=lambda item: -item[1]):
        if seconds % size == 0:
            return f"{seconds // size}{suffix}"
    return f"{seconds}s"  # pragma: no cover - every whole number of seconds is divisible by 1


# --- time values -----------------------------------------------------------------------------

# Epoch numbers are read by their size: below 1e11 seconds (until the year 5138), then
# milliseconds, microseconds, nanoseconds.
_EPOCH_SCALES = ((1e11, 1.0), (1e14, 1e-3), (1e17, 1e-6), (math.inf, 1e-9))


def epoch_seconds(value: object) -> float | None:
    """A logged time as Unix seconds, or None when it is not one.

    Accepts epoch numbers (seconds, or milliseconds/microseconds/nanoseconds told apart by their
    size), ISO-8601 strings (`2026-11-30T14:05:00Z`, `+02:00` offsets; no offset means UTC) and the
    datetimes a Parquet timestamp column gives (naive ones are UTC); from 1970 up to 1e11 s.
    """
    seconds = None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number) or number < 0:
            return None
        seconds = next(number * scale for limit, scale in _EPOCH_SCALES if number < limit)
    else:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value.strip())
            except ValueError:
                return None
        if isinstance(value, datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            seconds = moment.timestamp()
    # From 1970 to the year 5138: beyond that a number is not a time this tool can place in a window.
    return seconds if seconds is not None and 0.0 <= seconds < _EPOCH_SCALES[0][0] else None


def time_problem(name: str, value: object) -> str:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    kinds = "epoch seconds or milliseconds, or an ISO-8601 string, from 1970 to the year 5138"
    return f"{name} = {shown} is not a time ({kinds})"


# --- the tally -------------------------------------------------------------------------------


def _run_columns(k: IntArray, accepted: IntArray) -> tuple[IntArray, ...]:
    """Per run, the six columns after RUNS (drafted, accepted, examined and the three products), in int64."""
    k, accepted = k.astype(np.int64, copy=False), accepted.astype(np.int64, copy=False)
    examined = np.minimum(accepted + 1, k)
    return k, accepted, examined, accepted * accepted, examined * examined, accepted * examined


def _run_sums(k: IntArray, accepted: IntArray) -> IntArray:
    """Per run, the seven columns (runs = 1)."""
    return np.stack([np.ones(k.shape[0], dtype=np.int64), *_run_columns(k, accepted)], axis=1)


def _sum_by_key(keys: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    """Rows added up by key: (sorted distinct keys, their sums). Exact integer sums, one pass when keys are sorted."""
    if not keys.shape[0]:
        return keys.astype(np.int64), np.zeros((0, rows.shape[1]), dtype=np.int64)
    if bool((keys[1:] < keys[:-1]).any()):  # runs come in order; times need not
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
    firsts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[firsts].astype(np.int64), np.add.reduceat(rows, firsts, axis=0).astype(np.int64)


def _consecutive_sums(first: int, width: int, k: IntArray, accepted: IntArray) -> tuple[IntArray, IntArray]:
    """Runs at positions first, first + 1, ... added up by window (position // width): what `_sum_by_key`
    gives for those keys, without a key per run. Each window is a slice, cut where a position is a
    multiple of `width`, so each column is one `reduceat` (exact integer sums)."""
    count = k.shape[0]
    cuts = np.arange((-first) % width, count, width, dtype=np.int64)
    if not cuts.shape[0] or cuts[0] != 0:  # the first run tops up a window begun before
        cuts = np.concatenate([np.zeros(1, dtype=np.int64), cuts])
    sums = np.empty((cuts.shape[0], 7), dtype=np.int64)
    sums[:, RUNS] = np.diff(np.append(cuts, count))
    for column, values in enumerate(_run_columns(k, accepted), start=DRAFTED):
        np.add.reduceat(values, cuts, out=sums[:, column])
    return (first + cuts) // width, sums


# eq stays on: the Struct's != then calls the __eq__ below (with eq=False it would compare identities)
class WindowTally(Struct, frozen=True):
    """Windows of one log: [starts[i], ends[i]) in seconds since the epoch or in 0-based run positions.

    `sums[i]` holds the window's seven integer sums (see COLUMNS). Only windows holding runs are kept.
    `requested` is the width asked for (None: automatic); `width` is the width in force.
    """

    unit: Unit
    time_field: str | None
    requested: int | None
    width: int
    starts: IntArray
    ends: IntArray
    sums: IntArray

    @classmethod
    def empty(cls, spec: WindowSpec) -> WindowTally:
        width = spec.width or (TIME_LADDER[0] if spec.unit == "seconds" else FIRST_RUN_WIDTH)
        none = np.zeros(0, dtype=np.int64)
        return cls(spec.unit, spec.time_field, spec.width, width, none, none, np.zeros((0, 7), dtype=np.int64))

    @classmethod
    def of_times(
        cls, spec: WindowSpec, seconds: npt.NDArray[np.float64], k: IntArray, accepted: IntArray
    ) -> WindowTally:
        """Runs with their times (Unix seconds): each falls in the epoch-aligned window holding its time."""
        tally = cls.empty(spec)
        whole_seconds = np.floor(seconds).astype(np.int64)
        keys, sums = _sum_by_key(whole_seconds // tally.width, _run_sums(k, accepted))
        return tally._with(keys * tally.width, (keys + 1) * tally.width, sums)._within_cap()

    @property
    def cap(self) -> int:
        return AUTO_WINDOWS if self.requested is None else MAX_WINDOWS

    @property
    def runs(self) -> int:
        return int(self.sums[:, RUNS].sum())

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def _with(self, starts: IntArray, ends: IntArray, sums: IntArray, width: int | None = None) -> WindowTally:
        return WindowTally(self.unit, self.time_field, self.requested, width or self.width, starts, ends, sums)

    def extended(self, k: IntArray, accepted: IntArray) -> WindowTally:
        """Runs windows: these runs appended after the ones already counted (input order)."""
        assert self.unit == "runs", "time windows are built from times (of_times)"
        first = int(self.ends[-1]) if len(self) else 0
        if not k.shape[0]:
            return self
        keys, sums = _consecutive_sums(first, self.width, k, accepted)
        starts = np.maximum(keys * self.width, first)
        ends = np.minimum((keys + 1) * self.width, first + k.shape[0])
        if len(self) and int(keys[0]) * self.width < first:  # the last window was partly filled: top it up
            merged = self.sums.copy()
            merged[-1] += sums[0]
            head = self._with(self.starts, np.concatenate([self.ends[:-1], ends[:1]]), merged)
            return head._with(
                np.concatenate([head.starts, starts[1:]]),
                np.concatenate([head.ends, ends[1:]]),
                np.concatenate([merged, sums[1:]]),
            )._within_cap()
        return self._with(
            np.concatenate([self.starts, starts]), np.concatenate([self.ends, ends]), np.concatenate([self.sums, sums])
        )._within_cap()

    def _coarser_width(self) -> int:
        if self.unit == "seconds" and self.requested is None:
            larger = [width for width in TIME_LADDER if width > self.width]
            return larger[0] if larger else self.width * 2
        return self.width * 2

    def coarsened(self, width: int) -> WindowTally:
        """The same runs in windows of `width` (a multiple of the current width)."""
        if width == self.width:
            return self
        if self.unit == "seconds":
            keys, sums = _sum_by_key(self.starts // width, self.sums)
            return self._with(keys * width, (keys + 1) * width, sums, width)
        # Runs: windows are consecutive from position 0, so window i joins the others of i // factor.
        factor = width // self.width
        keys, sums = _sum_by_key(np.arange(len(self), dtype=np.int64) // factor, self.sums)
        bounds = np.searchsorted(np.arange(len(self)) // factor, keys)
        last = np.append(bounds[1:], len(self)) - 1
        return self._with(self.starts[bounds], self.ends[last], sums, width)

    def _within_cap(self) -> WindowTally:
        tally = self
        while len(tally) > tally.cap:
            tally = tally.coarsened(tally._coarser_width())
        return tally

    def _compatible(self, other: WindowTally) -> None:
        mine = (self.unit, self.time_field, self.requested)
        theirs = (other.unit, other.time_field, other.requested)
        if mine != theirs:
            raise ValueError(f"cannot add windows of different kinds ({_kind(*mine)}; {_kind(*theirs)})")

    def __add__(self, other: WindowTally) -> WindowTally:
        """Time windows add key by key (exact, any order); run windows append `other` after `self`."""
        self._compatible(other)
        width = max(self.width, other.width)  # widths of one kind climb one ladder: the larger is a multiple
        left, right = self.coarsened(width), other.coarsened(width)
        if self.unit == "seconds":
            keys, sums = _sum_by_key(
                np.concatenate([left.starts, right.starts]) // width, np.concatenate([left.sums, right.sums])
            )
            return left._with(keys * width, (keys + 1) * width, sums)._within_cap()
        shift = int(left.ends[-1]) if len(left) else 0
        return left._with(
            np.concatenate([left.starts, right.starts + shift]),
            np.concatenate([left.ends, right.ends + shift]),
            np.concatenate([left.sums, right.sums]),
        )._within_cap()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WindowTally):
            return NotImplemented
        return (
            (self.unit, self.time_field, self.requested, self.width)
            == (other.unit, other.time_field, other.requested, other.width)
            and bool(np.array_equal(self.starts, other.starts))
            and bool(np.array_equal(self.ends, other.ends))
            and bool(np.array_equal(self.sums, other.sums))
        )

    __hash__ = None  # type: ignore[assignment]

    # --- the machine format ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "time_field": self.time_field,
            "requested": self.requested,
            "width": self.width,
            "columns": list(COLUMNS),
            "windows": [
                [int(start), int(end), *(int(x) for x in row)]
                for start, end, row in zip(self.starts, self.ends, self.sums)
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WindowTally:
        unit = data["unit"]
        if unit not in ("seconds", "runs") or list(data["columns"]) != list(COLUMNS):
            raise ValueError("windows hold an unknown unit or columns")
        width, requested = data["width"], data["requested"]
        widest = MAX_WIDTH_SECONDS if unit == "seconds" else MAX_WIDTH_RUNS
        if any(type(x) is not int or not 1 <= x <= widest for x in (width, requested) if x is not None):
            raise ValueError(f"windows hold a width that is not a whole number from 1 to {widest:,} {unit}")
        rows = data["windows"]
        if any(len(row) != 2 + len(COLUMNS) or any(type(x) is not int for x in row) for row in rows):
            raise ValueError("windows hold a row of the wrong length, or a value that is not a whole number")
        table = np.array(rows, dtype=np.int64).reshape(-1, 2 + len(COLUMNS))
        starts, ends, sums = table[:, 0], table[:, 1], table[:, 2:]
        if bool((sums < 0).any()) or bool((ends <= starts).any()) or bool((np.diff(starts) <= 0).any()):
            raise ValueError("windows hold a negative sum or windows out of order")
        if bool((sums[:, RUNS] == 0).any()) or bool((sums[:, ACCEPTED] > sums[:, EXAMINED]).any()):
            raise ValueError("windows hold an empty window or more accepted than examined tokens")
        if unit == "seconds":
            aligned = bool((starts % width == 0).all()) and bool((ends == starts + width).all())
        else:
            aligned = starts.shape[0] == 0 or (int(starts[0]) == 0 and bool((starts[1:] == ends[:-1]).all()))
        cap = AUTO_WINDOWS if requested is None else MAX_WINDOWS
        if not aligned or starts.shape[0] > cap:
            raise ValueError(f"windows are not aligned to their width, or more than {cap}")
        time_field = data["time_field"]
        return cls(
            unit=unit,
            time_field=None if time_field is None else str(time_field),
            requested=None if requested is None else int(requested),
            width=width,
            starts=np.ascontiguousarray(starts),
            ends=np.ascontiguousarray(ends),
            sums=np.ascontiguousarray(sums),
        )


def _kind(unit: str, time_field: str | None, requested: int | None) -> str:
    width = "automatic" if requested is None else str(requested)
    return f"by {unit}" + (f" of {time_field!r}" if time_field else "") + f", width {width}"


# --- estimates per window, and the drift test -----------------------------------------------

Z_95 = 1.959963984540054


class WindowEstimate(Struct, frozen=True):
    """One window's numbers (start and end in the tally's unit)."""

    start: int
    end: int
    runs: int
    drafted_tokens: int
    accepted_tokens: int
    examined_tokens: int
    alpha: float | None
    alpha_ci: tuple[float, float] | None
    tokens_per_pass: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "runs": self.runs,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "alpha": self.alpha,
            "alpha_ci": None if self.alpha_ci is None else list(self.alpha_ci),
            "tokens_per_pass": self.tokens_per_pass,
        }


def _residual_squares(sums: IntArray, alpha: float) -> npt.NDArray[np.float64]:
    """Per row, the sum over its runs of (a - alpha e)^2, from the integer moments."""
    aa, ee, ae = (sums[:, column].astype(np.float64) for column in (SUM_AA, SUM_EE, SUM_AE))
    residual: npt.NDArray[np.float64] = np.maximum(0.0, aa - 2.0 * alpha * ae + alpha * alpha * ee)
    return residual


def design_effect(tally: WindowTally, clusters: ClusterTally | None) -> float:
    """How much request clustering inflates the variance of alpha, over the whole log (at least 1).

    The ratio of the cluster-robust variance of the residuals a - alpha e (request totals) to the
    variance over runs. A window holds parts of many requests, whose own per-window totals no
    additive state keeps for every window: so a window's interval over runs is widened by the
    whole log's design effect. An approximation: right when every window mixes requests as the
    whole log does; a window that is one long request is still under-covered.
    """
    sums = tally.sums
    runs, examined = tally.runs, int(sums[:, EXAMINED].sum()) if len(tally) else 0
    if clusters is None or clusters.clusters < 2 or runs < 2 or examined == 0:
        return 1.0
    alpha = int(sums[:, ACCEPTED].sum()) / examined
    run_variance = float(_residual_squares(sums, alpha).sum()) / runs
    if run_variance <= 0.0:
        return 1.0
    return max(1.0, _cluster_variance(clusters, alpha, runs) / run_variance)


def window_estimates(tally: WindowTally, clusters: ClusterTally | None = None) -> list[WindowEstimate]:
    """Each window's alpha with its 95% interval, in log order.

    The interval is the delta method over the window's runs, widened by the whole log's design
    effect when the runs are clustered (`design_effect`): over runs alone, windows of a request-
    clustered log exclude the whole-log alpha far more often than 5%.
    """
    inflation = math.sqrt(design_effect(tally, clusters))
    rows = []
    for start, end, window in zip(tally.starts.tolist(), tally.ends.tolist(), tally.sums):
        runs, examined, accepted = int(window[RUNS]), int(window[EXAMINED]), int(window[ACCEPTED])
        alpha = accepted / examined if examined else None
        interval = None
        if alpha is not None and runs >= 2:
            spread = math.sqrt(runs / (runs - 1) * float(_residual_squares(window[None, :], alpha)[0])) / examined
            spread *= inflation
            interval = (max(0.0, alpha - Z_95 * spread), min(1.0, alpha + Z_95 * spread))
        rows.append(
            WindowEstimate(
                start=start,
                end=end,
                runs=runs,
                drafted_tokens=int(window[DRAFTED]),
                accepted_tokens=accepted,
                examined_tokens=examined,
                alpha=alpha,
                alpha_ci=interval,
                tokens_per_pass=(accepted + runs) / runs,
            )
        )
    return rows


def excludes(window: WindowEstimate, alpha: float | None) -> bool:
    """Does the window's 95% interval leave out the whole-log alpha?"""
    if alpha is None or window.alpha_ci is None:
        return False
    low, high = window.alpha_ci
    return alpha < low or alpha > high


class Drift(Struct, frozen=True):
    """Is alpha constant over the log? A CUSUM test, and the likeliest change point."""

    statistic: float  # max |CUSUM| / (sigma sqrt(n)): Kolmogorov-distributed under a constant alpha
    p_value: float
    change_at: int  # where the CUSUM peaks: a window boundary (seconds since the epoch, or a run position)
    alpha_before: float | None
    alpha_after: float | None
    windows: int
    variance: Literal["runs", "windows", "clusters"]  # which spread estimate was the largest, and so was used

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistic": self.statistic,
            "p_value": self.p_value,
            "change_at": self.change_at,
            "alpha_before": self.alpha_before,
            "alpha_after": self.alpha_after,
            "windows": self.windows,
            "variance": self.variance,
        }


MIN_DRIFT_WINDOWS = 3


def drift_test(tally: WindowTally, clusters: ClusterTally | None = None) -> Drift | None:
    """CUSUM of run residuals a - alpha e over the windows in log order; None with under 3 windows.

    S_i = sum over windows up to i of (accepted - alpha examined), alpha the whole log's. If alpha
    is constant and runs are independent, S at run fraction t, divided by sigma sqrt(n), tends to a
    Brownian bridge; its largest absolute value has Kolmogorov's distribution (`kolmogorov_sf`).
    The sum is seen only at window ends, which lowers the maximum a little: the p-value applies
    the continuity correction for m monitoring points (DISCRETE_MONITORING_SHIFT / sqrt(m)).

    sigma^2 is the largest of up to three estimates: the spread of residuals over runs (right when runs
    are independent); the spread of window sums standardised by sqrt(runs), about alpha before and
    after the peak (so a real step does not inflate it); and, with `clusters` (--cluster-field), the
    spread of request totals, G/(G-1) sum_c R_c^2 / n with R_c a request's summed residual. Runs of one
    request share a prompt and lean the same way: the window spread sees that when a request sits within
    a window or two; when many requests run at once, each spreads over several windows, neighbouring
    windows lean together, and only request totals see it. An estimate from window sums (m - 2 degrees
    of freedom) or request totals (G - 1) makes the p-value average Kolmogorov's tail over the
    estimate's chi-square spread (`kolmogorov_sf_estimated_scale`). A request that spans most of the log
    adds to its total but hardly to the bridge, so request totals then overstate sigma: the test only
    grows more cautious.
    """
    windows = len(tally)
    sums = tally.sums
    runs = tally.runs
    examined = int(sums[:, EXAMINED].sum())
    if windows < MIN_DRIFT_WINDOWS or examined == 0 or runs < 2:
        return None
    alpha = int(sums[:, ACCEPTED].sum()) / examined
    residuals = sums[:, ACCEPTED] - alpha * sums[:, EXAMINED]  # per window: sum over its runs of a - alpha e
    run_variance = float(_residual_squares(sums, alpha).sum()) / runs
    if run_variance <= 0.0:  # every run kept all or none: nothing varies, nothing drifts
        return Drift(0.0, 1.0, int(tally.ends[0]), alpha, alpha, windows, "runs")
    # Locate the peak with the run variance (a constant factor does not move it), then judge it
    # with the largest spread.
    cusum = np.abs(np.cumsum(residuals)[:-1])
    peak = int(np.argmax(cusum))
    estimates: dict[Literal["runs", "windows", "clusters"], tuple[float, int | None]] = {
        "runs": (run_variance, None),  # known degrees of freedom: Kolmogorov's tail as it is
        "windows": (_window_variance(sums, peak), windows - 2),
    }
    if clusters is not None and clusters.clusters >= 2:
        estimates["clusters"] = (_cluster_variance(clusters, alpha, runs), clusters.clusters - 1)
    used = max(estimates, key=lambda name: estimates[name][0])  # ties keep the first: runs, then windows
    variance, degrees = estimates[used]
    statistic = float(cusum[peak] / math.sqrt(variance * runs))
    shifted = statistic + DISCRETE_MONITORING_SHIFT / math.sqrt(windows)
    p_value = kolmogorov_sf(shifted) if degrees is None else kolmogorov_sf_estimated_scale(shifted, degrees)
    before, after = sums[: peak + 1], sums[peak + 1 :]
    return Drift(
        statistic=statistic,
        p_value=p_value,
        change_at=int(tally.ends[peak]),
        alpha_before=_alpha(before),
        alpha_after=_alpha(after),
        windows=windows,
        variance=used,
    )


def _cluster_variance(clusters: ClusterTally, alpha: float, runs: int) -> float:
    """Per run: G/(G-1) times the sum over requests of their squared residual totals, over the runs."""
    sums = clusters.sums
    count = len(sums)
    totals = sums.accepted - alpha * sums.examined
    return count / (count - 1) * fixed.dot(totals, totals) / runs


def kolmogorov_sf_estimated_scale(x: float, degrees: int) -> float:
    """P(K / sqrt(V) > x) for V = chi2(degrees) / degrees independent of K: Kolmogorov's tail when the
    scale was estimated with `degrees` degrees of freedom (as Student's t is the normal's).

    Simpson's rule over u = sqrt(V) on [sqrt(max(0, 1 - 12 sd)), sqrt(1 + 12 sd)], sd = sqrt(2 / degrees):
    in u the integrand is smooth and finite at 0 for every degree of freedom (in V, the chi-square density
    is infinite there for 1 and a jump for 2, which a rule over V misses: with 2 or 3 requests, or 3 or 4
    windows, that made p-values too small).
    """
    if degrees < 1:
        return 1.0
    half = degrees / 2.0
    spread = 12.0 * math.sqrt(2.0 / degrees)
    lower, upper = math.sqrt(max(0.0, 1.0 - spread)), math.sqrt(1.0 + spread)
    steps = 400
    width = (upper - lower) / steps
    log_norm = math.log(2.0) + half * math.log(half) - math.lgamma(half)  # density of u = sqrt(chi2 / degrees)

    def integrand(u: float) -> float:
        if u <= 0.0:  # u^(degrees - 1) at 0, times Kolmogorov's tail at 0, which is 1
            return math.exp(log_norm) if degrees == 1 else 0.0
        density = math.exp(log_norm + (degrees - 1) * math.log(u) - half * u * u)
        return density * kolmogorov_sf(x * u)

    total = integrand(lower) + integrand(upper)
    total += sum((4.0 if i % 2 else 2.0) * integrand(lower + i * width) for i in range(1, steps))
    return min(1.0, max(0.0, total * width / 3.0))


def _window_variance(sums: IntArray, peak: int) -> float:
    """Spread per run of window residual sums, about alpha before and after the peak (m - 2 degrees of freedom).

    Window sums divided by sqrt(runs) have the variance of one run's residual when runs are
    independent, and more when runs of a window lean together (requests). Fitting alpha on each
    side of the likeliest change keeps a real step from inflating it.
    """
    spread = 0.0
    for part in (sums[: peak + 1], sums[peak + 1 :]):
        alpha = _alpha(part) or 0.0
        spread += float(np.sum((part[:, ACCEPTED] - alpha * part[:, EXAMINED]) ** 2 / part[:, RUNS]))
    return spread / max(1, int(sums.shape[0]) - 2)


def _alpha(sums: IntArray) -> float | None:
    examined = int(sums[:, EXAMINED].sum())
    return int(sums[:, ACCEPTED].sum()) / examined if examined else None


def describe_position(tally: WindowTally, position: int) -> str:
    """A window boundary for people: an ISO-8601 UTC time, or 'run N' (1-based: the first run after it)."""
    if tally.unit == "runs":
        return f"run {position + 1:,}"
    return datetime.fromtimestamp(position, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
