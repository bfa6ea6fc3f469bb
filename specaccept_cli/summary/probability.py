"""The two distribution tails the audits need, without scipy: the normal and Kolmogorov's."""

from __future__ import annotations

import math
from collections.abc import Callable


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def normal_cdf(z: float) -> float:
    """P(Z <= z), accurate in the far lower tail too (erfc, not 1 - erf)."""
    return normal_sf(-z)


def normal_two_sided(z: float) -> float:
    """P(|Z| >= |z|)."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def kolmogorov_sf(x: float) -> float:
    """P(K > x) for Kolmogorov's distribution (the limit of sqrt(n) D_n).

    Two series, each used where it converges fast: the theta-function form
    sqrt(2 pi)/x sum exp(-(2j-1)^2 pi^2 / (8 x^2)) for the CDF at small x, and
    2 sum (-1)^(j-1) exp(-2 j^2 x^2) for the tail.
    """
    if x <= 0.0:
        return 1.0
    if x < 1.18:
        factor = -(math.pi**2) / (8.0 * x * x)
        cdf = math.sqrt(2.0 * math.pi) / x * sum(math.exp(factor * (2 * j - 1) ** 2) for j in range(1, 8))
        return min(1.0, max(0.0, 1.0 - cdf))
    tail = 2.0 * math.fsum((-1.0) ** (j - 1) * math.exp(-2.0 * j * j * x * x) for j in range(1, 101))
    return min(1.0, max(0.0, tail))


def ks_p_value(statistic: float, n: int) -> float:
    """Asymptotic p-value of a one-sample KS statistic D from n draws (Stephens' small-n correction)."""
    if n <= 0:
        return 1.0
    root = math.sqrt(n)
    return kolmogorov_sf((root + 0.12 + 0.11 / root) * statistic)


# --- Student t and F: what the cluster-robust intervals and tests need ---------------------------
# Both reduce to the regularized incomplete beta function, evaluated by its continued fraction
# (Lentz's method), as in Numerical Recipes (6.4); tested against tables.

_TINY = 1e-300
_EPSILON = 1e-15


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), convergent for x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    fraction = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            fraction *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            break
    return fraction


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the CDF at x of a Beta(a, b) variable."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (the normal when df is infinite)."""
    if math.isinf(df):
        return normal_cdf(t)
    tail = 0.5 * regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t < 0 else 1.0 - tail


def student_t_quantile(probability: float, df: float) -> float:
    """The t with P(T <= t) = probability (bisection on the CDF: a few dozen evaluations, to 1e-12)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability must be in (0, 1), not {probability}")
    if probability < 0.5:
        return -student_t_quantile(1.0 - probability, df)
    return _positive_root(lambda t: student_t_cdf(t, df) < probability, 1.0, 1e-12, 1.0)


def _positive_root(below: Callable[[float], bool], high: float, tolerance: float, floor: float) -> float:
    """The x >= 0 where `below(x)` (true left of it, false right of it) turns false: `high` doubled until past it,
    then bisection until the bracket is narrower than tolerance * max(floor, its top end)."""
    low = 0.0
    while below(high):
        low, high = high, high * 2.0
    while high - low > tolerance * max(floor, high):
        middle = (low + high) / 2.0
        if below(middle):
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def f_sf(statistic: float, df_numerator: float, df_denominator: float) -> float:
    """P(F > statistic) for Fisher's F with the given degrees of freedom."""
    if statistic <= 0.0:
        return 1.0
    x = df_denominator / (df_denominator + df_numerator * statistic)
    return regularized_beta(df_denominator / 2.0, df_numerator / 2.0, x)


# --- chi-square: what the fingerprints' dispersion test needs at a handful of requests ---------------------
# The regularized incomplete gamma function, by its series below a + 1 and its continued fraction (Lentz's
# method) above, as in Numerical Recipes (6.2); tested against tables.


def _gamma_series(a: float, x: float) -> float:
    """P(a, x) by its power series (convergent fast for x < a + 1)."""
    term = total = 1.0 / a
    denominator = a
    for _ in range(10_000):
        denominator += 1.0
        term *= x / denominator
        total += term
        if abs(term) < abs(total) * _EPSILON:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_fraction(a: float, x: float) -> float:
    """Q(a, x) by its continued fraction (convergent fast for x >= a + 1)."""
    b = x + 1.0 - a
    c, d = 1.0 / _TINY, 1.0 / b
    fraction = d
    for i in range(1, 10_000):
        numerator = -i * (i - a)
        b += 2.0
        d = numerator * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + numerator / c
        c = c if abs(c) > _TINY else _TINY
        fraction *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            break
    return fraction * math.exp(-x + a * math.log(x) - math.lgamma(a))


def chi2_sf(statistic: float, df: float) -> float:
    """P(X >= statistic) for X ~ chi-square with `df` (> 0, not necessarily whole) degrees of freedom."""
    if statistic <= 0.0:
        return 1.0
    a, x = df / 2.0, statistic / 2.0
    if x < a + 1.0:
        return max(0.0, 1.0 - _gamma_series(a, x))
    return min(1.0, _gamma_fraction(a, x))


def chi2_upper_quantile(tail: float, df: float) -> float:
    """The x with P(X >= x) = tail for X ~ chi-square(df), by bisection on `chi2_sf` (to 1e-10 relative)."""
    if not 0.0 < tail < 1.0:
        raise ValueError(f"tail must be in (0, 1), not {tail}")
    return _positive_root(lambda x: chi2_sf(x, df) > tail, max(1.0, df), 1e-10, 0.0)
