"""Checks on estimates: minimum thresholds (gates), comparison with a baseline, power planning, and the server audits.

Both are pure functions of Summary objects and return plain results; the command
line decides how to print them and turns a failure into exit status 1.

The baseline comparison is a one-sided two-sample z test over runs. For a metric m
with estimates b (baseline) and c (current) and standard errors se_b, se_c (over
runs, so tokens of one run are not counted as independent draws), and a tolerated
relative drop d (`--max-drop`), it tests

    H0: true c >= (1 - d) * true b      (the metric dropped by at most d)

with z = (c - (1 - d) b) / sqrt(se_c^2 + (1 - d)^2 se_b^2) and p = P(T <= z), T a
Student t with the smaller side's degrees of freedom (units - 1: clusters with
--cluster-field, else runs). Rejecting H0 needs the estimated drop to exceed d *and*
that excess to be unlikely under noise alone; when the true drop is exactly d, false
alarms happen at the rate `significance`, and less often for smaller drops. With
d = 0 it is the plain test z = (c - b) / sqrt(se_b^2 + se_c^2).

Two metrics make one exit status, so the family is controlled: Holm's step-down
adjusts the two p-values (the smaller doubled, the larger at least that), and a
metric regresses when its adjusted p is below significance. `--significance 0.01`
then bounds the chance that a same-system comparison fails the gate by 1%.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.summary.probability import student_t_cdf, student_t_quantile
from specaccept_cli.text import shown_against

if TYPE_CHECKING:  # at run time checks need only attributes: `check` builds its options without numpy
    from specaccept_cli.summary.estimates import Estimates

# Gated metrics: (Estimates attribute, label), in the order results are listed.
GATE_METRICS: tuple[tuple[str, str], ...] = (
    ("alpha", "alpha"),
    ("tokens_per_pass", "tokens per pass"),
    ("acceptance_rate", "acceptance rate"),
)

# Metrics compared with a baseline: (Estimates attribute, label, standard-error attribute).
COMPARED_METRICS: tuple[tuple[str, str, str], ...] = (
    ("alpha", "alpha", "alpha_standard_error"),
    ("tokens_per_pass", "tokens per pass", "tokens_per_pass_standard_error"),
)

DEFAULT_MAX_DROP = 0.02
DEFAULT_SIGNIFICANCE = 0.01
MIN_UNITS = 2  # independent units (clusters, or runs) a side needs for a standard error
K_MIX_DISTANCE = 0.1  # total variation between the draft-length mixes above which a comparison warns
REQUEST_FIELDS = ("request_id", "req_id", "rid")  # obvious cluster fields, suggested when present


class Issue(Struct, frozen=True):
    """One check that failed or warns, as data: the command line words it (naming its options), views as they like.

    `check` is the verdict's check ("gate", "baseline", "drift", "server", "sampler", "skipped", "intervals",
    "iid"); `kind` what went wrong in it; the rest is what a sentence about it needs.
    """

    check: str
    kind: str
    metric: str | None = None
    value: float | None = None
    limit: float | None = None
    p: float | None = None
    at: str | None = None  # where (a position in the log), or which field
    before: float | None = None
    after: float | None = None


class GateResult(Struct, frozen=True):
    """One threshold checked against a summary. A metric with no value (no runs) fails.

    A metric the input only bounds is checked on the 95% interval of its bounds (`bounds`): the floor
    fails when even the interval's top is below it, passes when its bottom is at least the floor, and is
    inconclusive when the floor lies inside (the view says what would decide it).
    """

    metric: str  # e.g. "tokens_per_pass"
    label: str  # e.g. "tokens per pass"
    threshold: float
    value: float | None
    bounds: tuple[float, float] | None = None  # the bounds' 95% interval, when the value is only bounded
    identified_bounds: tuple[float, float] | None = None  # the bounds themselves

    @property
    def outcome(self) -> str:
        """ "passed", "failed" or "inconclusive" (bounds straddling the floor)."""
        if self.bounds is not None:
            low, high = self.bounds
            if low >= self.threshold:
                return "passed"
            return "failed" if high < self.threshold else "inconclusive"
        return "passed" if self.value is not None and self.value >= self.threshold else "failed"

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def inconclusive(self) -> bool:
        return self.outcome == "inconclusive"

    @property
    def shown_value(self) -> str:
        """The value with enough digits that it never reads equal to a threshold it differs from."""
        if self.value is None:
            return "null"
        short = f"{self.value:.6g}"
        if (float(short) >= self.threshold) != self.passed:  # rounded onto or across the threshold
            short = shown_against(self.value, self.threshold)
        return short


def check_gates(summary: Estimates, thresholds: Sequence[tuple[str, float]]) -> list[GateResult]:
    """Results for every (metric, threshold) given, in GATE_METRICS' order."""
    given = dict(thresholds)
    unknown = set(given) - {metric for metric, _ in GATE_METRICS}
    if unknown:
        raise KeyError(f"unknown gates: {sorted(unknown)}")
    return [
        GateResult(metric, label, given[metric], getattr(summary, metric), *_bounded(summary, metric))
        for metric, label in GATE_METRICS
        if metric in given
    ]


