"""Per-run records as JSONL or CSV, streamed batch by batch as bytes (no Rich, no per-run dicts for JSONL),
and the first runs (`Summary.first_runs`) as `-o json` shows them."""

from __future__ import annotations

import csv
import io
import re
from itertools import repeat
from typing import Protocol

import numpy as np
import orjson

from specaccept_cli.native import extension
from specaccept_cli.rule.batch import STANDARD_RULE, IntArray, RunBatch
from specaccept_cli.rule.vectorized import BatchOutcome
from specaccept_cli.summary.evaluate import RunColumns
from specaccept_cli.summary.first_runs import FirstRuns
from specaccept_cli.text import csv_text, json_controls_escaped


class ByteOutput(Protocol):
    """Where records go: a binary file, or the CLI's checked stdout."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


BASE_COLUMNS = ("source", "line", "k", "accepted", "emitted")
RULE_KEY = b'"rule"'


def _json_value(value: object) -> bytes:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)  # str: Parquet bytes, decimals


def _tail_values(
    batch: RunBatch, columns: RunColumns, column_names: tuple[str, ...], id_fields: tuple[str, ...]
) -> list[list[object]]:
    """Per-run values after the base columns: computed columns first, then --id-field values."""
    return [columns[name].tolist() for name in column_names] + [batch.extras[name] for name in id_fields]


class JsonlWriter:
    """One JSON object per run: source, line, k, accepted, emitted, computed columns, then each --id-field."""

    def __init__(self, out: ByteOutput, id_fields: tuple[str, ...], column_names: tuple[str, ...] = ()) -> None:
        self.out = out
        self.id_fields = id_fields
        self.column_names = column_names
        self.keys = [_json_value(name) for name in (*column_names, *id_fields)]

    def write(self, batch: RunBatch, outcome: BatchOutcome, columns: RunColumns) -> None:
        prefix = b'{"source":' + _json_value(batch.source) + b',"line":'
        # Each run's rule, when one of the batch is not `standard` (unless `--id-field rule` writes the row's own).
        rules = None if RULE_KEY in self.keys else columns.get("rule")
        if not self.keys and rules is None:
            formatted = _formatted_runs(prefix, batch.lines, outcome.k, outcome.accepted)
            if formatted is not None:
                self.out.write(json_controls_escaped(formatted))
                return
        base = zip(batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist())
        if rules is not None:  # a run of another rule than `standard` names it (a standard one, as before)
            named = [b"" if name == STANDARD_RULE else b',"rule":' + _json_value(name) for name in rules.tolist()]
            tails = zip(*_tail_values(batch, columns, self.column_names, self.id_fields), named)
            lines = [
                b'%s%d,"k":%d,"accepted":%d,"emitted":%d%s%s}\n'
                % (
                    prefix,
                    line,
                    k,
                    a,
                    a + 1,
                    b"".join(b"," + key + b":" + _json_value(v) for key, v in zip(self.keys, tail[:-1])),
                    tail[-1],
                )
                for (line, k, a), tail in zip(base, tails)
            ]
        elif not self.keys:
            lines = [b'%s%d,"k":%d,"accepted":%d,"emitted":%d}\n' % (prefix, line, k, a, a + 1) for line, k, a in base]
        else:
            tails = zip(*_tail_values(batch, columns, self.column_names, self.id_fields))
            lines = [
                b'%s%d,"k":%d,"accepted":%d,"emitted":%d%s}\n'
                % (
                    prefix,
                    line,
                    k,
                    a,
                    a + 1,
                    b"".join(b"," + key + b":" + _json_value(v) for key, v in zip(self.keys, tail)),
                )
                for (line, k, a), tail in zip(base, tails)
            ]
        self.out.write(json_controls_escaped(b"".join(lines)))

    def close(self) -> None:
        self.out.flush()


def _formatted_runs(prefix: bytes, lines: IntArray, k: IntArray, accepted: IntArray) -> bytes | None:
    """The lines `JsonlWriter.write` makes without extra keys, by the compiled reader's formatter when it is
    built (a Python loop of `%` formats costs about 0.7 us a run); None for the loop."""
    compiled = extension("_jsonl_c")
    arrays = (lines, k, accepted)
    if not compiled or not all(array.dtype == np.int64 and array.flags.c_contiguous for array in arrays):
        return None
    formatted: bytes | None = compiled.format_runs(prefix, lines, k, accepted)
    return formatted


def _csv_scalar(value: object) -> bytes:
    """A computed column's cell (an int or a bool): never needs quoting."""
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return b"%d" % value  # type: ignore[str-format]


