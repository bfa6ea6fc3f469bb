"""summary/fixed.py: sums in an order of the code's own agree with BLAS and LAPACK to rounding."""

from __future__ import annotations

import numpy as np
import pytest

from specaccept_cli.summary import fixed


@pytest.mark.parametrize("size", [2, 3, 5, 8, 12])
def test_the_wald_form_agrees_with_numpys_pseudo_inverse(size: int) -> None:
    rng = np.random.default_rng(size)
    columns, weight = rng.normal(size=(200, size)), rng.random(200)
    gram = fixed.weighted_gram(columns, weight)
    assert np.allclose(gram, (columns * weight[:, None]).T @ columns, rtol=1e-12, atol=0)
    vector = rng.normal(size=size)
    rank, value = fixed.pseudo_inverse_form(gram, vector.tolist())
    assert rank == size
    assert value == pytest.approx(float(vector @ np.linalg.pinv(np.array(gram)) @ vector), rel=1e-10)


def test_a_singular_matrix_has_its_rank_and_the_pseudo_inverse_form() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(size=(100, 2))
    columns = np.c_[base, base[:, 0] - 2 * base[:, 1]]  # the third column is the first two combined
    gram = fixed.weighted_gram(columns, np.ones(100))
    vector = np.array([0.3, -1.0, 2.0])
    rank, value = fixed.pseudo_inverse_form(gram, vector.tolist())
    assert rank == np.linalg.matrix_rank(np.array(gram)) == 2
    assert value == pytest.approx(float(vector @ np.linalg.pinv(np.array(gram)) @ vector), rel=1e-8)


def test_products_and_congruence_agree_with_matmul() -> None:
    rng = np.random.default_rng(3)
    matrix, vector = rng.normal(size=(50, 6)), rng.normal(size=6)
    assert np.allclose(fixed.matrix_vector(matrix, vector), matrix @ vector, rtol=1e-12, atol=1e-15)
    assert fixed.dot(vector, vector) == pytest.approx(float(vector @ vector), rel=1e-14)
    square, contrasts = rng.normal(size=(4, 4)), rng.normal(size=(3, 4))
    assert np.allclose(fixed.congruence(contrasts.tolist(), square.tolist()), contrasts @ square @ contrasts.T)
