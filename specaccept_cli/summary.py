"""`Summary`: everything the tool reports, built from additive counters.

The state is a joint histogram of (draft length k, accepted length a) over runs,
plus a few token-level sums. Every estimate (alpha, rates, tokens per pass, and
later per-position rates, variances, histograms) is a function of that state, and
two summaries add by adding their states: summarising shards apart and merging
them gives exactly the summary of the whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from specaccept_cli.audit import ReportedTally, SamplerTally
from specaccept_cli.vectorized import THRESHOLD_SCALE, BatchOutcome

SCHEMA = "specaccept.summary/1"

CountMatrix = npt.NDArray[np.int64]


Tally = TypeVar("Tally", ReportedTally, SamplerTally)


def _add_optional(left: Tally | None, right: Tally | None) -> Tally | None:
    """Audit tallies add like the rest; a side without one contributes nothing."""
    if left is None:
        return right
    if right is None:
        return left
    return left + right


def _optional_dict(tally: ReportedTally | None) -> dict[str, Any] | None:
    return None if tally is None else tally.to_dict()


def _empty_counts() -> CountMatrix:
    return np.zeros((1, 1), dtype=np.int64)


def _pad(counts: CountMatrix, size: int) -> CountMatrix:
    if counts.shape[0] == size:
        return counts
    padded = np.zeros((size, size), dtype=np.int64)
    n = counts.shape[0]
    padded[:n, :n] = counts
    return padded


@dataclass
class Summary:
    """Additive state of an audit; `a + b` is the summary of both inputs."""

    # counts[k, a] = number of runs that drafted k tokens and accepted a of them.
    counts: CountMatrix = field(default_factory=_empty_counts)
    passing_tokens: int = 0
    threshold_sum_fixed: int = 0  # sum of min(1, p/q) over drafted tokens, x THRESHOLD_SCALE
    sampled_tokens: int = 0  # drafted tokens with a logged (p, q, r): all of them, or 0 for greedy logs
    # Audits of the server, present when asked for (--reported-field, --check-sampler).
    reported: ReportedTally | None = None
    sampler: SamplerTally | None = None

    @classmethod
    def of_outcome(cls, outcome: BatchOutcome) -> Summary:
        size = int(outcome.k.max()) + 1 if outcome.k.shape[0] else 1
        flat = np.bincount(outcome.k * size + outcome.accepted, minlength=size * size)
        return cls(
            counts=flat.astype(np.int64).reshape(size, size),
            passing_tokens=outcome.passing_tokens,
            threshold_sum_fixed=outcome.threshold_sum_fixed,
            sampled_tokens=outcome.sampled_tokens,
        )

    def __add__(self, other: Summary) -> Summary:
        size = max(self.counts.shape[0], other.counts.shape[0])
        return Summary(
            counts=_pad(self.counts, size) + _pad(other.counts, size),
            passing_tokens=self.passing_tokens + other.passing_tokens,
            threshold_sum_fixed=self.threshold_sum_fixed + other.threshold_sum_fixed,
            sampled_tokens=self.sampled_tokens + other.sampled_tokens,
            reported=_add_optional(self.reported, other.reported),
            sampler=_add_optional(self.sampler, other.sampler),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Summary):
            return NotImplemented
        size = max(self.counts.shape[0], other.counts.shape[0])
        return (
            bool(np.array_equal(_pad(self.counts, size), _pad(other.counts, size)))
            and self.passing_tokens == other.passing_tokens
            and self.threshold_sum_fixed == other.threshold_sum_fixed
            and self.sampled_tokens == other.sampled_tokens
            and _optional_dict(self.reported) == _optional_dict(other.reported)
            and self.sampler == other.sampler
        )

    # --- counters -------------------------------------------------------------------

    @property
    def max_k(self) -> int:
        nonzero = np.flatnonzero(self.counts.sum(axis=1))
        return int(nonzero[-1]) if nonzero.shape[0] else 0

    def _grid(self) -> tuple[CountMatrix, CountMatrix]:
        size = self.counts.shape[0]
        k, a = np.indices((size, size), dtype=np.int64)
        return k, a

    @property
    def runs(self) -> int:
        return int(self.counts.sum())

    @property
    def drafted_tokens(self) -> int:
        k, _ = self._grid()
        return int((k * self.counts).sum())

    @property
    def accepted_tokens(self) -> int:
        _, a = self._grid()
        return int((a * self.counts).sum())

    @property
    def examined_tokens(self) -> int:
        """Tokens actually tested: a + 1 per run when it stopped at a rejection, else k."""
        k, a = self._grid()
        return int((np.minimum(a + 1, k) * self.counts).sum())

    # --- estimates (None when there is nothing to estimate from) -------------------------

    @property
    def alpha(self) -> float | None:
        """Maximum-likelihood per-token acceptance: accepted / examined."""
        examined = self.examined_tokens
        return self.accepted_tokens / examined if examined else None

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / drafted: what vLLM reports; biased low as an estimate of alpha."""
        drafted = self.drafted_tokens
        return self.accepted_tokens / drafted if drafted else None

    @property
    def mean_accepted(self) -> float | None:
        runs = self.runs
        return self.accepted_tokens / runs if runs else None

    @property
    def tokens_per_pass(self) -> float | None:
        """Tokens emitted per target pass: a + 1 per run, averaged."""
        runs = self.runs
        return (self.accepted_tokens + runs) / runs if runs else None

    @property
    def expected_alpha(self) -> float | None:
        sampled = self.sampled_tokens
        return self.threshold_sum_fixed / THRESHOLD_SCALE / sampled if sampled else None

    # --- uncertainty: variances over runs, not tokens ---------------------------------------
    # Tokens of one run share a context, so they are not independent draws; the run is
    # the independent unit. Both standard errors below treat runs as i.i.d. samples.

    def _run_moments(self) -> tuple[float, float, float]:
        """Sums over runs of a^2, e^2 and a*e (e = examined tokens of the run)."""
        k, a = self._grid()
        examined = np.minimum(a + 1, k)
        counts = self.counts
        return (
            float((a * a * counts).sum()),
            float((examined * examined * counts).sum()),
            float((a * examined * counts).sum()),
        )

    @property
    def alpha_standard_error(self) -> float | None:
        """Delta-method (ratio estimator) standard error of alpha = sum(a) / sum(e), over runs.

        Var(alpha) ~= n / (n - 1) * sum_j (a_j - alpha e_j)^2 / (sum_j e_j)^2.
        None with fewer than two runs or nothing examined.
        """
        runs, examined, alpha = self.runs, self.examined_tokens, self.alpha
        if runs < 2 or alpha is None:
            return None
        sum_aa, sum_ee, sum_ae = self._run_moments()
        residual = max(0.0, sum_aa - 2 * alpha * sum_ae + alpha * alpha * sum_ee)
        return float(np.sqrt(runs / (runs - 1) * residual) / examined)

    @property
    def tokens_per_pass_standard_error(self) -> float | None:
        """Standard error of the mean of (a + 1) over runs (sample variance / n)."""
        runs = self.runs
        if runs < 2:
            return None
        sum_aa, _, _ = self._run_moments()
        mean = self.accepted_tokens / runs
        variance = max(0.0, (sum_aa - runs * mean * mean) / (runs - 1))
        return float(np.sqrt(variance / runs))

    # --- machine format -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        nonzero = np.argwhere(self.counts)
        joint = [[int(k), int(a), int(self.counts[k, a])] for k, a in nonzero]
        result: dict[str, Any] = {
            "schema": SCHEMA,
            "runs": self.runs,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "examined_tokens": self.examined_tokens,
            "alpha": self.alpha,
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted": self.mean_accepted,
            "tokens_per_pass": self.tokens_per_pass,
        }
        state: dict[str, Any] = {
            "joint_counts": joint,
            "passing_tokens": self.passing_tokens,
            "threshold_sum_fixed": self.threshold_sum_fixed,
            "sampled_tokens": self.sampled_tokens,
            "threshold_scale": THRESHOLD_SCALE,
        }
        if self.reported is not None:
            result |= self.reported.summary_keys()
            state["reported"] = self.reported.to_dict()
        if self.sampler is not None:
            result |= self.sampler.summary_keys()
            state["sampler"] = self.sampler.to_dict()
        result["state"] = state
        return result

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """Rebuild the additive state from a `to_dict()` object (a saved summary or baseline).

        Raises ValueError when the object is not a specaccept summary this version can read.
        """
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} object (schema: {data.get('schema')!r})")
        try:
            state = data["state"]
            if state.get("threshold_scale", THRESHOLD_SCALE) != THRESHOLD_SCALE:
                raise ValueError("threshold_scale differs from this version's")
            joint = [(int(k), int(a), int(n)) for k, a, n in state["joint_counts"]]
            if any(k < 0 or a < 0 or a > k or n < 0 for k, a, n in joint):
                raise ValueError("joint_counts holds an impossible (k, accepted, runs) triple")
            size = max((k for k, _, _ in joint), default=0) + 1
            counts = np.zeros((size, size), dtype=np.int64)
            for k, a, n in joint:
                counts[k, a] += n
            return cls(
                counts=counts,
                passing_tokens=int(state["passing_tokens"]),
                threshold_sum_fixed=int(state["threshold_sum_fixed"]),
                sampled_tokens=int(state["sampled_tokens"]),
                reported=ReportedTally.from_dict(state["reported"]) if "reported" in state else None,
                sampler=SamplerTally.from_dict(state["sampler"]) if "sampler" in state else None,
            )
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise ValueError(f"summary state is incomplete or malformed ({exc!r})") from None
