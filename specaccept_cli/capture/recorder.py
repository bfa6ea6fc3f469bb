"""A recorder a serving loop can afford: `record(p, q, r, ...)` per verify step, written by a thread.

What the serving loop pays is a copy of three short lists into column buffers under a lock;
Parquet encoding (or JSON), compression and disk writes happen on a background thread, a block
at a time. What it must never pay is an exception: a full disk, a closed recorder or a value
that is not a number is counted, logged once, and the step goes on. Memory is bounded: when
the writer falls behind, new rows are dropped (and counted) instead of queued without end.

Parts are written under a hidden temporary name and renamed to `part-00001.parquet`,
`part-00002.parquet`, ... when whole, so `specaccept audit DIR` never reads a half-written file.
The field names are the ones `audit` reads by default (`p`, `q`, `r`), with the engine's own
count as `accepted` (`--reported-field accepted`) and the request as `request_id`
(`--cluster-field request_id`). Steps verified with another rule of the table (`rule/registry.py`)
go through `record_step`, which writes them in that rule's row contract (its fields, or `nodes` for a
tree, and a `rule` field), checked against the contract (`rule/contract.py`) when they are handed over.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import operator
import os
import queue
import signal
import threading
import time as clock
import weakref
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import numpy as np
from msgspec import Struct

from specaccept_cli.capture.parts import (
    Block,
    JsonlSink,
    ParquetSink,
    arrow_table,
    checked,
    conform,
    encodable,
    jsonl_bytes,
    publish,
)
from specaccept_cli.rule.contract import TOKEN_FIELDS, step_problem
from specaccept_cli.rule.registry import RULES, Rule, rule_named
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH

Format = Literal["parquet", "jsonl"]
FORMATS: tuple[Format, ...] = ("parquet", "jsonl")
RESERVED = ("p", "q", "r", "request_id", "step", "accepted", "time", "rule", "nodes")
MAX_TREE_NODES = 4096  # a recorded tree step's drafted nodes
# The table's field and parameter names: a step's label may not take one (a reader would take it for the field).
RULE_FIELDS = frozenset(
    name
    for rule in RULES
    for name in (*rule.fields, *rule.optional, *rule.ignored, *(param.name for param in rule.params))
)
RESERVED_SET = frozenset(RESERVED)

LOG = logging.getLogger("specaccept.capture")

_STOP = object()


class RecorderStats(Struct, frozen=True):
    """What became of the rows handed to `record()` so far (in this process)."""

    recorded: int  # rows taken into the buffers
    written: int  # rows written to disk (in finished parts or the part being written)
    dropped: int  # rows lost: the buffers were full, the recorder closed, or their part could not be written
    bad_values: int  # calls refused for their values (not numbers, lists of different lengths, ...)
    write_errors: int  # failed writes (a full disk, a file size limit, ...)
    parts: tuple[str, ...]  # finished part files, in the order they were published


def _values(values: Any) -> list[Any] | tuple[Any, ...]:
    """A step's values as a sequence to copy from: a list or tuple as it is, a numpy array or a torch
    tensor (any device: one device-to-host copy) as a list. Whether they are numbers is the writer's check."""
    if type(values) is list or isinstance(values, list | tuple):
        return values
    detach = getattr(values, "detach", None)
    if detach is not None:  # torch
        values = detach().cpu()
    elif not isinstance(values, np.ndarray):
        return list(values)
    if values.ndim != 1:
        raise ValueError(f"an array of shape {tuple(values.shape)}, not one value per drafted token")
    listed: list[Any] = values.tolist()
    return listed


_INT64 = 1 << 63  # steps, counts and integer labels are written as 64-bit integers (Parquet int64, JSON)


def _whole(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name} is a bool")
    number = operator.index(value)
    if not -_INT64 <= number < _INT64:
        raise OverflowError(f"{name} = {number} does not fit in a 64-bit integer")
    return number