def _bounded(summary: Estimates, metric: str) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """(the bounds' 95% interval, the bounds) of a metric the input only bounds; (None, None) when identified."""
    identified = summary.identified
    if identified is None or getattr(summary, metric) is not None:
        return None, None
    found = getattr(identified, f"{metric}_bounds", None)
    interval = getattr(identified, f"{metric}_bounds_ci", None)
    if found is None:
        return None, None
    return (interval or found), found


# --- baseline comparison ----------------------------------------------------------------


class MetricComparison(Struct, frozen=True):
    """One metric, baseline against current. `verdict` is "ok", "regressed" or "untestable"."""

    metric: str
    label: str
    baseline: float | None
    current: float | None
    baseline_standard_error: float | None
    current_standard_error: float | None
    change: float | None  # (current - baseline) / baseline
    z: float | None
    p: float | None
    verdict: str
    baseline_runs: int = 0
    current_runs: int = 0
    p_adjusted: float | None = None  # Holm-adjusted over the compared metrics: the verdict's p
    # Power (see `detectable_drop`): the relative drop this comparison's noise lets it flag with 80% power (beyond
    # --max-drop: at --max-drop d a true drop of d + this is flagged 80% of the time); the current side's units
    # (requests, or runs over runs) at which it would equal --max-drop; and whether it exceeds --max-drop.
    minimum_detectable_drop: float | None = None
    requests_needed: int | None = None
    underpowered: bool = False
    # On input that only bounds a metric: its bounds on each side (baseline and current are then the most
    # favourable values, the bottom of the baseline's bounds and the top of the current run's).
    baseline_bounds: tuple[float, float] | None = None
    current_bounds: tuple[float, float] | None = None
    # The whole relative drop flagged with 80% power: --max-drop plus minimum_detectable_drop (one definition
    # for the headline, the comparison table and `plan`).
    detectable_drop: float | None = None

    @property
    def failed(self) -> bool:
        """Regressed or untestable; an inconclusive comparison on bounds warns (fails only with strict bounds)."""
        return self.verdict in ("regressed", "untestable")

    @property
    def beyond_tolerance(self) -> bool:
        """The estimated drop exceeds the tolerated one (whether or not that is significant)."""
        return self.z is not None and self.z < 0

    def to_dict(self) -> dict[str, Any]:
        return _pick(
            self,
            "metric",
            "baseline",
            "current",
            "baseline_standard_error",
            "current_standard_error",
            "change",
            "z",
            "p",
            "verdict",
            "p_adjusted",
            "minimum_detectable_drop",
            "detectable_drop",
            "requests_needed",
            "underpowered",
            "baseline_bounds",
            "current_bounds",
        )


def _pick(result: object, *names: str) -> dict[str, Any]:
    """The machine form of a result: the named attributes, in that order."""
    return {name: getattr(result, name) for name in names}


