"""Per-group counters as columns: one row per group key, arrays rather than an object per group.

`--group-by request_id` on a million distinct values used to build a `Summary` (a record and a
count matrix) per group per batch, pickle them between processes and add them one by one: about
600 s and 8.7 GB. Here a batch's groups are a handful of arrays: the joint (k, a) counts as sparse
cells (only the (group, k, a) combinations that occur, encoded in one int64 and sorted), and one
token sum per group. Adding is concatenating and, now and then, compacting with one sort, so a
million groups cost about what a million runs do. `state.Groups` turns a row back into a `Summary`
when one is asked for (a view shows the largest few; the machine format writes those it is asked for).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field

from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH

Int64Array = npt.NDArray[np.int64]
SIDE = MAX_DRAFT_LENGTH + 1  # a cell is (group * SIDE + k) * SIDE + a: 2^63 / SIDE^2 groups fit (about 8.8e12)
COMPACT_AT = 1 << 16  # pending cells merged once there are more than this and than merged ones


def _empty() -> Int64Array:
    return np.zeros(0, dtype=np.int64)


class GroupColumns(Struct, frozen=True, eq=False, dict=True):
    """The additive counters of every group, by group code (the index of its key in `keys`)."""

    keys: tuple[str, ...] = ()
    cells: Int64Array = field(default_factory=_empty)  # encoded (group, k, a), sorted, each once
    cell_runs: Int64Array = field(default_factory=_empty)  # runs in each cell
    passing_tokens: Int64Array = field(default_factory=_empty)  # per group
    threshold_sum_fixed: Int64Array = field(default_factory=_empty)
    sampled_tokens: Int64Array = field(default_factory=_empty)
    # Sum of min(1, p/q) over examined tokens, per group; unknown (False) in summaries saved before it was kept.
    examined_threshold_sum_fixed: Int64Array = field(default_factory=_empty)
    examined_known: bool = True

    @classmethod
    def of_runs(
        cls,
        keys: Sequence[str],
        codes: Int64Array,
        k: Int64Array,
        accepted: Int64Array,
        passing_per_run: Int64Array,
        threshold_per_run: Int64Array,
        examined_threshold_per_run: Int64Array,
        sampled: bool,
    ) -> GroupColumns:
        """The groups of one batch: run j belongs to group codes[j]; every sum is an exact integer sum."""
        n_groups = len(keys)
        cells, cell_runs = np.unique((codes * SIDE + k) * SIDE + accepted, return_counts=True)
        return cls(
            tuple(keys),
            cells.astype(np.int64),
            cell_runs.astype(np.int64),
            _sum_by(codes, passing_per_run, n_groups),
            _sum_by(codes, threshold_per_run, n_groups),
            _sum_by(codes, k, n_groups) if sampled else np.zeros(n_groups, dtype=np.int64),
            _sum_by(codes, examined_threshold_per_run, n_groups),
        )

    def __len__(self) -> int:
        return len(self.keys)

    # Lookups built from the columns on first use; they live in the instance's __dict__, which pickling
    # leaves out, so only the columns cross a process boundary.
    @functools.cached_property
    def index(self) -> dict[str, int]:
        """Group code of each key."""
        return {key: code for code, key in enumerate(self.keys)}

    @functools.cached_property
    def runs(self) -> Int64Array:
        """Runs of each group."""
        return _sum_by(self.cells // (SIDE * SIDE), self.cell_runs, len(self.keys))

    def joint_cells(self, code: int) -> tuple[Int64Array, Int64Array, Int64Array]:
        """(k, a, runs) of the cells of group `code`."""
        start, end = np.searchsorted(self.cells, [code * SIDE * SIDE, (code + 1) * SIDE * SIDE])
        rest = self.cells[start:end] % (SIDE * SIDE)
        return rest // SIDE, rest % SIDE, self.cell_runs[start:end]

    def largest(self, limit: int, more: Int64Array | None = None) -> list[int]:
        """Codes of the `limit` groups with the most runs (ties: by key), largest first; all when limit is 0.
        `more`: runs each group holds beyond the columns' (block and tree runs, kept in its extras).

        With a million groups of one run each, all are tied: the cut is taken among the tied ones by key
        (`heapq.nsmallest`), and only the `limit` chosen are sorted.
        """
        runs = self.runs if more is None else self.runs + more
        sizes, keys = runs.tolist(), self.keys
        count = len(sizes)
        if 0 < limit < count:
            boundary = np.partition(runs, count - limit)[count - limit]
            above = np.flatnonzero(runs > boundary).tolist()  # fewer than limit
            tied = np.flatnonzero(runs == boundary).tolist()
            candidates = above + heapq.nsmallest(limit - len(above), tied, key=keys.__getitem__)
        else:
            candidates = list(range(count))
        return sorted(candidates, key=lambda code: (-sizes[code], keys[code]))

    def totals(
        self, chosen: npt.NDArray[np.bool_]
    ) -> tuple[Int64Array, Int64Array, Int64Array, int, int, int, int | None]:
        """The summed counters of the groups where `chosen` (by code): joint cells (k, a, runs), four token sums."""
        mask = chosen[self.cells // (SIDE * SIDE)]
        rest, inverse = np.unique(self.cells[mask] % (SIDE * SIDE), return_inverse=True)
        runs = np.zeros(rest.shape[0], dtype=np.int64)
        np.add.at(runs, inverse.ravel(), self.cell_runs[mask])
        return (
            rest // SIDE,
            rest % SIDE,
            runs,
            int(self.passing_tokens[chosen].sum()),
            int(self.threshold_sum_fixed[chosen].sum()),
            int(self.sampled_tokens[chosen].sum()),
            int(self.examined_threshold_sum_fixed[chosen].sum()) if self.examined_known else None,
        )

    def examined_threshold(self, code: int) -> int | None:
        return int(self.examined_threshold_sum_fixed[code]) if self.examined_known else None

    def __add__(self, other: GroupColumns) -> GroupColumns:
        builder = ColumnsBuilder()
        builder.add(self)
        builder.add(other)
        return builder.build()


def _sum_by(codes: Int64Array, values: Int64Array, n_groups: int) -> Int64Array:
    """Exact int64 sums of `values` by group code (np.bincount would sum in float64)."""
    sums = np.zeros(n_groups, dtype=np.int64)
    np.add.at(sums, codes, values)
    return sums


class ColumnsBuilder:
    """Adds GroupColumns up in order: keys keep their first appearance; cells are compacted lazily.

    Cells are appended as they come and merged (one sort of everything) only when the pending ones
    outnumber the merged ones, so adding many small parts costs O(n log n) in all, not O(n) per part.
    """

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.keys: list[str] = []
        self.parts: list[tuple[Int64Array, Int64Array]] = []
        self.merged = 0  # cells in parts[0] once compacted
        self.pending = 0
        self.sums = np.zeros((4, 0), dtype=np.int64)  # passing, threshold, sampled, examined threshold, by code
        self.examined_known = True

    def add(self, columns: GroupColumns) -> None:
        if not columns.keys:
            return
        index = self.index
        codes = np.fromiter(
            (index.setdefault(key, len(index)) for key in columns.keys), dtype=np.int64, count=len(columns.keys)
        )
        if len(index) > len(self.keys):
            self.keys.extend(columns.keys[code] for code in np.flatnonzero(codes >= len(self.keys)).tolist())
        if len(index) > self.sums.shape[1]:
            grown = np.zeros((4, max(len(index), 2 * self.sums.shape[1])), dtype=np.int64)
            grown[:, : self.sums.shape[1]] = self.sums
            self.sums = grown
        np.add.at(self.sums[0], codes, columns.passing_tokens)
        np.add.at(self.sums[1], codes, columns.threshold_sum_fixed)
        np.add.at(self.sums[2], codes, columns.sampled_tokens)
        np.add.at(self.sums[3], codes, columns.examined_threshold_sum_fixed)
        self.examined_known = self.examined_known and columns.examined_known
        group, rest = np.divmod(columns.cells, SIDE * SIDE)
        self.parts.append((codes[group] * SIDE * SIDE + rest, columns.cell_runs))
        self.pending += columns.cells.shape[0]
        if self.pending > max(self.merged, COMPACT_AT):
            self._compact()

    def _compact(self) -> None:
        if len(self.parts) > 1 or self.pending:
            cells = np.concatenate([part[0] for part in self.parts])
            runs = np.concatenate([part[1] for part in self.parts])
            unique, inverse = np.unique(cells, return_inverse=True)
            summed = np.zeros(unique.shape[0], dtype=np.int64)
            np.add.at(summed, inverse.ravel(), runs)
            self.parts = [(unique.astype(np.int64), summed)]
            self.merged, self.pending = unique.shape[0], 0

    def build(self) -> GroupColumns:
        self._compact()
        n = len(self.keys)
        cells, runs = self.parts[0] if self.parts else (_empty(), _empty())
        return GroupColumns(
            tuple(self.keys),
            cells,
            runs,
            self.sums[0, :n].copy(),
            self.sums[1, :n].copy(),
            self.sums[2, :n].copy(),
            self.sums[3, :n].copy(),
            self.examined_known,
        )
