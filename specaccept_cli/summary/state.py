"""`Summary`: everything the tool reports, built from additive counters.

The state is a joint histogram of (draft length k, accepted length a) over runs,
plus a few token-level sums. Every estimate (alpha, rates, tokens per pass, and
later per-position rates, variances, histograms) is a function of that state, and
two summaries add by adding their states: summarising shards apart and merging
them gives exactly the summary of the whole.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import orjson

from specaccept_cli.rule.vectorized import THRESHOLD_SCALE, BatchOutcome
from specaccept_cli.summary import formulas
from specaccept_cli.summary.conventions import engine_conventions
from specaccept_cli.summary.server import ReportedTally, SamplerTally

SCHEMA = "specaccept.summary/1"

Z_95 = 1.959963984540054  # two-sided 95% normal quantile
CONSISTENT_Z = 3.0  # |observed - predicted| / standard error above this: the i.i.d. model does not explain the logs

CountMatrix = npt.NDArray[np.int64]

MAX_KEPT_ERRORS = 20  # the first errors a summary keeps, in input order; the rest are only counted


@dataclass(frozen=True)
class SkippedRow:
    """One input problem kept in a summary: where (`line` is None for a whole source) and what."""

    source: str
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "message": self.message}


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


@functools.lru_cache(maxsize=64)
def _grid_of_size(size: int) -> tuple[CountMatrix, CountMatrix]:
    """k and a index grids of a size x size count matrix (read-only, shared)."""
    k, a = np.indices((size, size), dtype=np.int64)
    k.flags.writeable = False
    a.flags.writeable = False
    return k, a


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
    # With --group-by: the field's dotted path and one summary per group key (see `group_key`).
    # The whole summary above still covers every run; groups split the same runs.
    group_by: str | None = None
    groups: dict[str, Summary] | None = None
    # Input skipped under `--on-error skip`: additive counters, and the first MAX_KEPT_ERRORS problems
    # in input order (merging keeps the first ones of `a`, then of `b`).
    skipped_rows: int = 0
    skipped_sources: int = 0  # sources abandoned whole or part-way (unreadable, corrupt stream)
    errors: tuple[SkippedRow, ...] = ()

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
        group_by, groups = _merge_groups(self, other)
        return Summary(
            counts=_pad(self.counts, size) + _pad(other.counts, size),
            passing_tokens=self.passing_tokens + other.passing_tokens,
            threshold_sum_fixed=self.threshold_sum_fixed + other.threshold_sum_fixed,
            sampled_tokens=self.sampled_tokens + other.sampled_tokens,
            reported=_add_optional(self.reported, other.reported),
            sampler=_add_optional(self.sampler, other.sampler),
            group_by=group_by,
            groups=groups,
            skipped_rows=self.skipped_rows + other.skipped_rows,
            skipped_sources=self.skipped_sources + other.skipped_sources,
            errors=(self.errors + other.errors)[:MAX_KEPT_ERRORS],
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
            and self.group_by == other.group_by
            and self.groups == other.groups
            and self.skipped_rows == other.skipped_rows
            and self.skipped_sources == other.skipped_sources
            and self.errors == other.errors
        )

    # --- counters -------------------------------------------------------------------

    @property
    def max_k(self) -> int:
        nonzero = np.flatnonzero(self.counts.sum(axis=1))
        return int(nonzero[-1]) if nonzero.shape[0] else 0

    def _grid(self) -> tuple[CountMatrix, CountMatrix]:
        return _grid_of_size(self.counts.shape[0])

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
        """Mean of min(1, p/q) over every drafted token with a logged (p, q): an r-free estimate of alpha."""
        sampled = self.sampled_tokens
        return self.threshold_sum_fixed / THRESHOLD_SCALE / sampled if sampled else None

    @property
    def runs_by_k(self) -> CountMatrix:
        """runs_by_k[k] = number of runs that drafted k tokens (the k marginal of counts)."""
        by_k: CountMatrix = self.counts.sum(axis=1)
        return by_k

    @property
    def accepted_histogram(self) -> dict[str, int]:
        """Runs by accepted length, "0" .. str(max_k), zeros included (JSON keys are strings)."""
        by_accepted = self.counts.sum(axis=0)
        return {str(a): int(by_accepted[a]) for a in range(self.max_k + 1)}

    @property
    def tokens_per_pass_predicted(self) -> float | None:
        """What the i.i.d. model predicts for these runs: mean over runs of (1 - alpha^(k+1)) / (1 - alpha).

        alpha is the estimate above; each run keeps its own draft length k. Equal to the
        observed tokens per pass (within its standard error) when tokens pass independently
        with one probability.
        """
        alpha, runs = self.alpha, self.runs
        if alpha is None or not runs:
            return None
        by_k = self.runs_by_k
        total = sum(int(n) * formulas.expected_tokens_per_pass(alpha, k) for k, n in enumerate(by_k.tolist()) if n)
        return total / runs

    @property
    def alpha_ci(self) -> tuple[float, float] | None:
        """95% interval for alpha: alpha +- 1.96 standard errors (delta method over runs), clamped to [0, 1]."""
        alpha, error = self.alpha, self.alpha_standard_error
        if alpha is None or error is None:
            return None
        return max(0.0, alpha - Z_95 * error), min(1.0, alpha + Z_95 * error)

    @property
    def iid_check(self) -> dict[str, Any] | None:
        """Does the i.i.d. model explain the logs? Compares observed and predicted tokens per pass.

        z = (observed - predicted) / standard error of the observed mean (over runs). The
        prediction is fitted on the same runs, so this error is if anything too large and the
        test errs towards "consistent"; |z| > 3 is a clear misfit (e.g. acceptance that falls
        with the position in the draft, or a sampler bug).
        """
        observed, predicted, error = (
            self.tokens_per_pass,
            self.tokens_per_pass_predicted,
            self.tokens_per_pass_standard_error,
        )
        if observed is None or predicted is None or error is None:
            return None
        difference = observed - predicted
        if error == 0.0:
            z = 0.0 if abs(difference) < 1e-9 else float("inf") if difference > 0 else float("-inf")
        else:
            z = difference / error
        return {
            "difference": difference,
            "standard_error": error,
            "z": z if np.isfinite(z) else None,
            "consistent": bool(abs(z) <= CONSISTENT_Z),
        }

    @property
    def per_position(self) -> list[dict[str, Any]]:
        """One object per 1-based draft position j = 1 .. max_k.

        drafts: runs with k >= j; reached: runs that tested token j (a >= j - 1 and k >= j);
        accepted: runs that kept it (a >= j). rate = accepted / reached is the conditional rate
        (EAGLE's); unconditional_rate = accepted / drafts is vLLM's per-position rate.
        """
        counts = self.counts
        # at_least_k[j] = runs with k >= j; at_least_a[j] = runs with a >= j;
        # at_least_both[j] = runs with k >= j and a >= j - 1 (a = k when all kept, so a >= j - 1 and k >= j
        # is every run with a >= j - 1 except those that drafted exactly j - 1 and kept them all).
        at_least_k = np.cumsum(counts.sum(axis=1)[::-1])[::-1]
        at_least_a = np.cumsum(counts.sum(axis=0)[::-1])[::-1]
        all_kept = np.diagonal(counts)
        rows = []
        for position in range(1, self.max_k + 1):
            drafts = int(at_least_k[position])
            reached = int(at_least_a[position - 1] - all_kept[position - 1])
            accepted = int(at_least_a[position])
            rows.append(
                {
                    "position": position,
                    "drafts": drafts,
                    "reached": reached,
                    "accepted": accepted,
                    "rate": accepted / reached if reached else None,
                    "unconditional_rate": accepted / drafts if drafts else None,
                }
            )
        return rows

    @property
    def conventions(self) -> dict[str, dict[str, Any]]:
        """What vLLM, SGLang, llama.cpp, Spec-Bench and EAGLE would report on these runs."""
        return engine_conventions(self)

    # --- cost model: with c = draft step time / target step time ---------------------------

    @property
    def emitted_tokens(self) -> int:
        """Tokens the target passes emitted: a + 1 per run."""
        return self.accepted_tokens + self.runs

    def speedup(self, cost_ratio: float) -> float | None:
        """Observed walltime improvement: sum(a + 1) / sum(k c + 1) over runs."""
        runs = self.runs
        if not runs:
            return None
        return self.emitted_tokens / (self.drafted_tokens * cost_ratio + runs)

    def optimal_k(self, cost_ratio: float) -> int | None:
        """The k in 1..32 the i.i.d. model at the estimated alpha finds fastest."""
        alpha = self.alpha
        return None if alpha is None else formulas.optimal_k(alpha, cost_ratio)

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

    def to_dict(self, cost_ratio: float | None = None) -> dict[str, Any]:
        """The machine format: derived keys, then `groups` when grouped, then `state` (always last).

        `cost_ratio` is a question, not data: it adds `cost_ratio`, `speedup` and `optimal_k`
        (to every group too) and is not part of the state.
        """
        nonzero = np.argwhere(self.counts)
        joint = [[int(k), int(a), int(self.counts[k, a])] for k, a in nonzero]
        interval = self.alpha_ci
        data: dict[str, Any] = {
            "schema": SCHEMA,
            "runs": self.runs,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "examined_tokens": self.examined_tokens,
            "alpha": self.alpha,
            "alpha_ci": None if interval is None else list(interval),
            "expected_alpha": self.expected_alpha,
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted": self.mean_accepted,
            "tokens_per_pass": self.tokens_per_pass,
            "tokens_per_pass_predicted": self.tokens_per_pass_predicted,
            "iid_check": self.iid_check,
            "per_position": self.per_position,
            "accepted_histogram": self.accepted_histogram,
            "conventions": self.conventions,
            "skipped_rows": self.skipped_rows,
            "skipped_sources": self.skipped_sources,
            "errors": [error.to_dict() for error in self.errors],
        }
        if cost_ratio is not None:
            data["cost_ratio"] = cost_ratio
            data["speedup"] = self.speedup(cost_ratio)
            data["optimal_k"] = self.optimal_k(cost_ratio)
        state: dict[str, Any] = {
            "joint_counts": joint,
            "passing_tokens": self.passing_tokens,
            "threshold_sum_fixed": self.threshold_sum_fixed,
            "sampled_tokens": self.sampled_tokens,
            "threshold_scale": THRESHOLD_SCALE,
            "skipped_rows": self.skipped_rows,
            "skipped_sources": self.skipped_sources,
        }
        if self.reported is not None:
            data |= self.reported.summary_keys()
            state["reported"] = self.reported.to_dict()
        if self.sampler is not None:
            data |= self.sampler.summary_keys()
            state["sampler"] = self.sampler.to_dict()
        if self.groups is not None:
            data["group_by"] = self.group_by
            data["groups"] = {key: group.to_dict(cost_ratio) for key, group in self.groups.items()}
        data["state"] = state
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        """Rebuild the additive state from a `to_dict()` object (a saved summary or baseline).

        Raises ValueError when the object is not a specaccept summary this version can read.
        """
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            if not isinstance(data, dict):
                raise ValueError(f"not a {SCHEMA} object (a JSON {type(data).__name__})")
            raise ValueError(f"not a {SCHEMA} object (schema: {data.get('schema')!r})")
        try:
            if "state" not in data:
                raise ValueError("missing key 'state' (the counters every estimate derives from)")
            state = data["state"]
            if any(type(x) is bool for triple in state["joint_counts"] for x in triple):
                raise ValueError("joint_counts holds a boolean where a count belongs")
            if state.get("threshold_scale", THRESHOLD_SCALE) != THRESHOLD_SCALE:
                raise ValueError("threshold_scale differs from this version's")
            joint = [(int(k), int(a), int(n)) for k, a, n in state["joint_counts"]]
            if any(float(x) != y for triple, whole in zip(state["joint_counts"], joint) for x, y in zip(triple, whole)):
                raise ValueError("joint_counts holds a fractional count")
            if any(k < 0 or a < 0 or a > k or n < 0 for k, a, n in joint):
                raise ValueError("joint_counts holds an impossible (k, accepted, runs) triple")
            size = max((k for k, _, _ in joint), default=0) + 1
            counts = np.zeros((size, size), dtype=np.int64)
            for k, a, n in joint:
                counts[k, a] += n
            skipped_rows = int(state.get("skipped_rows", 0))
            skipped_sources = int(state.get("skipped_sources", 0))
            if skipped_rows < 0 or skipped_sources < 0:
                raise ValueError("skipped counts are negative")
            errors = tuple(
                SkippedRow(
                    str(item["source"]), None if item["line"] is None else int(item["line"]), str(item["message"])
                )
                for item in data.get("errors", [])[:MAX_KEPT_ERRORS]
            )
            groups = None
            group_by = data.get("group_by")
            if "groups" in data:
                if not isinstance(group_by, str) or not isinstance(data["groups"], dict):
                    raise ValueError("'groups' needs a 'group_by' field path and an object of summaries")
                groups = {str(key): cls.from_dict(group) for key, group in data["groups"].items()}
                if any(group.groups is not None for group in groups.values()):
                    raise ValueError("a group holds groups of its own")
            elif group_by is not None:
                raise ValueError("'group_by' without 'groups'")
            return cls(
                counts=counts,
                passing_tokens=int(state["passing_tokens"]),
                threshold_sum_fixed=int(state["threshold_sum_fixed"]),
                sampled_tokens=int(state["sampled_tokens"]),
                reported=ReportedTally.from_dict(state["reported"]) if "reported" in state else None,
                sampler=SamplerTally.from_dict(state["sampler"]) if "sampler" in state else None,
                group_by=group_by,
                groups=groups,
                skipped_rows=skipped_rows,
                skipped_sources=skipped_sources,
                errors=errors,
            )
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise ValueError(f"summary state is incomplete or malformed ({exc!r})") from None


def _merge_groups(left: Summary, right: Summary) -> tuple[str | None, dict[str, Summary] | None]:
    """Groups of `left + right`: key by key. An empty ungrouped summary adds to anything."""
    if left.groups is None and right.groups is None:
        return None, None
    if left.groups is None or right.groups is None:
        ungrouped = left if left.groups is None else right
        grouped = right if left.groups is None else left
        if ungrouped.runs:
            raise ValueError("cannot add a summary without groups to one grouped by " + repr(grouped.group_by))
        return grouped.group_by, dict(grouped.groups or {})
    if left.group_by != right.group_by:
        raise ValueError(f"cannot add summaries grouped by different fields ({left.group_by!r}, {right.group_by!r})")
    merged = dict(left.groups)
    for key, group in right.groups.items():
        merged[key] = merged[key] + group if key in merged else group
    return left.group_by, merged


def group_key(value: object) -> str:
    """How a field's value becomes a group key: strings as they are; anything else as compact JSON.

    So 3 -> "3", true -> "true", null or a missing field -> "null", [1, 2] -> "[1,2]",
    {"b": 1, "a": 2} -> '{"a":2,"b":1}' (keys sorted). The string "3" and the number 3 share
    the key "3". Values JSON cannot hold (Parquet bytes, dates) use their text form.
    """
    if type(value) is str:
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str).decode()
