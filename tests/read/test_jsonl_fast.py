"""The block fast path (`jsonl_fast`) against the exact path: the same batch bit for bit, or a refusal.

Blocks are built from row pieces that vary everything the fast path's byte checks rely on (key order,
spacing, extra fields, number spellings) and from pieces that must make it decline (a duplicate key, a
nested list, a boolean, an escape, a blank or padded line, a value out of range, ...). Whatever it is
given, `parse_block` on the block's text must give exactly what the line-by-line path gives.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.read import jsonl, jsonl_fast
from specaccept_cli.read.jsonl import EXACT_AFTER_BAD_BLOCK, parse_block, parse_blocks
from specaccept_cli.read.jsonl_fast import fast_batch
from specaccept_cli.rule.batch import FieldSpec, RunBatch

MAX_LINE = 1 << 20
FIELDS = FieldSpec()
COMPILED = jsonl_fast.compiled_reader()


@pytest.fixture(autouse=True, params=["compiled", "simdjson"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with each fast reader: the compiled one (when built) and the simdjson one."""
    if request.param == "compiled" and not COMPILED:
        if os.environ.get("CI") and not os.environ.get("SPECACCEPT_NO_EXTENSIONS"):
            pytest.fail("the compiled reader is not built (CI builds it)")
        pytest.skip("the compiled reader is not built")
    monkeypatch.setattr(jsonl_fast, "compiled_reader", lambda: COMPILED if request.param == "compiled" else False)
    return str(request.param)


# Spellings of valid numbers in [0, 1] (and of q's (0, 1]); integers, exponents, -0, many digits.
NUMBERS = st.one_of(
    st.floats(0, 1).map(repr),
    st.floats(1e-300, 1).map(lambda value: f"{value:.17e}"),
    st.sampled_from(["0", "1", "-0", "-0.0", "1E0", "1e-0", "0.5e+0", "5E-1", "0.1000000000000000055511151231257827"]),
)
POSITIVE = st.one_of(st.floats(1e-300, 1).map(repr), st.sampled_from(["1", "1.0", "1e0", "2.5e-1"]))
# Values that make a row bad (or that only the exact path takes): the fast path must decline them.
BAD_NUMBERS = st.sampled_from(
    ["true", "null", '"0.5"', "[0.5]", "{}", "1.5", "-0.5", "NaN", "1e400", "18446744073709551616", "01", ".5"]
)
EXTRAS = st.sampled_from(['"id":7', '"model":"m-1"', '"t":1.5e3', '"ok":true', '"n":null', '"s":""', '"x":-0'])


@st.composite
def rows(draw: st.DrawFn, bad: bool) -> bytes:
    k = draw(st.integers(0, 5))
    values = {
        "p": [draw(NUMBERS) for _ in range(k)],
        "q": [draw(POSITIVE) for _ in range(k)],
        "r": [draw(NUMBERS) for _ in range(k)],
    }
    if bad and k and draw(st.booleans()):
        name = draw(st.sampled_from("pqr"))
        values[name][draw(st.integers(0, k - 1))] = draw(BAD_NUMBERS)
    colon, comma = draw(st.sampled_from([(":", ","), (": ", ", "), (" : ", " , ")]))
    fields = [f'"{name}"{colon}[{comma.join(items)}]' for name, items in values.items()]
    fields += draw(st.lists(EXTRAS, max_size=2, unique=True))
    if bad and draw(st.booleans()):
        fields.append(
            draw(
                st.sampled_from(
                    ['"p":[0.5]', '"q":[1]', '"id":8', '"xs":[1,2]', '"o":{"a":1}', '"e":"\\n"', '"\\u0070":[0.5]']
                )
            )
        )
    order = draw(st.permutations(fields))
    line = "{" + comma.join(order) + "}"
    if bad and draw(st.integers(0, 5)) == 0:
        line = draw(st.sampled_from([" ", "\ufeff", ""])) + line + draw(st.sampled_from(["", " ", "\r", " x"]))
    return line.encode()


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    bad = draw(st.booleans())
    lines = draw(st.lists(rows(bad), min_size=1, max_size=6))
    if bad and draw(st.integers(0, 4)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from([b"", b"  ", b"[]", b"{}", b"{"])))
    return b"\n".join(lines)


