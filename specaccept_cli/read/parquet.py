"""Parquet -> `RunBatch`es, record batch by record batch, with the rule's columns taken from Arrow buffers.

Accepts list, large_list and fixed_size_list columns of any float or integer type
(as written by pyarrow, DuckDB and Polars); dotted field paths reach into struct columns.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np
import numpy.typing as npt

from specaccept_cli.errors import InputError, OnError, Reason, Why
from specaccept_cli.read.arrow_values import column_time_problem, python_values
from specaccept_cli.threads import signals_stay_with_main

with signals_stay_with_main():  # pyarrow starts threads of its own (jemalloc's) as it is imported
    import pyarrow as pa
    import pyarrow.parquet as pq
from specaccept_cli.rule.batch import (
    FieldSpec,
    FloatArray,
    IntArray,
    RunBatch,
    find_bad_runs,
    greedy_batch,
    parse_field_path,
)
from specaccept_cli.rule.contract import TOKEN_FIELDS
from specaccept_cli.rule.registry import Rule
from specaccept_cli.rule.rows import (
    STANDARD,
    Gathered,
    RuleRows,
    field_path,
    interleave,
    names_other_rule,
    rule_keys,
)
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH, count_problem, length_problem

BATCH_ROWS = 16_384
# Column chunks are read through a buffer of this size, page by page, not whole: a row group of hundreds of
# MB then costs about what one batch does (unbuffered, pyarrow reads each column chunk into memory at once).
READ_BUFFER_BYTES = 1 << 20

# What pyarrow raises on a damaged file: any Arrow error (invalid data, an encoding it does not implement,
# absurd sizes), an I/O error, or column names that are not UTF-8.
_DAMAGED: tuple[type[BaseException], ...] = (pa.ArrowException, OSError, UnicodeDecodeError)


def _column(batch: pa.RecordBatch, name: str, source: str) -> pa.Array:
    """Resolve a dotted path: a literal column name first, else struct fields."""
    if name in batch.schema.names:
        return batch.column(name)
    path = parse_field_path(name)
    array: pa.Array = batch.column(path[0])
    for depth, key in enumerate(path[1:], start=1):
        if not pa.types.is_struct(array.type) or array.type.get_field_index(key) < 0:
            where = ".".join(path[:depth])
            raise InputError(source, None, f"column '{where}' has no field '{key}' (type {array.type})")
        import pyarrow.compute as pc  # only for struct columns: a slow import otherwise not needed

        array = pc.struct_field(array, key)
    return array


def column_paths(where: str | pa.NativeFile | BinaryIO) -> list[str]:
    """Every column path of a Parquet file's schema, struct fields dotted (`request.id`)."""

    def paths(prefix: str, field: pa.Field) -> list[str]:
        name = prefix + field.name
        if pa.types.is_struct(field.type):
            return [name, *(path for child in field.type for path in paths(name + ".", child))]
        return [name]

    return [path for field in pq.read_schema(where) for path in paths("", field)]


def _top_level(name: str, schema_names: list[str]) -> str:
    return name if name in schema_names else parse_field_path(name)[0]


def _list_parts(array: pa.Array, name: str, source: str, tokens: bool = False) -> tuple[IntArray, pa.Array]:
    """Offsets (starting at 0) and the flat values of a list-like column, honouring slices.

    Values must be numbers, or (`tokens`, for greedy logs) integer or string token ids.
    """
    kind = array.type
    if pa.types.is_fixed_size_list(kind):
        size = kind.list_size
        offsets = np.arange(len(array) + 1, dtype=np.int64) * size
        values = array.values.slice(array.offset * size, len(array) * size)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        raw = array.offsets.to_numpy().astype(np.int64)
        values = array.values.slice(int(raw[0]), int(raw[-1] - raw[0]))
        offsets = raw - raw[0]
    else:
        raise InputError(
            source, None, f"column '{name}' is {kind}, not a list of numbers", why=Why(Reason.WRONG_FIELD, name)
        )
    value_type = values.type
    if tokens:
        if not (
            pa.types.is_integer(value_type) or pa.types.is_string(value_type) or pa.types.is_large_string(value_type)
        ):
            raise InputError(
                source, None, f"column '{name}' holds {value_type}, not token ids", why=Why(Reason.WRONG_FIELD, name)
            )
    elif not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise InputError(
            source, None, f"column '{name}' holds {value_type}, not numbers", why=Why(Reason.WRONG_FIELD, name)
        )
    return offsets, values