def _fmt(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"


class Comparison(Struct, frozen=True):
    """The baseline test: each metric's comparison, the allowed drop and level, and what it cannot vouch for."""

    max_drop: float
    significance: float
    metrics: list[MetricComparison]
    warnings: tuple[Issue, ...] = ()  # what the test cannot vouch for (clustering, a different k mix)
    method: str = ""  # the units the standard errors are over

    @property
    def failures(self) -> list[MetricComparison]:
        return [metric for metric in self.metrics if metric.failed]

    @property
    def untestable(self) -> bool:
        return any(metric.verdict == "untestable" for metric in self.metrics)

    @property
    def underpowered(self) -> bool:
        """Some metric's noise hides a drop of --max-drop beyond the tolerance (see `MetricComparison`)."""
        return any(metric.underpowered for metric in self.metrics)

    def to_dict(self, words: Callable[[Issue], str]) -> dict[str, Any]:
        """The machine form; `words` says each warning as the caller's reader needs it."""
        return {
            "max_drop": self.max_drop,
            "significance": self.significance,
            "test": "one-sided t over independent units (clusters, or runs): H0 current >= (1 - max_drop) * "
            "baseline; regressed when the Holm-adjusted p < significance",
            "metrics": [metric.to_dict() for metric in self.metrics],
            "regressed": any(metric.verdict == "regressed" for metric in self.metrics),
            "untestable": self.untestable,
            "method": self.method,
            "warnings": [words(warning) for warning in self.warnings],
            "underpowered": self.underpowered,
            # Each metric by name too (`comparison.alpha.minimum_detectable_drop`), for readers that look one up.
            **{metric.metric: metric.to_dict() for metric in self.metrics},
        }


def drop_test(
    baseline: float, baseline_se: float, current: float, current_se: float, max_drop: float, df: float = math.inf
) -> tuple[float | None, float]:
    """(z, p) of the one-sided test of H0: current >= (1 - max_drop) * baseline, t with `df` degrees of freedom.

    With no variance on either side the answer is certain: p = 0 when the current
    value is below the tolerated floor, else 1 (z is then undefined: None). Estimates
    never give a zero standard error for testing (see `Estimates.testing_standard_error`).
    """
    keep = 1.0 - max_drop
    difference = current - keep * baseline
    spread = math.sqrt(current_se * current_se + keep * keep * baseline_se * baseline_se)
    if spread == 0.0:
        return None, 0.0 if difference < 0 else 1.0
    z = difference / spread
    return z, student_t_cdf(z, df)


POWER = 0.80  # the chance of flagging a drop that minimum_detectable_drop and requests_needed are about


# Power is planned at --significance itself. Holm's first step judges the smaller p at significance / 2, but an
# acceptance drop moves alpha and tokens per pass together, the other metric regresses too, and the step-down
# then judges each at the full level: that is what the gate achieves on such drops (in a seeded study,
# planning at the halved level gave 88% where 80% was asked). A drop that moved one metric alone is caught
# less often (about 71% at the planned size).


def _one_sided_quantiles(significance: float, df: float = math.inf) -> float:
    """t_(1 - significance) + t_POWER with `df` degrees of freedom (the test's): how many standard errors apart
    a detectable drop and the floor are. With few units Student's t asks for more than the normal's 2.33 + 0.84."""
    return student_t_quantile(1.0 - significance, df) + student_t_quantile(POWER, df)


def dropped_unit_variance(
    runs_by_k: tuple[int, ...], metric: str, value: float, drop: float, unit_variance: float, units: int
) -> float:
    """A baseline's variance per unit (`unit_variance`, over `units` units) moved to the value a relative `drop`
    leaves: what a plan takes as the current run's. Two parts move differently when every token's acceptance
    scales by 1 - drop:

    - within runs, as the i.i.d. model over this draft-length mix scales it (`formulas.run_variance`): a lower
      alpha ends runs sooner, so fewer tokens are examined per run and alpha's estimate is noisier per run (by
      15% for a 10% drop from 0.73 with k 1-8);
    - between requests (what the sandwich holds beyond the i.i.d. part), by (1 - drop)^2: each request's
      acceptance scales alike, and so does the spread between them.

    Taking the baseline's spread as the current's, unmoved, fell short of the power asked on logs of
    one-run requests (64% where 80% was planned, in tests/study); the parts as they are where the model
    has nothing to say (no drafted runs, alpha at 0 or 1)."""
    from specaccept_cli.summary.formulas import alpha_of_tokens_per_pass, run_variance

    dropped = value * (1.0 - drop)
    if metric == "alpha":
        at, moved = value, dropped
    else:
        at, moved = alpha_of_tokens_per_pass(value, runs_by_k), alpha_of_tokens_per_pass(dropped, runs_by_k)
    runs = sum(runs_by_k[1:])
    if not (moved > 0.0 and at < 1.0) or runs <= 0 or units <= 0:
        return unit_variance
    before, after = run_variance(at, runs_by_k, metric), run_variance(moved, runs_by_k, metric)
    if before is None or after is None:
        return unit_variance
    within = min(unit_variance, before * units / runs)
    return within * after / before + (unit_variance - within) * (1.0 - drop) ** 2


def _welch(part_b: float, df_b: float, part_c: float, df_c: float) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference whose two squared errors are part_b and part_c."""
    denominator = (part_b * part_b / df_b if part_b else 0.0) + (part_c * part_c / df_c if part_c else 0.0)
    return math.inf if denominator <= 0.0 else max(1.0, (part_b + part_c) ** 2 / denominator)


def detectable_drop(
    baseline: float,
    baseline_se: float,
    current_se: float,
    significance: float,
    max_drop: float = 0.0,
    df: float = math.inf,
    scale: Callable[[float], float] | None = None,
) -> float | None:
    """The relative drop beyond `max_drop` that the one-sided test at `significance` flags with POWER.

    With the current value at (1 - max_drop - m) b, the test's z is centred at -m b / S, S the
    standard error of the difference (`drop_test`): it falls below -t_(1 - significance) with
    probability POWER when m = (t_(1 - significance) + t_POWER) S / b, t with the test's `df`.
    `scale(m)`, when given, is how much the current side's variance grows at that drop (see
    `dropped_unit_variance`): m is then its fixed point.
    """
    if baseline <= 0.0:
        return None
    keep = 1.0 - max_drop
    quantiles = _one_sided_quantiles(significance, df)
    drop = 0.0
    for _ in range(1 if scale is None else 8):
        grown = 1.0 if scale is None else scale(drop)
        spread = math.sqrt(grown * current_se * current_se + keep * keep * baseline_se * baseline_se)
        drop = quantiles * spread / baseline
    return drop


def units_needed(
    baseline: float,
    baseline_se: float,
    unit_variance: float,
    drop: float,
    significance: float,
    max_drop: float = 0.0,
    *,
    baseline_df: float = math.inf,
    baseline_units: float = math.inf,
    df_per_unit: float = 1.0,
) -> int | None:
    """Current-side units (requests, or runs) at which `detectable_drop` is `drop`; None when no number suffices.

    The current side's squared standard error is `unit_variance` / n (a sandwich variance: the sum
    of n squared unit contributions, each of about the same size). The baseline's own error stays
    as it is: when it alone exceeds what `drop` allows, no current run is large enough. The test's
    degrees of freedom at n units are Welch-Satterthwaite's over the baseline's (`baseline_df`) and the
    current side's `df_per_unit` (n - 1) (the share of its units' degrees of freedom Imbens-Kolesar keep
    when units are unequal), capped at the smaller side's units - 1 as `compare` caps them: the smallest n
    whose Student t quantiles leave room for the drop.
    """
    if baseline <= 0.0 or drop <= 0.0:
        return None
    keep = 1.0 - max_drop
    fixed = (keep * baseline_se) ** 2

    def enough(units: int) -> bool:
        part = unit_variance / units
        welch = _welch(fixed, baseline_df, part, max(1.0, df_per_unit * (units - 1)))
        df = min(float(units - 1), baseline_units - 1.0, welch)
        room = (drop * baseline / _one_sided_quantiles(significance, df)) ** 2 - fixed
        return room > 0.0 and part <= room

    room = (drop * baseline / _one_sided_quantiles(significance)) ** 2 - fixed
    if room <= 0.0:
        return None
    low = max(MIN_UNITS, math.ceil(unit_variance / room))  # the normal's answer: t never asks for fewer
    if enough(low):
        return low
    high = low
    while not enough(high):
        if high >= _MAX_UNITS:
            return None
        high = min(_MAX_UNITS, 2 * high)
    while high - low > 1:  # enough(high), not enough(low): more units only add degrees of freedom
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle
    return high


_MAX_UNITS = 1 << 40  # a plan beyond this many units is no plan


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: family-wise error control for several tests."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def compare(
    baseline: Estimates,
    current: Estimates,
    max_drop: float = DEFAULT_MAX_DROP,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> Comparison:
    """Compare alpha and tokens per pass; see the module docstring for the exact rule."""
    if not 0.0 <= max_drop < 1.0:
        raise ValueError(f"max_drop must be in [0, 1), not {max_drop}")
    if not 0.0 < significance < 1.0:
        raise ValueError(f"significance must be in (0, 1), not {significance}")
    rows = []
    df_b, df_c = baseline.degrees_of_freedom, current.degrees_of_freedom
    df = math.inf if df_b is None or df_c is None else float(min(df_b, df_c))
    runs = (baseline.runs, current.runs)
    unfavourable: dict[int, float] = {}  # bounded rows: the p of the least favourable values
    tested_df: dict[int, float] = {}  # tested rows: the degrees of freedom of their test
    for metric, label, _ in COMPARED_METRICS:
        b_sides, c_sides = baseline.sides(metric), current.sides(metric)
        if b_sides is None or c_sides is None or min(df_b or 0, df_c or 0) < MIN_UNITS - 1:
            b, c = getattr(baseline, metric), getattr(current, metric)
            se_b, se_c = baseline.testing_standard_error(metric), current.testing_standard_error(metric)
            change = (c - b) / b if b is not None and c is not None and b != 0 else None
            rows.append(MetricComparison(metric, label, b, c, se_b, se_c, change, None, None, "untestable", *runs))
            continue
        # On bounds the comparison regresses only when even the most favourable values regress: the baseline at
        # the bottom of its bounds, the current run at the top (the same value twice when identified).
        (b, se_b), (c, se_c) = b_sides[0], c_sides[1]
        change = (c - b) / b if b != 0 else None
        tested_df[len(rows)] = _welch_df(baseline, current, metric, se_b, se_c, max_drop, df)
        z, p = drop_test(b, se_b, c, se_c, max_drop, tested_df[len(rows)])
        bounded = b_sides[0] != b_sides[1] or c_sides[0] != c_sides[1]
        rows.append(
            MetricComparison(
                metric,
                label,
                b,
                c,
                se_b,
                se_c,
                change,
                z,
                p,
                "ok",
                *runs,
                baseline_bounds=(b_sides[0][0], b_sides[1][0]) if bounded else None,
                current_bounds=(c_sides[0][0], c_sides[1][0]) if bounded else None,
            )
        )
        if bounded:
            (worst_b, worst_se_b), (worst_c, worst_se_c) = b_sides[1], c_sides[0]
            unfavourable[len(rows) - 1] = drop_test(worst_b, worst_se_b, worst_c, worst_se_c, max_drop, df)[1]
    tested = [index for index, row in enumerate(rows) if row.p is not None]
    adjusted = holm([rows[index].p or 0.0 for index in tested])
    worst = dict(zip(tested, holm([unfavourable.get(index, rows[index].p or 0.0) for index in tested])))
    units = (current.degrees_of_freedom or 0) + 1
    for index, p_adjusted in zip(tested, adjusted):
        verdict = "regressed" if p_adjusted < significance else "ok"
        if verdict == "ok" and index in unfavourable and worst[index] < significance:
            verdict = "inconclusive"  # the bounds straddle: some values they allow regress, others do not
        rows[index] = replace(
            rows[index],
            p_adjusted=p_adjusted,
            verdict=verdict,
            **_power(rows[index], current, units, tested_df[index], max_drop, significance),
        )
    return Comparison(max_drop, significance, rows, comparison_warnings(baseline, current), _method(baseline, current))


def _welch_df(
    baseline: Estimates, current: Estimates, metric: str, se_b: float, se_c: float, max_drop: float, df: float
) -> float:
    """Welch-Satterthwaite degrees of freedom of the difference current - (1 - max_drop) baseline, from each
    side's own (Imbens-Kolesar) degrees of freedom; `df` (the smaller side's G - 1) where a side has none."""
    df_b, df_c = baseline.testing_degrees_of_freedom(metric), current.testing_degrees_of_freedom(metric)
    if df_b is None or df_c is None:
        return df
    keep = 1.0 - max_drop
    return min(df, _welch((keep * se_b) ** 2, df_b, se_c**2, df_c))


def _df_share(estimates: Estimates, metric: str, units: int) -> float:
    """The share of its units - 1 a side's test keeps as degrees of freedom (Imbens-Kolesar's, fewer when units
    are unequal), at most 1: what a plan expects of a run of other units with the same spread of sizes."""
    whole = float(max(1, units - 1))
    own = estimates.testing_degrees_of_freedom(metric) or whole
    return own / whole if own < whole else 1.0


def _power(
    row: MetricComparison, current: Estimates, units: int, df: float, max_drop: float, significance: float
) -> dict[str, Any]:
    """A tested row's power fields, at `significance` itself (see POWER), with the test's own degrees of freedom
    and the current side's variance moved to the value each drop leaves (`dropped_unit_variance`), as `plan`."""
    assert row.baseline is not None and row.baseline_standard_error is not None
    assert row.current_standard_error is not None and row.current is not None
    level, value, variance = significance, row.current, row.current_standard_error**2 * units

    def grown(drop: float) -> float:  # the current's variance at (1 - max_drop - drop) baseline, over its own
        target = (1.0 - max_drop - drop) * row.baseline  # type: ignore[operator]
        if variance <= 0.0 or value <= 0.0 or not 0.0 < target < 1.0 or units < MIN_UNITS:
            return 1.0
        moved = dropped_unit_variance(current.runs_by_k, row.metric, value, 1.0 - target / value, variance, units)
        return moved / variance

    base, base_se = row.baseline, row.baseline_standard_error
    drop = detectable_drop(base, base_se, row.current_standard_error, level, max_drop, df, grown)
    needed = None
    if max_drop > 0.0:
        share = _df_share(current, row.metric, units)
        needed = units_needed(
            base, base_se, grown(max_drop) * variance, max_drop, level, max_drop, baseline_df=df, df_per_unit=share
        )
    return {
        "minimum_detectable_drop": drop,
        "detectable_drop": None if drop is None else max_drop + drop,
        "requests_needed": needed,
        "underpowered": drop is not None and max_drop > 0.0 and drop > max_drop,
    }