def assert_same_batch(fast: RunBatch, exact: RunBatch) -> None:
    assert fast.source == exact.source and fast.greedy == exact.greedy and fast.absent == exact.absent
    assert orjson.dumps(fast.extras) == orjson.dumps(exact.extras)  # 1, 1.0 and true differ here
    for name in ("lines", "offsets", "p", "q", "r"):
        mine, theirs = getattr(fast, name), getattr(exact, name)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, name
        assert mine.tobytes() == theirs.tobytes(), name  # bit for bit: -0.0 and 0.0 differ here


def exact(text: bytes, first_line: int, fields: FieldSpec = FIELDS) -> tuple[RunBatch, list[Any]]:
    return parse_block(text.split(b"\n"), first_line, "x", fields, MAX_LINE)


# What to look up: the lists alone, or fields carried per run too (present, missing, null, a count).
SPECS = st.sampled_from(
    [FIELDS, FieldSpec(extras=("id", "model")), FieldSpec(extras=("t", "ok", "n", "x"), counts=("t",))]
)


@given(blocks(), st.integers(1, 10**9), SPECS)
def test_fast_path_gives_the_exact_batch_or_declines(text: bytes, first_line: int, fields: FieldSpec) -> None:
    expected, errors = exact(text, first_line, fields)
    fast = fast_batch(text, first_line, "x", fields, MAX_LINE)
    if fast is not None:
        assert errors == []
        assert_same_batch(fast, expected)
    batch, found = parse_block(text, first_line, "x", fields, MAX_LINE)  # whichever path takes it
    assert_same_batch(batch, expected)
    assert [(e.line, e.message, e.raw) for e in found] == [(e.line, e.message, e.raw) for e in errors]


@given(st.lists(rows(bad=False), min_size=1, max_size=6), st.sampled_from([FIELDS, FieldSpec(extras=("p2",))]))
def test_valid_rows_without_escapes_take_the_fast_path(lines: list[bytes], fields: FieldSpec) -> None:
    """Valid rows with flat lists: the fast path takes them, or it would be a slow path that always declines."""
    text = b"\n".join([lines[0][:-1] + b',"p2":"x"}', *lines[1:]])  # the carried field, in the first row only
    fast = fast_batch(text, 3, "x", fields, MAX_LINE)
    assert fast is not None, text
    assert_same_batch(fast, exact(text, 3, fields)[0])


GOOD = b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9]}'


# Lines the exact path refuses, or whose values only it can make: every fast reader declines them.
DECLINED_BY_ALL = [
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"p":[0.2,0.3]}',  # duplicate key: orjson takes the last
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"\\u0070":[0.2,0.3]}',  # the same key, escaped
    b'{"p":[[0.5],1],"q":[1,0.25],"r":[0.1,0.9]}',  # a nested list would be flattened
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1]}',  # different lengths
    b'{"p":[0.5,1],"q":[1,0],"r":[0.1,0.9]}',  # q = 0
    b'{"p":[0.5,true],"q":[1,0.25],"r":[0.1,0.9]}',
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9]} {}',
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9]}\r',
    b'{"p":[0.5,1],"q":[1,0.25]}',
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"x":"\xff"}',  # not UTF-8
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"x":"\x01"}',  # a control character in a string
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"big":1e400}',  # orjson refuses an infinite number anywhere
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"s":"\\ud800"}',  # a lone surrogate
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"s":"\\x"}',  # not an escape
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"a":' + b"[" * 70 + b"]" * 70 + b"}",  # deeper than we look
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"t":tru}',
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],}',  # a trailing comma
    b'{"p":[0.5,1,],"q":[1,0.25],"r":[0.1,0.9]}',
    b'{"p":[0.5,01],"q":[1,0.25],"r":[0.1,0.9]}',
]
# Valid lines the simdjson reader's byte counts refuse; the compiled reader checks the grammar and takes them.
VALID_BUT_UNUSUAL = [
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"note":"a\\"b"}',  # an escape
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"m":{"a":[1,{"b":null}]}}',  # nested objects and lists elsewhere
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"n":123456789012345678901234567890}',  # beyond 64 bits, elsewhere
    b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"u":"\\u00e9\\ud83d\\ude00 \xc3\xa9"}',  # escapes and UTF-8
    b'{ "p" : [ 0.5 , 1 ] , "q" : [1,0.25] , "r" : [0.1,0.9] }',  # spaces inside the object
]


