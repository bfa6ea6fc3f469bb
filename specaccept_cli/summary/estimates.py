"""Estimates: everything the tool reports about a `Summary`, computed once into a typed, frozen object.

The state (`summary.state`) only counts; this module turns the counts into rates,
intervals and model checks. `estimate(summary)` is called once per summary that a
view or a check needs (groups only when they are shown or written), so no number
is recomputed on every read.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.rule.vectorized import THRESHOLD_SCALE
from specaccept_cli.summary import fixed, formulas
from specaccept_cli.summary.clusters import Units
from specaccept_cli.summary.conventions import engine_conventions
from specaccept_cli.summary.fingerprints import Fingerprint, fingerprints
from specaccept_cli.summary.probability import f_sf, student_t_cdf, student_t_quantile
from specaccept_cli.summary.state import Summary

Z_95 = 1.959963984540054  # two-sided 95% normal quantile (the report's bands of normal-theory numbers)
LEVEL = 0.95  # every interval's coverage
IID_SIGNIFICANCE = 0.01  # the i.i.d. check's two tests together (Holm): below this, the model does not fit
MIN_POSITION_UNITS = 10  # units (runs or clusters) reaching a position before it enters the equal-rates test
RUNS_METHOD = "over runs, conditional on these prompts: runs of one request counted as independent"


class PositionRate(Struct, frozen=True):
    """Draft position j (1-based): drafts = runs with k >= j; reached = runs that tested token j
    (a >= j - 1 and k >= j); accepted = runs that kept it (a >= j).

    rate = accepted / reached is the conditional rate (EAGLE's); unconditional_rate = accepted / drafts
    is accepted at j over the runs that drafted position j.
    """

    position: int
    drafts: int
    reached: int
    accepted: int
    rate: float | None
    unconditional_rate: float | None
    rate_ci: tuple[float, float] | None = None
    unconditional_rate_ci: tuple[float, float] | None = None


class EqualRates(Struct, frozen=True):
    """Wald test that every tested position has one conditional rate (cluster-robust; F with (q, G - q) df)."""

    statistic: float  # F
    df: tuple[int, int]
    p_value: float
    positions: int  # positions in the test (reached by at least MIN_POSITION_UNITS units)


class IidCheck(Struct, frozen=True):
    """Is one alpha, token after token, consistent with these logs? Two tests, Holm-combined.

    `difference` = observed - predicted tokens per pass; `standard_error` is its delta-method
    standard error, which accounts for alpha being fitted on the same runs (over clusters when
    given); `z` = difference / standard_error and `p_value` its two-sided p (Student t, G - 1 df).
    `equal_rates` tests the per-position conditional rates against one another. `combined_p_value`
    is the smaller Holm-adjusted p; `consistent` when it is at least IID_SIGNIFICANCE.
    """

    difference: float
    standard_error: float
    z: float | None  # None when the standard error is 0 and the difference is not
    consistent: bool
    p_value: float | None = None
    equal_rates: EqualRates | None = None
    combined_p_value: float | None = None
    verdict: str = ""


class Clustering(Struct, frozen=True):
    """What the intervals and tests treat as independent: the requests (clusters of `field`), or the runs.

    Over runs, an interval holds only for a replayed prompt set: runs of one request share its prompt.
    """

    field: str | None  # the request field the runs are clustered by (named, or found in the first row)
    requests: int | None  # how many distinct values it took: the independent units

    @property
    def over_runs(self) -> bool:
        return self.field is None

    def describe(self) -> str:
        """The headline's words: 'clustered by request_id: 1,234 requests', or what holding over runs means."""
        if self.field is None:
            return "over runs: they hold only for a replayed prompt set"
        return f"clustered by {self.field}: {self.requests or 0:,} request{'s' if self.requests != 1 else ''}"

    def to_dict(self) -> dict[str, Any]:
        return {"over": "runs" if self.field is None else "requests", "field": self.field, "requests": self.requests}


EXACT, ASSUMED, BOUNDED, UNKNOWN = "exact", "exact if every draft was full", "bounded", "unknown"


class StepPosition(Struct, frozen=True):
    """Draft position j over every verify step of the whole input, as vLLM defines its per-position rate:
    `accepted` = steps that kept token j (a >= j, exact from the accepted-length histograms), `rate` =
    accepted / steps. `conditional_bounds` bound the conditional rate accepted / reached, which needs each
    step's draft length: a step with a = j - 1 reached j only if it drafted more than j - 1 tokens."""

    position: int
    accepted: int
    rate: float | None
    conditional_bounds: tuple[float, float] | None


class Identified(Struct, frozen=True):
    """What the input pins down, figure by figure: `how[figure]` is EXACT, ASSUMED, BOUNDED or UNKNOWN.

    Units are requests (payloads) or intervals (engine lines): `exact_units` have every run pinned down,
    `bounded_units` give totals only, `rates_only` give printed rates and no counts (in no figure).
    """

    how: dict[str, str]
    exact_units: int
    bounded_units: int
    rates_only: int
    unit: str  # "request" or "interval"
    runs_bounds: tuple[int, int] | None = None
    examined_bounds: tuple[int, int] | None = None
    alpha_bounds: tuple[float, float] | None = None
    alpha_bounds_standard_errors: tuple[float, float] | None = None
    alpha_bounds_ci: tuple[float, float] | None = None
    tokens_per_pass_bounds: tuple[float, float] | None = None
    tokens_per_pass_bounds_ci: tuple[float, float] | None = None
    tokens_per_pass_bounds_standard_errors: tuple[float, float] | None = None
    step_positions: tuple[StepPosition, ...] = ()

    def of(self, figure: str) -> str:
        return self.how.get(figure, EXACT)

    def reason(self) -> str:
        """Why some figure is bounded, in the headline's words."""
        if not self.bounded_units:
            return ""
        total = self.exact_units + self.bounded_units + self.rates_only
        plural = "s" if total != 1 else ""
        one = self.bounded_units == 1
        if self.unit == "request" and self.runs_bounds is None:
            why = f"drafted short, so {'its' if one else 'their'} examined tokens are not logged"
        else:
            why = f"give{'s' if one else ''} totals only, so {'its' if one else 'their'} examined tokens are not logged"
        return f"{self.bounded_units:,} of {total:,} {self.unit}{plural} {why}"

    def to_dict(self) -> dict[str, Any]:
        def listed(pair: tuple[float, float] | tuple[int, int] | None) -> list[float] | list[int] | None:
            return None if pair is None else list(pair)

        return {
            "identification": dict(self.how),
            f"{self.unit}s_exact": self.exact_units,
            f"{self.unit}s_bounded": self.bounded_units,
            f"{self.unit}s_rates_only": self.rates_only,
            "runs_bounds": listed(self.runs_bounds),
            "examined_bounds": listed(self.examined_bounds),
            "alpha_bounds": listed(self.alpha_bounds),
            "alpha_bounds_standard_errors": listed(self.alpha_bounds_standard_errors),
            "alpha_bounds_ci": listed(self.alpha_bounds_ci),
            "tokens_per_pass_bounds": listed(self.tokens_per_pass_bounds),
            "tokens_per_pass_bounds_ci": listed(self.tokens_per_pass_bounds_ci),
            "tokens_per_pass_bounds_standard_errors": listed(self.tokens_per_pass_bounds_standard_errors),
            "per_position_over_steps": [
                {
                    "position": row.position,
                    "accepted": row.accepted,
                    "rate": row.rate,
                    "conditional_bounds": listed(row.conditional_bounds),
                }
                for row in self.step_positions
            ],
        }


class Estimates(Struct, frozen=True):
    """The numbers of one summary (None where there is nothing to estimate from)."""

    runs: int
    drafted_tokens: int
    accepted_tokens: int
    examined_tokens: int | None  # None when only bounded (`identified.examined_bounds`)
    emitted_tokens: int | None
    alpha: float | None  # maximum-likelihood per-token acceptance: accepted / examined
    alpha_standard_error: float | None
    alpha_ci: tuple[float, float] | None
    expected_alpha: float | None  # mean of min(1, p/q) over drafted tokens with a logged (p, q): r-free
    acceptance_rate: float | None  # accepted / drafted: what vLLM reports; biased low as an estimate of alpha
    mean_accepted: float | None
    tokens_per_pass: float | None  # (accepted + runs) / runs
    tokens_per_pass_standard_error: float | None
    tokens_per_pass_predicted: float | None
    iid_check: IidCheck | None
    per_position: tuple[PositionRate, ...]
    accepted_histogram: dict[str, int]  # runs by accepted length, "0" .. str(max_k), zeros included
    conventions: dict[str, dict[str, Any]]  # what each engine would report on these runs
    # How intervals and tests treat dependence: over clusters of `cluster_field`, or over runs.
    interval_method: str = RUNS_METHOD
    cluster_field: str | None = None
    clusters: int | None = None  # G, the independent units when a cluster field was given
    degrees_of_freedom: int | None = None  # G - 1 (clusters) or runs - 1: Student t's
    tokens_per_pass_ci: tuple[float, float] | None = None
    expected_alpha_drafted: float | None = None  # mean of min(1, p/q) over every drafted token
    runs_by_k: tuple[int, ...] = ()  # runs by draft length, 0 .. max_k
    # Evidence that acceptance was not the exact rule at work (summary.fingerprints): plain data for any view.
    fingerprints: tuple[Fingerprint, ...] = ()
    # How each figure is identified by the input (see `Identified`), and the bounds of those that are only
    # bounded: sums of every unit's bounds over the whole input, with Imbens-Manski 95% intervals.
    identified: Identified | None = None
    # Imbens-Kolesar degrees of freedom of each CR2 variance (at most degrees_of_freedom; fewer when a few
    # units hold most of the tokens): the Student t of its interval and of a baseline test.
    alpha_degrees_of_freedom: float | None = None
    tokens_per_pass_degrees_of_freedom: float | None = None

    def identification_keys(self) -> dict[str, Any]:
        """How each figure is identified and the bounds of those only bounded, for the machine formats."""
        if self.identified is None:
            return {"identification": None, "alpha_bounds": None, "alpha_bounds_ci": None}
        return self.identified.to_dict()

    @property
    def bounded(self) -> bool:
        """Some figure is only bounded: engine totals that do not pin every run down."""
        return self.identified is not None and self.identified.bounded_units > 0

    @property
    def clustering(self) -> Clustering:
        """The units every interval and test here is over (plain data, for views and verdicts)."""
        return Clustering(self.cluster_field, self.clusters)

    def sides(self, metric: str) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """((low, its standard error), (high, its standard error)) of a metric for a comparison: the value
        twice when identified, the bounds when only bounded; None when there is no value or no error."""
        value = getattr(self, metric)
        if value is not None:
            error = self.testing_standard_error(metric)
            return None if error is None else ((value, error), (value, error))
        identified = self.identified
        if identified is None:
            return None
        bounds = getattr(identified, f"{metric}_bounds", None)
        errors = getattr(identified, f"{metric}_bounds_standard_errors", None)
        if bounds is None or errors is None:
            return None
        return (bounds[0], errors[0]), (bounds[1], errors[1])

    def testing_standard_error(self, metric: str) -> float | None:
        """The standard error a comparison uses: the estimate's, but never below what its interval implies.

        Where the delta method degenerates (every token kept, or none) its standard error is 0;
        the score-type interval is not, and a baseline test must not treat a few runs as certainty.
        """
        error: float | None = getattr(self, f"{metric}_standard_error")
        interval: tuple[float, float] | None = getattr(self, f"{metric}_ci")
        df = self.testing_degrees_of_freedom(metric)
        if error is None or interval is None or df is None:
            return None
        return max(error, (interval[1] - interval[0]) / (2 * _critical(df)))

    def testing_degrees_of_freedom(self, metric: str) -> float | None:
        """The Student t degrees of freedom of `metric`'s interval and tests: its own (IK), else G - 1."""
        own: float | None = getattr(self, f"{metric}_degrees_of_freedom", None)
        return own if own is not None else None if self.degrees_of_freedom is None else float(self.degrees_of_freedom)

    def speedup(self, cost_ratio: float) -> float | None:
        """Observed walltime improvement: sum(a + 1) / sum(k c + 1) over runs."""
        if not self.runs or self.emitted_tokens is None:
            return None
        return self.emitted_tokens / (self.drafted_tokens * cost_ratio + self.runs)

    def optimal_k(self, cost_ratio: float) -> int | None:
        """The k in 1..32 the i.i.d. model at the estimated alpha finds fastest."""
        return None if self.alpha is None else formulas.optimal_k(self.alpha, cost_ratio)


def estimate(summary: Summary) -> Estimates:
    """Every estimate of `summary`, computed once: over its runs, or over the whole input with its bounded units."""
    plain = _estimate_runs(summary)
    engine = summary.engine
    if engine is None:
        return plain
    return _with_engine_units(summary, plain)


def _estimate_runs(summary: Summary) -> Estimates:
    """Every estimate of the runs `summary` pins down, computed once.

    Variances sum over independent units: the clusters of `--cluster-field` when given, else
    the runs. Either way a variance is the sandwich G/(G-1) sum_g psi_g^2 of each unit's
    linearised contribution psi_g, and intervals use Student t with G - 1 degrees of freedom.
    """
    runs = summary.runs
    drafted, accepted, examined = summary.drafted_tokens, summary.accepted_tokens, summary.examined_tokens
    alpha = accepted / examined if examined else None
    tokens_per_pass = (accepted + runs) / runs if runs else None
    predicted = _tokens_per_pass_predicted(summary, alpha)
    tally = summary.clusters
    units = (
        Units.of_runs(summary.counts, summary.max_k) if tally is None else Units.of_clusters(tally.sums, summary.max_k)
    )
    unit_count = units.count
    df = unit_count - 1 if unit_count >= 2 else None
    alpha_error = _ratio_error(units, units.accepted, units.examined, alpha)
    tokens_error = _ratio_error(units, units.accepted + units.runs, units.runs, tokens_per_pass)
    # Imbens-Kolesar degrees of freedom for clusters (requests); runs as units keep runs - 1, which the study's
    # small logs cover at (CR2 is there too; a million one-run groups would pay the fit for nothing).
    clustered = tally is not None
    alpha_df = _small_sample_df(
        df, _ratio_degrees_of_freedom(units, units.accepted, units.examined, alpha) if clustered else None
    )
    tokens_df = _small_sample_df(
        df,
        _ratio_degrees_of_freedom(units, units.accepted + units.runs, units.runs, tokens_per_pass)
        if clustered
        else None,
    )
    positions = _per_position(summary, units, df, clustered=clustered)
    sampled = summary.sampled_tokens
    examined_sum = summary.examined_threshold_sum_fixed
    return Estimates(
        runs=runs,
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        examined_tokens=examined,
        emitted_tokens=accepted + runs,
        alpha=alpha,
        alpha_standard_error=alpha_error,
        alpha_ci=_proportion_interval(alpha, alpha_error, examined, unit_count, alpha_df),
        expected_alpha=examined_sum / THRESHOLD_SCALE / examined
        if sampled and examined and examined_sum is not None
        else None,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_accepted=accepted / runs if runs else None,
        tokens_per_pass=tokens_per_pass,
        tokens_per_pass_standard_error=tokens_error,
        tokens_per_pass_predicted=predicted,
        iid_check=_iid_check(units, alpha, tokens_per_pass, predicted, df),
        per_position=positions,
        accepted_histogram=_accepted_histogram(summary),
        conventions=engine_conventions(
            runs,
            drafted,
            accepted,
            summary.passing_tokens if summary.engine is None else None,  # engine output logs no r
            [row.accepted for row in positions],
            [row.rate for row in positions],
        ),
        interval_method=RUNS_METHOD
        if tally is None
        else f"cluster-robust over {unit_count:,} clusters of {tally.field} (sandwich variance, Student t)",
        cluster_field=None if tally is None else tally.field,
        clusters=None if tally is None else unit_count,
        degrees_of_freedom=df,
        tokens_per_pass_ci=_tokens_per_pass_interval(summary, tokens_per_pass, tokens_error, unit_count, tokens_df),
        alpha_degrees_of_freedom=alpha_df,
        tokens_per_pass_degrees_of_freedom=tokens_df,
        expected_alpha_drafted=summary.threshold_sum_fixed / THRESHOLD_SCALE / sampled if sampled else None,
        runs_by_k=tuple(int(n) for n in summary.runs_by_k[: summary.max_k + 1].tolist()),
        fingerprints=fingerprints(summary),
    )


# --- uncertainty: sandwich variances over independent units ----------------------------------
# Tokens of one run share a context, and runs of one request share a prompt: neither are
# independent draws. The unit is the cluster (with --cluster-field) or else the run.


@functools.lru_cache(maxsize=1024)
def _critical(df: float) -> float:
    """Two-sided 95% Student t quantile with `df` degrees of freedom."""
    return student_t_quantile(0.5 + LEVEL / 2, df)


def _sandwich(units: Units, influence: npt.NDArray[np.float64]) -> float | None:
    """G/(G-1) sum_g w_g psi_g^2 (for a matrix of influences, the covariance matrix); None below two units."""
    count = units.count
    if count < 2:
        return None
    return float(count / (count - 1) * np.sum(units.weight * influence * influence))


def _ratio_error(
    units: Units, numerator: npt.NDArray[np.float64], denominator: npt.NDArray[np.float64], ratio: float | None
) -> float | None:
    """Delta-method (linearised) standard error of ratio = sum(numerator) / sum(denominator) over units."""
    return _weighted_ratio_error(units.weight, numerator, denominator, ratio)


def _weighted_ratio_error(
    weight: npt.NDArray[np.float64],
    numerator: npt.NDArray[np.float64],
    denominator: npt.NDArray[np.float64],
    ratio: float | None,
) -> float | None:
    """The same over units given as columns, each `weight` times (identical runs counted once).

    The variance is Bell and McCaffrey's CR2 sandwich: sum_g w_g psi_g^2 / (1 - h_g), h_g = d_g / sum d the
    unit's leverage (a ratio is the intercept of a token-level regression, whose hat matrix gives a unit
    of d_g tokens the block J / N). With equal units it is the G/(G-1) sandwich; with unequal ones it stops
    the largest unit's residual, shrunk by its own pull on the ratio, from reading as small.
    """
    total = float(np.sum(weight * denominator))
    count = round(float(weight.sum()))
    if ratio is None or total == 0.0 or count < 2:
        return None
    influence = (numerator - ratio * denominator) / total
    leverage = denominator / total
    if float(leverage.max()) >= 1.0 - 1e-12:
        return None  # one unit holds the whole denominator: nothing varies between units
    variance = float(np.sum(weight * influence * influence / (1.0 - leverage)))
    return float(np.sqrt(max(0.0, variance)))


def _ratio_degrees_of_freedom(
    units: Units, numerator: npt.NDArray[np.float64], denominator: npt.NDArray[np.float64], ratio: float | None
) -> float | None:
    """Imbens and Kolesar's (2016) degrees of freedom for the CR2 variance of a ratio over units.

    The CR2 variance is V = sum_g c_g s_g^2, c_g = 1 / (1 - h_g), s = (I - h 1') t with t the units'
    residual totals. Under a working model Var(t_g) = v_g, V is a quadratic form whose Satterthwaite
    degrees of freedom are tr(C S)^2 / tr((C S)^2), S = Cov(s) = diag(v) - h v' - v h' + (sum v) h h':
    a diagonal plus rank two, so both traces are O(G) sums. The working model is a unit's within part
    and its between part, v_g = a d_g + b d_g^2 (independent tokens plus a unit effect, IK's random
    effects), a and b >= 0 fitted to the squared residuals by least squares. Equal units give G - 1; a
    few units holding most of the tokens give fewer, down to about 1.
    """
    weight = units.weight
    numerator, denominator = numerator.astype(np.float64), denominator.astype(np.float64)  # counts may be int32
    total = float(np.sum(weight * denominator))
    count = units.count
    if ratio is None or total == 0.0 or count < 2:
        return None
    squared = denominator * denominator
    if float(weight @ squared) ** 2 >= IK_EFFECTIVE_UNITS * float(weight @ (squared * squared)):
        return float(count - 1)  # even with unit effects alone as many effective units: t is the normal's
    shares = denominator / total
    if float(shares.max()) >= 1.0 - 1e-12:
        return None
    present = denominator > 0
    d = denominator[present]
    squares = ((numerator - ratio * denominator)[present]) ** 2 / (1.0 - shares[present])
    w = weight[present]
    # Fit squares / d^2 = a / d + b (scaled so units of every size count alike), a, b >= 0.
    x, y = 1.0 / d, squares / (d * d)
    within, between = _nonnegative_line(w, x, y)
    v = np.zeros_like(denominator)
    v[present] = within * d + between * d * d if within + between > 0 else d
    c = 1.0 / (1.0 - shares)
    size = float(np.sum(weight * v))
    first = float(
        np.sum(weight * c * v) - 2.0 * np.sum(weight * c * shares * v) + size * np.sum(weight * c * shares**2)
    )
    # S = D + U K U', U = [h, v], K = [[sum v, -1], [-1, 0]]; tr((CS)^2) = tr(CDCD) + 2 tr(K U'CDC U) + tr(KQKQ)
    columns = np.stack([shares, v])
    gram_dd = (columns * (weight * c * c * v)) @ columns.T
    gram = (columns * (weight * c)) @ columns.T
    k = np.array([[size, -1.0], [-1.0, 0.0]])
    second = float(np.sum(weight * (c * v) ** 2) + 2.0 * np.trace(k @ gram_dd) + np.trace(k @ gram @ k @ gram))
    if second <= 0.0 or first <= 0.0:
        return None
    return min(float(count - 1), first * first / second)


# Effective units (sum d^2)^2 / sum d^4, close to the degrees of freedom under unit effects alone (the most
# concentrated working model here), above which they are not computed: t's 97.5% point at 2,000 df is the
# normal's to 0.05%, and an estimate of a million requests costs two passes more, not the fit.
IK_EFFECTIVE_UNITS = 2000.0


def _nonnegative_line(
    weight: npt.NDArray[np.float64], x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
) -> tuple[float, float]:
    """(slope, intercept), both >= 0, of the weighted least-squares line y = slope x + intercept."""
    total = float(weight.sum())
    mean_x, mean_y = float(weight @ x) / total, float(weight @ y) / total
    spread = float(weight @ ((x - mean_x) ** 2))
    slope = float(weight @ ((x - mean_x) * (y - mean_y))) / spread if spread > 0 else 0.0
    intercept = mean_y - slope * mean_x
    if slope >= 0.0 and intercept >= 0.0:
        return slope, intercept
    if slope < 0.0:
        return 0.0, max(0.0, mean_y)
    through_origin = float(weight @ (x * y)) / float(weight @ (x * x))
    return max(0.0, through_origin), 0.0


def _small_sample_df(df: int | None, exact: float | None) -> float | None:
    """The degrees of freedom an interval or test uses: IK's, rounded down to a tenth (a handful of
    distinct t quantiles, each computed once), never above G - 1; None without units."""
    if df is None or exact is None:
        return None if df is None else float(df)
    return max(1.0, min(float(df), math.floor(exact * 10.0) / 10.0))


CONTINUITY = 0.5  # half Yates' correction: the rate is shifted by 0.5 / (2 n) towards each bound


def _score_bound(rate: float, n: float, crit: float, sign: int) -> float:
    """One end of Wilson's score interval: the pi with (pi - rate)^2 = crit^2 pi (1 - pi) / n on side `sign`."""
    c2 = crit * crit / n
    centre = (rate + c2 / 2) / (1 + c2)
    half = crit / (1 + c2) * float(np.sqrt(max(0.0, rate * (1 - rate) / n + c2 / (4 * n))))
    return centre + sign * half


def _proportion_interval(
    rate: float | None, error: float | None, tokens: int, units: int, df: float | None
) -> tuple[float, float] | None:
    """95% interval of a rate in [0, 1]: Wilson's score interval at the effective sample size.

    n_eff = rate (1 - rate) / variance (the sandwich variance, so clustering widens it), at most
    the tokens behind the rate; where the delta method degenerates (rate 0 or 1, no spread) n_eff
    is the number of units instead. The score interval stays inside [0, 1] and never has zero
    width; with Student t's quantile it is the t interval wherever the delta method is sound. Each
    end is taken at the rate moved CONTINUITY / (2 n_eff) outwards: with a handful of rejections
    (alpha 0.99, 50 runs) the plain score interval covers 91-93%, Yates' full correction 98%.
    """
    if rate is None or error is None or df is None or tokens == 0 or units < 2:
        return None
    crit = _critical(df)
    return _score_end(rate, error, tokens, units, crit, -1), _score_end(rate, error, tokens, units, crit, +1)


def _score_end(rate: float, error: float, tokens: int, units: int, crit: float, sign: int) -> float:
    """One end (`sign` -1 low, +1 high) of `_proportion_interval` at critical value `crit`."""
    spread = rate * (1.0 - rate)
    n = min(float(tokens), spread / (error * error)) if spread > 0.0 and error > 0.0 else float(units)
    shift = CONTINUITY / (2 * n)
    # At rate 0 or 1 the interval's near end is the rate itself.
    if sign < 0:
        return 0.0 if rate == 0.0 else max(0.0, _score_bound(max(0.0, rate - shift), n, crit, -1))
    return 1.0 if rate == 1.0 else min(1.0, _score_bound(min(1.0, rate + shift), n, crit, +1))


def _tokens_per_pass_interval(
    summary: Summary, tokens_per_pass: float | None, error: float | None, units: int, df: float | None
) -> tuple[float, float] | None:
    """95% interval for tokens per pass, inside [1, 1 + longest draft].

    Tokens per pass is 1 + k_max v with v = mean accepted / k_max in [0, 1]: the interval is v's
    score interval (like alpha's, at v's own effective sample size, one trial per unit where the
    runs do not vary), mapped back. Far from the bounds it is the Student t interval; near them
    (few rejections) it is not symmetric, as the mean's distribution is not.
    """
    return _tokens_interval(summary.max_k, summary.drafted_tokens, tokens_per_pass, error, units, df)


def _tokens_interval(
    top: int, drafted: int, tokens_per_pass: float | None, error: float | None, units: int, df: float | None
) -> tuple[float, float] | None:
    """`_tokens_per_pass_interval` for drafts of at most `top` tokens, `drafted` of them."""
    if tokens_per_pass is None or error is None or df is None or not top:
        return None
    bounds = _proportion_interval((tokens_per_pass - 1.0) / top, error / top, drafted, units, df)
    return None if bounds is None else (1.0 + top * bounds[0], 1.0 + top * bounds[1])


def _tokens_per_pass_predicted(summary: Summary, alpha: float | None) -> float | None:
    """What the i.i.d. model predicts for these runs: mean over runs of (1 - alpha^(k+1)) / (1 - alpha).

    Each run keeps its own draft length k. Equal to the observed tokens per pass (within its
    standard error) when tokens pass independently with one probability.
    """
    runs = summary.runs
    if alpha is None or not runs:
        return None
    by_k = summary.runs_by_k
    total = sum(int(n) * formulas.expected_tokens_per_pass(alpha, k) for k, n in enumerate(by_k.tolist()) if n)
    return total / runs


def _iid_check(
    units: Units, alpha: float | None, observed: float | None, predicted: float | None, df: int | None
) -> IidCheck | None:
    """Does one alpha, token after token, explain the logs? Observed vs predicted tokens per pass, and equal rates.

    The prediction uses alpha fitted on the same runs, so the difference D = observed - predicted
    is linearised in both: a unit's influence is (A_g + n_g - F_g - D n_g) / N - m' (A_g - alpha E_g) / E,
    with F_g = n_g + sum_j alpha^j drafts_gj its predicted tokens and m' the prediction's slope in
    alpha. Ignoring the fit (the plain standard error of observed tokens per pass) overstates the
    error 3-8 fold and the check then almost never fires.
    """
    if observed is None or predicted is None or alpha is None or df is None:
        return None
    runs_total = float(np.sum(units.weight * units.runs))
    examined_total = float(np.sum(units.weight * units.examined))
    positions = np.arange(1, units.drafts.shape[1] + 1)
    powers = alpha**positions
    slope_terms = positions * alpha ** (positions - 1)
    drafts_total = units.weight @ units.drafts  # integer counts: exact in any order
    slope = fixed.dot(slope_terms, drafts_total) / runs_total
    predicted_by_unit = units.runs + fixed.matrix_vector(units.drafts, powers)
    difference = observed - predicted
    influence = (units.accepted + units.runs - predicted_by_unit - difference * units.runs) / runs_total - slope * (
        units.accepted - alpha * units.examined
    ) / examined_total
    variance = _sandwich(units, influence)
    error = float(np.sqrt(max(0.0, variance or 0.0)))
    if error == 0.0:
        z = None
        p_value = 1.0 if abs(difference) < 1e-9 else 0.0
    else:
        z = difference / error
        p_value = 2.0 * student_t_cdf(-abs(z), df)
    equal = _equal_rates(units)
    p_values = [p_value] if equal is None else [p_value, equal.p_value]
    combined = min(1.0, len(p_values) * min(p_values))  # Holm's first step: the family's smallest adjusted p
    consistent = combined >= IID_SIGNIFICANCE
    verdict = (
        f"no evidence against the i.i.d. model (p = {combined:.3g})"
        if consistent
        else f"the i.i.d. model does not fit (p = {combined:.3g})"
    )
    return IidCheck(
        difference=difference,
        standard_error=error,
        z=z,
        consistent=consistent,
        p_value=p_value,
        equal_rates=equal,
        combined_p_value=combined,
        verdict=verdict,
    )


def _equal_rates(units: Units) -> EqualRates | None:
    """Cluster-robust Wald test that the conditional rates of the well-reached positions are equal.

    theta_j = kept_j / reached_j with influences (kept_gj - theta_j reached_gj) / reached_j; the
    contrasts theta_j - theta_1 and their sandwich covariance give W, and W (G - q) / (q (G - 1))
    is referred to F(q, G - q): the small-G correction of a Hotelling test.
    """
    reaching = units.weight @ (units.reached > 0)
    reached, kept = units.weight @ units.reached, units.weight @ units.kept
    rates = np.divide(kept, reached, out=np.zeros_like(kept), where=reached > 0)
    tested = np.flatnonzero((reaching >= MIN_POSITION_UNITS) & (rates > 0) & (rates < 1))
    count = units.count
    if tested.shape[0] < 2:
        return None
    theta = rates[tested]
    # Residuals under the null (one rate for every tested position): a score-type covariance, whose
    # size holds where positions rest on few runs (the Wald covariance at each position's own rate
    # rejected an i.i.d. log 2.4 times as often as it should).
    pooled = float(kept[tested].sum() / reached[tested].sum())
    columns, totals = tested.tolist(), reached[tested].tolist()

    def influence(i: int) -> npt.NDArray[np.float64]:
        """Tested position i's influences, one unit each (made column by column: no units x positions copy)."""
        column = columns[i]
        made: npt.NDArray[np.float64] = (units.kept[:, column] - pooled * units.reached[:, column]) / totals[i]
        return made

    # In an order fixed by the code (not BLAS's, which is the CPU's), so the statistic has one value everywhere.
    correction = count / (count - 1)
    gram = fixed.weighted_gram_of(influence, len(columns), units.weight)
    covariance = [[correction * cell for cell in row] for row in gram]
    size = tested.shape[0]
    contrasts = [[float(j == i + 1) - float(j == 0) for j in range(size)] for i in range(size - 1)]  # theta_j - theta_1
    values = theta.tolist()
    difference = [values[i + 1] - values[0] for i in range(size - 1)]
    rank, wald = fixed.pseudo_inverse_form(fixed.congruence(contrasts, covariance), difference)
    if rank == 0 or count <= rank:
        return None
    statistic = wald * (count - rank) / (rank * (count - 1))
    return EqualRates(
        statistic=statistic,
        df=(rank, count - rank),
        p_value=f_sf(statistic, rank, count - rank),
        positions=int(tested.shape[0]),
    )


def _per_position(
    summary: Summary, units: Units, df: int | None, *, clustered: bool = False
) -> tuple[PositionRate, ...]:
    """One row per 1-based draft position j = 1 .. max_k (see `PositionRate`), with sandwich intervals."""
    counts = summary.counts
    # at_least_k[j] = runs with k >= j; at_least_a[j] = runs with a >= j;
    # at_least_both[j] = runs with k >= j and a >= j - 1 (a = k when all kept, so a >= j - 1 and k >= j
    # is every run with a >= j - 1 except those that drafted exactly j - 1 and kept them all).
    at_least_k = np.cumsum(counts.sum(axis=1)[::-1])[::-1]
    at_least_a = np.cumsum(counts.sum(axis=0)[::-1])[::-1]
    all_kept = np.diagonal(counts)
    reaching, drafting = units.weight @ (units.reached > 0), units.weight @ (units.drafts > 0)
    rows = []
    for position in range(1, summary.max_k + 1):
        drafts = int(at_least_k[position])
        reached = int(at_least_a[position - 1] - all_kept[position - 1])
        accepted = int(at_least_a[position])
        rate = accepted / reached if reached else None
        unconditional = accepted / drafts if drafts else None
        column = position - 1
        kept_by_unit = units.kept[:, column]
        rate_error = _ratio_error(units, kept_by_unit, units.reached[:, column], rate)
        unconditional_error = _ratio_error(units, kept_by_unit, units.drafts[:, column], unconditional)
        reached_column, drafts_column = units.reached[:, column], units.drafts[:, column]
        rate_df = _small_sample_df(
            df, _ratio_degrees_of_freedom(units, kept_by_unit, reached_column, rate) if clustered else None
        )
        unconditional_df = _small_sample_df(
            df, _ratio_degrees_of_freedom(units, kept_by_unit, drafts_column, unconditional) if clustered else None
        )
        rows.append(
            PositionRate(
                position=position,
                drafts=drafts,
                reached=reached,
                accepted=accepted,
                rate=rate,
                unconditional_rate=unconditional,
                rate_ci=_proportion_interval(rate, rate_error, reached, int(reaching[column]), rate_df),
                unconditional_rate_ci=_proportion_interval(
                    unconditional, unconditional_error, drafts, int(drafting[column]), unconditional_df
                ),
            )
        )
    return tuple(rows)


def _accepted_histogram(summary: Summary) -> dict[str, int]:
    """Runs by accepted length, "0" .. str(max_k), zeros included (JSON keys are strings)."""
    by_accepted = summary.counts.sum(axis=0)
    return {str(a): int(by_accepted[a]) for a in range(summary.max_k + 1)}


# --- the whole input when some units give only totals -----------------------------------------
# Accepted, drafted and (usually) verify steps are exact for every unit with counts, so every figure
# they make is over the whole input; examined tokens, hence alpha, are bounded by the sums of every
# unit's bounds. A bound's standard error is the sandwich over the same units as the exact figures'
# (requests, or runs and intervals), and its 95% interval Imbens and Manski's (2004).


def _with_engine_units(summary: Summary, plain: Estimates) -> Estimates:
    engine = summary.engine
    assert engine is not None
    units = engine.units
    rows = units.rows if units is not None else None
    count = len(rows) if rows is not None else 0
    exact_units = plain.clusters if plain.clusters is not None else engine.recovered
    unit = "request" if engine.requests else "interval"
    how = {name: EXACT for name in ("runs", "accepted", "drafted", "acceptance_rate", "tokens_per_pass")}
    assumed = engine.assumed or engine.requests_assuming_full_drafts  # SGLang's nominal proposed count
    how["alpha"] = how["per_position"] = ASSUMED if assumed else EXACT
    if rows is None or not count:
        identified = Identified(
            how=how,
            exact_units=exact_units or 0,
            bounded_units=0,
            rates_only=engine.unquantified,
            unit=unit,
            examined_bounds=_assumed_examined(summary) if engine.assumed else None,
            alpha_bounds=engine.alpha_bounds_with(summary.accepted_tokens, summary.examined_tokens),
        )
        return replace(plain, identified=identified)

    accepted = summary.accepted_tokens + int(rows.accepted.sum())
    drafted = summary.drafted_tokens + int(rows.drafted.sum())
    steps = (summary.runs + int(rows.steps_low.sum()), summary.runs + int(rows.steps_high.sum()))
    examined_exact = _assumed_examined(summary)
    examined = (examined_exact[0] + int(rows.examined_low.sum()), examined_exact[1] + int(rows.examined_high.sum()))
    steps_known = steps[0] == steps[1]

    # The units every standard error sums over: the exact part's (clusters, or runs) and one per bounded unit.
    exact = (
        Units.of_runs(summary.counts, summary.max_k)
        if summary.clusters is None
        else Units.of_clusters(summary.clusters.sums, summary.max_k)
    )
    weight = np.concatenate([exact.weight, np.ones(count)])
    numerator = np.concatenate([exact.accepted, rows.accepted.astype(np.float64)])
    below = np.concatenate([exact.examined, rows.examined_low.astype(np.float64)])
    above = np.concatenate([exact.examined, rows.examined_high.astype(np.float64)])
    unit_count = round(float(weight.sum()))
    df = unit_count - 1 if unit_count >= 2 else None

    alpha_bounds = (accepted / examined[1], accepted / examined[0]) if examined[0] else None
    errors = None
    alpha_ci = None
    if alpha_bounds is not None:
        low_error = _weighted_ratio_error(weight, numerator, above, alpha_bounds[0])
        high_error = _weighted_ratio_error(weight, numerator, below, alpha_bounds[1])
        if low_error is not None and high_error is not None:
            errors = (low_error, high_error)
            alpha_ci = bounds_interval(alpha_bounds, errors, df, ceiling=1.0, tokens=(examined[1], examined[0]))
    how["alpha"] = BOUNDED if alpha_bounds is None or alpha_bounds[0] != alpha_bounds[1] else EXACT
    how["per_position"] = BOUNDED

    step_weights = np.concatenate([exact.runs, rows.steps_low.astype(np.float64)])
    # The longest draft seen (the exact runs' k, the longest accepted length a histogram gives): tokens per
    # pass is then 1 + top v with v in [0, 1], and its intervals are the exact path's (score ends, continuity).
    top = max(summary.max_k, len(units.histogram) - 1 if units is not None else 0)
    tokens_per_pass = tokens_error = tokens_ci = tokens_bounds = tokens_bounds_ci = tokens_bounds_errors = None
    if steps_known and steps[0]:
        tokens_per_pass = (accepted + steps[0]) / steps[0]
        tokens_error = _weighted_ratio_error(weight, numerator + step_weights, step_weights, tokens_per_pass)
        if tokens_error is not None and df is not None and top:
            tokens_ci = _tokens_interval(top, drafted, tokens_per_pass, tokens_error, unit_count, df)
        elif tokens_error is not None and df is not None:
            crit = _critical(df)
            tokens_ci = (max(1.0, tokens_per_pass - crit * tokens_error), tokens_per_pass + crit * tokens_error)
    elif steps[0]:
        how["runs"] = how["tokens_per_pass"] = BOUNDED
        tokens_bounds = (1 + accepted / steps[1], 1 + accepted / steps[0])
        most = np.concatenate([exact.runs, rows.steps_high.astype(np.float64)])
        low_error = _weighted_ratio_error(weight, numerator + most, most, tokens_bounds[0])
        high_error = _weighted_ratio_error(weight, numerator + step_weights, step_weights, tokens_bounds[1])
        if low_error is not None and high_error is not None:
            tokens_bounds_errors = (low_error, high_error)
            if top and tokens_bounds[1] <= 1 + top:
                scaled = bounds_interval(
                    ((tokens_bounds[0] - 1) / top, (tokens_bounds[1] - 1) / top),
                    (low_error / top, high_error / top),
                    df,
                    ceiling=1.0,
                    tokens=(drafted, drafted),
                )
                if scaled is not None:
                    tokens_bounds_ci = (1 + top * scaled[0], 1 + top * scaled[1])
            else:
                tokens_bounds_ci = bounds_interval(tokens_bounds, tokens_bounds_errors, df, ceiling=None)
    else:
        how["runs"] = how["tokens_per_pass"] = UNKNOWN

    histogram = _whole_histogram(summary, units) if units is not None else None
    how["accepted_histogram"] = EXACT if histogram is not None else UNKNOWN
    identified = Identified(
        how=how,
        exact_units=exact_units or 0,
        bounded_units=count,
        rates_only=engine.unquantified,
        unit=unit,
        runs_bounds=None if steps_known else steps,
        examined_bounds=examined,
        alpha_bounds=alpha_bounds,
        alpha_bounds_standard_errors=errors,
        alpha_bounds_ci=alpha_ci,
        tokens_per_pass_bounds=tokens_bounds,
        tokens_per_pass_bounds_ci=tokens_bounds_ci,
        tokens_per_pass_bounds_standard_errors=tokens_bounds_errors,
        step_positions=_step_positions(summary, histogram, steps[0] if steps_known else None),
    )
    alpha = alpha_bounds[0] if how["alpha"] == EXACT and alpha_bounds is not None else None
    return replace(
        plain,
        runs=steps[0],
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        examined_tokens=examined[0] if examined[0] == examined[1] else None,
        emitted_tokens=accepted + steps[0] if steps_known else None,
        alpha=alpha,
        alpha_standard_error=None,
        alpha_ci=None if alpha is None else alpha_ci,
        expected_alpha=None,
        expected_alpha_drafted=None,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_accepted=accepted / steps[0] if steps_known and steps[0] else None,
        tokens_per_pass=tokens_per_pass,
        tokens_per_pass_standard_error=tokens_error,
        tokens_per_pass_ci=tokens_ci,
        tokens_per_pass_predicted=None,  # the i.i.d. prediction needs alpha and each run's k
        iid_check=None,
        per_position=(),
        accepted_histogram={} if histogram is None else {str(a): n for a, n in enumerate(histogram)},
        conventions={},
        runs_by_k=(),
        # Per-request payloads are clustered by request whether or not any request was exact.
        cluster_field=plain.cluster_field or ("request_id" if unit == "request" else None),
        clusters=unit_count if unit == "request" or plain.clusters is not None else None,
        interval_method=plain.interval_method
        if unit != "request"
        else f"cluster-robust over {unit_count:,} requests (sandwich variance, Student t)",
        degrees_of_freedom=df,
        alpha_degrees_of_freedom=None,  # the bounds' intervals use G - 1 over every unit
        tokens_per_pass_degrees_of_freedom=None,
        identified=identified,
    )


def _assumed_examined(summary: Summary) -> tuple[int, int]:
    """The exact part's examined tokens, as bounds that do not assume full drafts where an interval did."""
    engine = summary.engine
    examined = summary.examined_tokens
    if engine is None or not engine.assumed:
        return (examined, examined)
    surely = examined - engine.assumed_examined
    return (surely + engine.assumed_examined_low, surely + engine.assumed_examined_high)


def _whole_histogram(summary: Summary, units: Any) -> tuple[int, ...] | None:
    """Steps by accepted length over the whole input, when every bounded unit wrote its histogram."""
    if not units.histogram_complete:
        return None
    exact = summary.counts.sum(axis=0).tolist()
    size = max(len(exact), len(units.histogram))
    padded = [int(n) for n in exact] + [0] * (size - len(exact))
    for a, n in enumerate(units.histogram):
        padded[a] += n
    while len(padded) > 1 and padded[-1] == 0:
        padded.pop()
    return tuple(padded)


def _step_positions(summary: Summary, histogram: tuple[int, ...] | None, steps: int | None) -> tuple[StepPosition, ...]:
    """vLLM's per-position rate over every step, and bounds on the conditional rate (see `StepPosition`)."""
    if histogram is None or not steps:
        return ()
    at_least = np.cumsum(np.array(histogram[::-1], dtype=np.int64))[::-1]
    # The exact part's reached counts are known; a bounded step with a = j - 1 may or may not have reached j.
    exact_reached = [row.reached for row in _per_position_counts(summary)]
    exact_at_least = np.cumsum(summary.counts.sum(axis=0)[::-1])[::-1]
    rows = []
    for position in range(1, len(histogram)):
        kept = int(at_least[position])
        known = exact_reached[position - 1] if position - 1 < len(exact_reached) else 0
        exact_prior = int(exact_at_least[position - 1]) if position - 1 < exact_at_least.shape[0] else 0
        exact_kept = int(exact_at_least[position]) if position < exact_at_least.shape[0] else 0
        bounded_kept = kept - exact_kept
        bounded_prior = int(at_least[position - 1]) - exact_prior
        # Every step drafted at least one token, so every step reached position 1.
        fewest, most = (
            (known + bounded_prior, known + bounded_prior)
            if position == 1
            else (known + bounded_kept, known + bounded_prior)
        )
        bounds = (kept / most, kept / fewest) if fewest else None
        rows.append(StepPosition(position, kept, kept / steps, bounds))
    return tuple(rows)


def _per_position_counts(summary: Summary) -> list[PositionRate]:
    units = Units.of_runs(summary.counts, summary.max_k)
    return list(_per_position(summary, units, None))


def bounds_interval(
    bounds: tuple[float, float],
    errors: tuple[float, float],
    df: int | None,
    ceiling: float | None,
    tokens: tuple[int, int] | None = None,
) -> tuple[float, float] | None:
    """Imbens and Manski's (2004) 95% interval for a value known to lie in [low, high]: [low - c s_low,
    high + c s_high], with c solving T(c + (high - low) / max(s)) - T(-c) = 0.95 (T: Student t with df
    degrees of freedom, the normal in their paper). c is the two-sided quantile when the bounds meet and
    falls to the one-sided one as they widen: the interval covers the value, not the whole identified set.

    For a rate in [0, 1] (`tokens`: the tokens behind the low and the high bound) each end is instead the
    exact path's (`_proportion_interval`) at c: Wilson's score bound at the end's effective sample size,
    moved by the continuity correction, so bounds that meet give the interval of an exact rate. On
    request-clustered payloads of 6 requests the plain ends covered 91-93%, these 93-95% (tests/study)."""
    if df is None:
        return None
    (low, high), (s_low, s_high) = bounds, errors
    spread = max(s_low, s_high)
    width = (high - low) / spread if spread > 0 else math.inf

    def covered(c: float) -> float:
        return (
            student_t_cdf(c + width, df) - student_t_cdf(-c, df) if math.isfinite(width) else 1 - student_t_cdf(-c, df)
        )

    lo_c, hi_c = 0.0, _critical(df)
    for _ in range(60):
        mid = (lo_c + hi_c) / 2
        lo_c, hi_c = (mid, hi_c) if covered(mid) < LEVEL else (lo_c, mid)
    c = hi_c
    if tokens is not None:
        units = df + 1
        return (_score_end(low, s_low, tokens[0], units, c, -1), _score_end(high, s_high, tokens[1], units, c, +1))
    result_low = max(0.0, low - c * s_low)
    result_high = high + c * s_high
    if ceiling is not None:
        result_high = min(ceiling, result_high)
    return (result_low, result_high)
