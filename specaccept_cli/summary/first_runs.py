"""`FirstRuns`: the first runs of the input, each with its accepted length, for the first screen and `-o json`.

Per-run accepted lengths are what a user looks at first, and a summary of a billion runs must not hold
them all: the per-batch stage keeps a block's first `limit` runs and `a + b` keeps `a`'s, then `b`'s, up to
the limit. So the preview is bounded whatever the input, the same from one process, a pool or a cluster
(parts are added in input order), and every run still streams out whole through `-o jsonl` / `-o csv`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson
from msgspec import Struct

# One kept run: (source, line, k, accepted, the values of the id fields). An id is kept as the row has it
# when it is a JSON scalar, else as compact JSON with sorted keys (Parquet values that JSON cannot hold as
# their text), as `summary.state.group_key` writes a group's key.
IdValue = str | int | float | bool | None
FirstRun = tuple[str, int, int, int, tuple[IdValue, ...]]


def _id_value(value: object) -> IdValue:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str).decode()


class FirstRuns(Struct, frozen=True):
    """The first `limit` runs in input order and how many runs there were in all (`total`).

    `id_fields` name the fields shown beside each run (`--id-field`, or the first row's request id or id).
    """

    limit: int
    id_fields: tuple[str, ...] = ()
    rows: tuple[FirstRun, ...] = ()
    total: int = 0

    @classmethod
    def of_runs(
        cls,
        limit: int,
        source: str,
        lines: Sequence[int],
        ks: Sequence[int],
        accepted: Sequence[int],
        ids: Sequence[tuple[str, Sequence[object]]] = (),
        total: int | None = None,
    ) -> FirstRuns:
        """A block's first `limit` runs; `ids` pairs each id field with its values, one per run; `total`: the
        block's runs, when only its first ones are given."""
        kept = min(limit, len(lines))
        columns = [[_id_value(value) for value in values[:kept]] for _, values in ids]
        rows = tuple(
            (
                source,
                int(lines[index]),
                int(ks[index]),
                int(accepted[index]),
                tuple(column[index] for column in columns),
            )
            for index in range(kept)
        )
        return cls(limit, tuple(name for name, _ in ids), rows, len(lines) if total is None else total)

    def with_ids(self, name: str, ids: Mapping[tuple[str, int], object]) -> FirstRuns:
        """The runs with the id `name` filled in from `ids` (by source and line) where a run has none (a run that
        `ids` does not hold stays without: shown as an empty cell, not as a null id)."""
        rows = tuple(
            (source, line, k, a, shown or ((_id_value(ids[source, line]),) if (source, line) in ids else ()))
            for source, line, k, a, shown in self.rows
        )
        return FirstRuns(self.limit, self.id_fields or (name,), rows, self.total)

    @property
    def more(self) -> int:
        """Runs read but not kept."""
        return self.total - len(self.rows)

    def __add__(self, other: FirstRuns) -> FirstRuns:
        """`self`'s runs, then `other`'s, up to the limit (the larger one's, if two were asked for)."""
        limit = max(self.limit, other.limit)
        room = limit - len(self.rows)
        rows = self.rows + other.rows[:room] if room > 0 else self.rows
        return FirstRuns(limit, self.id_fields or other.id_fields, rows, self.total + other.total)
