"""A fast path for whole JSONL blocks: one simdjson parse per block, or a refusal.

`fast_batch` takes a block's text (its lines joined by newlines) and returns the very `RunBatch` the
exact path (`jsonl.parse_block` on the block's lines, orjson per line) returns for it when every line of
the block is a valid run, or None ("decline") when it cannot be sure of that. A declined block goes
unchanged to the exact path, which names each bad row with its file and line; so the fast path never
has to word an error, and any doubt is a refusal, never a guess.

How a block is read: its newlines become commas, `[` and `]` go around it, and simdjson parses the
whole as one array; each row's three lists come out as float64 buffers (`as_buffer(of_type="d")`).
Before that, byte counts on the block (numpy) make sure that element i of the array is line i and that
orjson would read the same three lists:

- no backslash in the block, so every `"` starts or ends a string (this also rules out `\\u` escapes,
  which could spell a key differently);
- every line starts with `{` and ends with `}`, and the block holds exactly one `{` and one `}` per line
  (counting those inside strings). Then, when simdjson accepts the array and finds as many elements as
  lines, each element is exactly one line: a line's `{` can only be closed by a `}` that ends a line;
  were it not the `}` of its own line, some element would span two lines and, with no other `{` to start
  one, the array would hold fewer elements than lines;
- the block holds exactly three `[` per line, so p, q and r are flat lists (simdjson's buffers would
  flatten a nested list) and no other list is in the way;
- each key occurs as the string `"name"` exactly once per line: once at least, since its lookup
  succeeds in every row, and the count allows no more. So no row repeats a key, which simdjson would
  resolve to the first value and orjson to the last;
- simdjson refuses what orjson refuses here (invalid UTF-8, control characters in strings, NaN, numbers
  beyond a double, leading zeros, trailing garbage) and rounds numbers to the same doubles (both round
  correctly; integers convert like `float(int)`); it also refuses integers beyond 64 bits, which orjson
  takes: such a block is declined, which is safe;
- booleans, nulls, strings or objects in a list make `as_buffer` raise: declined;
- fields carried per run (`FieldSpec.extras`) are looked up in each row like the lists; such a key may
  occur at most once per line (a missing one is None, as on the exact path), and its values must be
  numbers, strings, booleans or nulls (counts must be counts);
- a row of another rule than `standard` (docs/rules.md): `--rule` naming another rule declines every block;
  a block holding the rule field's key (`"rule"`, or `--rule-field`'s first part; none with `--rule-field
  none`) is read with the rule field as one more field carried per run and declined unless every row's is
  absent, null or a name of `standard` (so standard logs that name their rule stay on this path; an escaped
  key is declined as above, and a dotted rule field declines such a block);
- values out of range, lists of different lengths, drafts longer than MAX_DRAFT_LENGTH, over-long,
  blank or whitespace-padded lines, a byte order mark, CRLF line ends, greedy logs, dotted paths and
  field names outside [A-Za-z0-9_-]: declined.

pysimdjson is imported on first use; without it every block declines and the exact path reads everything.

First of all, when it is built, the compiled reader (`specaccept_cli._jsonl_c`, C) is offered the block:
it checks every line against the JSON grammar itself (strings, escapes and UTF-8 included), so it also
takes lines the byte counts above would refuse (escapes, nested objects and lists in other fields), and
writes the three lists straight into float64 buffers. It declines whatever it is not sure orjson reads the
same way (see its header), and a block it declines goes to the exact path: the simdjson path accepts no
block it declines but those with integers of 19 or 20 digits, which are not worth a second parse.
`SPECACCEPT_NO_EXTENSIONS=1` in the environment turns it off (as it turns off its build).

A block the standard path declines may be a block of one chain rule other than `standard` (docs/rules.md):
`fast_rule_batch` offers it to the compiled reader with that rule's list keys and kinds, checks every row's
rule, the parameters and each field's range with numpy, and recomputes the rule over the block; the batch is
the exact path's (`rule.rows`: stand-in runs carrying each row's accepted length), or None on any doubt.
"""

