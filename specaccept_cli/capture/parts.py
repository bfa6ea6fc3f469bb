"""What the recorder's writer thread writes: column buffers of a block, and the Parquet and JSONL parts.

The serving loop's side (`Recorder.record`) and the process events (exit, SIGTERM, fork) are in
`recorder.py`; everything here runs on the writer thread, a block at a time.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
from array import array
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

LOG = logging.getLogger("specaccept.capture")

_PART = re.compile(r"^part-(\d+)\.(parquet|jsonl)$")


class Block:
    """Column buffers for a block of rows; `rows` is raised last, so a row half-appended when a
    signal handler flushes is left out (`trimmed`)."""

    __slots__ = ("accepted", "labels", "offsets", "p", "q", "r", "request_id", "rows", "rule", "step", "steps", "time")

    def __init__(self) -> None:
        self.offsets = array("q", [0])
        self.p: list[Any] = []  # flat values, checked for numbers by the writer (`checked`), not in record()
        self.q: list[Any] = []
        self.r: list[Any] = []
        self.request_id: list[Any] = []
        self.step: list[int | None] = []
        self.accepted: list[int | None] = []
        self.time: list[float] = []
        self.labels: dict[str, list[Any]] = {}
        self.rule: list[str | None] = []  # the row's rule of the table, when it was named
        # Rows of other rules (`Recorder.record_step`), by row: their fields (or `nodes`) and parameters. Such
        # a row holds no values in the flat p, q, r above (its offsets do not move).
        self.steps: dict[int, dict[str, Any]] = {}
        self.rows = 0

    def finish_row(
        self,
        end: int,
        request_id: Any,
        step: int | None,
        accepted: int | None,
        at: float,
        rule: str | None,
        labels: Mapping[str, Any] | None,
    ) -> None:
        """Row `self.rows`'s columns but its values (the caller has put its p, q, r or its step's fields), and
        `rows` raised last: `end` is where its values end in the flat p, q and r."""
        n = self.rows
        self.offsets.append(end)
        self.request_id.append(request_id)
        self.step.append(step)
        self.accepted.append(accepted)
        self.time.append(at)
        self.rule.append(rule)
        if labels:
            self.add_labels(labels)
        self.rows = n + 1

    def add_labels(self, labels: Mapping[str, Any]) -> None:
        """Row `self.rows`'s labels, each in its column; a column first met here is padded with nulls before it."""
        n = self.rows
        for name, value in labels.items():
            column = self.labels.get(name)
            if column is None:
                column = self.labels[name] = []
            if len(column) < n:
                column.extend([None] * (n - len(column)))
            column.append(value)

    def trimmed(self) -> Block:
        n = self.rows
        del self.offsets[n + 1 :]
        end = self.offsets[n]
        for flat in (self.p, self.q, self.r):
            del flat[end:]
        for column in (self.request_id, self.step, self.accepted, self.time, self.rule):
            del column[n:]
        for row in [row for row in self.steps if row >= n]:
            del self.steps[row]
        for values in self.labels.values():
            del values[n:]
            values.extend([None] * (n - len(values)))
        return self


def publish(temp: Path, directory: Path, suffix: str) -> Path:
    """Rename a finished part to the next free `part-NNNNN.suffix`; exclusive (a hard link), so two
    processes writing into one directory never take the same name."""
    taken = [int(match.group(1)) for name in os.listdir(directory) if (match := _PART.match(name))]
    for number in itertools.count(max(taken, default=0) + 1):
        final = directory / f"part-{number:05d}.{suffix}"
        try:
            os.link(temp, final)
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links: a plain rename
            if final.exists():
                continue
            os.replace(temp, final)
            return final
        os.unlink(temp)
        return final
    raise AssertionError("unreachable")


# ----------------------------------------------------------------- the two formats