@pytest.mark.parametrize("line", DECLINED_BY_ALL + VALID_BUT_UNUSUAL)
def test_a_block_with_any_doubtful_line_goes_whole_to_the_exact_path(line: bytes, reader: str) -> None:
    text = b"\n".join([GOOD, line, GOOD])
    fast = fast_batch(text, 40, "x", FIELDS, MAX_LINE)
    expected, expected_errors = exact(text, 40)
    if line in VALID_BUT_UNUSUAL and reader == "compiled":
        assert fast is not None and expected_errors == []
    if line in DECLINED_BY_ALL:
        assert fast is None
    elif fast is not None:
        assert_same_batch(fast, expected)
    batch, errors = parse_block(text, 40, "x", FIELDS, MAX_LINE)
    assert_same_batch(batch, expected)
    assert [(e.line, e.message) for e in errors] == [(e.line, e.message) for e in expected_errors]


def test_a_bad_row_is_reported_at_its_line_as_before() -> None:
    text = b"\n".join([GOOD, GOOD, b'{"p":[0.5,2],"q":[1,0.25],"r":[0.1,0.9]}', GOOD])
    batch, errors = parse_block(text, 100, "logs.jsonl", FIELDS, MAX_LINE)
    assert [(error.source, error.line) for error in errors] == [("logs.jsonl", 102)]
    assert "p[1]" in errors[0].message and errors[0].raw == b'{"p":[0.5,2],"q":[1,0.25],"r":[0.1,0.9]}'
    assert batch.lines.tolist() == [100, 101, 103]


def test_a_duplicate_key_keeps_the_last_value_as_orjson_does() -> None:
    text = b'{"p":[0.5],"q":[1],"r":[0.1],"p":[0.25]}'
    batch, errors = parse_block(text, 1, "x", FIELDS, MAX_LINE)
    assert errors == [] and batch.p.tolist() == [0.25]


def test_over_long_lines_are_declined_and_reported() -> None:
    text = b"\n".join([GOOD, b'{"p":[' + b"0.5," * 40 + b'0.5],"q":[1],"r":[0.1]}'])
    assert fast_batch(text, 1, "x", FIELDS, 100) is None
    _, errors = parse_block(text, 1, "x", FIELDS, 100)
    assert [error.line for error in errors] == [2] and "longer than 100 bytes" in errors[0].message


def test_fields_carried_per_run_come_as_orjson_gives_them() -> None:
    fields = FieldSpec(extras=("id", "model", "seed"), counts=("id",))
    text = b'{"id":7,"model":"m-1","p":[0.5],"q":[1],"r":[0.1]}\n{"p":[0.5],"q":[1],"r":[0.1],"id":8.0,"seed":3}'
    fast = fast_batch(text, 1, "x", fields, MAX_LINE)
    assert fast is not None
    assert orjson.dumps(fast.extras) == b'{"id":[7,8.0],"model":["m-1",null],"seed":[null,3]}'
    assert_same_batch(fast, exact(text, 1, fields)[0])