from __future__ import annotations

import re
import threading
from functools import cache
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace

from specaccept_cli.native import extension, in_use
from specaccept_cli.rule.batch import FieldSpec, FloatArray, RunBatch, find_bad_runs, parse_field_path
from specaccept_cli.rule.contract import TOKEN_FIELDS
from specaccept_cli.rule.registry import Rule, rule_named
from specaccept_cli.rule.rows import (
    STANDARD,
    bad_values,
    field_path,
    interleave,
    is_standard,
    names_other_rule,
    row_rule,
)
from specaccept_cli.rule.steps import ChainSteps
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH, count_problem

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")
_NEWLINE, _QUOTE, _COMMA, _OPEN_LIST, _CLOSE_LIST, _OPEN_OBJECT, _CLOSE_OBJECT = b'\n",[]{}'
# What pysimdjson raises on a document it refuses, or on a lookup or a type that does not fit.
_REFUSALS = (ValueError, RuntimeError, KeyError, TypeError, AttributeError, IndexError)
_BYTE_SIZE = attrgetter("size")  # bytes in a simdjson ArrayBuffer
_SCALARS = (int, float, str, bool, type(None))
_MISSING = object()  # what a row's lookup of a field it does not have gives

_parser: Any = None  # the simdjson module once imported; False without it
_parsers = threading.local()  # a simdjson.Parser per thread: it keeps its buffers, and it is not thread-safe


def compiled_reader() -> Any:
    """The compiled block reader, or False when it is not built or SPECACCEPT_NO_EXTENSIONS is set."""
    return extension("_jsonl_c")  # looked for once per process (`native.extension`)


def count_newlines(text: bytes) -> int:
    """The newline bytes in `text`: by the compiled reader's memchr loop when it is built, else by numpy
    (`bytes.count` takes about three times numpy's time)."""
    compiled = compiled_reader()
    if compiled:
        return int(compiled.count_newlines(text))
    return int(np.count_nonzero(np.frombuffer(text, dtype=np.uint8) == _NEWLINE))


def reader_name() -> str:
    """Which JSONL reader is in use, for `--version`."""
    return in_use(compiled_reader(), "pure Python", "compiled reader")


def _compiled_batch(
    reader: Any, text: bytes, first_line: int, source: str, fields: FieldSpec, keys: _Keys, max_line_bytes: int
) -> RunBatch | None:
    parsed = reader.parse_block(
        text,
        tuple(key.encode() for key in keys.lists),
        tuple(key.encode() for key in keys.extras),
        max_line_bytes,
        _MISSING,
        fields.rule_key.encode() if fields.rule_key is not None else b"",
    )
    if parsed is None:
        return None
    p_bytes, q_bytes, r_bytes, sizes, columns = parsed
    lengths = np.frombuffer(sizes, dtype=np.int64)
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    p, q, r = (np.frombuffer(found, dtype=np.float64) for found in (p_bytes, q_bytes, r_bytes))
    extras: dict[str, list[object]] = dict(zip(fields.extras, columns))
    # The reader declined every value out of range: only the lengths are left to check.
    if (lengths.shape[0] and int(lengths.max()) > MAX_DRAFT_LENGTH) or not _extras_are_plain(fields, extras):
        return None
    return RunBatch(
        source=source,
        lines=np.arange(first_line, first_line + lengths.shape[0], dtype=np.int64),
        offsets=offsets,
        p=p,
        q=q,
        r=r,
        extras=extras,
    )


def _get_parser() -> Any:
    """This thread's simdjson parser, or False when pysimdjson is not installed."""
    global _parser
    if _parser is None:
        try:
            import simdjson
        except ImportError:  # pragma: no cover - depends on the installation
            _parser = False
        else:
            _parser = simdjson
    if _parser is False:
        return False
    parser = getattr(_parsers, "parser", None)
    if parser is None:
        parser = _parsers.parser = _parser.Parser()
    return parser


