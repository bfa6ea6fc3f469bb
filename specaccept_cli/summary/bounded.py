"""Units whose runs are not pinned down: their exact totals and the bounds on what they do not give.

A per-request payload of totals (vLLM's `summary` metrics where a request drafted short, AIPerf
records, llama.cpp's `timings`), or an engine interval of totals (llama.cpp's per-request lines, a
scrape, vLLM's first log layout) gives accepted and drafted tokens exactly, usually the verify steps
too, but not which steps stopped at a rejection and which ran out of draft: examined tokens, hence
alpha = accepted / examined, are only bounded. These units are kept here, one row each, so that

- the figures the totals pin down (accepted, drafted, steps, tokens per pass, accepted / drafted, the
  accepted-length histogram) are over the whole input, these units with the exact ones;
- alpha is bounded over the whole input: the sums of every unit's bounds, never a subset's figure;
- the bounds' standard errors are sandwich variances over the same units as every other interval
  (requests, or intervals of an engine log), which the Imbens-Manski interval needs (summary.estimates).

Additive: rows concatenate, and rows with one key (a request read in two shards) are summed once, when
estimates need them. Steps are closed bounds too (equal when written): llama.cpp prints only a rounded
mean length beside its totals.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct
from msgspec.structs import force_setattr

from specaccept_cli.summary.clusters import KeyArray, decode_column, encode_column

Column = npt.NDArray[np.int64]
COLUMNS = ("steps_low", "steps_high", "accepted", "drafted", "examined_low", "examined_high")


class BoundedRows(Struct, frozen=True, eq=False):
    """One row per unit: key, then the COLUMNS (int64)."""

    keys: KeyArray
    steps_low: Column
    steps_high: Column
    accepted: Column
    drafted: Column
    examined_low: Column
    examined_high: Column

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @classmethod
    def empty(cls) -> BoundedRows:
        none = np.zeros(0, dtype=np.int64)
        return cls(np.zeros(0, dtype=np.uint64), none, none, none, none, none, none)

    @classmethod
    def combined(cls, parts: tuple[BoundedRows, ...]) -> BoundedRows:
        """One row per distinct key, the columns summed key by key, sorted by key."""
        parts = tuple(part for part in parts if len(part))
        if not parts:
            return cls.empty()
        keys = np.concatenate([part.keys for part in parts])
        unique, inverse = np.unique(keys, return_inverse=True)
        columns = {}
        for name in COLUMNS:
            column = np.concatenate([getattr(part, name) for part in parts])
            if unique.shape[0] == keys.shape[0]:
                out = np.empty_like(column)
                out[inverse] = column
            else:
                out = np.zeros(unique.shape[0], dtype=np.int64)
                np.add.at(out, inverse, column)
            columns[name] = out
        return cls(unique.astype(np.uint64), **columns)


# eq stays on: the Struct's != then calls the __eq__ below (with eq=False it would compare identities)
class BoundedUnits(Struct, frozen=True, dict=True):
    """Bounded units of one summary; `a + b` holds both. `histogram[a]` = steps that accepted exactly a drafts,
    summed over the units that wrote one; `without_histogram` counts the rows added without one (a request
    read in two shards counts twice, so it may exceed `units`)."""

    parts: tuple[BoundedRows, ...] = ()
    histogram: tuple[int, ...] = ()
    without_histogram: int = 0

    @classmethod
    def of_rows(
        cls, rows: list[tuple[int, int, int, int, int, int, int]], histogram: tuple[int, ...], without_histogram: int
    ) -> BoundedUnits:
        """Units from rows of (key, then COLUMNS), with their summed histogram and how many wrote none."""
        keys = np.array([row[0] for row in rows], dtype=np.uint64)
        table = np.array([row[1:] for row in rows], dtype=np.int64).reshape(len(rows), len(COLUMNS))
        columns = {name: np.ascontiguousarray(table[:, index]) for index, name in enumerate(COLUMNS)}
        return cls((BoundedRows(keys, **columns),), histogram, without_histogram)

    @classmethod
    def one(
        cls,
        key: int,
        steps: tuple[int, int],
        accepted: int,
        drafted: int,
        examined: tuple[int, int],
        histogram: tuple[int, ...] | None,
    ) -> BoundedUnits:
        row = (key, steps[0], steps[1], accepted, drafted, examined[0], examined[1])
        return cls.of_rows([row], histogram or (), 0 if histogram is not None else 1)

    def __add__(self, other: BoundedUnits) -> BoundedUnits:
        parts = self.parts + other.parts
        if len(parts) > 64:  # a bounded list of arrays however many parts are added
            parts = (BoundedRows.combined(parts),)
        return BoundedUnits(
            parts,
            added_histograms(self.histogram, other.histogram),
            self.without_histogram + other.without_histogram,
        )

    @functools.cached_property
    def rows(self) -> BoundedRows:
        """Every unit once (computed once; the combined rows then stand for the parts)."""
        combined = BoundedRows.combined(self.parts)
        force_setattr(self, "parts", (combined,) if len(combined) else ())
        return combined

    @property
    def units(self) -> int:
        return len(self.rows)

    def total(self, name: str) -> int:
        return int(getattr(self.rows, name).sum())

    @property
    def histogram_complete(self) -> bool:
        """Every unit wrote its accepted-length histogram: the whole input's histogram is exact."""
        return self.without_histogram == 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BoundedUnits):
            return NotImplemented
        mine, theirs = self.rows, other.rows
        size = max(len(self.histogram), len(other.histogram))
        return (
            np.array_equal(mine.keys, theirs.keys)
            and all(np.array_equal(getattr(mine, name), getattr(theirs, name)) for name in COLUMNS)
            and added_histograms(self.histogram, (0,) * size) == added_histograms(other.histogram, (0,) * size)
            and self.without_histogram == other.without_histogram
        )

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        rows = self.rows
        return {
            "units": len(rows),
            "histogram": list(self.histogram),
            "without_histogram": self.without_histogram,
            **{name: encode_column(getattr(rows, name)) for name in ("keys", *COLUMNS)},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BoundedUnits:
        """Rebuild from `to_dict`; ValueError when the rows are not ones a log could have produced."""
        count = data.get("units")
        histogram = data.get("histogram")
        without = data.get("without_histogram")
        if type(count) is not int or count < 0 or type(without) is not int or without < 0:
            raise ValueError("bounded units: 'units' and 'without_histogram' must be whole numbers")
        if not isinstance(histogram, list) or any(type(n) is not int or not 0 <= n <= 2**53 for n in histogram):
            raise ValueError("bounded units: 'histogram' must be a list of whole numbers")
        keys = decode_column(data.get("keys"), "bounded keys", count, None)
        if keys.dtype != np.uint64 or np.unique(keys).shape[0] != count:
            raise ValueError("bounded units: keys must be distinct 64-bit unsigned integers")
        columns = {}
        for name in COLUMNS:
            column = decode_column(data.get(name), f"bounded {name}", count, None)
            if column.size and int(column.max()) > 2**53:
                raise ValueError(f"bounded units: {name} out of range")
            columns[name] = column.astype(np.int64)
        if (
            (columns["steps_low"] > columns["steps_high"]).any()
            or (columns["examined_low"] > columns["examined_high"]).any()
            or (columns["accepted"] > columns["examined_low"]).any()
            or (columns["examined_high"] > columns["drafted"]).any()
        ):
            raise ValueError("bounded units: inconsistent rows (accepted <= examined <= drafted, low <= high)")
        order = np.argsort(keys, kind="stable")
        rows = BoundedRows(keys[order].astype(np.uint64), **{name: column[order] for name, column in columns.items()})
        return cls((rows,) if count else (), tuple(histogram), without)


def added_histograms(left: Sequence[int], right: Sequence[int]) -> tuple[int, ...]:
    """Two histograms by accepted length added bucket by bucket, the shorter padded with empty buckets."""
    size = max(len(left), len(right))
    return tuple((left[a] if a < len(left) else 0) + (right[a] if a < len(right) else 0) for a in range(size))


def steps_bounds(
    steps: int | None,
    steps_range: tuple[int, int] | None,
    accepted: int,
    drafted: int,
    examined: tuple[int, int],
    k: int | None,
) -> tuple[int, int]:
    """Verify steps as closed bounds: as written, or what the totals allow.

    Every step drafted at least one token and at most k; every rejected step is a step of its own.
    """
    if steps is not None:
        return (steps, steps)
    low = max(1 if drafted else 0, examined[0] - accepted, -(-drafted // k) if k else 0)
    high = drafted
    if steps_range is not None:
        low, high = max(low, steps_range[0]), min(high, steps_range[1])
    return (low, max(low, high))
