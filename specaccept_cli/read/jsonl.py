"""JSONL rows -> `RunBatch`es: newline-aligned blocks of bytes, parsed whole by simdjson or line by line by orjson.

Blocks are independent (a block knows the number of its first line), so they can
later be parsed in parallel without losing exact line numbers or order.
"""

from __future__ import annotations

import array
import lzma
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, cast

import numpy as np
import orjson

from specaccept_cli.errors import InputError, OnError, Problem, Reason, Why
from specaccept_cli.read.jsonl_fast import compiled_reader, count_newlines, fast_batch, fast_rule_batch
from specaccept_cli.rule.batch import (
    FieldPath,
    FieldSpec,
    FloatArray,
    IntArray,
    RunBatch,
    absent_from_both,
    find_bad_runs,
    greedy_batch,
    parse_field_path,
)
from specaccept_cli.rule.registry import Rule
from specaccept_cli.rule.rows import STANDARD, RuleRows, interleave, names_other_rule, rule_value
from specaccept_cli.rule.validate import (
    DEFAULT_MAX_LINE_BYTES,
    count_problem,
    describe_value,
    json_value,
    length_problem,
)

# The pure-Python readers make objects per row: 512 KiB blocks keep them in a core's L2 cache while a block
# is parsed (~22% less CPU than 4 MiB blocks on the 1M-run benchmark). The compiled reader makes none, and
# what is left per block is fixed Python work (the arrays, the rule, the tallies): 2 MiB blocks take about
# a tenth less time than 512 KiB ones (docs/performance.md).
PURE_BLOCK_BYTES = 512 << 10
COMPILED_BLOCK_BYTES = 2 << 20
BLOCK_BYTES = COMPILED_BLOCK_BYTES if compiled_reader() else PURE_BLOCK_BYTES
BOM = b"\xef\xbb\xbf"
_NEWLINE = ord("\n")

# A line too long to hold stands in its block as this marker (its bytes are discarded).
OVERLONG = b""


class _Missing:
    pass


MISSING = _Missing()
_NO_KEY = "\ud800"  # a dict key no parsed JSON object holds: orjson refuses lone surrogates
# A line that is no JSON, or JSON but no object: the way out the command line adds is keyed on these.
_NOT_JSON = Why(Reason.NOT_JSON)
_NOT_AN_OBJECT = Why(Reason.NOT_AN_OBJECT)

# Exceptions a decompressor raises on a truncated or corrupt stream.
_STREAM_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, lzma.LZMAError, zlib.error)
try:  # optional
    import zstandard

    _STREAM_ERRORS += (zstandard.ZstdError,)
except ImportError:  # pragma: no cover - depends on the extra
    pass


Lines = bytes | list[bytes | None]
# A block's lines: its text (lines joined by newlines), or the lines themselves (an over-long one as None).


def iter_text_blocks(
    stream: BinaryIO,
    source: str,
    block_bytes: int = BLOCK_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[int, int, Lines]]:
    """Yield (number of the first line, number of lines, lines) for newline-aligned blocks of the stream.

    A block comes as its text, unsplit (the fast path parses it whole; `split_lines` gives the lines), or
    as a list where a line was longer than `max_line_bytes`: such a line is yielded alone as None and its
    bytes are dropped as they arrive, so memory stays bounded whatever the input.
    """
    state = _LineState()
    try:
        yield from _text_blocks(stream, source, block_bytes, max_line_bytes, state)
    except MemoryError:
        if not state.pending_size:
            raise
        # A line that --max-line-bytes allows, longer than the memory there is: its pieces are dropped by now.
        raise InputError(
            source,
            state.next_line,
            f"line does not fit in memory ({state.pending_size:,} bytes of it read; --max-line-bytes"
            f" {max_line_bytes:,} allows more than this machine holds)",
        ) from None


class _LineState:
    """Where `_text_blocks` is: the next line's number and how much of a line that spans blocks it holds."""

    next_line = 1
    pending_size = 0


