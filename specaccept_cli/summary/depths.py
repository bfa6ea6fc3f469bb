"""`DepthTally`: per depth, what a sandwich variance over requests needs from engines' accepted-depth histograms.

An engine that reports each request's accepted-length histogram (SGLang's `spec_correct_drafts_histogram`) and
serves a tree gives, for request i and depth d, reached_i(d) = passes that kept at least d - 1 drafts and
kept_i(d) = passes that kept at least d. The conditional rate c_d = sum kept / sum reached is exact; its
variance over requests (the cluster sandwich, as every other interval) needs only the sums of kept^2,
reached^2 and kept x reached over requests besides the sums themselves, so the tally stays additive and as
small as the tree is deep, however many requests are read. A request read in two shards counts as two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import Struct

PARTS = ("kept", "reached", "kept_squares", "reached_squares", "cross")
LARGEST = 2**63 - 1  # a saved count beyond a signed 64-bit integer is no count a log could give


def _added(left: Sequence[int], right: Sequence[int]) -> tuple[int, ...]:
    size = max(len(left), len(right))
    return tuple((left[d] if d < len(left) else 0) + (right[d] if d < len(right) else 0) for d in range(size))


class DepthTally(Struct, frozen=True):
    """Sums over requests, per depth d = 1, 2, ... (index d - 1), of kept_i(d), reached_i(d), their squares and
    their product; `requests` the requests (clusters) behind them."""

    requests: int = 0
    kept: tuple[int, ...] = ()
    reached: tuple[int, ...] = ()
    kept_squares: tuple[int, ...] = ()
    reached_squares: tuple[int, ...] = ()
    cross: tuple[int, ...] = ()

    @classmethod
    def of_histogram(cls, histogram: Sequence[int]) -> DepthTally:
        """One request's tally from its histogram (histogram[a] = passes that accepted exactly a drafts)."""
        at_least = [sum(histogram[d:]) for d in range(len(histogram))]
        kept = tuple(at_least[1:])
        reached = tuple(at_least[:-1])
        return cls(
            1,
            kept,
            reached,
            tuple(k * k for k in kept),
            tuple(r * r for r in reached),
            tuple(k * r for k, r in zip(kept, reached, strict=True)),
        )

    def __add__(self, other: DepthTally) -> DepthTally:
        return DepthTally(
            self.requests + other.requests, *(_added(getattr(self, name), getattr(other, name)) for name in PARTS)
        )

    @property
    def passes(self) -> int:
        """Verify passes behind the tally: every pass reached depth 0."""
        return self.reached[0] if self.reached else 0

    def rate_error(self, depth: int) -> tuple[float, float] | None:
        """c_d and its standard error over requests (CR1: the sandwich times G / (G - 1)); None where no pass
        reached d - 1 or fewer than two requests were read."""
        index = depth - 1
        if index >= len(self.reached) or not self.reached[index] or self.requests < 2:
            return None
        reached = self.reached[index]
        rate = self.kept[index] / reached
        spread = self.kept_squares[index] - 2 * rate * self.cross[index] + rate * rate * self.reached_squares[index]
        variance = max(0.0, spread) / (reached * reached) * self.requests / (self.requests - 1)
        return rate, variance**0.5

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, **{name: list(getattr(self, name)) for name in PARTS}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DepthTally:
        """What `to_dict` wrote; ValueError on anything that is not a list of counts of one length."""
        requests = data.get("requests")
        if type(requests) is not int or not 0 <= requests <= LARGEST:
            raise ValueError("depths: 'requests' must be a whole number")
        parts = []
        for name in PARTS:
            values = data.get(name)
            if not isinstance(values, list) or any(type(n) is not int or not 0 <= n <= LARGEST for n in values):
                raise ValueError(f"depths: {name!r} must be a list of whole numbers below 2**63")
            parts.append(tuple(values))
        if len({len(part) for part in parts}) > 1:
            raise ValueError("depths: its lists differ in length")
        return cls(requests, *parts)
