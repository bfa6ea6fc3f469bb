"""The accept rule, scalar: the reference routine, exactly.

Kept free of numpy so that `specaccept check` starts as fast as click itself.
The vectorized twin lives in `vectorized.py` and is property-tested against this.
"""

from __future__ import annotations

from collections.abc import Sequence


def threshold(p: float, q: float) -> float:
    """Probability that a drafted token is kept: min(1, p / q). The rule's one test is r <= this."""
    return min(1.0, p / q)


def accept_prefix(p: Sequence[float], q: Sequence[float], r: Sequence[float]) -> int:
    """Length of the accepted prefix: token i is kept iff r[i] <= min(1, p[i]/q[i]).

    The scan stops at the first rejection (a token after a rejected one continues a
    prefix the output will never contain). An empty draft accepts 0 tokens.
    Inputs are assumed valid (see `validate.py`); q must be > 0.
    """
    accepted = 0
    for i in range(len(p)):
        if r[i] <= threshold(p[i], q[i]):
            accepted += 1
        else:
            break
    return accepted


def kept_flags(p: Sequence[float], q: Sequence[float], r: Sequence[float]) -> list[bool]:
    """Whether each token passes its own test, regardless of the prefix (what `check --explain` shows)."""
    return [r[i] <= threshold(p[i], q[i]) for i in range(len(p))]