class ChunkReader:
    """`read(size)` built from `read1` calls: the bytes `read(size)` gives, each read of the source returning
    to Python, and what was read before a failure kept.

    - A buffered `read(size)` on a pipe loops in C until it has `size` bytes: a signal that arrives between
      two of its reads (Ctrl-C or SIGTERM while a pipe trickles, or stalls) is noted but not acted on, and
      the next read waits for data that may never come. Here Python runs between the reads, and with it the
      signal's handler.
    - A decompressor's `read(size)` that meets a truncated or corrupt stream raises and drops everything it
      decoded in that call (a whole block of good rows). Here the bytes before the failure are returned
      first and the failure is raised by the next call, so every complete line before the damage is read
      and the error names how many there were.

    A stream without `read1`, or a followed one (which hands out what it has as it comes, and whose own
    reads wake for signals), is read as it is.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self._read1 = None if getattr(stream, "hands_out_lines", False) else getattr(stream, "read1", None)
        self.failure: BaseException | None = None

    def read(self, size: int = -1) -> bytes:
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        if self._read1 is None:
            whole: bytes = self.stream.read(size)
            return whole
        parts: list[bytes] = []
        got = 0
        while size < 0 or got < size:
            try:
                part: bytes = self._read1(size - got if size >= 0 else 1 << 20)
            except Exception as exc:  # the decompressor's or the device's: after the bytes before it
                if not parts:
                    raise
                self.failure = exc
                break
            if not part:
                break
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        self.stream.close()


def _text_blocks(
    stream: BinaryIO, source: str, block_bytes: int, max_line_bytes: int, state: _LineState
) -> Iterator[tuple[int, int, Lines]]:
    chunks = ChunkReader(stream)
    next_line = 1
    pending: list[bytes] = []  # pieces of a line that spans blocks, joined once when its end arrives
    pending_size = 0
    discarding = False  # inside an overlong line whose start was already reported
    while True:
        state.next_line, state.pending_size = next_line, pending_size
        try:
            chunk = chunks.read(block_bytes)
        except _STREAM_ERRORS as exc:
            read = f"{next_line - 1} line{'s' if next_line != 2 else ''}"
            if isinstance(exc, OSError) and exc.errno is not None:  # the device, not the data
                raise InputError(source, None, f"read error after {read} ({exc.strerror})") from None
            why = Why(Reason.CUT, lines=next_line - 1)
            raise InputError(
                source, None, f"compressed stream is truncated or corrupt after {read} ({exc})", why=why
            ) from None
        if not chunk:
            break
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if not discarding:
                pending.append(chunk)
                pending_size += len(chunk)
                state.pending_size = pending_size
                if pending_size > max_line_bytes:
                    yield next_line, 1, [None]
                    next_line += 1
                    pending, pending_size = [], 0
                    discarding = True
            continue
        head, tail = memoryview(chunk)[:cut], chunk[cut + 1 :]  # the head is copied once, below
        text: bytes | None
        if discarding:  # the rest of the overlong line, already counted
            rest = chunk.find(b"\n", 0, cut)
            text = bytes(head[rest + 1 :]) if rest >= 0 else None
            discarding = False
        else:
            text = b"".join([*pending, head])
        pending, pending_size = ([tail], len(tail)) if tail else ([], 0)
        if text is not None:
            count = count_newlines(text) + 1
            yield next_line, count, text
            next_line += count
    if pending and not discarding:
        state.next_line, state.pending_size = next_line, pending_size
        yield next_line, 1, b"".join(pending)


def split_lines(lines: Lines) -> list[bytes | None]:
    """A block's lines, one by one."""
    return cast(list[bytes | None], lines.split(b"\n")) if isinstance(lines, bytes) else lines


def iter_line_blocks(
    stream: BinaryIO,
    source: str,
    block_bytes: int = BLOCK_BYTES,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[int, list[bytes | None]]]:
    """Yield (number of the first line, lines) for newline-aligned blocks of the stream (see `iter_text_blocks`)."""
    for first_line, _, lines in iter_text_blocks(stream, source, block_bytes, max_line_bytes):
        yield first_line, split_lines(lines)