class _Keys(NamedTuple):
    lists: tuple[str, str, str]  # the keys of p, q and r
    extras: tuple[str, ...]  # the keys of the fields carried per run (FieldSpec.extras)


@cache
def _plain_keys(fields: FieldSpec) -> _Keys | None:
    """The top-level keys the fast path looks up for `fields`, or None when it must decline every block."""
    if fields.greedy or names_other_rule(fields.rule):
        return None
    names = (fields.p, fields.q, fields.r, *fields.extras)
    paths = [parse_field_path(name) for name in names]
    keys = tuple(path[0] for path in paths if len(path) == 1 and _PLAIN_NAME.fullmatch(path[0]))
    if len(keys) != len(names) or len(set(keys)) != len(keys):
        return None
    return _Keys((keys[0], keys[1], keys[2]), keys[3:])


def _key_strings(
    data: npt.NDArray[np.uint8], quotes: npt.NDArray[np.intp], keys: tuple[str, ...]
) -> list[npt.NDArray[np.intp]]:
    """Where the strings of the block that equal each key start.

    With no backslash in the block, the even-numbered quotes start its strings (were it otherwise, the
    block would not parse, and be declined all the same).
    """
    starts = quotes[0::2]
    last = data.shape[0] - 1
    encoded = [key.encode() for key in keys]
    following = [data[np.minimum(starts + offset, last)] for offset in range(1, max(map(len, encoded)) + 2)]
    found = []
    for key in encoded:
        match = following[len(key)] == _QUOTE
        for char, byte in zip(key, following):
            match &= byte == char
        found.append(starts[match])
    return found


def _extras_are_plain(fields: FieldSpec, extras: dict[str, list[object]]) -> bool:
    """Every extra value is what orjson would give (a number, string, boolean or null), and counts are counts.

    A field missing from a row is None, as on the exact path (which the values are made into here); a field
    missing from every row of the block is left to the exact path, which says which keys the rows have.

    simdjson hands out objects and lists as its own proxies, not as dicts and lists: such a block is declined.
    """
    for name, values in extras.items():
        if all(value is _MISSING for value in values):
            return False  # no row has the field: the exact path names the keys the rows have (`RunBatch.absent`)
        values[:] = [None if value is _MISSING else value for value in values]
        if any(type(value) not in _SCALARS for value in values):
            return False
        if name in fields.counts and any(count_problem(name, value) is not None for value in values):
            return False
    return True


def _is_plain_block(data: npt.NDArray[np.uint8], newlines: npt.NDArray[np.intp], max_line_bytes: int) -> bool:
    """Every line is one `{...}` of at most `max_line_bytes` bytes, with one `{`, one `}` and three `[` each.

    The block's last byte is a `}`, so no line is empty at the end (an empty line elsewhere starts at a newline).
    """
    lines = newlines.shape[0] + 1
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [data.shape[0]]))  # one past each line's last byte
    if int((ends - starts).max()) > max_line_bytes:
        return False
    return bool(
        np.all(data[starts] == _OPEN_OBJECT)
        and np.all(data[ends - 1] == _CLOSE_OBJECT)
        and np.count_nonzero(data == _OPEN_OBJECT) == lines
        and np.count_nonzero(data == _CLOSE_OBJECT) == lines
        and np.count_nonzero(data == _OPEN_LIST) == 3 * lines
    )


@cache
def _rule_key(fields: FieldSpec) -> bytes | None:
    """The rule field's top-level key as it stands in a line (`"rule"`, quoted), or None when rows name none."""
    return None if fields.rule_key is None else f'"{fields.rule_key}"'.encode()


@cache
def _with_rule(fields: FieldSpec) -> FieldSpec:
    """`fields` with the rows' rule field carried per run, for the fast path to check it."""
    assert fields.rule_field is not None
    return replace(fields, extras=(*fields.extras, fields.rule_field))


