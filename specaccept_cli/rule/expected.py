"""Expected tokens per target pass, by rule: the chain's closed form, block verification's floor, a tree's depths.

Every pass emits its accepted length plus one token, so E[tokens per pass] = 1 + sum over d of
P(accepted >= d) = 1 + c_1 + c_1 c_2 + ... with c_d the conditional rate P(accepted >= d | accepted >= d - 1).
- A chain under the i.i.d. model has c_d = alpha at every position: (1 - alpha^(k+1)) / (1 - alpha).
- Block verification keeps at least as many tokens on average as the chain rule on the same drafts (Sun et
  al. 2025, Theorem 2), so the chain's figure at the token-level alpha is a lower bound for it; how much more
  it keeps depends on the distributions, not on alpha alone: measure it from its logs.
- A tree's per-depth rates come from its accepted-depth histogram (or its own model); a chain's alpha says
  nothing about a tree.
"""

from __future__ import annotations

from collections.abc import Sequence


def tokens_per_pass(conditional_rates: Sequence[float]) -> float:
    """1 + c_1 + c_1 c_2 + ...: expected tokens per pass from per-depth conditional rates."""
    total, reach = 1.0, 1.0
    for rate in conditional_rates:
        reach *= rate
        total += reach
    return total


def chain_tokens_per_pass(alpha: float, k: int) -> float:
    """(1 - alpha^(k+1)) / (1 - alpha); k + 1 when alpha = 1 (the i.i.d. chain model)."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def conditional_rates(depth_histogram: Sequence[int]) -> list[float | None]:
    """Per-depth conditional rates from an accepted-depth histogram (h[d] = steps that accepted exactly d):
    c_d = (steps reaching depth d) / (steps reaching depth d - 1); None where no step reached d - 1.

    With a fixed tree every step could reach every depth, so these are exact; a histogram shorter than the
    tree's depth leaves the deeper rates unknown (no step reached them), not zero.
    """
    reached = [sum(depth_histogram[d:]) for d in range(len(depth_histogram))]
    return [reached[d] / reached[d - 1] if reached[d - 1] else None for d in range(1, len(depth_histogram))]
