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


def _run_moments(alpha: float, k: int) -> tuple[float, float, float, float, float]:
    """(E a, E a^2, E e, E e^2, E a e) for one run of draft length k under the i.i.d. model: a accepted, with
    P(a = j) = alpha^j (1 - alpha) below k and alpha^k at k; e = min(a + 1, k) tokens examined."""
    moments = [0.0] * 5
    for accepted in range(k + 1):
        chance = alpha**accepted * ((1.0 - alpha) if accepted < k else 1.0)
        examined = min(accepted + 1, k)
        for index, value in enumerate(
            (accepted, accepted * accepted, examined, examined * examined, accepted * examined)
        ):
            moments[index] += chance * value
    return moments[0], moments[1], moments[2], moments[3], moments[4]


def run_variance(alpha: float, runs_by_k: tuple[int, ...], metric: str) -> float | None:
    """The i.i.d. model's variance per run of a metric's estimate over runs of this draft-length mix: for
    "alpha" (accepted / examined) the linearised ratio's E[(a - alpha e)^2] / E[e]^2, for "tokens_per_pass"
    (1 + accepted / runs) Var(a). None when the mix has no drafted runs or the variance is 0."""
    total = sum(count for k, count in enumerate(runs_by_k) if k > 0)
    if total <= 0 or not 0.0 <= alpha <= 1.0:
        return None
    mean = [0.0] * 5
    for k, count in enumerate(runs_by_k):
        if k > 0 and count:
            for index, value in enumerate(_run_moments(alpha, k)):
                mean[index] += value * count / total
    a, a2, e, e2, ae = mean
    if metric == "alpha":
        ratio = a / e
        variance = (a2 - 2.0 * ratio * ae + ratio * ratio * e2) / (e * e)
    else:
        variance = a2 - a * a
    return variance if variance > 0.0 else None


def tokens_per_pass_of(alpha: float, runs_by_k: tuple[int, ...]) -> float:
    """E[tokens per pass] over runs of this draft-length mix (each run with its own k, runs of k = 0 one token),
    under the i.i.d. model: the mean of `expected_tokens_per_pass`; 1 for no runs."""
    runs = sum(runs_by_k)
    total = sum(count * expected_tokens_per_pass(alpha, k) for k, count in enumerate(runs_by_k) if count)
    return total / runs if runs else 1.0


def alpha_of_tokens_per_pass(tokens_per_pass: float, runs_by_k: tuple[int, ...]) -> float:
    """The i.i.d. alpha whose tokens per pass over this mix is `tokens_per_pass` (clamped to [0, 1]), by bisection."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2.0
        if tokens_per_pass_of(middle, runs_by_k) < tokens_per_pass:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0