def fast_batch(text: bytes, first_line: int, source: str, fields: FieldSpec, max_line_bytes: int) -> RunBatch | None:
    """The batch the exact path gives for this block when all its lines are valid runs, else None.

    `text` is the block's lines joined by newlines (no newline at the end); its first line is line
    `first_line` of `source`.

    Both readers decline a row with the rule field's key (`rule` by default) unless the rule field is carried
    per run: a block they decline that holds the key is read once more with it carried, and taken when every
    row's is absent, null or a name of `standard` (so logs naming their rule keep this path; no scan of the
    block else). With no rule field (`--rule-field none`) such a key is a row's like any other.
    """
    batch = _fast_batch(text, first_line, source, fields, max_line_bytes)
    rule_field, key = fields.rule_field, _rule_key(fields)
    if rule_field is None or key is None:
        return batch
    if rule_field in fields.extras:
        return batch if batch is None or all(map(is_standard, batch.extras[rule_field])) else None
    if batch is not None or text.find(key) < 0:
        return batch
    batch = _fast_batch(text, first_line, source, _with_rule(fields), max_line_bytes)
    if batch is None or not all(map(is_standard, batch.extras[rule_field])):
        return None  # a row of another rule: the exact path reads it by its rule
    del batch.extras[rule_field]
    return batch