def _lookup(obj: dict[str, object], path: FieldPath) -> object:
    value: object = obj
    for key in path:
        if type(value) is not dict:
            return MISSING
        value = value.get(key, MISSING)
        if value is MISSING:
            return MISSING
    return value


def _row_extras(
    obj: dict[str, object], extra_paths: list[tuple[str, FieldPath]], counts: tuple[str, ...]
) -> tuple[list[object], str | None]:
    """A row's extra fields (MISSING where absent), and why the row is bad when a count among them is not one."""
    values = [_lookup(obj, path) for _, path in extra_paths]
    for (name, _), value in zip(extra_paths, values):
        if name in counts:
            problem = count_problem(name, None if value is MISSING else value)
            if problem is not None:
                return values, problem
    return values, None


def _keys_near(obj: dict[str, object], path: FieldPath) -> tuple[str, ...]:
    """The dotted keys of the deepest object on `path` that a row has: what the user may have meant."""
    value, depth = obj, 0
    for depth, key in enumerate(path):  # noqa: B007 - depth is where the path stops
        inner = value.get(key)
        if type(inner) is not dict:
            break
        value = inner
    prefix = "".join(part + "." for part in path[:depth])
    return tuple(prefix + str(name) for name in value)


def _missing_message(obj: dict[str, object], path: FieldPath) -> Problem:
    value: object = obj
    dotted = ".".join(path)
    missing = Why(Reason.MISSING_FIELD, about=dotted)
    for depth, key in enumerate(path):
        where = ".".join(path[:depth])
        if type(value) is not dict:
            wrong = Why(Reason.WRONG_FIELD, about=dotted)  # a part of the path is no object: not a missing field
            return Problem(f"field '{where}' is {json_value(value)}, not an object (looking for '{dotted}')", wrong)
        if key not in value:
            keys = list(value)
            shown = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "")
            place = f"'{where}'" if where else "the row"
            return Problem(f"missing field '{dotted}' ({place} has keys: {shown or 'none'})", missing)
        value = value[key]
    return Problem(f"missing field '{dotted}'", missing)  # pragma: no cover - only called when lookup failed


def _json_error_message(raw: bytes, exc: orjson.JSONDecodeError) -> str:
    text = str(exc)
    column = getattr(exc, "colno", None)
    position = getattr(exc, "pos", 0) or 0
    if "UTF-8" in text and "byte order mark" not in text:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            return f"line is not valid UTF-8 (byte 0x{raw[bad.start]:02x} at column {bad.start + 1})"
        return Problem(
            f"invalid JSON at column {column}: a \\u escape is a lone surrogate (not a Unicode character)", _NOT_JSON
        )
    rest = raw[position : position + 9].lstrip(b"-")
    if rest.startswith((b"NaN", b"Infinity")):
        return f"NaN or Infinity at column {column} is not valid JSON (a numerics bug upstream?)"
    if "infinity when parsed" in text:
        return f"number at column {column} is too large for a double (it would be Infinity)"
    reason = text.split(": line ")[0]
    return Problem(f"invalid JSON at column {column}: {reason}", _NOT_JSON)


def _find_lists(obj: dict[str, object], names: tuple[str, str, str], paths: tuple[FieldPath, ...]) -> str | list[Any]:
    """The row's three lists, or the message naming the first field that is missing or not a list."""
    found = []
    for name, path in zip(names, paths):
        value = _lookup(obj, path)
        if value is MISSING:
            return _missing_message(obj, path)
        if type(value) is not list:
            return Problem(f"'{name}' is {json_value(value)}, not a list of numbers", Why(Reason.WRONG_FIELD, name))
        found.append(value)
    return found