class RequestPlan(Struct, frozen=True):
    """How many units (requests, or runs over runs) a current run needs to flag `drop` in one metric."""

    metric: str
    label: str
    baseline: float | None
    baseline_standard_error: float | None
    baseline_units: int  # the baseline's requests (or runs), whose spread stands in for the current run's
    units: str  # "requests" or "runs"
    requests_needed: int | None  # None: no number suffices (the baseline alone is too noisy), or no value
    requests_needed_each_side: int | None = None  # with a new baseline as large as the run, as noisy per request

    def to_dict(self) -> dict[str, Any]:
        return _pick(
            self,
            "metric",
            "baseline",
            "baseline_standard_error",
            "baseline_units",
            "units",
            "requests_needed",
            "requests_needed_each_side",
        )


def plan_requests(
    baseline: Estimates, drop: float, max_drop: float = 0.0, significance: float = DEFAULT_SIGNIFICANCE
) -> list[RequestPlan]:
    """Per compared metric, the current-side units at which a comparison with `baseline` flags a true relative
    `drop` with POWER, at `max_drop` and `significance` as `compare` runs them (at --significance itself: see POWER).

    The current run is taken to vary request by request as the baseline does: its squared standard
    error is the baseline's per-unit variance (se_b^2 times its units) over its own units.
    """
    if not max_drop < drop < 1.0:
        raise ValueError(f"drop must exceed max_drop ({max_drop:g}) and be below 1, not {drop:g}")
    level = significance
    count = (baseline.degrees_of_freedom or 0) + 1
    units = "runs" if baseline.cluster_field is None else "requests"
    plans = []
    for metric, label, _ in COMPARED_METRICS:
        # A bounded baseline is compared at the bottom of its bounds (see `compare`): plan at that side too.
        sides = baseline.sides(metric)
        value, error = sides[0] if sides is not None else (getattr(baseline, metric), None)
        needed = each_side = None
        if value is not None and error is not None and count >= MIN_UNITS:
            # The current run varies per unit as the baseline does, moved to its lower value (see
            # dropped_unit_variance), and keeps the same share of degrees of freedom per unit.
            variance = error * error * count
            moved = dropped_unit_variance(baseline.runs_by_k, metric, value, drop, variance, count)
            share = _df_share(baseline, metric, count)
            needed = units_needed(
                value, error, moved, drop - max_drop, level, max_drop,
                baseline_df=share * (count - 1), baseline_units=float(count), df_per_unit=share,
            )  # fmt: skip
            # Both sides of n units: (moved + (1 - max_drop)^2 variance) / n is the difference's squared error.
            keep = 1.0 - max_drop
            each_side = units_needed(
                value, 0.0, moved + keep * keep * variance, drop - max_drop, level, max_drop, df_per_unit=share
            )
        plans.append(
            RequestPlan(metric, label, value, error, count if error is not None else 0, units, needed, each_side)
        )
    return plans