def read_parquet_file(
    path: Path | pa.NativeFile,
    source: str,
    fields: FieldSpec,
    on_error: OnError,
    row_groups: tuple[int, int] | None = None,
) -> Iterator[RunBatch]:
    """Stream one Parquet file (a path, or a file opened in object storage) as batches of valid runs.

    Rows are numbered from 1; with `row_groups` (start, end), only those groups are read and their
    rows keep the numbers they have in the whole file, from the footer's row counts.
    """
    try:
        parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES, page_checksum_verification=True)
        schema_names = parquet.schema_arrow.names
        groups = None if row_groups is None else list(range(*row_groups))
        first_row = 1 + sum(parquet.metadata.row_group(index).num_rows for index in range(groups[0] if groups else 0))
    except _DAMAGED as exc:
        why = Why(Reason.BROKEN_PARQUET)
        raise InputError(source, None, f"is not a Parquet file, or its footer is damaged ({exc})", why=why) from None
    columns = columns_to_read(schema_names, source, fields)
    try:
        # Closed on every way out, an error raised here included: the prefetch thread is stopped and joined
        # before the error travels on, never left decoding while the process ends (a C++ abort at exit).
        with contextlib.closing(
            _prefetched(parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=columns))
        ) as batches:
            for record_batch in batches:
                batch, errors = runs_of_record_batch(record_batch, first_row, source, fields)
                for error in errors:
                    on_error(error)
                yield batch
                first_row += record_batch.num_rows
    except _DAMAGED as exc:
        read = first_row - 1
        group = _damaged_group(parquet, groups, first_row, columns)
        where = "" if group is None else f" in row group {group}"
        raise InputError(
            source,
            None,
            f"cannot read Parquet data{where} after {read} row{'s' if read != 1 else ''} ({exc})",
            why=Why(Reason.BROKEN_PARQUET),
        ) from None


def _damaged_group(
    parquet: pq.ParquetFile, groups: list[int] | None, first_row: int, columns: list[str] | None
) -> int | None:
    """The row group (numbered from 0) that fails to decode, in the batch starting at row `first_row` of the file.

    Batches span row groups, so the failing one is found again by decoding, one at a time, the groups the
    failed batch reached (at most BATCH_ROWS rows): a cost paid only when a file is damaged. None when
    none fails on its own.
    """
    metadata = parquet.metadata
    start = 1  # the group's first row, in the whole file's numbering
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        chosen = groups is None or group in groups
        if chosen and start + rows > first_row and start < first_row + BATCH_ROWS:
            try:
                for _ in parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=columns):
                    pass
            except _DAMAGED:
                return group
        start += rows
    return None


def columns_to_read(schema_names: list[str], source: str, fields: FieldSpec) -> list[str] | None:
    """The top-level columns the fields live in; a missing one is an error of the whole source.

    None (every column) when rows may be of other rules than `standard` (a `rule` column, or `--rule`): each
    rule reads its own fields, and the (p, q, r) columns are needed only by the `standard` rows there are.
    """
    if not fields.greedy and (_names_rules(schema_names, fields) or names_other_rule(fields.rule)):
        for name in fields.extras:
            if _top_level(name, schema_names) not in schema_names:
                shown = ", ".join(schema_names[:20]) + (", ..." if len(schema_names) > 20 else "")
                raise InputError(
                    source, None, f"missing column '{name}' (columns: {shown})", why=Why(Reason.MISSING_FIELD, name)
                )
        return None
    if fields.greedy:
        assert fields.draft_tokens is not None and fields.target_tokens is not None
        names: tuple[str, ...] = (fields.draft_tokens, fields.target_tokens)
    else:
        names = (fields.p, fields.q, fields.r)
    wanted = [*names, *fields.extras]
    for name in wanted:
        if _top_level(name, schema_names) not in schema_names:
            shown = ", ".join(schema_names[:20]) + (", ..." if len(schema_names) > 20 else "")
            raise InputError(
                source, None, f"missing column '{name}' (columns: {shown})", why=Why(Reason.MISSING_FIELD, name)
            )
    return list(dict.fromkeys(_top_level(name, schema_names) for name in wanted))


