"""How the input identifies each figure, and the figures over the whole input when some of its units (requests,
or intervals of an engine log) give totals only: exact where the counts pin them down, bounds over every unit
with Imbens and Manski's 95% interval where not (see docs/statistics.md, "Bounds when the input does not pin
alpha down"). `summary.estimates.estimate` calls `with_engine_units` for every engine input.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from msgspec import Struct

from specaccept_cli.summary.bounded import added_histograms
from specaccept_cli.summary.clusters import Units
from specaccept_cli.summary.probability import student_t_cdf
from specaccept_cli.summary.uncertainty import LEVEL, critical, score_end, tokens_interval, weighted_ratio_error

if TYPE_CHECKING:
    from specaccept_cli.summary.bounded import BoundedUnits
    from specaccept_cli.summary.state import Summary


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


# --- the whole input when some units give only totals -----------------------------------------
# Accepted, drafted and (usually) verify steps are exact for every unit with counts, so every figure
# they make is over the whole input; examined tokens, hence alpha, are bounded by the sums of every
# unit's bounds. A bound's standard error is the sandwich over the same units as the exact figures'
# (requests, or runs and intervals), and its 95% interval Imbens and Manski's (2004).


class Plain(Struct, frozen=True):
    """What the runs' own estimates say of their units (`Estimates.clusters`, `cluster_field`, `interval_method`)."""

    clusters: int | None
    cluster_field: str | None
    interval_method: str


def with_engine_units(summary: Summary, plain: Plain) -> dict[str, Any]:
    """The `Estimates` fields that change on engine input (`identified` always; the whole-input figures when some
    units are bounded), to replace those the runs alone gave."""
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
        # Intervals exact only under the full-drafts assumption are bounded without it: alpha is, accordingly.
        low, high = _assumed_examined(summary)
        bounds = None
        if engine.assumed and high > 0:
            accepted = summary.accepted_tokens
            bounds = (accepted / high, accepted / low if low > 0 else 1.0)
        identified = Identified(
            how=how,
            exact_units=exact_units or 0,
            bounded_units=0,
            rates_only=engine.unquantified,
            unit=unit,
            examined_bounds=(low, high) if engine.assumed else None,
            alpha_bounds=bounds,
        )
        return {"identified": identified}

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
        low_error = weighted_ratio_error(weight, numerator, above, alpha_bounds[0])
        high_error = weighted_ratio_error(weight, numerator, below, alpha_bounds[1])
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
        tokens_error = weighted_ratio_error(weight, numerator + step_weights, step_weights, tokens_per_pass)
        if tokens_error is not None and df is not None and top:
            tokens_ci = tokens_interval(top, drafted, tokens_per_pass, tokens_error, unit_count, df)
        elif tokens_error is not None and df is not None:
            crit = critical(df)
            tokens_ci = (max(1.0, tokens_per_pass - crit * tokens_error), tokens_per_pass + crit * tokens_error)
    elif steps[0]:
        how["runs"] = how["tokens_per_pass"] = BOUNDED
        tokens_bounds = (1 + accepted / steps[1], 1 + accepted / steps[0])
        most = np.concatenate([exact.runs, rows.steps_high.astype(np.float64)])
        low_error = weighted_ratio_error(weight, numerator + most, most, tokens_bounds[0])
        high_error = weighted_ratio_error(weight, numerator + step_weights, step_weights, tokens_bounds[1])
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
    return dict(
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


def _whole_histogram(summary: Summary, units: BoundedUnits) -> tuple[int, ...] | None:
    """Steps by accepted length over the whole input, when every bounded unit wrote its histogram."""
    if not units.histogram_complete:
        return None
    summed = list(added_histograms([int(n) for n in summary.counts.sum(axis=0).tolist()], units.histogram))
    while len(summed) > 1 and summed[-1] == 0:
        summed.pop()
    return tuple(summed)


def _step_positions(summary: Summary, histogram: tuple[int, ...] | None, steps: int | None) -> tuple[StepPosition, ...]:
    """vLLM's per-position rate over every step, and bounds on the conditional rate (see `StepPosition`)."""
    if histogram is None or not steps:
        return ()
    at_least = np.cumsum(np.array(histogram[::-1], dtype=np.int64))[::-1]
    # The exact part's reached counts are known; a bounded step with a = j - 1 may or may not have reached j.
    # The exact part's runs that reached position j: a >= j - 1 and k >= j (a run that kept all of k = j - 1 did not).
    counts = summary.counts
    exact_at_least_a = np.cumsum(counts.sum(axis=0)[::-1])[::-1]
    all_kept = np.diagonal(counts)
    exact_reached = [int(exact_at_least_a[j - 1] - all_kept[j - 1]) for j in range(1, summary.max_k + 1)]
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
    exact path's (`proportion_interval`) at c: Wilson's score bound at the end's effective sample size,
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

    lo_c, hi_c = 0.0, critical(df)
    for _ in range(60):
        mid = (lo_c + hi_c) / 2
        lo_c, hi_c = (mid, hi_c) if covered(mid) < LEVEL else (lo_c, mid)
    c = hi_c
    if tokens is not None:
        units = df + 1
        return (score_end(low, s_low, tokens[0], units, c, -1), score_end(high, s_high, tokens[1], units, c, +1))
    result_low = max(0.0, low - c * s_low)
    result_high = high + c * s_high
    if ceiling is not None:
        result_high = min(ceiling, result_high)
    return (result_low, result_high)
