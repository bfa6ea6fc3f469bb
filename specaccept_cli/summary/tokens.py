"""What the logged (p, q, r) values themselves look like: the evidence for the impossible-log checks.

A log whose fields are swapped, or filled by a placeholder, still runs through the exact rule and gives
figures that look like any other. These tallies keep what such logs betray, additively and exactly
(counts add; minima and maxima merge by min and max), so a merged or saved summary says the same:

- how many logged tokens had p <= q (all of them: the target never favoured a drafted token more than
  the draft did, which swapped p and q fields give from a log where the draft was the sharper model);
- the range of p and of q over every token (one value throughout: a constant written in place of a
  probability);
- per draft position, the range of r over the runs that drafted it (one value at every position across
  many runs: the uniforms were not drawn afresh for each run, so acceptance was not random);
- the sum of min(p/q, 2) over the tokens, in fixed point (`RATIO_SCALE` steps, rounded down, so the sum
  is an exact integer that adds in any order). A drafted token x is drawn from q, so E[p(x)/q(x)] is the
  target's mass on the draft's support, at most 1, given everything before it, for any pair of models,
  any temperature and any truncation applied alike to the logged q and to the draft's sampling. Capped
  at 2 and rounded down, the mean only falls. Swapped fields give E[q/p] = sum q^2/p >= 1 (Cauchy-Schwarz)
  instead, and a draft whose tokens were not drawn from the logged q (a greedy argmax logged with its
  softmax q) is not bound at all: `mean_ratio_limit` is the level an honest log stays under but for a
  one-in-a-million chance.

q = 1 on every token is the `greedy_draft` fingerprint's (`Summary.one_hot_draft_tokens`).
Computed with numpy for each batch of (p, q, r) runs (`summary.evaluate.evaluate_batch`); greedy batches,
which log no q or r, add nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from msgspec import Struct

if TYPE_CHECKING:
    from specaccept_cli.rule.batch import RunBatch


RATIO_SCALE = 1 << 16  # fixed-point steps of min(p/q, 2)
RATIO_CAP = 2.0
RATIO_SLACK = 0.01  # room for probabilities logged in reduced precision (bf16 p and q: ~0.4% each)
RATIO_RISK = 1e-6  # chance an honest log crosses the limit, by Azuma-Hoeffding


class TokenTally(Struct, frozen=True):
    """Additive facts about the logged tokens (see the module doc)."""

    tokens: int
    p_at_most_q: int
    p_range: tuple[float, float]
    q_range: tuple[float, float]
    # r_low[j], r_high[j]: the smallest and largest r at draft position j + 1; r_runs[j] the runs that drafted it
    r_low: tuple[float, ...]
    r_high: tuple[float, ...]
    r_runs: tuple[int, ...]
    ratio_fixed: int | None = None  # sum of floor(min(p/q, 2) * RATIO_SCALE); None: a file from before it

    @classmethod
    def of_batch(cls, batch: RunBatch) -> TokenTally | None:
        p, q, r, offsets = batch.p, batch.q, batch.r, batch.offsets
        if p.shape[0] == 0:
            return None
        starts, k = offsets[:-1], np.diff(offsets)
        low, high, runs = [], [], []
        for position in range(int(k.max())):
            at = starts[k > position] + position
            values = r[at]
            low.append(float(values.min()))
            high.append(float(values.max()))
            runs.append(int(at.shape[0]))
        with np.errstate(over="ignore"):  # a subnormal q makes p/q overflow to inf, which the cap makes 2
            ratios = np.minimum(p / q, RATIO_CAP)
        return cls(
            tokens=int(p.shape[0]),
            p_at_most_q=int(np.count_nonzero(p <= q)),
            p_range=(float(p.min()), float(p.max())),
            q_range=(float(q.min()), float(q.max())),
            r_low=tuple(low),
            r_high=tuple(high),
            r_runs=tuple(runs),
            ratio_fixed=int(np.floor(ratios * RATIO_SCALE).sum(dtype=np.int64)),
        )

    def __add__(self, other: TokenTally) -> TokenTally:
        size = max(len(self.r_runs), len(other.r_runs))

        def padded(values: tuple[Any, ...], fill: Any) -> list[Any]:
            return list(values) + [fill] * (size - len(values))

        return TokenTally(
            tokens=self.tokens + other.tokens,
            p_at_most_q=self.p_at_most_q + other.p_at_most_q,
            p_range=(min(self.p_range[0], other.p_range[0]), max(self.p_range[1], other.p_range[1])),
            q_range=(min(self.q_range[0], other.q_range[0]), max(self.q_range[1], other.q_range[1])),
            r_low=tuple(map(min, padded(self.r_low, math.inf), padded(other.r_low, math.inf))),
            r_high=tuple(map(max, padded(self.r_high, -math.inf), padded(other.r_high, -math.inf))),
            r_runs=tuple(a + b for a, b in zip(padded(self.r_runs, 0), padded(other.r_runs, 0))),
            ratio_fixed=None
            if self.ratio_fixed is None or other.ratio_fixed is None
            else self.ratio_fixed + other.ratio_fixed,
        )

    def mean_ratio(self) -> float | None:
        """The mean of min(p/q, 2) over the logged tokens (rounded down to RATIO_SCALE steps)."""
        if self.ratio_fixed is None or self.tokens == 0:
            return None
        return self.ratio_fixed / RATIO_SCALE / self.tokens

    def mean_ratio_limit(self) -> float:
        """The mean an honest log stays at or under, but with chance RATIO_RISK: 1 + RATIO_SLACK plus the
        Azuma-Hoeffding margin for terms in [0, RATIO_CAP], cap * sqrt(ln(1 / risk) / (2 n))."""
        return 1.0 + RATIO_SLACK + RATIO_CAP * math.sqrt(math.log(1.0 / RATIO_RISK) / (2 * max(1, self.tokens)))

    def r_repeated(self) -> tuple[int, int] | None:
        """(positions, runs) when every draft position drafted by two runs or more holds one r value in all
        of them (None otherwise): runs is how many drafted the first position."""
        shared = [index for index, runs in enumerate(self.r_runs) if runs >= 2]
        if not shared or any(self.r_low[index] != self.r_high[index] for index in shared):
            return None
        return len(shared), self.r_runs[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "p_at_most_q": self.p_at_most_q,
            "p_range": list(self.p_range),
            "q_range": list(self.q_range),
            "r_low": list(self.r_low),
            "r_high": list(self.r_high),
            "r_runs": list(self.r_runs),
            **({} if self.ratio_fixed is None else {"ratio_fixed": self.ratio_fixed}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenTally:
        """The tally as `to_dict` wrote it; ValueError on anything else (a hand-edited file)."""

        def whole(value: object) -> int:
            if type(value) is not int or value < 0:
                raise ValueError(f"tokens tally: {value!r} is not a count")
            return value

        def number(value: object) -> float:
            if type(value) not in (int, float) or not math.isfinite(float(value)):  # type: ignore[arg-type]
                raise ValueError(f"tokens tally: {value!r} is not a finite number")
            return float(value)  # type: ignore[arg-type]

        def pair(value: object) -> tuple[float, float]:
            if not isinstance(value, list) or len(value) != 2:
                raise ValueError("tokens tally: a range is two numbers")
            low, high = number(value[0]), number(value[1])
            if low > high:
                raise ValueError("tokens tally: a range's low end is above its high end")
            return low, high

        r_low, r_high, r_runs = data["r_low"], data["r_high"], data["r_runs"]
        if not (isinstance(r_low, list) and isinstance(r_high, list) and isinstance(r_runs, list)):
            raise ValueError("tokens tally: r_low, r_high and r_runs are lists")
        if not len(r_low) == len(r_high) == len(r_runs):
            raise ValueError("tokens tally: r_low, r_high and r_runs differ in length")
        tally = cls(
            tokens=whole(data["tokens"]),
            p_at_most_q=whole(data["p_at_most_q"]),
            p_range=pair(data["p_range"]),
            q_range=pair(data["q_range"]),
            r_low=tuple(number(value) for value in r_low),
            r_high=tuple(number(value) for value in r_high),
            r_runs=tuple(whole(value) for value in r_runs),
            ratio_fixed=whole(data["ratio_fixed"]) if "ratio_fixed" in data else None,
        )
        if tally.p_at_most_q > tally.tokens:
            raise ValueError("tokens tally: more tokens with p <= q than tokens")
        if tally.ratio_fixed is not None and tally.ratio_fixed > tally.tokens * int(RATIO_CAP * RATIO_SCALE):
            raise ValueError("tokens tally: ratio_fixed is above its cap on every token")
        if tally.ratio_fixed is not None and tally.ratio_fixed < (tally.tokens - tally.p_at_most_q) * RATIO_SCALE:
            raise ValueError("tokens tally: ratio_fixed is below one step a token where p > q")
        return tally