class _LazyRows(Sequence[dict[str, Any]]):
    """A record batch's rows as Python dicts, made when a row is first asked for (all at once: when the columns
    give every row, none is)."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch
        self.rows: list[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return int(self.batch.num_rows)

    def __getitem__(self, index: int) -> dict[str, Any]:  # type: ignore[override]
        if self.rows is None:
            self.rows = self.batch.to_pylist()
        return self.rows[index]


def _rule_codes(
    record_batch: pa.RecordBatch, source: str, fields: FieldSpec, rule_rows: RuleRows
) -> tuple[npt.NDArray[np.intp], list[Rule | str]]:
    """Each row's rule as an index into a table of rules (or of what is wrong with a row's rule value), the
    rules looked up once per distinct name."""
    n = record_batch.num_rows
    if fields.rule_field is None or not _names_rules(record_batch.schema.names, fields):
        return np.zeros(n, dtype=np.intp), [rule_rows.default]
    table: list[Rule | str] = []
    index: dict[object, int] = {}
    codes = np.empty(n, dtype=np.intp)
    for row, value in enumerate(python_values(_column(record_batch, fields.rule_field, source))):
        key = value if value is None or type(value) is str else ("row", row)  # a value that is no name: its own
        code = index.get(key)
        if code is None:
            code = index[key] = len(table)
            table.append(rule_rows.rule_of(value))
        codes[row] = code
    return codes, table


def _names_rules(schema_names: list[str], fields: FieldSpec) -> bool:
    """Whether the rows may name their rule: the rule field's column (or the struct holding it) is there."""
    return fields.rule_field is not None and _top_level(fields.rule_field, schema_names) in schema_names


def runs_of_record_batch(
    record_batch: pa.RecordBatch, first_row: int, source: str, fields: FieldSpec
) -> tuple[RunBatch, list[InputError]]:
    """One Arrow record batch (rows numbered from `first_row`) -> its valid runs, and an error per bad row.

    What the Parquet reader does to each batch; engines that hand out Arrow batches (Spark's
    `mapInArrow`, Ray's `map_batches`) call it too (`pipeline.frameworks`).
    """
    if fields.greedy:
        return _to_greedy_batch(record_batch, first_row, source, fields)
    if _names_rules(record_batch.schema.names, fields) or names_other_rule(fields.rule):
        return _to_rule_batch(record_batch, first_row, source, fields)
    return _to_run_batch(record_batch, first_row, source, fields)


