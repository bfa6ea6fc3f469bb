"""`Summary`: the additive state of an audit, and nothing else.

The state is a joint histogram of (draft length k, accepted length a) over runs,
plus a few token-level sums, the server-audit tallies, the groups and the skipped
input. Two summaries add by adding their states, so summarising shards apart and
adding them gives exactly the summary of the whole. Estimates are computed from
it once, elsewhere (`summary.estimates`); the machine format lives in `summary.files`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import orjson

from specaccept_cli.errors import MAX_KEPT_ERRORS, SkippedRow
from specaccept_cli.rule.vectorized import BatchOutcome
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.server import ReportedTally, SamplerTally
from specaccept_cli.summary.windows import WindowTally

CountMatrix = npt.NDArray[np.int64]

Tally = TypeVar("Tally", ReportedTally, SamplerTally, EngineTally, WindowTally)


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


@dataclass(frozen=True, eq=False)
class Summary:
    """Additive state of an audit; `a + b` is the summary of both inputs. Frozen: build, never mutate."""

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
    # Acceptance over the log: windows of time or of runs (summary.windows), when asked for.
    windows: WindowTally | None = None
    # Built from engine metrics lines or scrapes instead of runs: what they gave and what they only bound.
    engine: EngineTally | None = None

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
            windows=_add_optional(self.windows, other.windows),
            engine=_add_optional(self.engine, other.engine),
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
            and self.windows == other.windows
            and self.engine == other.engine
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

    @property
    def emitted_tokens(self) -> int:
        """Tokens the target passes emitted: a + 1 per run."""
        return self.accepted_tokens + self.runs

    @property
    def runs_by_k(self) -> CountMatrix:
        """runs_by_k[k] = number of runs that drafted k tokens (the k marginal of counts)."""
        by_k: CountMatrix = self.counts.sum(axis=1)
        return by_k

    def run_moments(self) -> tuple[float, float, float]:
        """Sums over runs of a^2, e^2 and a*e (e = examined tokens of the run): what the variances need."""
        k, a = self._grid()
        examined = np.minimum(a + 1, k)
        counts = self.counts
        return (
            float((a * a * counts).sum()),
            float((examined * examined * counts).sum()),
            float((a * examined * counts).sum()),
        )


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
    return left.group_by, add_groups(dict(left.groups), right.groups)


def add_groups(into: dict[str, Summary], groups: Mapping[str, Summary]) -> dict[str, Summary]:
    """Add `groups` key by key into `into` (changed in place, and returned): only the keys `groups` has are touched."""
    for key, group in groups.items():
        known = into.get(key)
        into[key] = group if known is None else known + group
    return into


def group_key(value: object) -> str:
    """How a field's value becomes a group key: strings as they are; anything else as compact JSON.

    So 3 -> "3", true -> "true", null or a missing field -> "null", [1, 2] -> "[1,2]",
    {"b": 1, "a": 2} -> '{"a":2,"b":1}' (keys sorted). The string "3" and the number 3 share
    the key "3". Values JSON cannot hold (Parquet bytes, dates) use their text form.
    """
    if type(value) is str:
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str).decode()