def _float_array(values: list[object]) -> FloatArray | None:
    """The values as float64, or None when one is not a JSON number or does not fit a double.

    array('d') rejects strings, nulls, lists and objects, and overflows on huge integers, but takes
    booleans as 0.0 and 1.0: only values equal to 0 or 1 need their type checked.
    """
    try:
        floats = np.frombuffer(array.array("d", cast(list[float], values)), dtype=np.float64)
    except (TypeError, OverflowError):
        return None
    suspects = np.flatnonzero((floats == 0.0) | (floats == 1.0)).tolist()
    if suspects and any(type(values[index]) is bool for index in suspects):
        return None
    return floats


def _is_number(value: object) -> bool:
    return type(value) is float or type(value) is int


def _type_problem(name: str, values: list[object]) -> tuple[str | None, list[float]]:
    """First non-numeric element of a list (message) and the list with bad elements made valid."""
    cleaned: list[float] = []
    problem: str | None = None
    for index, value in enumerate(values):
        if _is_number(value):
            try:
                cleaned.append(float(value))  # type: ignore[arg-type]
                continue
            except OverflowError:
                if problem is None:
                    problem = f"{name}[{index}] = {describe_value(value)} is not a finite number"
        elif problem is None:
            problem = f"{name}[{index}] is {json_value(value)}, not a number"
        cleaned.append(0.5)
    return problem, cleaned


class _RowFrame:
    """What both row loops share: decoding lines into JSON objects, the extra fields, line numbers, errors.

    `objects()` yields (line, object) for every line that is a JSON object and records why the
    others are not rows; a loop then takes the row's own fields and calls `keep` for a valid run.
    """

    def __init__(self, lines: list[bytes | None], first_line: int, source: str, fields: FieldSpec, max_line_bytes: int):
        self.lines, self.first_line, self.source, self.max_line_bytes = lines, first_line, source, max_line_bytes
        self.counts = fields.counts
        self.extra_paths = [(name, parse_field_path(name)) for name in fields.extras]
        self.extras: dict[str, list[object]] = {name: [] for name in fields.extras}
        self.found: set[str] = set()  # extra fields some kept row has
        self.near: dict[str, tuple[str, ...]] = {}  # for an extra field missing from a kept row: that row's keys
        self.lengths: list[int] = []
        self.line_numbers: list[int] = []
        self.problems: list[tuple[int, str]] = []  # (line, message), in the order found
        self.rows: list[tuple[int, dict[str, object]]] | None = None  # objects already decoded (`_parse_rules`)

    def objects(self) -> Iterator[tuple[int, dict[str, object]]]:
        if self.rows is not None:
            yield from self.rows
            return
        loads, problems, max_line_bytes = orjson.loads, self.problems, self.max_line_bytes
        line = self.first_line - 1
        for raw in self.lines:
            line += 1
            if raw is None or len(raw) > max_line_bytes:
                problems.append((line, f"line is longer than {max_line_bytes} bytes (the max_line_bytes limit)"))
                continue
            if line == 1 and raw.startswith(BOM):  # before the blank test: a BOM alone is an empty first line
                raw = raw[len(BOM) :]
            if not raw or raw.isspace():
                continue
            try:
                obj = loads(raw)
            except orjson.JSONDecodeError as exc:
                problems.append((line, _json_error_message(raw, exc)))
                continue
            if type(obj) is not dict:
                problems.append((line, Problem(f"row is {json_value(obj)}, not a JSON object", _NOT_AN_OBJECT)))
                continue
            yield line, obj

    def keep(self, line: int, obj: dict[str, object], length: int) -> bool:
        """Record a run of `length` tokens (its extras too); False when an extra makes the row bad."""
        if self.extra_paths:
            row_extras, problem = _row_extras(obj, self.extra_paths, self.counts)
            if problem is not None:
                self.problems.append((line, problem))
                return False
            for (name, path), value in zip(self.extra_paths, row_extras):
                if value is MISSING:
                    value = None
                    if name not in self.near:
                        self.near[name] = _keys_near(obj, path)
                else:
                    self.found.add(name)
                self.extras[name].append(value)
        self.lengths.append(length)
        self.line_numbers.append(line)
        return True

    def absent(self) -> dict[str, tuple[str, ...]]:
        """Extra fields no row of the block has (every one, when no row was kept), with keys to suggest."""
        return {name: self.near.get(name, ()) for name, _ in self.extra_paths if name not in self.found}

    def offsets(self) -> IntArray:
        offsets = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        return offsets

    def errors(self) -> list[InputError]:
        """Every problem as an InputError carrying its raw line, in line order."""
        lines, first_line, source = self.lines, self.first_line, self.source
        return [
            InputError(source, line, message, raw=lines[line - first_line]) for line, message in sorted(self.problems)
        ]


