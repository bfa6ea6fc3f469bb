"""The tails against published values (scipy's, to the digits printed in standard tables)."""

from __future__ import annotations

import math

import pytest

from specaccept_cli.summary.probability import kolmogorov_sf, ks_p_value, normal_cdf, normal_sf, normal_two_sided


@pytest.mark.parametrize(
    ("z", "tail"),
    [
        (0.0, 0.5),
        (1.0, 0.15865525393145707),
        (1.6448536269514722, 0.05),
        (2.326347874040841, 0.01),
        (3.090232306167813, 0.001),
        (-1.0, 0.8413447460685429),
        (8.0, 6.22096057427178e-16),
    ],
)
def test_normal_sf(z: float, tail: float) -> None:
    assert normal_sf(z) == pytest.approx(tail, rel=1e-9)


def test_normal_two_sided() -> None:
    assert normal_two_sided(1.959963984540054) == pytest.approx(0.05, rel=1e-9)
    assert normal_two_sided(-1.959963984540054) == pytest.approx(0.05, rel=1e-9)


@pytest.mark.parametrize(
    ("x", "tail"),
    [  # scipy.special.kolmogorov
        (0.2, 0.9999999999999990),
        (0.5, 0.9639452436648751),
        (0.8, 0.5441424115741982),
        (1.0, 0.2699996716735565),
        (1.1, 0.1777181926064012),
        (1.3580986393225505, 0.05),
        (1.6276236115189480, 0.01),
        (1.9494746927713730, 0.001),
        (3.0, 3.0459959489543e-08),
    ],
)
def test_kolmogorov_sf(x: float, tail: float) -> None:
    assert kolmogorov_sf(x) == pytest.approx(tail, rel=1e-6, abs=1e-15)


def test_kolmogorov_is_continuous_where_the_series_switch() -> None:
    assert kolmogorov_sf(1.18 - 1e-9) == pytest.approx(kolmogorov_sf(1.18 + 1e-9), rel=1e-6)


def test_ks_p_value_edges() -> None:
    assert ks_p_value(0.0, 100) == 1.0
    assert ks_p_value(0.5, 0) == 1.0
    assert ks_p_value(0.2, 1000) < 1e-20


@pytest.mark.parametrize(
    ("z", "expected"),
    [
        (0.0, 0.5),
        (-1.959963984540054, 0.025),
        (-2.3263478740408408, 0.01),
        (1.6448536269514722, 0.95),
        (-3.0, 0.0013498980316301),  # tables: 1.3499e-3
        (-10.0, 7.619853024160527e-24),
        (-20.0, 2.753624118606233e-89),  # erfc keeps the far tail; 1 - erf would give 0
    ],
)
def test_normal_cdf_known_values(z: float, expected: float) -> None:
    assert normal_cdf(z) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("df", "tail", "quantile"),
    [  # upper points of the chi-square (Abramowitz & Stegun, table 26.8)
        (1, 0.05, 3.84146),
        (2, 0.05, 5.99146),
        (4, 0.01, 13.2767),
        (5, 0.05, 11.0705),
        (10, 0.01, 23.2093),
        (30, 0.05, 43.7730),
        (100, 0.01, 135.807),
    ],
)
def test_chi2_tail_and_quantile_match_the_tables(df: int, tail: float, quantile: float) -> None:
    from specaccept_cli.summary.probability import chi2_sf, chi2_upper_quantile

    assert chi2_sf(quantile, df) == pytest.approx(tail, rel=1e-4)
    assert chi2_upper_quantile(tail, df) == pytest.approx(quantile, rel=1e-5)


def test_chi2_tail_at_its_edges_and_between_the_two_methods() -> None:
    from specaccept_cli.summary.probability import chi2_sf

    assert chi2_sf(0.0, 3) == 1.0 and chi2_sf(-1.0, 3) == 1.0
    assert chi2_sf(2.0, 2) == pytest.approx(math.exp(-1.0))  # df 2: the exponential's tail
    assert 0.0 <= chi2_sf(1e4, 3) < 1e-300 or chi2_sf(1e4, 3) == 0.0
    # series below df/2 + 1, continued fraction above: continuous where they meet (x/2 = a + 1)
    for df in (0.7, 3.0, 12.5):
        edge = 2.0 * (df / 2.0 + 1.0)
        assert chi2_sf(edge * (1 - 1e-9), df) == pytest.approx(chi2_sf(edge * (1 + 1e-9), df), rel=1e-6)
