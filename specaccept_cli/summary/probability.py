"""The two distribution tails the audits need, without scipy: the normal and Kolmogorov's."""

from __future__ import annotations

import math


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
