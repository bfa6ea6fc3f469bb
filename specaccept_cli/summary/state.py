"""`Summary`: the additive state of an audit, and nothing else.

The state is a joint histogram of (draft length k, accepted length a) over runs,
plus a few token-level sums, the server-audit tallies, the groups, the per-cluster
sums (`summary.clusters`) and the skipped input. Two summaries add by adding their
states, so summarising shards apart and adding them gives exactly the summary of the whole. Estimates are computed from
it once, elsewhere (`summary.estimates`); the machine format lives in `summary.files`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import orjson
from msgspec import Struct, field
from msgspec.structs import force_setattr, replace

from specaccept_cli.errors import MAX_KEPT_ERRORS, SkippedRow
from specaccept_cli.rule.vectorized import BatchOutcome
from specaccept_cli.summary.clusters import ClusterTally  # at run time: help(Summary) resolves its fields
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.first_runs import FirstRuns
from specaccept_cli.summary.groups import SIDE, GroupColumns
from specaccept_cli.summary.rules import RuleTally
from specaccept_cli.summary.server import ReportedTally, SamplerTally
from specaccept_cli.summary.tokens import TokenTally
from specaccept_cli.summary.windows import WindowTally

CountMatrix = npt.NDArray[np.int64]

Tally = TypeVar(
    "Tally", ReportedTally, SamplerTally, EngineTally, WindowTally, ClusterTally, TokenTally, FirstRuns, RuleTally
)


def _add_optional(left: Tally | None, right: Tally | None) -> Tally | None:
    """Audit tallies add like the rest; a side without one contributes nothing."""
    if left is None:
        return right
    if right is None:
        return left
    return left + right


def _add_unknown(left: int | None, right: int | None) -> int | None:
    """A sum that an old summary file does not hold: unknown in any total it is part of."""
    return None if left is None or right is None else left + right


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


# eq stays on: the Struct's != then calls the __eq__ below (with eq=False it would compare identities)
class Summary(Struct, frozen=True):
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
    # The whole summary above still covers every run; groups split the same runs. Any mapping
    # given is held as `Groups` (columns; a group's Summary is built when it is looked up).
    group_by: str | None = None
    groups: Mapping[str, Summary] | None = None
    # Input skipped under `--on-error skip`: additive counters, and the first MAX_KEPT_ERRORS problems
    # in input order (merging keeps the first ones of `a`, then of `b`).
    skipped_rows: int = 0
    skipped_sources: int = 0  # sources abandoned whole or part-way (unreadable, corrupt stream)
    errors: tuple[SkippedRow, ...] = ()
    # Sum of min(1, p/q) over examined tokens only, x THRESHOLD_SCALE (None: read from a file that lacks it).
    examined_threshold_sum_fixed: int | None = 0
    # With --cluster-field: per-cluster sums for cluster-robust intervals (`summary.clusters`).
    clusters: ClusterTally | None = None
    # Acceptance over the log: windows of time or of runs (summary.windows), when asked for.
    windows: WindowTally | None = None
    # Built from engine metrics lines or scrapes instead of runs: what they gave and what they only bound.
    engine: EngineTally | None = None
    # Logged draft tokens whose q is exactly 1 (None: read from a file that lacks it): the greedy_draft fingerprint.
    one_hot_draft_tokens: int | None = 0
    # What the logged (p, q, r) values look like (summary.tokens): evidence for the impossible-log checks.
    tokens: TokenTally | None = None
    # The first runs with their accepted lengths (summary.first_runs), when a view asked for them: a bounded
    # preview of the input, not state (never saved, not compared).
    first_runs: FirstRuns | None = None
    # Runs of the rules other than `standard` (summary.rules): block and tree runs are there, not in `counts`.
    # None: every run is a `standard` one (or an engine's; every file from before the tally).
    rules: RuleTally | None = None

    def __post_init__(self) -> None:
        if self.groups is not None and not isinstance(self.groups, Groups):
            force_setattr(self, "groups", Groups.of(self.groups))

    @classmethod
    def of_outcome(cls, outcome: BatchOutcome) -> Summary:
        size = int(outcome.k.max()) + 1 if outcome.k.shape[0] else 1
        flat = np.bincount(outcome.k * size + outcome.accepted, minlength=size * size)
        return cls(
            counts=flat.astype(np.int64).reshape(size, size),
            passing_tokens=outcome.passing_tokens,
            threshold_sum_fixed=outcome.threshold_sum_fixed,
            sampled_tokens=outcome.sampled_tokens,
            examined_threshold_sum_fixed=outcome.examined_threshold_sum_fixed,
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
            examined_threshold_sum_fixed=_add_unknown(
                self.examined_threshold_sum_fixed, other.examined_threshold_sum_fixed
            ),
            clusters=_add_clusters(self, other),
            windows=_add_optional(self.windows, other.windows),
            engine=_add_optional(self.engine, other.engine),
            one_hot_draft_tokens=_add_unknown(self.one_hot_draft_tokens, other.one_hot_draft_tokens),
            tokens=_add_optional(self.tokens, other.tokens),
            first_runs=_add_optional(self.first_runs, other.first_runs),
            rules=_add_optional(self.rules, other.rules),
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
            and self.examined_threshold_sum_fixed == other.examined_threshold_sum_fixed
            and self.clusters == other.clusters
            and self.windows == other.windows
            and self.engine == other.engine
            and self.one_hot_draft_tokens == other.one_hot_draft_tokens
            and self.rules == other.rules
        )  # `first_runs` is a preview, not state. `tokens` is not compared: evidence about the whole input's
        # values, which groups do not split (a whole equals the sum of its groups); TokenTally's own == is exact
        # and tested on merges and files

    def without_clusters(self) -> Summary:
        """This summary with its per-cluster sums left out (in every group too), so that it adds to one
        without clusters. Its intervals are then over runs: no cluster-level (per-request) variance,
        which holds only for a replayed prompt set, and the views say so as they do for any such log."""
        groups = self.groups
        if isinstance(groups, Groups):  # __post_init__ makes every mapping one
            extras = {key: extra._unclustered() for key, extra in groups.extras.items()}
            groups = Groups(groups.columns, {key: extra for key, extra in extras.items() if extra != Summary()})
        return replace(self._unclustered(), groups=groups)

    def _unclustered(self) -> Summary:
        """Without the per-cluster sums of its counted runs and of its block and tree runs (`rules`)."""
        return replace(self, clusters=None, rules=None if self.rules is None else self.rules.without_clusters())

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


def _add_clusters(left: Summary, right: Summary) -> ClusterTally | None:
    """Cluster tallies add key by key; a side with runs but no tally would leave them out of the clusters."""
    if (left.clusters is None) != (right.clusters is None) and (left.runs if left.clusters is None else right.runs):
        raise ValueError(
            "cannot add a summary without clusters to one with clusters: the runs of the one without belong to "
            "no request, so the sum would have no cluster-level variance. Summarise both with the same cluster "
            "field (Plan(cluster_field=...)), or add the other's .without_clusters() for intervals over runs"
        )
    return _add_optional(left.clusters, right.clusters)


def _merge_groups(left: Summary, right: Summary) -> tuple[str | None, Groups | None]:
    """Groups of `left + right`: key by key. An empty ungrouped summary adds to anything."""
    if left.groups is None and right.groups is None:
        return None, None
    if left.groups is None or right.groups is None:
        ungrouped = left if left.groups is None else right
        grouped = right if left.groups is None else left
        if ungrouped.runs:
            raise ValueError("cannot add a summary without groups to one grouped by " + repr(grouped.group_by))
        return grouped.group_by, Groups.of(grouped.groups or {})
    if left.group_by != right.group_by:
        raise ValueError(f"cannot add summaries grouped by different fields ({left.group_by!r}, {right.group_by!r})")
    return left.group_by, Groups.of(left.groups) + Groups.of(right.groups)


def add_groups(into: dict[str, Summary], groups: Mapping[str, Summary]) -> dict[str, Summary]:
    """Add `groups` key by key into `into` (changed in place, and returned): only the keys `groups` has are touched."""
    for key, group in groups.items():
        known = into.get(key)
        into[key] = group if known is None else known + group
    return into


def _counts_of(k: CountMatrix, a: CountMatrix, runs: CountMatrix) -> CountMatrix:
    """The (k + 1) x (k + 1) count matrix of sparse (k, a, runs) cells."""
    side = int(k.max()) + 1 if k.shape[0] else 1
    counts = np.zeros((side, side), dtype=np.int64)
    counts[k, a] = runs
    return counts


class Groups(Mapping[str, Summary]):
    """Per-group summaries held as columns (`summary.groups.GroupColumns`); `groups[key]` builds a Summary.

    A million groups are a few arrays, not a million objects: views and the machine format look up
    only the groups they show or write. Whatever a group's Summary holds beyond the columns'
    counters (a field added to Summary later, tallies kept per group) lives in `extras`, one
    Summary per group that has any, added to the group's columns when it is looked up.
    """

    def __init__(self, columns: GroupColumns, extras: Mapping[str, Summary] | None = None) -> None:
        self.columns = columns
        self.extras: dict[str, Summary] = dict(extras or {})

    @classmethod
    def of(cls, groups: Mapping[str, Summary]) -> Groups:
        """`groups` as columns (itself when it is already)."""
        if isinstance(groups, Groups):
            return groups
        keys, cells, cell_runs, sums, extras = [], [], [], [], {}
        examined_known = True
        for code, (key, group) in enumerate(groups.items()):
            k, a = np.nonzero(group.counts)  # row-major: sorted by (k, a), as the columns keep cells
            keys.append(key)
            cells.append((code * SIDE + k) * SIDE + a)
            cell_runs.append(group.counts[k, a])
            examined = group.examined_threshold_sum_fixed
            examined_known = examined_known and examined is not None
            sums.append((group.passing_tokens, group.threshold_sum_fixed, group.sampled_tokens, examined or 0))
            rest = _without_columns(group)
            if rest != Summary():
                extras[key] = rest
        per_group = np.array(sums, dtype=np.int64).reshape(-1, 4).T
        columns = GroupColumns(
            tuple(keys),
            np.concatenate([*cells, np.zeros(0, dtype=np.int64)]).astype(np.int64),
            np.concatenate([*cell_runs, np.zeros(0, dtype=np.int64)]).astype(np.int64),
            per_group[0].copy(),
            per_group[1].copy(),
            per_group[2].copy(),
            per_group[3].copy(),
            examined_known,
        )
        return cls(columns, extras)

    def __getitem__(self, key: str) -> Summary:
        return self._summary_of(self.columns.index[key])  # KeyError for an unknown key, as a dict

    def _summary_of(self, code: int) -> Summary:
        k, a, runs = self.columns.joint_cells(code)
        return replace(
            self.extras.get(self.columns.keys[code]) or Summary(),
            counts=_counts_of(k, a, runs),
            passing_tokens=int(self.columns.passing_tokens[code]),
            threshold_sum_fixed=int(self.columns.threshold_sum_fixed[code]),
            sampled_tokens=int(self.columns.sampled_tokens[code]),
            examined_threshold_sum_fixed=self.columns.examined_threshold(code),
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns.keys)

    def __len__(self) -> int:
        return len(self.columns.keys)

    def __contains__(self, key: object) -> bool:
        return key in self.columns.index

    def __add__(self, other: Groups) -> Groups:
        return Groups(self.columns + other.columns, add_groups(dict(self.extras), other.extras))

    def __repr__(self) -> str:
        shown = ", ".join(repr(key) for key in self.columns.keys[:5])
        return f"Groups({len(self)} groups: {shown}{', ...' if len(self) > 5 else ''})"

    def largest(self, limit: int) -> list[tuple[str, Summary]]:
        """The `limit` groups with the most runs (ties: by key), largest first; every group when limit is 0."""
        keys = self.columns.keys
        return [(keys[code], self._summary_of(code)) for code in self.columns.largest(limit, self._runs_apart())]

    def _runs_apart(self) -> npt.NDArray[np.int64] | None:
        """Each group's block and tree runs (in its extras' rule tally, not in the columns), or None if none has."""
        index = self.columns.index
        apart = {
            index[key]: sum(extra.rules.outside_alpha().values())
            for key, extra in self.extras.items()
            if extra.rules is not None and extra.rules.accepted
        }
        if not apart:
            return None
        runs = np.zeros(len(self), dtype=np.int64)
        runs[list(apart)] = list(apart.values())
        return runs

    def total_except(self, shown: list[str]) -> Summary:
        """One Summary of every group but `shown`, together (the "other" row of a view of the largest)."""
        index = self.columns.index
        rest = np.ones(len(self), dtype=bool)
        rest[[index[key] for key in shown]] = False
        k, a, runs, passing, threshold, sampled, examined = self.columns.totals(rest)
        left_out = set(self.extras).difference(shown)
        # Extras hold no counts (`_without_columns`), so they add among themselves; the columns go in after.
        extras = sum((self.extras[key] for key in self.columns.keys if key in left_out), Summary())
        return replace(
            extras,
            counts=_counts_of(k, a, runs),
            passing_tokens=passing,
            threshold_sum_fixed=threshold,
            sampled_tokens=sampled,
            examined_threshold_sum_fixed=examined,
        )


def _without_columns(group: Summary) -> Summary:
    """What a group holds beyond the counters `GroupColumns` keeps (tallies, clusters, windows)."""
    return replace(
        group,
        counts=_empty_counts(),
        passing_tokens=0,
        threshold_sum_fixed=0,
        sampled_tokens=0,
        examined_threshold_sum_fixed=0,
    )


def shown_groups(summary: Summary, limit: int) -> tuple[list[tuple[str, Summary]], tuple[int, Summary] | None]:
    """The `limit` largest groups, largest first (all when limit is 0), and the rest as (how many, their sum).

    What a view shows and what the machine format writes by default (`--max-groups`): a table of a
    million rows is read by no one, and the rest still adds up to the whole in the "other" row.
    """
    groups = Groups.of(summary.groups or {})
    shown = groups.largest(limit)
    if len(shown) == len(groups):
        return shown, None
    return shown, (len(groups) - len(shown), groups.total_except([key for key, _ in shown]))


def group_key(value: object) -> str:
    """How a field's value becomes a group key, one spelling per value (different values never share one).

    Anything but a string is written as compact JSON: 3 -> `3`, true -> `true`, null or a missing field ->
    `null`, [1, 2] -> `[1,2]`, {"b": 1, "a": 2} -> `{"a":2,"b":1}` (keys sorted), and the floats JSON has no
    word for as JavaScript and Python's json module write them: `NaN`, `Infinity`, `-Infinity`. A string is
    shown as itself, unless it would read as one of those (`"3"`, `"null"`, `"true"`, `" 3"`, `"NaN"`,
    `'"quoted"'`): then it is written as a JSON string, in double quotes. So the string "3" is `"3"` and the
    number 3 is `3`, while every key that was never in doubt (`llama-3`, `3`, `null`) reads as it always did.
    Values JSON cannot hold (Parquet bytes, decimals) are their text form as a JSON string, in double quotes.
    """
    if type(value) is str:
        return _quoted(value) if value and value[0] in _JSON_STARTS and _reads_as_json(value) else value
    if type(value) is float and not math.isfinite(value):
        return _NON_FINITE[str(value)]
    if isinstance(value, (list, dict)):
        value = _non_finite_marked(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str).decode()
    except TypeError:  # an integer beyond 64 bits, which orjson does not write: Python's json writes it whole
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str, allow_nan=True)


# A string that Python's json module reads as a value starts (after JSON's whitespace) with one of these:
# only such strings are parsed to find out, so a key like `llama-3` costs one set lookup.
_JSON_STARTS = frozenset('"-0123456789[{tfnNI \t\n\r')
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_NON_FINITE_JSON = {key: orjson.Fragment(text) for key, text in _NON_FINITE.items()}


def _reads_as_json(text: str) -> bool:
    """Whether a string, read as JSON (NaN and Infinity included), is a value: then it needs quotes as a key."""
    try:
        json.loads(text)
    except ValueError:
        return False
    except RecursionError:  # thousands of nested brackets: JSON nonetheless
        return True
    return True


def _quoted(text: str) -> str:
    return orjson.dumps(text).decode()


def _non_finite_marked(value: object) -> object:
    """A list or object with its NaN and infinities as bare words (orjson writes them as null)."""
    if type(value) is float and not math.isfinite(value):
        return _NON_FINITE_JSON[str(value)]
    if isinstance(value, list):
        return [_non_finite_marked(item) for item in value]
    if isinstance(value, dict):
        return {key: _non_finite_marked(item) for key, item in value.items()}
    return value


def label_key(value: str | None) -> str:
    """The group key of an engine's label: its text as it is. Labels are text in every engine format (log
    lines, Prometheus, payload labels), so there is no number to tell a `"12"` from; a missing label is null.
    """
    return value if value is not None else group_key(None)