# A spreadsheet reads a cell that starts with one of these as a formula (`=HYPERLINK(...)`,
# `+cmd|...`, `@SUM(1)`); a tab or carriage return first hides such a start. OWASP's advice on CSV
# injection: begin such a cell with a `'`, which spreadsheets show as text and do not evaluate.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A plain number written as text ("-3", "+1.5e3") is no formula: a spreadsheet reads it as that
# number, so it is left as it is, like the numbers specaccept writes itself.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_safe(text: str) -> str:
    """`text` as a CSV cell no spreadsheet evaluates (see `_FORMULA_START`); other text unchanged."""
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def _csv_text(value: str) -> str:
    """A string from the data as a cell: controls made visible, no leading `::`, no formula.

    The formula test looks at the string as the data has it: a leading tab or CR is both made
    visible (`\\x09`) and quoted off (`'`), so neither the terminal nor the spreadsheet acts on it.
    """
    shown = csv_text(value)
    return "'" + shown if value.startswith(("\t", "\r")) else spreadsheet_safe(shown)


def _csv_cell(value: object) -> object:
    """One single-line cell: strings with controls made visible and formulas defused, non-scalars as
    JSON text; numbers (JSON numbers in the data, and every column specaccept computes) as numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _csv_text(value)
    if value is None or isinstance(value, (int, float)):
        return value
    return spreadsheet_safe(csv_text(_json_value(value).decode()))


class CsvWriter:
    """A header, then one row per run; non-scalar id values are written as JSON text.

    Every cell is one line (no quoted newlines), so a record is a line: `head`, `grep` and CI logs see
    whole records, and no cell can start a line as a CI workflow command.
    """

    def __init__(self, out: ByteOutput, id_fields: tuple[str, ...], column_names: tuple[str, ...] = ()) -> None:
        self.out = out
        self.id_fields = id_fields
        self.column_names = column_names
        self.buffer = io.StringIO()
        self.writer = csv.writer(self.buffer, lineterminator="\n")
        self.writer.writerow([*BASE_COLUMNS, *column_names, *(csv_text(name) for name in id_fields)])
        self._flush_buffer()

    def _flush_buffer(self) -> None:
        self.out.write(self.buffer.getvalue().encode())
        self.buffer.seek(0)
        self.buffer.truncate()

    def write(self, batch: RunBatch, outcome: BatchOutcome, columns: RunColumns) -> None:
        base = zip(batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist())
        # The source cell is the same for the whole batch: quote it once with the csv module; the
        # numbers need no quoting, so the common case (no id fields) is formatted without it.
        self.writer.writerow([_csv_text(batch.source)])
        source = self.buffer.getvalue()[:-1].encode()
        self.buffer.seek(0)
        self.buffer.truncate()
        values = _tail_values(batch, columns, self.column_names, self.id_fields)
        if not self.id_fields:
            tails = zip(*values) if values else repeat(())
            rows = [
                b"%s,%d,%d,%d,%d%s\n" % (source, line, k, a, a + 1, b"".join(b"," + _csv_scalar(v) for v in tail))
                for (line, k, a), tail in zip(base, tails)
            ]
            self.out.write(b"".join(rows))
            return
        plain_source = _csv_text(batch.source)
        for (line, k, a), tail in zip(base, zip(*values)):
            self.writer.writerow([plain_source, line, k, a, a + 1, *(_csv_cell(value) for value in tail)])
        self._flush_buffer()

    def close(self) -> None:
        self.out.flush()


def first_runs_object(runs: FirstRuns) -> dict[str, object]:
    """`-o json`'s `first_runs`: how many runs there were, and the first ones as the per-run records write them."""
    records = [
        {"source": source, "line": line, "k": k, "accepted": a, "emitted": a + 1, **dict(zip(runs.id_fields, ids))}
        for source, line, k, a, ids in runs.rows
    ]
    return {"count": runs.total, "shown": len(records), "runs": records}
