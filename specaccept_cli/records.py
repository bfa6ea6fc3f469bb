"""Per-run records as JSONL or CSV, streamed batch by batch as bytes (no Rich, no per-run dicts for JSONL)."""

from __future__ import annotations

import csv
import io
from typing import IO

import orjson

from specaccept_cli.batch import RunBatch
from specaccept_cli.text import json_controls_escaped, safe_text
from specaccept_cli.vectorized import BatchOutcome

BASE_COLUMNS = ("source", "line", "k", "accepted", "emitted")


def _json_value(value: object) -> bytes:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)  # str: Parquet bytes, decimals


class JsonlWriter:
    """One JSON object per run: source, line, k, accepted, emitted, then each --id-field."""

    def __init__(self, out: IO[bytes], id_fields: tuple[str, ...]) -> None:
        self.out = out
        self.id_fields = id_fields
        self.id_keys = [_json_value(name) for name in id_fields]

    def write(self, batch: RunBatch, outcome: BatchOutcome) -> None:
        prefix = b'{"source":' + _json_value(batch.source) + b',"line":'
        columns = [batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist()]
        if not self.id_fields:
            lines = [
                b'%s%d,"k":%d,"accepted":%d,"emitted":%d}\n' % (prefix, line, k, a, a + 1)
                for line, k, a in zip(*columns)
            ]
        else:
            ids = [batch.extras[name] for name in self.id_fields]
            lines = []
            for index, (line, k, a) in enumerate(zip(*columns)):
                tail = b"".join(
                    b"," + key + b":" + _json_value(values[index]) for key, values in zip(self.id_keys, ids)
                )
                lines.append(b'%s%d,"k":%d,"accepted":%d,"emitted":%d%s}\n' % (prefix, line, k, a, a + 1, tail))
        self.out.write(json_controls_escaped(b"".join(lines)))

    def close(self) -> None:
        self.out.flush()


def _csv_cell(value: object) -> object:
    """One single-line cell: strings with controls made visible, non-scalars as JSON text."""
    if isinstance(value, str):
        return safe_text(value)
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    return safe_text(_json_value(value).decode())


class CsvWriter:
    """A header, then one row per run; non-scalar id values are written as JSON text.

    Every cell is one line (no quoted newlines), so a record is a line: `head`, `grep` and CI logs see
    whole records, and no cell can start a line as a CI workflow command.
    """

    def __init__(self, out: IO[bytes], id_fields: tuple[str, ...]) -> None:
        self.out = out
        self.id_fields = id_fields
        self.buffer = io.StringIO()
        self.writer = csv.writer(self.buffer, lineterminator="\n")
        self.writer.writerow([*BASE_COLUMNS, *(safe_text(name) for name in id_fields)])
        self._flush_buffer()

    def _flush_buffer(self) -> None:
        self.out.write(self.buffer.getvalue().encode())
        self.buffer.seek(0)
        self.buffer.truncate()

    def write(self, batch: RunBatch, outcome: BatchOutcome) -> None:
        ids = [batch.extras[name] for name in self.id_fields]
        rows = zip(batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist())
        source = safe_text(batch.source)
        for index, (line, k, a) in enumerate(rows):
            self.writer.writerow([source, line, k, a, a + 1, *(_csv_cell(values[index]) for values in ids)])
        self._flush_buffer()

    def close(self) -> None:
        self.out.flush()