def _to_rule_batch(
    record_batch: pa.RecordBatch, first_row: int, source: str, fields: FieldSpec
) -> tuple[RunBatch, list[InputError]]:
    """Rows of any rule (docs/rules.md, "The row contract"), as `jsonl._parse_rules` reads them: the `standard`
    rows through `_to_run_batch`, the others as Python values (lists, and `nodes` as a list of structs)
    checked and recomputed by their own rules (`rule.rows`), then put back in row order."""
    n = record_batch.num_rows
    rows = np.arange(first_row, first_row + n, dtype=np.int64)
    rule_rows = RuleRows(fields)
    codes, table = _rule_codes(record_batch, source, fields, rule_rows)
    kind = np.array([0 if isinstance(rule, str) else 1 if rule is STANDARD else 2 for rule in table], dtype=np.int8)
    row_kind = kind[codes] if n else np.zeros(0, dtype=np.int8)
    bad: dict[int, str] = {index: cast(str, table[codes[index]]) for index in np.flatnonzero(row_kind == 0).tolist()}
    standard = np.flatnonzero(row_kind == 1).tolist()
    other_index = np.flatnonzero(row_kind == 2)
    other_rules = [cast(Rule, table[code]) for code in codes[other_index].tolist()]
    extras_bad: dict[int, str] = {}
    taken = record_batch.take(pa.array(other_index, pa.int64()))
    extras = _extras(taken, source, fields, extras_bad)
    # Each row as the columns its rule reads (its fields, parameters, nodes), made only for the rows the
    # columns do not give (`_gather_chain`): no dict of every column per row.
    present = {rule.name: rule for rule in other_rules}.values()
    wanted = {_top_level(name, taken.schema.names) for rule in present for name in rule_keys(rule, fields)}
    places = [place for place in range(len(other_rules)) if place not in extras_bad] if extras_bad else None
    if places is not None:
        taken = taken.take(pa.array(places, pa.int64()))
        other_rules = [other_rules[place] for place in places]
        bad.update((int(other_index[place]), problem) for place, problem in extras_bad.items())
    objects = _LazyRows(taken.select([name for name in taken.schema.names if name in wanted]))
    offered = other_index if places is None else other_index[places]

    def gather(rule: Rule, rows_of_rule: list[int]) -> Gathered | None:
        part = taken.take(pa.array(rows_of_rule, pa.int64()))
        return _gather_chain(part, rule, fields) if rule.kind == "chain" else _gather_tree(part, rule)

    problems = rule_rows.add(objects, other_rules, gather)
    taken_mask = np.array([problem is None for problem in problems], dtype=bool)
    bad.update((int(index), problem) for index, problem in zip(offered, problems) if problem is not None)
    added = offered[taken_mask]
    values_bad = rule_rows.check()
    kept_mask = np.ones(added.shape[0], dtype=bool)
    kept_mask[list(values_bad)] = False
    bad.update((int(added[place]), problem) for place, problem in values_bad.items())
    kept = added[kept_mask]
    place_of = np.searchsorted(other_index, kept).tolist()  # each kept row's place among `taken`'s
    kept_extras = {name: [column[place] for place in place_of] for name, column in extras.items()}
    errors: list[InputError] = []
    if standard:
        batch, errors = _to_run_batch(record_batch.take(pa.array(standard, pa.int64())), 0, source, fields)
        batch.lines = rows[standard][batch.lines]  # `_to_run_batch` numbered them from 0: their places here
        errors = [
            InputError(source, int(rows[standard][error.line or 0]), error.message, error.raw, error.why)
            for error in errors
        ]
    else:
        empty = np.zeros(0)
        batch = RunBatch(source, rows[:0], np.zeros(1, dtype=np.int64), empty, empty, empty)
        batch.extras = {name: [] for name in fields.extras}
    k, accepted, names = rule_rows.accepted()
    merged = interleave(batch, rows[kept], k, accepted, kept_extras, names)
    if bad:
        order = sorted(bad)
        raws = _rows_json(record_batch, order)
        errors += [InputError(source, int(rows[index]), bad[index], raw=raw) for index, raw in zip(order, raws)]
    return merged, sorted(errors, key=lambda error: error.line or 0)


_END = object()


def _prefetched(batches: Iterator[pa.RecordBatch], depth: int = 2) -> Generator[pa.RecordBatch, None, None]:
    """The same record batches, decoded one or two ahead by a background thread.

    Arrow decodes (decompression, Parquet pages) without holding the GIL, so the next batch is
    being read while the rule runs on this one: about a third less time for 1M runs. Errors
    reach the consumer as they were raised; when the consumer stops early, the thread stops too.
    """
    handoff: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for batch in batches:
                if not put(batch):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it in its own thread
            put(exc)
            return
        put(_END)

    producer = threading.Thread(target=produce, name="parquet-prefetch", daemon=True)
    with signals_stay_with_main():  # and so do Arrow's thread pools, which it starts
        producer.start()
    try:
        while True:
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        producer.join()  # never leave Arrow decoding in a thread while the interpreter exits


def _to_run_batch(
    record_batch: pa.RecordBatch, first_row: int, source: str, fields: FieldSpec
) -> tuple[RunBatch, list[InputError]]:
    names = (fields.p, fields.q, fields.r)
    n, rows, bad, columns = _list_columns(record_batch, names, first_row, source)
    parts = []
    for offsets, values, null_tokens in columns:
        if values.type != pa.float64():  # a cast loads pyarrow.compute: skip it when there is nothing to cast
            values = values.cast(pa.float64())
        floats = values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if null_tokens.shape[0]:
            floats = floats.copy()
            floats[null_tokens] = 0.5  # placeholder; the run is dropped
        parts.append((offsets, floats))
    (p_off, p), (q_off, q), (r_off, r) = parts
    if not (np.array_equal(p_off, q_off) and np.array_equal(p_off, r_off)):
        lengths = np.stack([np.diff(p_off), np.diff(q_off), np.diff(r_off)])
        for run in np.flatnonzero((lengths != lengths[0]).any(axis=0)).tolist():
            k_p, k_q, k_r = lengths[:, run].tolist()
            bad.setdefault(run, f"{names[0]}, {names[1]} and {names[2]} have different lengths ({k_p}, {k_q}, {k_r})")
        # Align every run on its shortest list so the arrays below share one layout; bad runs are dropped.
        shortest = lengths.min(axis=0)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(shortest, out=offsets[1:])
        p, q, r = (
            values[np.repeat(own[:-1], shortest) + _ranks(shortest)]
            for own, values in ((p_off, p), (q_off, q), (r_off, r))
        )
    else:
        offsets = p_off
    for run, message in find_bad_runs(offsets, p, q, r, names):
        bad.setdefault(run, message)
    extras = _extras(record_batch, source, fields, bad)
    batch = RunBatch(source=source, lines=rows, offsets=offsets, p=p, q=q, r=r, extras=extras)
    return _without_bad_rows(batch, record_batch, bad)


