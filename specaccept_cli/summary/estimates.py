"""Estimates: everything the tool reports about a `Summary`, computed once into a typed, frozen object.

The state (`summary.state`) only counts; this module turns the counts into rates,
intervals and model checks. `estimate(summary)` is called once per summary that a
view or a check needs (groups only when they are shown or written), so no number
is recomputed on every read.
"""

from __future__ import annotations

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
from specaccept_cli.summary.identified import Identified, Plain, with_engine_units
from specaccept_cli.summary.probability import f_sf, student_t_cdf
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.uncertainty import (
    cr2_variance,
    critical,
    proportion_interval,
    ratio_degrees_of_freedom,
    ratio_error,
    small_sample_df,
    tokens_per_pass_interval,
)

Z_95 = 1.959963984540054  # two-sided 95% normal quantile (the report's bands of normal-theory numbers)
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
    # The requests of every run, block and tree runs kept apart from alpha too (None: the same as `requests`).
    every_request: int | None = None

    @property
    def over_runs(self) -> bool:
        return self.field is None

    def describe(self) -> str:
        """The headline's words: 'clustered by request_id: 1,234 requests', or what holding over runs means."""
        if self.field is None:
            return "over runs: they hold only for a replayed prompt set"
        requests = self.requests or 0
        text = f"clustered by {self.field}: {requests:,} request{'s' if requests != 1 else ''}"
        if self.every_request is not None and self.every_request != requests:  # block and tree runs apart
            text = f"clustered by {self.field}: {self.every_request:,} requests, {requests:,} with runs in alpha"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"over": "runs" if self.field is None else "requests", "field": self.field, "requests": self.requests}


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
    # Distinct requests over every run, block and tree runs kept apart from alpha included (None: no such runs
    # per request, so `clusters` counts them all).
    every_request: int | None = None

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
        return Clustering(self.cluster_field, self.clusters, self.every_request)

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
        return max(error, (interval[1] - interval[0]) / (2 * critical(df)))

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
    return replace(
        plain, **with_engine_units(summary, Plain(plain.clusters, plain.cluster_field, plain.interval_method))
    )


def _estimate_runs(summary: Summary) -> Estimates:
    """Every estimate of the runs `summary` pins down, computed once.

    Variances sum over independent units: the clusters of `--cluster-field` when given, else
    the runs. Either way a variance is CR2's sum_g psi_g^2 / (1 - h_g) of each unit's linearised
    contribution psi_g (the G/(G-1) sandwich when units are equal), and intervals use Student t with
    Imbens-Kolesar's degrees of freedom for clusters, G - 1 for runs (summary.uncertainty).
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
    alpha_error = ratio_error(units, units.accepted, units.examined, alpha)
    tokens_error = ratio_error(units, units.accepted + units.runs, units.runs, tokens_per_pass)
    # Imbens-Kolesar degrees of freedom for clusters (requests); runs as units keep runs - 1, which the study's
    # small logs cover at (CR2 is there too; a million one-run groups would pay the fit for nothing).
    clustered = tally is not None
    alpha_df = small_sample_df(
        df, ratio_degrees_of_freedom(units, units.accepted, units.examined, alpha) if clustered else None
    )
    tokens_df = small_sample_df(
        df,
        ratio_degrees_of_freedom(units, units.accepted + units.runs, units.runs, tokens_per_pass)
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
        alpha_ci=proportion_interval(alpha, alpha_error, examined, unit_count, alpha_df),
        expected_alpha=examined_sum / THRESHOLD_SCALE / examined
        if sampled and examined and examined_sum is not None
        else None,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_accepted=accepted / runs if runs else None,
        tokens_per_pass=tokens_per_pass,
        tokens_per_pass_standard_error=tokens_error,
        tokens_per_pass_predicted=predicted,
        iid_check=_iid_check(units, alpha, tokens_per_pass, predicted, tokens_df),
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
        tokens_per_pass_ci=tokens_per_pass_interval(summary, tokens_per_pass, tokens_error, unit_count, tokens_df),
        alpha_degrees_of_freedom=alpha_df,
        tokens_per_pass_degrees_of_freedom=tokens_df,
        expected_alpha_drafted=summary.threshold_sum_fixed / THRESHOLD_SCALE / sampled if sampled else None,
        runs_by_k=tuple(int(n) for n in summary.runs_by_k[: summary.max_k + 1].tolist()),
        fingerprints=fingerprints(summary),
        every_request=_every_request(summary),
    )


def _every_request(summary: Summary) -> int | None:
    """How many requests the runs of every rule come from, where block or tree runs are kept per request: the
    chain runs' requests alone leave out a request whose runs are all apart (a tree log has none in alpha)."""
    if summary.clusters is None or summary.rules is None or not summary.rules.clusters:
        return None
    keys = [summary.clusters.sums.keys, *(tally.sums.keys for tally in summary.rules.clusters.values())]
    return int(np.unique(np.concatenate(keys)).shape[0])