def test_a_field_no_row_of_the_block_has_is_left_to_the_exact_path_which_names_the_keys() -> None:
    fields = FieldSpec(extras=("modle",))
    text = b'{"model":"m-1","p":[0.5],"q":[1],"r":[0.1]}'
    assert fast_batch(text, 1, "x", fields, MAX_LINE) is None
    batch, errors = parse_block(text, 1, "x", fields, MAX_LINE)
    assert errors == [] and "modle" in batch.absent and "model" in batch.absent["modle"]


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":7,"p":[0.5],"q":[1],"r":[0.1],"id":8}',  # a carried field twice: orjson takes the last
        b'{"id":-1,"p":[0.5],"q":[1],"r":[0.1]}',  # not a count
        b'{"id":{"a":1},"p":[0.5],"q":[1],"r":[0.1]}',
    ],
)
def test_doubtful_carried_fields_send_the_block_to_the_exact_path(line: bytes) -> None:
    fields = FieldSpec(extras=("id",), counts=("id",))
    assert fast_batch(line, 1, "x", fields, MAX_LINE) is None


@pytest.mark.parametrize(
    "fields",
    [
        FieldSpec(extras=("meta.id",)),
        FieldSpec(extras=("id", "id")),
        FieldSpec(extras=("p",)),
        FieldSpec(p="spec.p"),
        FieldSpec(p="q"),
        FieldSpec(draft_tokens="d", target_tokens="t"),
    ],
)
def test_fields_the_fast_path_cannot_look_up_send_every_block_to_the_exact_path(fields: FieldSpec) -> None:
    text = b'{"p":[0.5],"q":[1],"r":[0.1],"id":3,"meta":3}'
    assert fast_batch(text, 1, "x", fields, MAX_LINE) is None


def test_other_field_names_are_looked_up_as_given() -> None:
    fields = FieldSpec(p="target_p", q="draft-q", r="u")
    text = b'{"u":[0.1,0.9],"draft-q":[1,0.5],"target_p":[0.5,1],"p":"not this one"}'
    fast = fast_batch(text, 1, "x", fields, MAX_LINE)
    assert fast is not None and fast.p.tolist() == [0.5, 1.0] and fast.r.tolist() == [0.1, 0.9]
    assert_same_batch(fast, exact(text, 1, fields)[0])


def test_without_simdjson_every_block_goes_to_the_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_fast, "_parser", False)
    monkeypatch.setattr(jsonl_fast, "compiled_reader", lambda: False)
    assert fast_batch(GOOD, 1, "x", FIELDS, MAX_LINE) is None
    batch, errors = parse_block(GOOD, 1, "x", FIELDS, MAX_LINE)
    assert errors == [] and np.array_equal(batch.p, [0.5, 1.0])


def test_blocks_after_a_bad_one_skip_the_fast_path_with_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = b'{"p":[0.5,2],"q":[1,0.25],"r":[0.1,0.9]}'
    texts = [b"\n".join([GOOD, bad if index in (1, 12) else GOOD]) for index in range(16)]
    blocks = [(1 + 2 * index, text) for index, text in enumerate(texts)]
    offered: list[int] = []

    def counting(text: bytes, first_line: int, *args: Any) -> RunBatch | None:
        offered.append(first_line)
        return fast_batch(text, first_line, *args)

    monkeypatch.setattr(jsonl, "fast_batch", counting)
    results = list(parse_blocks(blocks, "x", FIELDS, MAX_LINE))
    skipped = set(range(2, 2 + EXACT_AFTER_BAD_BLOCK)) | set(range(13, min(16, 13 + EXACT_AFTER_BAD_BLOCK)))
    assert offered == [1 + 2 * index for index in range(16) if index not in skipped]
    for (batch, errors), (first_line, text) in zip(results, blocks):
        expected, expected_errors = exact(text, first_line)
        assert_same_batch(batch, expected)
        assert [(e.line, e.message) for e in errors] == [(e.line, e.message) for e in expected_errors]
    assert [error.line for _, errors in results for error in errors] == [4, 26]


def test_threads_parse_blocks_at_once_each_with_its_own_parser() -> None:
    text = b"\n".join([GOOD] * 200)
    expected = exact(text, 1)[0]
    with ThreadPoolExecutor(4) as pool:
        batches = list(pool.map(lambda _: fast_batch(text, 1, "x", FIELDS, MAX_LINE), range(40)))
    for batch in batches:
        assert batch is not None
        assert_same_batch(batch, expected)