def _list_columns(
    record_batch: pa.RecordBatch, names: tuple[str, ...], first_row: int, source: str, tokens: bool = False
) -> tuple[int, IntArray, dict[int, str], list[tuple[IntArray, pa.Array, IntArray]]]:
    """What both batch builders start from: the row count, row numbers, the bad rows found so far
    (row index -> message) and each named list column's parts (see `_list_column`)."""
    bad: dict[int, str] = {}
    columns = [_list_column(record_batch, name, source, bad, tokens) for name in names]
    n = record_batch.num_rows
    return n, np.arange(first_row, first_row + n, dtype=np.int64), bad, columns


def _list_column(
    record_batch: pa.RecordBatch, name: str, source: str, bad: dict[int, str], tokens: bool = False
) -> tuple[IntArray, pa.Array, IntArray]:
    """A list column's offsets, flat values and the positions of null values; null rows and null
    values are recorded in `bad` (row index -> message) as they are found."""
    array = _column(record_batch, name, source)
    if array.null_count:
        for index in np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)).tolist():
            bad.setdefault(index, f"'{name}' is null")
    offsets, values = _list_parts(array, name, source, tokens=tokens)
    null_tokens = np.zeros(0, dtype=np.int64)
    if values.null_count:
        null_tokens = np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))
        runs = np.searchsorted(offsets, null_tokens, side="right") - 1
        for token, run in zip(null_tokens.tolist(), runs.tolist()):
            bad.setdefault(run, f"{name}[{token - int(offsets[run])}] is null")
    return offsets, values, null_tokens


def _extras(
    record_batch: pa.RecordBatch, source: str, fields: FieldSpec, bad: dict[int, str]
) -> dict[str, list[object]]:
    """The extra columns as Python values per row (temporal ones as text at their own precision,
    `arrow_values`); a row whose count column holds no count is recorded in `bad`. A time field whose
    column holds no moments (a duration, a time of day) is an error of the whole source."""
    columns = {name: _column(record_batch, name, source) for name in fields.extras}
    for name in fields.times:
        problem = column_time_problem(name, columns[name].type) if name in columns else None
        if problem is not None:
            raise InputError(source, None, problem)
    extras = {name: python_values(column) for name, column in columns.items()}
    for name in fields.counts:
        for row, value in enumerate(extras[name]):
            problem = count_problem(name, value)
            if problem is not None:
                bad.setdefault(row, problem)
    return extras


def _without_bad_rows(
    batch: RunBatch, record_batch: pa.RecordBatch, bad: dict[int, str]
) -> tuple[RunBatch, list[InputError]]:
    """The batch less its bad rows, and an error for each (with the row as JSON, for quarantine)."""
    if not bad:
        return batch, []
    keep = np.ones(len(batch), dtype=bool)
    keep[list(bad)] = False
    bad_runs = sorted(bad)
    raws = _rows_json(record_batch, bad_runs)
    errors = [InputError(batch.source, int(batch.lines[run]), bad[run], raw=raw) for run, raw in zip(bad_runs, raws)]
    return batch.select(keep), errors


def _rows_json(record_batch: pa.RecordBatch, indices: list[int]) -> list[bytes]:
    """Bad rows as lines of JSON (for quarantine): the columns read, NaN and Infinity as bare words."""
    import json

    taken = record_batch.take(pa.array(indices, pa.int64()))
    columns = {name: python_values(column) for name, column in zip(taken.schema.names, taken.columns)}
    rows = [dict(zip(columns, row)) for row in zip(*columns.values())] if columns else [{} for _ in indices]
    return [json.dumps(row, default=str, ensure_ascii=False).encode() for row in rows]


def _ranks(lengths: IntArray) -> IntArray:
    """0, 1, ..., n-1 within each run (the position of every token in its run)."""
    total = int(lengths.sum())
    starts = np.zeros(lengths.shape[0], dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)