def _parse_sampled(frame: _RowFrame, fields: FieldSpec) -> tuple[RunBatch, list[InputError]]:
    """(p, q, r) rows: the runs of a block, with numbers checked as a batch (see `parse_block`)."""
    names = (fields.p, fields.q, fields.r)
    paths = tuple(parse_field_path(name) for name in names)
    # Keys for the fast path; a dotted path gets a key no JSON object has, so it always takes the full lookup.
    p_key, q_key, r_key = (path[0] if len(path) == 1 else _NO_KEY for path in paths)
    flat: tuple[list[object], list[object], list[object]] = ([], [], [])
    flat_p, flat_q, flat_r = flat
    problems, lengths, line_numbers = frame.problems, frame.lengths, frame.line_numbers
    has_extras = bool(frame.extra_paths)
    for line, obj in frame.objects():
        p, q, r = obj.get(p_key), obj.get(q_key), obj.get(r_key)  # fast path: three top-level lists
        if type(p) is not list or type(q) is not list or type(r) is not list:
            found = _find_lists(obj, names, paths)
            if isinstance(found, str):
                problems.append((line, found))
                continue
            p, q, r = found
        n = len(p)
        if len(q) != n or len(r) != n:
            problems.append(
                (line, f"{names[0]}, {names[1]} and {names[2]} have different lengths ({n}, {len(q)}, {len(r)})")
            )
            continue
        if has_extras and not frame.keep(line, obj, n):
            continue
        if not has_extras:  # the hot path: no per-row call
            lengths.append(n)
            line_numbers.append(line)
        flat_p += p
        flat_q += q
        flat_r += r

    offsets = frame.offsets()
    arrays = []
    bad_runs: dict[int, str] = {}
    for name, values in zip(names, flat):
        floats = _float_array(values)
        if floats is not None:
            arrays.append(floats)
            continue
        # Slow path, only for a batch holding a non-number: name the row and element.
        cleaned_all: list[float] = []
        for run, length in enumerate(lengths):
            start = int(offsets[run])
            problem, cleaned = _type_problem(name, values[start : start + length])
            if problem is not None and run not in bad_runs:
                bad_runs[run] = problem
            cleaned_all += cleaned
        arrays.append(np.array(cleaned_all, dtype=np.float64))
    p_arr, q_arr, r_arr = arrays
    for run, message in find_bad_runs(offsets, p_arr, q_arr, r_arr, names):
        bad_runs.setdefault(run, message)

    batch = RunBatch(
        source=frame.source,
        lines=np.array(line_numbers, dtype=np.int64),
        offsets=offsets,
        p=p_arr,
        q=q_arr,
        r=r_arr,
        extras=frame.extras,
        absent=frame.absent(),
    )
    if bad_runs:
        problems += [(line_numbers[run], message) for run, message in bad_runs.items()]
        keep = np.ones(len(lengths), dtype=bool)
        keep[list(bad_runs)] = False
        batch = batch.select(keep)
    return batch, frame.errors()


def _token_problem(name: str, tokens: list[object]) -> str | None:
    for index, token in enumerate(tokens):
        if type(token) is not int and type(token) is not str:
            return f"{name}[{index}] is {json_value(token)}, not a token id"
    return None


