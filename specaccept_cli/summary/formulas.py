"""Closed forms of the i.i.d. model (Leviathan et al. 2023): no imports, no I/O."""

from __future__ import annotations

K_MAX = 32  # longest draft the best-k search considers


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """E[tokens per target pass] = (1 - alpha^(k+1)) / (1 - alpha); k + 1 when alpha = 1."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, cost_ratio: float) -> float:
    """Walltime improvement with c = draft step time / target step time."""
    return expected_tokens_per_pass(alpha, k) / (k * cost_ratio + 1.0)


def optimal_k(alpha: float, cost_ratio: float, k_max: int = K_MAX) -> int:
    """The k in 1..k_max that maximises the expected speedup (no closed form exists)."""
    return max(range(1, k_max + 1), key=lambda k: expected_speedup(alpha, k, cost_ratio))


def expectation(alpha: float, k: int, cost_ratio: float | None = None) -> dict[str, float]:
    """One row of the `expect` calculator: {"alpha", "k", "tokens_per_pass", "speedup"?}."""
    row: dict[str, float] = {"alpha": alpha, "k": k, "tokens_per_pass": expected_tokens_per_pass(alpha, k)}
    if cost_ratio is not None:
        row["speedup"] = expected_speedup(alpha, k, cost_ratio)
    return row