def _to_greedy_batch(
    record_batch: pa.RecordBatch, first_row: int, source: str, fields: FieldSpec
) -> tuple[RunBatch, list[InputError]]:
    """Greedy logs: drafted token ids and the target's argmax ids (k or k + 1 of them) per row."""
    assert fields.draft_tokens is not None and fields.target_tokens is not None
    names = (fields.draft_tokens, fields.target_tokens)
    n, rows, bad, columns = _list_columns(record_batch, names, first_row, source, tokens=True)
    (draft_offsets, drafted, _), (target_offsets, target, _) = columns
    drafted, target = drafted.to_numpy(zero_copy_only=False), target.to_numpy(zero_copy_only=False)
    k = np.diff(draft_offsets)
    target_k = np.diff(target_offsets)
    for run in np.flatnonzero(k > MAX_DRAFT_LENGTH).tolist():
        bad.setdefault(run, length_problem(int(k[run])) or "")
    for run in np.flatnonzero((target_k != k) & (target_k != k + 1)).tolist():
        bad.setdefault(
            run, f"'{names[1]}' has {target_k[run]} entries; {k[run]} drafted tokens need {k[run]} or {k[run] + 1}"
        )
    # Compare each drafted token with the target's token at the same position of its run.
    usable = np.repeat(~np.isin(np.arange(n), list(bad)), k)
    target_index = np.repeat(target_offsets[:-1], k) + _ranks(k)
    matches = np.zeros(drafted.shape[0], dtype=bool)
    matches[usable] = drafted[usable] == target[target_index[usable]]
    extras = _extras(record_batch, source, fields, bad)
    batch = greedy_batch(source, rows, draft_offsets, matches, extras)
    return _without_bad_rows(batch, record_batch, bad)


# --- rows of other rules, read from their columns --------------------------------------------------------------


def _valid_bits(array: pa.Array) -> npt.NDArray[np.bool_]:
    """Which entries of `array` are not null (its validity bitmap, read without pyarrow.compute)."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    bitmap = np.frombuffer(array.buffers()[0], dtype=np.uint8)
    bits = np.unpackbits(bitmap, bitorder="little")[array.offset : array.offset + len(array)]
    return bits.astype(bool)


def _plain_numbers(array: pa.Array, tokens: bool) -> npt.NDArray[Any] | None:
    """A flat numeric array's values (a null's slot holds whatever its buffer holds), or None for a type whose
    Python values are not the numbers `row_step` takes alike (floats other than float64, unsigned 64-bit,
    booleans, strings)."""
    kind = array.type
    if tokens:
        if not pa.types.is_integer(kind) or kind == pa.uint64():
            return None
    elif not (kind == pa.float64() or (pa.types.is_integer(kind) and kind != pa.uint64())):
        return None
    values = np.frombuffer(array.buffers()[1], dtype=kind.to_pandas_dtype())[array.offset : array.offset + len(array)]
    return values.astype(np.int64 if tokens else np.float64)


def _gathered_params(part: pa.RecordBatch, rule: Rule, ok: npt.NDArray[np.bool_]) -> dict[str, FloatArray] | None:
    """The rule's per-step parameters read column-wise (clearing `ok` where one without a default is missing),
    or None when a column is not of a type read here; a column no row carries leaves the rule's default."""
    params: dict[str, FloatArray] = {}
    for param in rule.params:
        if param.name not in part.schema.names:
            if param.default is None:
                ok[:] = False
            continue
        column = part.column(param.name)
        numbers = None if pa.types.is_list(column.type) else _plain_numbers(column, tokens=False)
        if numbers is None:
            return None
        valid = _valid_bits(column)
        if param.default is None:
            ok &= valid
        elif not valid.any():
            continue  # no row carries it: the rule's default
        params[param.name] = np.where(valid, numbers, math.nan if param.default is None else param.default)
    return params