def _label(value: Any, name: str) -> Any:
    """A label as a plain value that both formats can write: str (valid UTF-8), int (64 bits), float, bool,
    or a list of them (numpy and torch scalars unwrapped); anything else as its text."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError as exc:  # a lone surrogate: neither Parquet nor JSON can hold it
                raise ValueError(
                    f"{name} is not valid UTF-8 text (a lone surrogate at character {exc.start})"
                ) from None
        return value
    if isinstance(value, int):
        return _whole(value, name)
    if isinstance(value, list | tuple):
        return [_label(item, name) for item in value]
    item = getattr(value, "item", None)  # numpy and torch scalars
    if item is not None:
        try:
            plain = item()
        except (TypeError, ValueError, RuntimeError):
            pass
        else:
            if plain is not value:
                return _label(plain, name)
    return _label(str(value), name)


def _pqr_rule(name: Any) -> str:
    """`record(rule=...)`: a rule whose step is p, q and r (or less); the others need `record_step`."""
    if not isinstance(name, str):
        raise TypeError(f"rule is {name!r}, not the name of a rule")
    try:
        rule = rule_named(name)
    except KeyError as error:
        raise ValueError(str(error.args[0])) from None
    if rule.kind != "chain" or not set(rule.fields) <= {"p", "q", "r"}:
        raise ValueError(f"rule '{rule.name}' needs {', '.join(rule.fields)}: record it with record_step()")
    return rule.name


def _plain_values(name: str, values: Any) -> list[Any]:
    """A field's values as plain numbers (token ids as ints; block's last null residual kept as None)."""
    listed = list(_values(values))
    if name in TOKEN_FIELDS:
        return [
            _whole(value, name) if not isinstance(value, int) or isinstance(value, bool) else value for value in listed
        ]
    return [_number(value) for value in listed]


def _number(value: Any) -> Any:
    """A number as a double (ints too, so a column's type never depends on its values); anything else as it
    is, for the contract to name (a bool, text, None)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return value
    return float(value)


def _step_fields(rule: Rule, fields: Any, nodes: Any, params: Any) -> dict[str, Any]:
    """A step's fields in the row contract, checked against its rule (ValueError naming the first problem)."""
    step_params = {name: _number(value) for name, value in dict(params or {}).items()}
    known = {param.name for param in rule.params}
    if not set(step_params) <= known:
        extra = sorted(set(step_params) - known)[0]
        raise ValueError(f"rule '{rule.name}' has no parameter {extra!r}")
    if rule.kind == "chain":
        if nodes is not None or fields is None:
            raise ValueError(f"rule '{rule.name}' verifies chains: give its fields, not nodes")
        given = dict(fields)
        names = [name for name in (*rule.fields, *rule.optional, *rule.ignored) if name in given]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"rule '{rule.name}' has no field {unknown[0]!r}")
        columns = {name: _plain_values(name, given[name]) for name in names}
        lengths = {len(values) for values in columns.values()}
        if lengths and max(lengths) > MAX_DRAFT_LENGTH:
            raise ValueError(f"a draft of {max(lengths)} tokens is longer than {MAX_DRAFT_LENGTH}")
        if columns.get("residual"):
            last = columns["residual"][-1]
            if isinstance(last, float) and last != last:  # NaN: the last position has no next one
                columns["residual"][-1] = None
        problem = step_problem(rule, columns, step_params)
        if problem is None and len({len(values) for values in columns.values()}) > 1:
            problem = "the fields differ in length"
        if problem is not None:
            raise ValueError(problem)
        return {**columns, **step_params}
    if fields is not None or nodes is None:
        raise ValueError(f"rule '{rule.name}' verifies trees: give its nodes, not fields")
    listed = [dict(node) for node in nodes]
    if len(listed) > MAX_TREE_NODES:
        raise ValueError(f"a tree of {len(listed)} nodes is larger than {MAX_TREE_NODES}")
    parent = [_whole(node.get("parent"), "parent") for node in listed]
    if any(value is None for value in parent):
        raise ValueError("a node has no 'parent'")
    node_names = (*rule.fields, *rule.optional)
    columns = {name: _plain_values(name, [node.get(name) for node in listed]) for name in node_names}
    columns = {
        name: values for name, values in columns.items() if name in rule.fields or any(v is not None for v in values)
    }
    problem = step_problem(rule, columns, step_params, [int(value) for value in parent if value is not None])
    if problem is not None:
        raise ValueError(problem)
    plain_nodes = [
        {"parent": parent[index], **{name: values[index] for name, values in columns.items()}}
        for index in range(len(listed))
    ]
    return {"nodes": plain_nodes, **step_params}