def _parse_greedy(frame: _RowFrame, fields: FieldSpec) -> tuple[RunBatch, list[InputError]]:
    """Greedy logs: each row holds the drafted token ids and the target's argmax ids.

    The target list has k entries, or k + 1 when it includes the bonus position; a run's
    accepted length is the common prefix of the two (see `batch.greedy_batch`).
    """
    assert fields.draft_tokens is not None and fields.target_tokens is not None
    names = (fields.draft_tokens, fields.target_tokens)
    paths = [parse_field_path(name) for name in names]
    matches: list[bool] = []
    for line, obj in frame.objects():
        lists, problem = _token_lists(obj, names, paths)
        if problem is None:
            drafted, target = lists
            k = len(drafted)
            if len(target) not in (k, k + 1):
                problem = f"'{names[1]}' has {len(target)} entries; {k} drafted tokens need {k} or {k + 1}"
            else:
                problem = length_problem(k)
        if problem is not None:
            frame.problems.append((line, problem))
        elif frame.keep(line, obj, k):
            matches += [d == t for d, t in zip(drafted, target)]
    lines_array = np.array(frame.line_numbers, dtype=np.int64)
    matched = np.array(matches, dtype=bool)
    batch = greedy_batch(frame.source, lines_array, frame.offsets(), matched, frame.extras, frame.absent())
    return batch, frame.errors()


def _token_lists(
    obj: dict[str, object], names: tuple[str, str], paths: list[FieldPath]
) -> tuple[list[list[object]], str | None]:
    """The row's drafted and target token-id lists, or the message naming the first field that is not one."""
    lists: list[list[object]] = []
    for name, path in zip(names, paths):
        value = _lookup(obj, path)
        if value is MISSING:
            return lists, _missing_message(obj, path)
        if type(value) is not list:
            return lists, Problem(
                f"'{name}' is {json_value(value)}, not a list of token ids", Why(Reason.WRONG_FIELD, name)
            )
        problem = _token_problem(name, value)
        if problem is not None:
            return lists, problem
        lists.append(value)
    return lists, None


