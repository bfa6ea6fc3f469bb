"""Uncertainty over independent units: sandwich variances (CR2, Bell and McCaffrey), their degrees of freedom,
and the score intervals every rate and tokens per pass is shown with. Used by `summary.estimates` and, for
bounds, `summary.identified`.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from specaccept_cli.summary import fixed
from specaccept_cli.summary.clusters import Units
from specaccept_cli.summary.probability import student_t_quantile

if TYPE_CHECKING:
    from specaccept_cli.summary.state import Summary

LEVEL = 0.95  # every interval's coverage


# --- uncertainty: sandwich variances over independent units ----------------------------------
# Tokens of one run share a context, and runs of one request share a prompt: neither are
# independent draws. The unit is the cluster (with --cluster-field) or else the run.


@functools.lru_cache(maxsize=1024)
def critical(df: float) -> float:
    """Two-sided 95% Student t quantile with `df` degrees of freedom."""
    return student_t_quantile(0.5 + LEVEL / 2, df)


def ratio_error(
    units: Units, numerator: npt.NDArray[np.float64], denominator: npt.NDArray[np.float64], ratio: float | None
) -> float | None:
    """Delta-method (linearised) standard error of ratio = sum(numerator) / sum(denominator) over units."""
    return weighted_ratio_error(units.weight, numerator, denominator, ratio)


def weighted_ratio_error(
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
    variance = cr2_variance(weight, (numerator - ratio * denominator) / total, denominator / total)
    return None if variance is None else float(np.sqrt(max(0.0, variance)))


def cr2_variance(
    weight: npt.NDArray[np.float64], influence: npt.NDArray[np.float64], leverage: npt.NDArray[np.float64]
) -> float | None:
    """CR2's sum_g w_g psi_g^2 / (1 - h_g); None when one unit's leverage is 1 (it holds the whole denominator:
    nothing varies between units)."""
    if float(leverage.max()) >= 1.0 - 1e-12:
        return None
    return float(np.sum(weight * influence * influence / (1.0 - leverage)))


def ratio_degrees_of_freedom(
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
    if fixed.dot(weight, squared) ** 2 >= IK_EFFECTIVE_UNITS * fixed.dot(weight, squared * squared):
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
    # 2 x 2 products in plain floats, the sums in a fixed order (summary.fixed): the same bytes on every CPU.
    columns = np.stack([shares, v], axis=1)
    gram_dd = fixed.weighted_gram(columns, weight * c * c * v)
    gram = fixed.weighted_gram(columns, weight * c)
    k = [[size, -1.0], [-1.0, 0.0]]

    def product(left: list[list[float]], right: list[list[float]]) -> list[list[float]]:
        return [[left[i][0] * right[0][j] + left[i][1] * right[1][j] for j in range(2)] for i in range(2)]

    kg = product(k, gram)
    kgkg = product(kg, kg)
    kgdd = product(k, gram_dd)
    second = float(np.sum(weight * (c * v) ** 2)) + 2.0 * (kgdd[0][0] + kgdd[1][1]) + (kgkg[0][0] + kgkg[1][1])
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
    mean_x, mean_y = fixed.dot(weight, x) / total, fixed.dot(weight, y) / total
    spread = fixed.dot(weight, (x - mean_x) ** 2)
    slope = fixed.dot(weight, (x - mean_x) * (y - mean_y)) / spread if spread > 0 else 0.0
    intercept = mean_y - slope * mean_x
    if slope >= 0.0 and intercept >= 0.0:
        return slope, intercept
    if slope < 0.0:
        return 0.0, max(0.0, mean_y)
    through_origin = fixed.dot(weight, x * y) / fixed.dot(weight, x * x)
    return max(0.0, through_origin), 0.0


def small_sample_df(df: int | None, exact: float | None) -> float | None:
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


def proportion_interval(
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
    crit = critical(df)
    return score_end(rate, error, tokens, units, crit, -1), score_end(rate, error, tokens, units, crit, +1)


def score_end(rate: float, error: float, tokens: int, units: int, crit: float, sign: int) -> float:
    """One end (`sign` -1 low, +1 high) of `proportion_interval` at critical value `crit`."""
    spread = rate * (1.0 - rate)
    n = min(float(tokens), spread / (error * error)) if spread > 0.0 and error > 0.0 else float(units)
    shift = CONTINUITY / (2 * n)
    # At rate 0 or 1 the interval's near end is the rate itself; so is the far end of a rate the continuity shift
    # takes to 0 or 1, which the score formula gives only to rounding (1 - 1e-16 where 1 is exact).
    if sign < 0:
        return 0.0 if rate - shift <= 0.0 else max(0.0, _score_bound(rate - shift, n, crit, -1))
    return 1.0 if rate + shift >= 1.0 else min(1.0, _score_bound(rate + shift, n, crit, +1))


def tokens_per_pass_interval(
    summary: Summary, tokens_per_pass: float | None, error: float | None, units: int, df: float | None
) -> tuple[float, float] | None:
    """95% interval for tokens per pass, inside [1, 1 + longest draft].

    Tokens per pass is 1 + k_max v with v = mean accepted / k_max in [0, 1]: the interval is v's
    score interval (like alpha's, at v's own effective sample size, one trial per unit where the
    runs do not vary), mapped back. Far from the bounds it is the Student t interval; near them
    (few rejections) it is not symmetric, as the mean's distribution is not.
    """
    return tokens_interval(summary.max_k, summary.drafted_tokens, tokens_per_pass, error, units, df)


def tokens_interval(
    top: int, drafted: int, tokens_per_pass: float | None, error: float | None, units: int, df: float | None
) -> tuple[float, float] | None:
    """`tokens_per_pass_interval` for drafts of at most `top` tokens, `drafted` of them."""
    if tokens_per_pass is None or error is None or df is None or not top:
        return None
    bounds = proportion_interval((tokens_per_pass - 1.0) / top, error / top, drafted, units, df)
    return None if bounds is None else (1.0 + top * bounds[0], 1.0 + top * bounds[1])