class Recorder:
    """Rows of (p, q, r) per verify step into a directory of Parquet (or JSONL) parts.

    `block_rows` rows make one Parquet row group (one JSONL write); up to `max_pending_blocks`
    full blocks wait for the writer before new rows are dropped. A part is finished and renamed
    when it reaches `rotate_bytes`, when it is `rotate_seconds` old, and on `close()`; rows
    reach the disk at the latest `flush_seconds` after they were recorded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        format: Format = "parquet",
        *,
        block_rows: int = 16_384,
        max_pending_blocks: int = 4,
        rotate_bytes: int = 256 << 20,
        rotate_seconds: float | None = 3600.0,
        flush_seconds: float = 5.0,
        compression: str = "zstd",
        handle_sigterm: bool = True,
        close_timeout: float = 30.0,
    ) -> None:
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
        if block_rows < 1 or max_pending_blocks < 1 or rotate_bytes < 1 or flush_seconds <= 0:
            raise ValueError("block_rows, max_pending_blocks, rotate_bytes and flush_seconds must be positive")
        self.directory = Path(path)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.format: Format = format
        self._block_rows = block_rows
        self._max_pending = max_pending_blocks
        self._rotate_bytes = rotate_bytes
        self._rotate_seconds = rotate_seconds
        self._flush_seconds = flush_seconds
        self._compression = compression
        self._close_timeout = close_timeout
        if format == "parquet":  # imported here, not on the writer's first block, when the first rows pour in
            import pyarrow.parquet  # noqa: F401
        else:
            import orjson  # noqa: F401
        self._lock = threading.RLock()  # reentrant: a SIGTERM handler may flush while this thread records
        self._io_lock = threading.Lock()  # held by the writer around each write; fork waits for it
        self._stats_lock = threading.Lock()
        self._fresh_state()
        _LIVE.add(self)
        if handle_sigterm:
            _install_sigterm_handler()

    def _fresh_state(self) -> None:
        """Everything a process owns alone (called again in a forked child)."""
        self._pid = os.getpid()
        self._block = Block()
        self._pending: queue.Queue[object] = queue.Queue(maxsize=self._max_pending + 1)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._sink: ParquetSink | JsonlSink | None = None
        self._sink_opened = 0.0
        self._parts: list[str] = []
        self._recorded = self._written = self._dropped = self._bad = self._write_errors = 0
        self._warned: set[str] = set()
        self._temp_names = itertools.count(1)

    # ----------------------------------------------------------------- the serving loop's side

    def record(
        self,
        p: Any,
        q: Any,
        r: Any,
        /,
        *,
        request_id: Any = None,
        step: Any = None,
        accepted: Any = None,
        time: float | None = None,
        rule: str | None = None,
        **labels: Any,
    ) -> bool:
        """Buffer one verify step; True when it was taken, False when it was refused or dropped (counted).

        `accepted` is the engine's own count of accepted drafts, audited with `--reported-field accepted`;
        `time` defaults to now (epoch seconds); `labels` become columns of their own (str, int, float, bool).
        `rule` names the rule of the table the step was verified with, written as the row's `rule` field: one
        whose fields are p, q and r (`standard`, `greedy-draft`); the others go through `record_step`.
        """
        try:
            if self._closed:
                self._lose("closed", "record() after close(): the row is dropped")
                return False
            try:
                rule_name = None if rule is None else _pqr_rule(rule)
                p_values, q_values, r_values = _values(p), _values(q), _values(r)
                k = len(p_values)
                if len(q_values) != k or len(r_values) != k:
                    raise ValueError(f"p, q and r have different lengths ({k}, {len(q_values)}, {len(r_values)})")
                if k > MAX_DRAFT_LENGTH:
                    raise ValueError(f"a draft of {k} tokens is longer than {MAX_DRAFT_LENGTH}")
                at = clock.time() if time is None else float(time)
                step_number = (
                    step if step is None or (type(step) is int and -_INT64 <= step < _INT64) else _whole(step, "step")
                )
                count = (
                    accepted
                    if accepted is None or (type(accepted) is int and -_INT64 <= accepted < _INT64)
                    else _whole(accepted, "accepted")
                )
                if not (request_id is None or (type(request_id) is str and request_id.isascii())):
                    request_id = _label(request_id, "request_id")
                row_labels = None
                if labels:
                    row_labels = {name: _label(value, name) for name, value in labels.items()}
                    if not RESERVED_SET.isdisjoint(row_labels):
                        taken = sorted(RESERVED_SET.intersection(row_labels))
                        raise ValueError(f"label {taken[0]!r} is a field the recorder writes itself")
            except (TypeError, ValueError, OverflowError) as exc:
                self._count(bad=1)
                self._warn_once("bad", f"a row was refused ({exc}); such rows are counted in stats.bad_values")
                return False
            with self._lock:
                block = self._open_block()
                if block is None:
                    return False
                block.p.extend(p_values)
                block.q.extend(q_values)
                block.r.extend(r_values)
                block.finish_row(
                    block.offsets[block.rows] + k, request_id, step_number, count, at, rule_name, row_labels
                )
                self._recorded += 1
                if self._thread is None:
                    self._start_writer()
            return True
        except Exception as exc:  # the serving loop must go on; the failure is counted and logged once
            with self._lock:
                self._block.trimmed()  # drop whatever part of the row was appended
            self._count(bad=1)
            self._warn_once("internal", f"a row was refused ({type(exc).__name__}: {exc})")
            return False

    def record_step(
        self,
        rule: str,
        fields: Any = None,
        /,
        *,
        nodes: Any = None,
        params: Any = None,
        request_id: Any = None,
        step: Any = None,
        accepted: Any = None,
        time: float | None = None,
        **labels: Any,
    ) -> bool:
        """Buffer one verify step under any rule of the table, in its row contract (docs/rules.md); True when
        it was taken, False when it was refused or dropped (counted, as for `record`).

        A chain step gives `fields`, a mapping of the rule's fields to one value per drafted position (lists,
        numpy arrays or tensors: `{"p": ..., "r": ...}` for `greedy-draft`, `{"draft_tokens": ...,
        "target_tokens": ...}` for `sample-match`, ...); a tree step gives `nodes`, one mapping per drafted node
        in the order the verifier tried siblings, each with `parent` (-1 at depth 1) and the rule's fields.
        `params` holds the step's parameters (`typical`'s epsilon and delta, `tree-target-cdf`'s thresholds).
        The step is checked against its rule here, in the caller's thread (a rule's fields, lengths and values,
        a tree's parents), so a refused step is counted at once; `record` stays the cheaper path for p, q, r.
        """
        try:
            if self._closed:
                self._lose("closed", "record_step() after close(): the row is dropped")
                return False
            try:
                verifier = rule_named(rule) if isinstance(rule, str) else None
                if verifier is None:
                    raise ValueError(f"rule is {rule!r}, not the name of a rule")
                stored = _step_fields(verifier, fields, nodes, params)
                at = clock.time() if time is None else float(time)
                step_number, count = _whole(step, "step"), _whole(accepted, "accepted")
                if not (request_id is None or (type(request_id) is str and request_id.isascii())):
                    request_id = _label(request_id, "request_id")
                row_labels = {name: _label(value, name) for name, value in labels.items()}
                taken = sorted((RESERVED_SET | RULE_FIELDS | set(stored)).intersection(row_labels))
                if taken:
                    raise ValueError(f"label {taken[0]!r} is a field the recorder writes itself")
            except (TypeError, ValueError, OverflowError, KeyError) as exc:
                self._count(bad=1)
                self._warn_once("bad-step", f"a step was refused ({exc}); such rows are counted in stats.bad_values")
                return False
            with self._lock:
                block = self._open_block()
                if block is None:
                    return False
                block.steps[block.rows] = stored  # no flat p, q, r: the step's fields are its own
                block.finish_row(
                    block.offsets[block.rows], request_id, step_number, count, at, verifier.name, row_labels
                )
                self._recorded += 1
                if self._thread is None:
                    self._start_writer()
            return True
        except Exception as exc:  # the serving loop must go on; the failure is counted and logged once
            with self._lock:
                self._block.trimmed()
            self._count(bad=1)
            self._warn_once("internal", f"a step was refused ({type(exc).__name__}: {exc})")
            return False

    def _open_block(self) -> Block | None:
        """The block the next row goes into (the caller holds the lock): a full one is handed to the writer first;
        None when the writer is behind and every buffer is full (the row is lost, counted and said once)."""
        block = self._block
        if block.rows >= self._block_rows:
            if not self._hand_off():
                self._lose("full", "the writer is behind and the buffers are full: rows are dropped")
                return None
            block = self._block
        return block

    def _hand_off(self) -> bool:
        """Queue the current block for the writer (under the lock); False when the queue is full."""
        try:
            self._pending.put_nowait(self._block.trimmed())
        except queue.Full:
            return False
        self._block = Block()
        return True

    def _count(self, bad: int = 0, dropped: int = 0, write_errors: int = 0) -> None:
        """Add to the counters that several threads raise (under a lock of their own, held for nothing else)."""
        with self._stats_lock:
            self._bad += bad
            self._dropped += dropped
            self._write_errors += write_errors

    def _lose(self, key: str, message: str, rows: int = 1) -> None:
        self._count(dropped=rows)
        self._warn_once(key, f"{message} (stats.dropped counts them)")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            LOG.warning("specaccept capture %s: %s", self.directory, message)

    @property
    def stats(self) -> RecorderStats:
        return RecorderStats(
            self._recorded, self._written, self._dropped, self._bad, self._write_errors, tuple(self._parts)
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self, timeout: float | None = None) -> None:
        """Write what is buffered now and finish the part, so a reader sees every row recorded so far;
        returns when that is done or after `timeout` seconds."""
        with self._lock:
            if self._thread is None or self._block.rows == 0:
                return
            block, self._block = self._block.trimmed(), Block()
        done = threading.Event()
        try:
            self._pending.put((block, done), timeout=timeout)
        except queue.Full:
            self._lose("full", "the writer is behind and the buffers are full: rows are dropped", block.rows)
            return
        done.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write everything buffered, finish the part and stop the writer. Idempotent; never raises."""
        wait = self._close_timeout if timeout is None else timeout
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            if thread is None:
                return
            block, self._block = self._block.trimmed(), Block()
        try:
            if block.rows:
                self._pending.put(block, timeout=wait)
            self._pending.put(_STOP, timeout=wait)
        except queue.Full:
            self._lose("full", "the writer did not catch up before close(): rows are dropped", block.rows)
            return
        thread.join(wait)
        if thread.is_alive():
            self._warn_once("slow", f"the writer did not finish within {wait:g}s of close()")

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ----------------------------------------------------------------- the writer thread's side

    def _start_writer(self) -> None:
        self._thread = threading.Thread(target=self._run, name="specaccept-capture", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                item = self._pending.get(timeout=self._flush_seconds)
            except queue.Empty:
                item = self._take_current()
            if item is _STOP:
                with self._io_lock:
                    self._finish_part()
                return
            try:
                self._handle(item)
            except Exception as exc:  # the writer must outlive anything a block holds; counted and logged once
                self._count(write_errors=1)
                self._warn_once("writer", f"the writer met {type(exc).__name__}: {exc}")

    def _handle(self, item: object) -> None:
        """One item of the queue: a block, a flush (a block and its event), or a wake-up to rotate by age."""
        done = None
        if isinstance(item, tuple):
            item, done = item
        if isinstance(item, Block) and item.rows:
            with self._io_lock:
                self._write(item)
        if done is not None:  # flush(): the part is finished so that a reader sees it
            with self._io_lock:
                self._finish_part()
            done.set()
        old = self._rotate_seconds is not None and clock.monotonic() - self._sink_opened >= self._rotate_seconds
        if self._sink is not None and old:
            with self._io_lock:
                self._finish_part()

    def _take_current(self) -> Block | None:
        """The rows recorded since the last block, so a quiet server's rows still reach the disk."""
        if not self._lock.acquire(timeout=1.0):
            return None
        try:
            if self._block.rows == 0:
                return None
            block, self._block = self._block.trimmed(), Block()
            return block
        finally:
            self._lock.release()

    def _write(self, block: Block) -> None:
        block, flats, refused = checked(block)
        if refused:
            self._count(bad=refused)
            self._warn_once("bad", "rows holding values that are not numbers were refused (stats.bad_values)")
        if block.rows == 0:
            return
        encode = arrow_table if self.format == "parquet" else jsonl_bytes
        try:
            encoded = encode(block, flats)
        except Exception:  # a value record() let through: that row alone is refused, never the block
            block, flats, encoded, refused = encodable(block, encode)
            self._count(bad=refused)
            self._warn_once("encode", "rows the writer could not encode were refused (stats.bad_values)")
            if block.rows == 0:
                return
        try:
            if self.format == "parquet":
                self._write_parquet(block, encoded)
            else:
                self._write_jsonl(block, encoded)
        except Exception as exc:  # a full disk, a size limit, a vanished directory: count, log once, go on
            self._count(write_errors=1)
            self._lose("write", f"cannot write ({type(exc).__name__}: {exc})", block.rows)
            if isinstance(self._sink, JsonlSink):
                self._finish_part()  # its whole lines are kept; the next block starts a part of its own
            return
        if self._sink is not None and self._sink.size() >= self._rotate_bytes:
            self._finish_part()

    def _open_sink(self) -> ParquetSink | JsonlSink:
        if self._sink is None:
            name = f".part-{os.getpid()}-{id(self):x}-{next(self._temp_names)}.{self.format}.tmp"
            temp = self.directory / name
            self._sink = ParquetSink(temp, self._compression) if self.format == "parquet" else JsonlSink(temp)
            self._sink_opened = clock.monotonic()
        return self._sink

    def _write_parquet(self, block: Block, table: Any) -> None:
        sink = self._open_sink()
        assert isinstance(sink, ParquetSink)
        if sink.schema is not None and not table.schema.equals(sink.schema):
            conformed = conform(table, sink.schema)
            if conformed is None:  # new labels, or a label whose type changed: a part of its own
                self._finish_part()
                sink = self._open_sink()
                assert isinstance(sink, ParquetSink)
            else:
                table = conformed
        try:
            sink.write(table)
        except Exception:
            rows = sink.rows
            self._sink = None
            sink.abandon()  # a Parquet file is unreadable after a failed write: its rows are lost with it
            self._written -= rows
            self._count(dropped=rows)
            raise
        self._written += block.rows

    def _write_jsonl(self, block: Block, lines: bytes) -> None:
        sink = self._open_sink()
        assert isinstance(sink, JsonlSink)
        sink.write(lines)  # a failed write is cut back to the last whole line
        self._written += block.rows

    def _finish_part(self) -> None:
        sink, self._sink = self._sink, None
        if sink is None:
            return
        try:
            sink.finish()
            if sink.rows:
                self._parts.append(str(publish(sink.path, self.directory, self.format)))
            else:
                sink.path.unlink(missing_ok=True)
        except Exception as exc:
            self._count(write_errors=1)
            self._written -= sink.rows
            self._lose("write", f"cannot finish a part ({type(exc).__name__}: {exc})", sink.rows)
            sink.abandon()


# ----------------------------------------------------------------- process events: exit, SIGTERM, fork

_LIVE: weakref.WeakSet[Recorder] = weakref.WeakSet()
_KEEP_IN_CHILD: list[object] = []  # the parent's open parts, which a forked child must never finalise
_PREVIOUS_SIGTERM: Any = None
_SIGTERM_INSTALLED = False


def close_all(timeout: float | None = None) -> None:
    """Close every recorder of this process (at exit and on SIGTERM)."""
    for recorder in list(_LIVE):
        recorder.close(timeout)


def _install_sigterm_handler() -> None:
    global _PREVIOUS_SIGTERM, _SIGTERM_INSTALLED
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    try:
        _PREVIOUS_SIGTERM = signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main interpreter, or no signals here
        return
    _SIGTERM_INSTALLED = True


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Flush every recorder, then do what was to be done before: the previous handler, or die of the signal."""
    close_all()
    previous = _PREVIOUS_SIGTERM
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _blind(sink: object) -> None:
    fd = sink.file.fileno() if isinstance(sink, ParquetSink) else getattr(sink, "fd", -1)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError as exc:
        LOG.debug("cannot detach a forked child from its parent's part: %s", exc)


def _before_fork() -> None:
    for recorder in list(_LIVE):
        recorder._io_lock.acquire()
        recorder._lock.acquire()
        _KEEP_IN_CHILD.append(recorder._sink)


def _after_fork_parent() -> None:
    for recorder in list(_LIVE):
        recorder._lock.release()
        recorder._io_lock.release()
    _KEEP_IN_CHILD.clear()


def _after_fork_child() -> None:
    """A child starts empty: the parent's buffered rows and open part stay the parent's to write.

    The child's copy of the parent's open part is pointed at /dev/null: whatever finalises it
    later in the child (Arrow writes a Parquet footer when its writer is freed) cannot touch the file.
    """
    for sink in _KEEP_IN_CHILD:
        if sink is not None:
            _blind(sink)
    for recorder in list(_LIVE):
        recorder._lock = threading.RLock()
        recorder._io_lock = threading.Lock()
        recorder._stats_lock = threading.Lock()
        closed = recorder._closed
        recorder._fresh_state()
        recorder._closed = closed


atexit.register(close_all)
os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child)