def parse_block(
    lines: Lines,
    first_line: int,
    source: str,
    fields: FieldSpec,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[RunBatch, list[InputError]]:
    """Parse one block of JSONL lines into a batch of valid runs, and the bad rows in line order.

    (p, q, r) rows, or greedy token-id rows when `fields` names them. A pure function of its
    arguments (no callbacks, no I/O), so blocks can be parsed anywhere, in any order, and their
    errors dispatched in input order by the caller. Each error carries the raw line
    (`InputError.raw`); blank lines are ignored.

    A block given as its text is first offered whole to the fast path (`jsonl_fast`), which gives the
    same batch when every line is a valid run and declines otherwise; a declined block is parsed here,
    line by line.
    """
    if isinstance(lines, bytes):
        batch = fast_batch(lines, first_line, source, fields, max_line_bytes)
        if batch is None:
            batch = fast_rule_batch(lines, first_line, source, fields, max_line_bytes)
        if batch is not None:
            return batch, []
    frame = _RowFrame(split_lines(lines), first_line, source, fields, max_line_bytes)
    if fields.greedy:
        return _parse_greedy(frame, fields)
    if _may_name_rules(lines, fields):
        return _parse_rules(frame, fields)
    return _parse_sampled(frame, fields)


def _may_name_rules(lines: Lines, fields: FieldSpec) -> bool:
    """Whether a row of the block may be of another rule than `standard`: `--rule` names one, or a line holds
    the rule field's key (`rule` by default) or a `\\u` escape (which could spell it)."""
    if names_other_rule(fields.rule):
        return True
    if fields.rule_key is None:
        return False
    key = fields.rule_key.encode()
    texts = [lines] if isinstance(lines, bytes) else [line for line in lines if line is not None]
    return any(key in text or b"\\u" in text for text in texts)


def _parse_rules(frame: _RowFrame, fields: FieldSpec) -> tuple[RunBatch, list[InputError]]:
    """Rows of any rule (docs/rules.md, "The row contract"): the `standard` ones through `_parse_sampled`, the
    others checked and recomputed by their own rules (`rule.rows`), then put back in input order."""
    rows = RuleRows(fields)
    standard: list[tuple[int, dict[str, object]]] = []
    others = _RowFrame(frame.lines, frame.first_line, frame.source, fields, frame.max_line_bytes)
    others.problems = frame.problems  # one list of problems, put in line order by `errors`
    lines: list[int] = []
    offered: list[dict[str, object]] = []
    rules: list[Rule] = []
    named = rows.named
    key = fields.rule_field if fields.rule_field is None or "." not in fields.rule_field else None
    for line, obj in frame.objects():
        value = obj.get(key) if key is not None else rule_value(obj, fields)
        rule = named.get(value) if value is None or type(value) is str else None
        if rule is None:
            rule = rows.rule_of(value)
        if isinstance(rule, str):
            frame.problems.append((line, rule))
        elif rule is STANDARD:
            standard.append((line, obj))
        else:
            lines.append(line)
            offered.append(obj)
            rules.append(rule)
    problems = rows.add(offered, rules)
    if any(problems):
        frame.problems += [(line, problem) for line, problem in zip(lines, problems) if problem is not None]
        lines = [line for line, problem in zip(lines, problems) if problem is None]
        offered = [obj for obj, problem in zip(offered, problems) if problem is None]
    bad = rows.check()  # the values, column by column: a bad row's message before its extras' (as row by row)
    if bad or others.extra_paths:
        for index, (line, obj) in enumerate(zip(lines, offered)):
            problem = bad.get(index)
            if problem is not None:
                frame.problems.append((line, problem))
            elif not others.keep(line, obj, 0):
                rows.drop(index)
    else:  # every row taken, and no extras to look up: `keep` for each at once
        others.line_numbers += lines
        others.lengths += [0] * len(lines)
    sampled = _RowFrame(frame.lines, frame.first_line, frame.source, fields, frame.max_line_bytes)
    sampled.rows, sampled.problems = standard, frame.problems
    batch, _ = _parse_sampled(sampled, fields)
    k, accepted, names = rows.accepted()
    batch = interleave(batch, np.array(others.line_numbers, dtype=np.int64), k, accepted, others.extras, names)
    if names:
        batch.absent = absent_from_both(sampled.absent(), others.absent()) if standard else others.absent()
    return batch, frame.errors()


# After a block with bad rows, about 4 MiB of blocks skip the fast path (8 blocks of 512 KiB, 2 of 2 MiB): a
# block it declines for a bad row is parsed twice (up to 1.7x the exact path's time), so a log with bad rows
# everywhere would otherwise read more slowly, and one with a rare bad row loses little.
EXACT_AFTER_BAD_BLOCK = max(1, (4 << 20) // BLOCK_BYTES)


def parse_blocks(
    blocks: Iterable[tuple[int, Lines]],
    source: str,
    fields: FieldSpec,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[RunBatch, list[InputError]]]:
    """`parse_block` over consecutive blocks of one source; what each gives does not depend on the others.

    Only the speed does: the blocks after one with bad rows go straight to the exact path
    (`EXACT_AFTER_BAD_BLOCK`), since bad rows tend to come together.
    """
    exact_for = 0
    for first_line, lines in blocks:
        if exact_for:
            exact_for -= 1
            lines = split_lines(lines)
        batch, errors = parse_block(lines, first_line, source, fields, max_line_bytes)
        if errors:
            exact_for = EXACT_AFTER_BAD_BLOCK
        yield batch, errors


def read_jsonl(
    stream: BinaryIO,
    source: str,
    fields: FieldSpec,
    on_error: OnError,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[RunBatch]:
    """Stream a JSONL byte stream as batches of valid runs, in input order."""
    blocks = iter_text_blocks(stream, source, max_line_bytes=max_line_bytes)
    for batch, errors in parse_blocks(((first, lines) for first, _, lines in blocks), source, fields, max_line_bytes):
        for error in errors:
            on_error(error)
        yield batch
