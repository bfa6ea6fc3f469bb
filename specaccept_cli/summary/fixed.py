"""Sums of products in an order fixed by the code, so a figure has the same bytes on every CPU.

`a @ b` and `np.linalg` hand floats to BLAS and LAPACK, whose kernels are chosen at run time by
the CPU (OpenBLAS has one per core type): the same audit gave 0.9873843896639577 on one machine and
...584 on another. Here an element-wise product (correctly rounded on every CPU) is followed by
numpy's pairwise sum of a contiguous array, whose order is fixed by the array's length alone, and
the small matrices of a Wald test are solved in plain Python floats. Products of integer counts
held as floats need none of this: they are exact below 2**53, whatever the order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

Matrix = list[list[float]]


def dot(left: npt.NDArray[np.float64], right: npt.NDArray[np.float64]) -> float:
    """sum_i left_i right_i of two 1-D arrays."""
    return float(np.sum(np.ascontiguousarray(left, dtype=np.float64) * right))


def matrix_vector(matrix: npt.NDArray[np.float64], vector: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """matrix @ vector, column after column (one temporary of the matrix's height, not its size)."""
    total = np.zeros(matrix.shape[0])
    for column, value in enumerate(vector.tolist()):
        total += matrix[:, column] * value
    return total


def weighted_gram(columns: npt.NDArray[np.float64], weight: npt.NDArray[np.float64]) -> Matrix:
    """sum_g weight_g x_gi x_gj for every pair of columns i, j (symmetric)."""
    return weighted_gram_of(lambda i: np.ascontiguousarray(columns[:, i], dtype=np.float64), columns.shape[1], weight)


def weighted_gram_of(
    column: Callable[[int], npt.NDArray[np.float64]], width: int, weight: npt.NDArray[np.float64]
) -> Matrix:
    """`weighted_gram` of columns made on demand, `column(i)`: a few columns of the units' length at a time,
    never the whole matrix (a million clusters and 8 positions: 64 MB a copy)."""
    gram = [[0.0] * width for _ in range(width)]
    for i in range(width):
        weighted = weight * column(i)
        for j in range(i, width):
            gram[i][j] = gram[j][i] = float(np.sum(weighted * column(j)))
    return gram


def symmetric_eigen(matrix: Matrix, sweeps: int = 100) -> tuple[list[float], Matrix]:
    """Eigenvalues and eigenvectors (columns of the second) of a small symmetric matrix: cyclic Jacobi
    rotations in plain floats, a fixed sequence of operations."""
    n = len(matrix)
    a = [list(row) for row in matrix]
    vectors = [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]
    for _ in range(sweeps):
        off = math.fsum(a[i][j] * a[i][j] for i in range(n) for j in range(n) if i != j)
        scale = math.fsum(a[i][i] * a[i][i] for i in range(n))
        if off <= 1e-32 * scale or off == 0.0:
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                if a[p][q] == 0.0:
                    continue
                theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q])
                t = math.copysign(1.0, theta) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(n):  # columns p and q
                    akp, akq = a[k][p], a[k][q]
                    a[k][p], a[k][q] = c * akp - s * akq, s * akp + c * akq
                for k in range(n):  # rows p and q
                    apk, aqk = a[p][k], a[q][k]
                    a[p][k], a[q][k] = c * apk - s * aqk, s * apk + c * aqk
                for k in range(n):
                    vkp, vkq = vectors[k][p], vectors[k][q]
                    vectors[k][p], vectors[k][q] = c * vkp - s * vkq, s * vkp + c * vkq
    return [a[i][i] for i in range(n)], vectors


def pseudo_inverse_form(matrix: Matrix, vector: Sequence[float]) -> tuple[int, float]:
    """(rank, v' M^+ v) of a symmetric positive semi-definite M, eigenvalues below max * n * eps as zero
    (the tolerance of numpy's matrix_rank)."""
    values, vectors = symmetric_eigen(matrix)
    n = len(values)
    largest = max((abs(value) for value in values), default=0.0)
    tolerance = largest * n * np.finfo(np.float64).eps
    rank, terms = 0, []
    for index, value in enumerate(values):
        if abs(value) <= tolerance:
            continue
        rank += 1
        projection = math.fsum(vectors[k][index] * vector[k] for k in range(n))
        terms.append(projection * projection / value)
    return rank, math.fsum(terms)


def congruence(contrasts: Matrix, matrix: Matrix) -> Matrix:
    """C M C' for a small C and M, each entry an exactly rounded sum."""
    rows, inner = len(contrasts), len(matrix)
    left = [[math.fsum(row[k] * matrix[k][j] for k in range(inner)) for j in range(inner)] for row in contrasts]
    return [[math.fsum(left[i][k] * contrasts[j][k] for k in range(inner)) for j in range(rows)] for i in range(rows)]