class ParquetSink:
    def __init__(self, path: Path, compression: str) -> None:
        import pyarrow as pa

        self.path = path
        self.file = pa.OSFile(str(path), "wb")
        self.compression = compression
        self.writer: Any = None
        self.schema: Any = None
        self.rows = 0

    def write(self, table: Any) -> None:
        import pyarrow.parquet as pq

        if self.writer is None:
            # Dictionaries only for the columns that repeat (request ids, labels): tried on the float lists
            # they cost twice the CPU and a third more bytes (measured on float32 values held as doubles).
            repeating = [name for name in table.schema.names if name not in ("p", "q", "r", "time")]
            self.writer = pq.ParquetWriter(
                self.file, table.schema, compression=self.compression, use_dictionary=repeating
            )
            self.schema = table.schema
        self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        self.rows += table.num_rows

    def size(self) -> int:
        return int(self.file.tell())

    def finish(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.file.close()

    def abandon(self) -> None:
        for close in (self.file.close,):
            try:
                close()
            except Exception as exc:
                LOG.debug("closing an abandoned part: %s", exc)
        self.writer = None  # never finish it: its footer would describe a damaged file
        self.path.unlink(missing_ok=True)


class JsonlSink:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.written = 0
        self.rows = 0

    def write(self, text: bytes) -> None:
        view = memoryview(text)
        try:
            while view:
                done = os.write(self.fd, view)
                view = view[done:]
        except OSError:
            os.ftruncate(self.fd, self.written)  # never leave half a line
            os.lseek(self.fd, self.written, os.SEEK_SET)
            raise
        self.written += len(text)
        self.rows += text.count(b"\n")

    def size(self) -> int:
        return self.written

    def finish(self) -> None:
        os.close(self.fd)

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.path.unlink(missing_ok=True)


def _flat(values: list[Any]) -> np.ndarray | None:
    """The flat values as doubles, or None when one is not a number (None, text, a nested list, ...)."""
    try:
        converted = np.array(values)
    except (ValueError, TypeError, OverflowError):
        return None
    if converted.ndim != 1 or converted.shape[0] != len(values) or converted.dtype.kind not in "fiub":
        return None
    return converted.astype(np.float64, copy=False)


def checked(block: Block) -> tuple[Block, list[np.ndarray], int]:
    """The block's p, q and r as doubles, less the rows holding something that is not a number (counted)."""
    flats = [_flat(block.p), _flat(block.q), _flat(block.r)]
    if all(flat is not None for flat in flats):
        return block, [flat for flat in flats if flat is not None], 0
    keep = []
    offsets = block.offsets
    for row in range(block.rows):
        start, end = offsets[row], offsets[row + 1]
        try:
            for column in (block.p, block.q, block.r):
                array("d", column[start:end])
        except (TypeError, ValueError, OverflowError):
            continue
        keep.append(row)
    good = rows_of(block, keep)
    arrays = [np.array(column, dtype=np.float64) for column in (good.p, good.q, good.r)]
    return good, arrays, block.rows - good.rows


def rows_of(block: Block, keep: list[int]) -> Block:
    """A block of the rows `keep` of `block`, in their order."""
    good = Block()
    offsets = block.offsets
    for row in keep:
        start, end = offsets[row], offsets[row + 1]
        n = good.rows
        for column, source in zip((good.p, good.q, good.r), (block.p, block.q, block.r)):
            column.extend(source[start:end])
        good.offsets.append(good.offsets[n] + (end - start))
        good.request_id.append(block.request_id[row])
        good.step.append(block.step[row])
        good.accepted.append(block.accepted[row])
        good.time.append(block.time[row])
        good.rule.append(block.rule[row])
        if row in block.steps:
            good.steps[n] = block.steps[row]
        for name, column in block.labels.items():
            good.labels.setdefault(name, [None] * n).append(column[row])
        good.rows = n + 1
    for column in good.labels.values():
        column.extend([None] * (good.rows - len(column)))
    return good


def encodable(
    block: Block, encode: Callable[[Block, list[np.ndarray]], Any]
) -> tuple[Block, list[np.ndarray], Any, int]:
    """The rows of a block that `encode` takes one by one, and the encoding of them all: a last line of
    defence, so a value `record()` let through costs its own row and never the block's good ones."""
    keep = []
    for row in range(block.rows):
        single = rows_of(block, [row])
        try:
            encode(single, [np.array(column, dtype=np.float64) for column in (single.p, single.q, single.r)])
        except Exception as exc:  # whatever Arrow or orjson refuse: the row is counted as bad
            LOG.debug("a row the writer cannot encode: %s: %s", type(exc).__name__, exc)
            continue
        keep.append(row)
    good = rows_of(block, keep)
    flats = [np.array(column, dtype=np.float64) for column in (good.p, good.q, good.r)]
    return good, flats, encode(good, flats) if good.rows else None, block.rows - good.rows


def arrow_table(block: Block, flats: list[np.ndarray]) -> Any:
    import pyarrow as pa

    offsets = pa.array(np.frombuffer(block.offsets, dtype=np.int64).astype(np.int32))

    def lists(flat: np.ndarray) -> Any:
        return pa.ListArray.from_arrays(offsets, pa.array(flat))

    if block.steps:  # rows of other rules: their own p, q, r where they have them, null where not
        pqr = [_mixed_lists(block, name, flat) for name, flat in zip(("p", "q", "r"), flats)]
    else:
        pqr = [lists(flat) for flat in flats]
    columns: dict[str, Any] = {
        **({"rule": pa.array(block.rule, pa.string())} if any(block.rule) else {}),
        "p": pqr[0],
        "q": pqr[1],
        "r": pqr[2],
        "request_id": _column(block.request_id),
        "step": pa.array(block.step, pa.int64()),
        "accepted": pa.array(block.accepted, pa.int64()),
        "time": pa.array(block.time, pa.float64()),
    }
    step_fields = sorted({name for fields in block.steps.values() for name in fields} - {"p", "q", "r"})
    for name in sorted({*block.labels, *step_fields}):
        columns[name] = _column(_merged(block, name))
    return pa.table(columns)


def _mixed_lists(block: Block, name: str, flat: np.ndarray) -> Any:
    """A p, q or r column of a block holding rows of other rules: the flat values, a step's own list, or null."""
    import pyarrow as pa

    offsets = block.offsets
    values: list[list[float] | None] = []
    for row in range(block.rows):
        fields = block.steps.get(row)
        if fields is None:
            values.append(flat[offsets[row] : offsets[row + 1]].tolist())
        else:
            values.append(fields.get(name))
    return pa.array(values, pa.list_(pa.float64()))


def _merged(block: Block, name: str) -> list[Any]:
    """A column that rows of other rules fill with a field (`nodes`, `draft_tokens`, ...) and others may
    fill with a label of that name (the transformers capture's `draft_tokens`)."""
    column = block.labels.get(name) or [None] * block.rows
    if not block.steps:
        return column
    # A step row's own field where it has one, else its label of that name (record_step's labels: `committed`, ...)
    return [
        block.steps[row][name] if row in block.steps and name in block.steps[row] else column[row]
        for row in range(block.rows)
    ]


def _column(values: list[Any]) -> Any:
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: text
        return pa.array([None if value is None else str(value) for value in values], pa.string())


def conform(table: Any, schema: Any) -> Any:
    """The block in the part's schema (a label missing from it as nulls, an all-null column cast), or None."""
    import pyarrow as pa

    if not set(table.schema.names) <= set(schema.names):
        return None
    arrays = []
    for field in schema:
        if field.name in table.schema.names:
            column = table.column(field.name)
            if not column.type.equals(field.type):
                if not pa.types.is_null(column.type):
                    return None
                column = pa.nulls(table.num_rows, field.type)
            arrays.append(column)
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def jsonl_bytes(block: Block, flats: list[np.ndarray]) -> bytes:
    """One line a row; a row whose p, q or r holds NaN or an infinity is written with the tokens `NaN`,
    `Infinity` and `-Infinity` (orjson would write null), so `audit` refuses that row by name."""
    import orjson

    offsets = block.offsets.tolist()
    p, q, r = (flat.tolist() for flat in flats)
    labels = list(block.labels.items())
    unusual = _rows_not_finite(flats, block.offsets)
    lines = []
    for row in range(block.rows):
        start, end = offsets[row], offsets[row + 1]
        item: dict[str, Any] = {} if block.rule[row] is None else {"rule": block.rule[row]}
        fields = block.steps.get(row)
        if fields is None:
            item |= {"p": p[start:end], "q": q[start:end], "r": r[start:end]}
        else:
            item |= fields
        for name, column in (("request_id", block.request_id), ("step", block.step), ("accepted", block.accepted)):
            if column[row] is not None:
                item[name] = column[row]
        item["time"] = block.time[row]
        for name, values in labels:
            if values[row] is not None:
                item[name] = values[row]
        if row in unusual:
            orjson.dumps(item)  # what orjson refuses is refused here too
            lines.append(json.dumps(item, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode())
        else:
            lines.append(orjson.dumps(item))
    lines.append(b"")
    return b"\n".join(lines)


def _rows_not_finite(flats: list[np.ndarray], offsets: array[int]) -> set[int]:
    """The rows whose p, q or r holds a NaN or an infinity (a check of the whole block first: none, usually)."""
    rows: set[int] = set()
    for flat in flats:
        finite = np.isfinite(flat)
        if not finite.all():
            places = np.flatnonzero(~finite)
            starts = np.frombuffer(offsets, dtype=np.int64)
            rows.update((np.searchsorted(starts, places, side="right") - 1).tolist())
    return rows