def _tokens_per_pass_predicted(summary: Summary, alpha: float | None) -> float | None:
    """What the i.i.d. model predicts for these runs: mean over runs of (1 - alpha^(k+1)) / (1 - alpha).

    Each run keeps its own draft length k. Equal to the observed tokens per pass (within its
    standard error) when tokens pass independently with one probability.
    """
    runs = summary.runs
    if alpha is None or not runs:
        return None
    return formulas.tokens_per_pass_of(alpha, tuple(summary.runs_by_k.tolist()))


def _iid_check(
    units: Units, alpha: float | None, observed: float | None, predicted: float | None, df: float | None
) -> IidCheck | None:
    """Does one alpha, token after token, explain the logs? Observed vs predicted tokens per pass, and equal rates.

    The prediction uses alpha fitted on the same runs, so the difference D = observed - predicted
    is linearised in both: a unit's influence is (A_g + n_g - F_g - D n_g) / N - m' (A_g - alpha E_g) / E,
    with F_g = n_g + sum_j alpha^j drafts_gj its predicted tokens and m' the prediction's slope in
    alpha. Ignoring the fit (the plain standard error of observed tokens per pass) overstates the
    error 3-8 fold and the check then almost never fires.

    The variance is CR2's, as tokens per pass's interval: each unit's squared influence over 1 - h_g,
    h_g = n_g / N its share of the runs (with runs as units, 1 / N: the G/(G-1) sandwich), and `df` is
    tokens per pass's Imbens-Kolesar degrees of freedom. With the G/(G-1) sandwich and G - 1, five or ten
    requests of 20-2,000 runs at one alpha rejected 2.2% and 2.0% of the time at the nominal 1%. Both are
    tokens per pass's, not this statistic's own (the alpha fit's part would take E_g / E as leverage): an
    approximation that errs cautious, 0.3% rejected where the nominal is 1% (the study), at some power.
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
    variance = cr2_variance(units.weight, influence, units.runs / runs_total) if units.count >= 2 else None
    if variance is None:
        return None  # one unit holds every run: nothing varies between units
    error = float(np.sqrt(max(0.0, variance)))
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
        rate_error = ratio_error(units, kept_by_unit, units.reached[:, column], rate)
        unconditional_error = ratio_error(units, kept_by_unit, units.drafts[:, column], unconditional)
        reached_column, drafts_column = units.reached[:, column], units.drafts[:, column]
        rate_df = small_sample_df(
            df, ratio_degrees_of_freedom(units, kept_by_unit, reached_column, rate) if clustered else None
        )
        unconditional_df = small_sample_df(
            df, ratio_degrees_of_freedom(units, kept_by_unit, drafts_column, unconditional) if clustered else None
        )
        rows.append(
            PositionRate(
                position=position,
                drafts=drafts,
                reached=reached,
                accepted=accepted,
                rate=rate,
                unconditional_rate=unconditional,
                rate_ci=proportion_interval(rate, rate_error, reached, int(reaching[column]), rate_df),
                unconditional_rate_ci=proportion_interval(
                    unconditional, unconditional_error, drafts, int(drafting[column]), unconditional_df
                ),
            )
        )
    return tuple(rows)


def _accepted_histogram(summary: Summary) -> dict[str, int]:
    """Runs by accepted length, "0" .. str(max_k), zeros included (JSON keys are strings)."""
    by_accepted = summary.counts.sum(axis=0)
    return {str(a): int(by_accepted[a]) for a in range(summary.max_k + 1)}