def _method(baseline: Estimates, current: Estimates) -> str:
    """The units of the standard errors, in our own words (no field names: the text goes into markdown as is)."""
    if baseline.cluster_field is not None and current.cluster_field is not None:
        return f"cluster-robust over clusters ({baseline.clusters or 0:,} baseline, {current.clusters or 0:,} current)"
    return "over runs (no --cluster-field): conditional on these prompts"


def comparison_warnings(baseline: Estimates, current: Estimates) -> tuple[Issue, ...]:
    """What a comparison cannot vouch for: runs of one request counted as independent, a different k mix."""
    warnings = []
    if baseline.cluster_field is None or current.cluster_field is None:
        sides = "neither side" if baseline.cluster_field is None and current.cluster_field is None else "one side"
        warnings.append(Issue("baseline", "unclustered", at=sides))
    elif baseline.cluster_field != current.cluster_field:
        warnings.append(
            Issue("baseline", "cluster_fields_differ", at=f"{baseline.cluster_field}|{current.cluster_field}")
        )
    distance = k_mix_distance(baseline.runs_by_k, current.runs_by_k)
    if distance is not None and distance > K_MIX_DISTANCE:
        warnings.append(Issue("baseline", "k_mix", value=distance, limit=K_MIX_DISTANCE))
    return tuple(warnings)


def k_mix_distance(baseline: tuple[int, ...], current: tuple[int, ...]) -> float | None:
    """Total variation distance between two draft-length distributions (None when a side has no runs)."""
    total_b, total_c = sum(baseline), sum(current)
    if not total_b or not total_c:
        return None
    size = max(len(baseline), len(current))
    padded_b = list(baseline) + [0] * (size - len(baseline))
    padded_c = list(current) + [0] * (size - len(current))
    return 0.5 * sum(abs(b / total_b - c / total_c) for b, c in zip(padded_b, padded_c))