def _gather_chain(part: pa.RecordBatch, rule: Rule, fields: FieldSpec) -> Gathered | None:
    """A chain rule's rows (`part`) read column-wise: the rows whose lists are there, of one length (the
    target's bonus token dropped), with no null inside (but a residual's last), and whose parameters are
    numbers or null; None when a column is not of a type read here (`row_step` then reads every row)."""
    if rule.kind != "chain":
        return None
    rows = part.num_rows
    ok = np.ones(rows, dtype=bool)
    names = part.schema.names
    found: dict[str, tuple[IntArray, npt.NDArray[Any], npt.NDArray[np.bool_]]] = {}
    optional: dict[str, tuple[IntArray, npt.NDArray[Any], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]] = {}
    for name in (*rule.fields, *rule.optional):
        path = field_path(name, fields)
        if len(path) != 1 or path[0] not in names:
            return None
        array = part.column(path[0])
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            return None
        present = _valid_bits(array)
        raw = array.offsets.to_numpy().astype(np.int64)
        values = array.values.slice(int(raw[0]), int(raw[-1] - raw[0]))
        numbers = _plain_numbers(values, name in TOKEN_FIELDS)
        if numbers is None:
            return None
        if name in rule.optional:  # null, or held to its contract as the row path holds it (`row_step`)
            optional[name] = (np.diff(raw), numbers, _valid_bits(values), present)
            continue
        ok &= present
        found[name] = (np.diff(raw), numbers, _valid_bits(values))
    if "target_tokens" in found:
        draft, (lengths, numbers, valid) = found["draft_tokens"][0], found["target_tokens"]
        bonus = lengths == draft + 1
        if bonus.any():  # the bonus position's token: dropped
            keep = np.ones(numbers.shape[0], dtype=bool)
            keep[(np.cumsum(lengths) - 1)[bonus]] = False
            found["target_tokens"] = (lengths - bonus, numbers[keep], valid[keep])
    lengths = found[rule.fields[0]][0]
    ok &= lengths <= MAX_DRAFT_LENGTH
    for own, numbers, valid, present in optional.values():  # a probability in [0, 1] at every drafted position
        fits = valid & (numbers >= 0.0) & (numbers <= 1.0)
        unfit = np.bincount(np.repeat(np.arange(rows), own), weights=~fits, minlength=rows) > 0
        ok &= ~present | ((own == lengths) & ~unfit)
    for name, (own, numbers, valid) in found.items():
        ok &= own == lengths
        missing = ~valid
        if name == "residual":  # the last position's residual is null: no position follows
            ends = np.cumsum(own)[own > 0] - 1
            missing[ends] = False
            numbers[ends[~valid[ends]]] = math.nan
        if missing.any():
            ok[np.searchsorted(np.cumsum(own), np.flatnonzero(missing), side="right")] = False
    params = _gathered_params(part, rule, ok)
    if params is None:
        return None
    columns = {}
    for name, (own, numbers, _) in found.items():
        columns[name] = numbers[np.repeat(ok, own)]
    return Gathered(ok, lengths[ok], columns, {name: values[ok] for name, values in params.items()})


def _gather_tree(part: pa.RecordBatch, rule: Rule) -> Gathered | None:
    """A tree rule's rows (`part`) read column-wise from `nodes`, a list of structs: the rows whose nodes are
    there, each node with a parent and every field of its rule (not null); None when a column is not of a
    type read here (`row_step` then reads every row)."""
    if "nodes" not in part.schema.names:
        return None
    array = part.column("nodes")
    kind = array.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return None
    node_type = kind.value_type
    if any(node_type.get_field_index(name) < 0 for name in ("parent", *rule.fields)):
        return None
    raw = array.offsets.to_numpy().astype(np.int64)
    lengths = np.diff(raw)
    ok = _valid_bits(array) & (lengths > 0)
    nodes = array.values.slice(int(raw[0]), int(raw[-1] - raw[0]))
    good_node = _valid_bits(nodes)
    children = nodes.flatten()  # each field's values for the nodes in view
    columns: dict[str, npt.NDArray[Any]] = {}
    for name in ("parent", *rule.fields):
        child = children[node_type.get_field_index(name)]
        numbers = _plain_numbers(child, tokens=name == "parent" or name in TOKEN_FIELDS)
        if numbers is None:
            return None
        columns[name] = numbers
        good_node = good_node & _valid_bits(child)
    if not good_node.all():
        ends = np.cumsum(lengths)
        ok[np.searchsorted(ends, np.flatnonzero(~good_node), side="right")] = False
    params = _gathered_params(part, rule, ok)
    if params is None:
        return None
    keep = np.repeat(ok, lengths)
    return Gathered(
        ok,
        lengths[ok],
        {name: values[keep] for name, values in columns.items()},
        {name: values[ok] for name, values in params.items()},
    )