def _fast_batch(text: bytes, first_line: int, source: str, fields: FieldSpec, max_line_bytes: int) -> RunBatch | None:
    keys = _plain_keys(fields)
    if keys is None or not text or text[-1] != _CLOSE_OBJECT:
        return None
    compiled = compiled_reader()
    if compiled:
        return _compiled_batch(compiled, text, first_line, source, fields, keys, max_line_bytes)
    rule_key = _rule_key(fields)
    if text.find(b"\\") >= 0 or (
        rule_key is not None and fields.rule_field not in fields.extras and text.find(rule_key) >= 0
    ):
        return None
    p_key, q_key, r_key = keys.lists
    parser = _get_parser()
    if parser is False:
        return None
    data = np.frombuffer(text, dtype=np.uint8)
    newlines = np.flatnonzero(data == _NEWLINE)
    if not _is_plain_block(data, newlines, max_line_bytes):
        return None
    lines = newlines.shape[0] + 1
    quotes = np.flatnonzero(data == _QUOTE)
    strings = _key_strings(data, quotes, (*keys.lists, *keys.extras))
    if any(found.shape[0] != lines for found in strings[:3]):
        return None  # each list's key once per line: at least once, since every row's lookup must succeed
    if any(np.any(np.diff(np.searchsorted(newlines, found)) == 0) for found in strings[3:]):
        return None  # an extra field's key at most once per line (a missing one is None, as on the exact path)

    document = bytearray(len(text) + 2)
    document[0], document[1:-1], document[-1] = _OPEN_LIST, text, _CLOSE_LIST
    np.frombuffer(document, dtype=np.uint8)[newlines + 1] = _COMMA
    buffers: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
    add_p, add_q, add_r = (found.append for found in buffers)
    extras: dict[str, list[object]] = {name: [] for name in fields.extras}
    extra_adds = [(key, extras[name].append) for name, key in zip(fields.extras, keys.extras)]
    try:
        rows = parser.parse(document)
        if len(rows) != lines:
            return None
        for row in rows:
            add_p(row[p_key].as_buffer(of_type="d"))
            add_q(row[q_key].as_buffer(of_type="d"))
            add_r(row[r_key].as_buffer(of_type="d"))
        for key, add in extra_adds:  # a column at a time: the loop above stays the hot one
            for row in rows:
                add(row.get(key, _MISSING))
    except _REFUSALS:
        return None
    finally:
        rows = row = None  # the proxies pin the parser's document: let them go before its next parse

    sizes = np.fromiter(map(_BYTE_SIZE, chain(*buffers)), dtype=np.int64, count=3 * lines).reshape(3, lines)
    if not (np.array_equal(sizes[0], sizes[1]) and np.array_equal(sizes[0], sizes[2])):
        return None
    offsets = np.zeros(lines + 1, dtype=np.int64)
    np.cumsum(sizes[0] // 8, out=offsets[1:])
    p, q, r = (np.frombuffer(bytearray().join(found), dtype=np.float64) for found in buffers)
    if find_bad_runs(offsets, p, q, r) or not _extras_are_plain(fields, extras):
        return None
    return RunBatch(
        source=source,
        lines=np.arange(first_line, first_line + lines, dtype=np.int64),
        offsets=offsets,
        p=p,
        q=q,
        r=r,
        extras=extras,
    )


# --- blocks of one other rule than `standard` (docs/rules.md), by the compiled reader ------------------------

_KIND_UNIT, _KIND_Q, _KIND_NUMBER, _KIND_NULLABLE, _KIND_TOKEN, _KIND_SKIPPED = range(6)


class _RulePlan(NamedTuple):
    rule: Rule
    lists: tuple[str, ...]  # the keys of the rule's list fields, then of the lists it may carry unused
    kinds: bytes  # what each list holds (the compiled reader's KIND_ values)
    bonus: int  # the list that may hold one more entry than drafted (the target's bonus token), or -1
    extras: tuple[str, ...]  # the scalar keys read per row: FieldSpec.extras, the rule field, the parameters


@cache
def _rule_plan(fields: FieldSpec, name: str) -> _RulePlan | None:
    """How the compiled reader reads a block of chain rule `name`'s rows, or None when it cannot (a tree rule,
    a dotted path, a field name outside [A-Za-z0-9_-])."""
    rule = rule_named(name)
    if rule.kind != "chain" or rule.name == STANDARD.name or fields.greedy:
        return None
    wanted = (*rule.fields, *rule.optional)
    paths = [field_path(field, fields) for field in wanted]
    named = () if fields.rule_field is None else (fields.rule_field,)  # `--rule-field none`: rows name none
    extras = tuple(dict.fromkeys((*fields.extras, *named, *(param.name for param in rule.params))))
    keys = [path[0] for path in paths if len(path) == 1 and _PLAIN_NAME.fullmatch(path[0])]
    plain_extras = [name for name in extras if _PLAIN_NAME.fullmatch(name)]
    if len(keys) != len(wanted) or len(plain_extras) != len(extras) or len({*keys, *extras}) != len(keys) + len(extras):
        return None

    def kind(field: str, optional: bool) -> int:
        if optional:
            return _KIND_SKIPPED
        if field in TOKEN_FIELDS:
            return _KIND_TOKEN
        return {"p": _KIND_UNIT, "r": _KIND_UNIT, "q": _KIND_Q, "residual": _KIND_NULLABLE}.get(field, _KIND_NUMBER)

    kinds = bytes(kind(field, field in rule.optional) for field in wanted)
    bonus = wanted.index("target_tokens") if "target_tokens" in wanted else -1
    return _RulePlan(rule, tuple(keys), kinds, bonus, extras)


_RULE_VALUE = re.compile(rb'"([A-Za-z0-9_-]+)"\s*:\s*"([A-Za-z0-9_-]+)"')


def _first_rule(text: bytes, fields: FieldSpec) -> Rule | None:
    """The rule the block's first row names in its rule field (or `--rule`'s when it names none)."""
    end = text.find(b"\n")
    first = text if end < 0 else text[:end]
    key = fields.rule_key
    if key is not None and first.find(f'"{key}"'.encode()) >= 0:
        for found in _RULE_VALUE.finditer(first):
            if found.group(1).decode() == key:
                rule = row_rule(found.group(2).decode(), STANDARD)
                return rule if isinstance(rule, Rule) else None
        return None
    return rule_named(fields.rule)


def fast_rule_batch(
    text: bytes, first_line: int, source: str, fields: FieldSpec, max_line_bytes: int
) -> RunBatch | None:
    """The batch the exact path gives for a block whose rows are all valid rows of one chain rule other than
    `standard`, else None: the block's first row names the rule, the compiled reader reads that rule's lists
    (declining as for (p, q, r) rows, and any row that lacks one or holds a duplicate key), and every row must
    name the same rule; values out of their field's range, parameters that are not numbers, and extras the
    exact path would word a message about decline the block."""
    compiled = compiled_reader()
    if not compiled or not text or text[-1] != _CLOSE_OBJECT:
        return None
    rule = _first_rule(text, fields)
    plan = None if rule is None else _rule_plan(fields, rule.name)
    if plan is None:
        return None
    parsed = compiled.parse_block(
        text,
        tuple(key.encode() for key in plan.lists),
        tuple(key.encode() for key in plan.extras),
        max_line_bytes,
        _MISSING,
        b"" if fields.rule_key is None else fields.rule_key.encode(),
        plan.kinds,
        plan.bonus,
    )
    if parsed is None:
        return None
    buffers, sizes, scalars = parsed[: len(plan.lists)], parsed[-2], parsed[-1]
    lengths = np.frombuffer(sizes, dtype=np.int64)
    rows = lengths.shape[0]
    if rows and int(lengths.max()) > MAX_DRAFT_LENGTH:
        return None
    read = dict(zip(plan.extras, scalars))
    default = rule_named(fields.rule)
    for value in set(map(_named_value, read[fields.rule_field] if fields.rule_field is not None else ())):
        named = default if value is None else row_rule(value, default) if type(value) is str else None
        if named is not plan.rule:
            return None  # another rule's row, or a value the exact path words a message about
    params = _params(plan.rule, read, rows)
    if params is None:
        return None
    extras = {name: list(read[name]) for name in fields.extras}
    if not _extras_are_plain(fields, extras):
        return None
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    columns: dict[str, npt.NDArray[Any]] = {}
    for field, found in zip(plan.rule.fields, buffers):
        values = np.frombuffer(found, dtype=np.float64)
        if field in TOKEN_FIELDS:
            columns[field] = values.astype(np.int64)
        elif bad_values(field, values, offsets).any():
            return None
        else:
            columns[field] = values
    accepted = plan.rule.accepted(ChainSteps(offsets, columns, params))
    empty = np.zeros(0)
    standard = RunBatch(
        source,
        np.zeros(0, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        empty,
        empty,
        empty,
        extras={name: [] for name in fields.extras},
    )
    lines = np.arange(first_line, first_line + rows, dtype=np.int64)
    return interleave(standard, lines, lengths.copy(), accepted, extras, [plan.rule.name] * rows)


def _named_value(value: object) -> object:
    """A rule field's value as the exact path sees it (absent is None); a value it cannot hash is refused."""
    if value is _MISSING:
        return None
    return value if value is None or type(value) is str else _UNNAMED


_UNNAMED = object()  # a rule value that is not a name (a number, a boolean): the exact path words it


def _params(rule: Rule, read: dict[str, list[object]], rows: int) -> dict[str, FloatArray] | None:
    """The rule's per-step parameters as the exact path takes them, or None when one is not a finite number
    (absent without a default, a string, a boolean, out of range)."""
    params: dict[str, FloatArray] = {}
    for param in rule.params:
        values = read[param.name]
        given = [value for value in values if value is not _MISSING and value is not None]
        if any(type(value) is not float and type(value) is not int for value in given):
            return None
        if len(given) < rows:
            if param.default is None:
                return None
            values = [param.default if value is _MISSING or value is None else value for value in values]
        if not given and param.default is not None:
            continue  # no row carries it: the rule's default, as the exact path leaves it
        try:
            column = np.array(values, dtype=np.float64)
        except OverflowError:
            return None
        if not np.isfinite(column).all() or (param.minimum is not None and not (column >= param.minimum).all()):
            return None
        params[param.name] = column
    return params
