"""The JSONL parser as a pure function: `parse_block`/`parse_block` against `json.loads` and the reference routine."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.jsonl import parse_block, read_jsonl
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.vectorized import accept_prefix_batch
from tests.fuzz_reader import COMPRESS, check_compressed, check_reader
from tests.helpers import (
    FIRST_EXAMPLE,
    GOOD,
    ROWS,
    expected_accepted,
    jsonl_bytes,
    mixed_lines,
    nonblank_lines,
    random_rows,
    spec_accept,
)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"p": [1, 0, 1.0, 0.0, 0.5], "q": [1, 1.0, 0.5, 1, 0.25], "r": [0, 1, 0.0, 1.0, 0.5]}', None),
        (
            b'{"p": [0.5, 1.0, true], "q": [0.5, 0.5, 0.5], "r": [0.1, 0.1, 0.1]}',
            "p[2] is true, not a number",
        ),
        (b'{"p": [0.5], "q": [false], "r": [0.1]}', "q[0] is false, not a number"),
        (b'{"p": [0.5, 0.5], "q": [0.5, 0.5], "r": [0.1, "0.1"]}', "r[1] is the string '0.1', not a number"),
        (b'{"p": [0.5], "q": [0.5], "r": [null]}', "r[0] is null, not a number"),
        (b'{"p": [0.5], "q": [0.5], "r": [[0.1]]}', "r[0] is an array, not a number"),
        (b'{"p": [0.5], "q": [0.5], "r": [{"u": 0.1}]}', "r[0] is an object, not a number"),
        (b'{"p": [' + b"1" * 400 + b'], "q": [0.5], "r": [0.1]}', "too large"),
    ],
)
def test_number_conversion_matches_the_type_rules(raw: bytes, message: str | None) -> None:
    good = b'{"p": [0.9], "q": [0.5], "r": [0.7]}'
    batch, errors = parse_block([good, raw, good], 10, "x", FieldSpec())
    if message is None:
        assert errors == []
        assert batch.lines.tolist() == [10, 11, 12]
        assert batch.p.tolist() == [0.9, 1.0, 0.0, 1.0, 0.0, 0.5, 0.9]
        assert batch.r.tolist() == [0.7, 0.0, 1.0, 0.0, 1.0, 0.5, 0.7]
    else:
        assert [error.line for error in errors] == [11]
        assert message in errors[0].message
        assert batch.lines.tolist() == [10, 12]  # the good rows around it survive
        assert batch.p.tolist() == [0.9, 0.9]


def test_dotted_and_top_level_fields_agree() -> None:
    lines = mixed_lines(200, seed=9)
    nested = []
    for raw in lines:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            nested.append(raw)
            continue
        nested.append(orjson.dumps({"spec": obj, "id": obj.get("id")} if isinstance(obj, dict) else obj))
    flat_batch, flat_errors = parse_block(lines, 1, "x", FieldSpec(extras=("id",)))
    dotted = FieldSpec(p="spec.p", q="spec.q", r="spec.r", extras=("id",))
    nested_batch, nested_errors = parse_block(nested, 1, "x", dotted)
    assert nested_batch.lines.tolist() == flat_batch.lines.tolist()
    assert nested_batch.p.tolist() == flat_batch.p.tolist()
    assert nested_batch.extras == flat_batch.extras
    assert [error.line for error in nested_errors] == [error.line for error in flat_errors]


CASES = [
    # (bad line, words the message must contain)
    (b'{"p": [0.9, 0.2], "q": [0.5, 0.8], "r": [0.1,', ["invalid JSON", "column"]),
    (b'{"p": [NaN], "q": [0.5], "r": [0.1]}', ["NaN or Infinity"]),
    (b"[1, 2, 3]", ["row is an array, not a JSON object"]),
    (b'{"q": [0.5], "r": [0.1], "extra": 1}', ["missing field 'p'", "q, r, extra"]),
    (b'{"p": 0.5, "q": [0.5], "r": [0.1]}', ["'p' is 0.5, not a list"]),
    (b'{"p": [0.5, "x"], "q": [0.5, 0.5], "r": [0.1, 0.1]}', ["p[1] is the string 'x', not a number"]),
    (b'{"p": [true], "q": [0.5], "r": [0.1]}', ["p[0] is true, not a number"]),
    (b'{"p": [null], "q": [0.5], "r": [0.1]}', ["p[0] is null, not a number"]),
    (b'{"p": [0.5, 0.5], "q": [0.5], "r": [0.1, 0.1]}', ["different lengths (2, 1, 2)"]),
    (b'{"p": [0.5, 1.5], "q": [0.5, 0.5], "r": [0.1, 0.1]}', ["p[1] = 1.5", "out of range"]),
    (b'{"p": [0.5], "q": [0.0], "r": [0.1]}', ["q[0] = 0.0", "q > 0"]),
    (b'{"p": [0.5], "q": [-0.2], "r": [0.1]}', ["q[0] = -0.2", "out of range"]),
    (b'{"p": [0.5], "q": [0.5], "r": [1.01]}', ["r[0] = 1.01", "out of range"]),
    (b'{"p": [1e400], "q": [0.5], "r": [0.1]}', ["column 8", "too large", "Infinity"]),
    (b'{"p": [' + b"1" * 400 + b'], "q": [0.5], "r": [0.1]}', ["column 8", "too large"]),
    (b'{"p": [0.5], "q": [0.5], "r": [0.1], "bad": "\xff"}', ["not valid UTF-8"]),
]


def read(
    data: bytes, fields: FieldSpec | None = None, on_error: ErrorPolicy | None = None
) -> tuple[list[tuple[int, int, int]], list[InputError]]:
    """(line, k, accepted) of every valid run and the bad rows, by the library's own JSONL reader.

    With `on_error` given, that policy decides (a fail policy raises the first bad row)."""
    errors: list[InputError] = []
    policy = on_error if on_error is not None else errors.append
    runs = []
    for batch in read_jsonl(io.BytesIO(data), SOURCE, fields or FieldSpec(), policy):
        outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)
        runs += zip(batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist())
    return runs, errors


SOURCE = "logs.jsonl"


@pytest.mark.parametrize(("bad", "words"), CASES)
def test_bad_jsonl_row(bad: bytes, words: list[str]) -> None:
    runs, errors = read(GOOD + b"\n" + GOOD + b"\n" + bad + b"\n" + GOOD + b"\n")
    assert [line for line, _, _ in runs] == [1, 2, 4]  # the good rows around it are read
    [error] = errors
    assert (error.source, error.line) == (SOURCE, 3)
    for word in words:
        assert word in error.message, error.message


def test_the_first_bad_row_is_reported_whatever_its_kind() -> None:
    """A value error found per batch must not hide behind a later parse error found per line."""
    with pytest.raises(InputError) as caught:
        read(b'{"p": [2.0], "q": [0.5], "r": [0.1]}\n{not json\n', on_error=ErrorPolicy("fail"))
    assert caught.value.line == 1 and caught.value.message.startswith("p[0] = 2.0")


def test_custom_field_names_appear_in_messages() -> None:
    data = b'{"spec": {"tp": [0.5, 7]}, "q": [0.5, 0.5], "r": [0.1, 0.1]}\n'
    _, [error] = read(data, FieldSpec(p="spec.tp"))
    assert "spec.tp[1] = 7" in error.message
    _, [missing] = read(data, FieldSpec(p="spec.target_p"))
    assert "missing field 'spec.target_p'" in missing.message and "tp" in missing.message


# Built once: a strategy made inside the composite would be built again on every draw.
NUMBER = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-0.5, max_value=1.5),
    st.sampled_from([0, 1, 0.0, 1.0, -0.0, 2, 1e-320, 5e-324]),
)
ANYTHING = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | NUMBER | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def messy_lines(draw: st.DrawFn) -> bytes:
    """Lines that are mostly almost-valid rows: wrong types, lengths, ranges, junk, blanks, cut-offs."""
    number, anything = NUMBER, ANYTHING
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        k = draw(st.integers(0, 4))
        row: dict[str, Any] = {}
        for name in ("p", "q", "r"):
            length = draw(st.sampled_from([k, k, k, k + 1]))
            row[name] = draw(st.lists(st.one_of(number, number, number, anything), min_size=length, max_size=length))
            if draw(st.integers(0, 19)) == 0:
                row[name] = draw(anything)
        if draw(st.integers(0, 19)) == 0:
            del row[draw(st.sampled_from(["p", "q", "r"]))]
        line = json.dumps(row).encode()  # Python's json writes NaN/Infinity only if asked: here never
        kind = draw(st.integers(0, 19))
        if kind == 0:
            line = line[: draw(st.integers(0, len(line)))]
        elif kind == 1:
            line = draw(st.sampled_from([b"", b"   ", b"\t\r", b"[]", b"null", b"{}", b"\xff\xfe", b"NaN"]))
        elif kind == 2:
            line = json.dumps(draw(anything)).encode()
        lines.append(line)
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


@given(data=messy_lines())
def test_arbitrary_json_lines_are_counted_exactly(data: bytes) -> None:
    skip = ErrorPolicy("skip")
    runs, _ = read(data, on_error=skip)
    assert skip.skipped_sources == 0
    assert len(runs) + skip.skipped_rows == nonblank_lines(data)
    assert len(skip.errors) == min(20, skip.skipped_rows)
    if not skip.skipped_rows:
        read(data, on_error=ErrorPolicy("fail"))
        return
    with pytest.raises(InputError) as caught:  # fail mode stops at exactly the first row skip mode skipped
        read(data, on_error=ErrorPolicy("fail"))
    first = skip.errors[0]
    assert (caught.value.source, caught.value.line, caught.value.message) == (first.source, first.line, first.message)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), block=st.integers(1, 100), limit=st.integers(1, 60))
def test_fuzz_target_on_tiny_blocks(data: bytes, block: int, limit: int) -> None:
    """The `make fuzz` target, briefly: block boundaries and overlong lines never lose or double a line."""
    check_reader(data, block, limit)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(st.sampled_from([b'{"p": [0.5], "q": [0.5], "r": [0.1]}', b"", b"{"]), max_size=30).map(b"\n".join),
    kind=st.sampled_from(list(COMPRESS)),
    cut=st.integers(0, 400),
)
def test_fuzz_target_on_cut_compressed_streams(data: bytes, kind: str, cut: int) -> None:
    check_compressed(data, kind, cut)


def oracle(line: bytes) -> int | None:
    """Accepted length of a line by json.loads and the reference routine, or None when the row is invalid."""
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or not all(isinstance(row.get(name), list) for name in "pqr"):
        return None
    p, q, r = row["p"], row["q"], row["r"]
    if not len(p) == len(q) == len(r):
        return None
    for values, low_open in ((p, False), (q, True), (r, False)):
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return None
            if value > 1 or value < 0 or (low_open and value == 0):
                return None
    return spec_accept(p, q, r)


@st.composite
def valid_ish_rows(draw: st.DrawFn) -> bytes:
    """Rows written by json.dumps in its many styles: separators, indentation, ASCII escapes, key order."""
    k = draw(st.integers(0, 5))
    unit = st.floats(min_value=0, max_value=1) | st.sampled_from([0, 1])
    positive = st.floats(min_value=5e-324, max_value=1) | st.just(1)
    row: dict[str, Any] = {
        "p": draw(st.lists(unit, min_size=k, max_size=k)),
        "q": draw(st.lists(positive, min_size=k, max_size=k)),
        "r": draw(st.lists(unit, min_size=k, max_size=k)),
    }
    if draw(st.booleans()):
        row["id"] = draw(st.text(max_size=6) | st.integers(-(2**63), 2**63 - 1))
    if draw(st.booleans()):
        row = dict(reversed(list(row.items())))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,  ", " :\t")]))
    text = json.dumps(row, separators=separators, ensure_ascii=draw(st.booleans()))
    return text.encode()


@given(lines=st.lists(valid_ish_rows() | messy_lines(), max_size=10))
def test_reader_agrees_with_json_loads(lines: list[bytes]) -> None:
    data = b"\n".join(line.replace(b"\n", b" ") for line in lines)
    runs, _ = read(data)
    got = {line: accepted for line, _, accepted in runs}
    expected = {
        number: accepted
        for number, line in enumerate(data.split(b"\n"), start=1)
        if (accepted := oracle(line)) is not None
    }
    assert got == expected


def test_the_one_known_difference_from_json_loads() -> None:
    """orjson reads an integer beyond 64 bits as a double, and one beyond a double's range not at all;
    Python's json keeps any integer. Such a line is reported, never misread."""
    line = json.dumps({**FIRST_EXAMPLE, "id": 10**400}).encode()
    assert oracle(line) == 1
    runs, [error] = read(line + b"\n")
    assert runs == []
    assert error.line == 1 and error.message.startswith("number at column 74 is too large for a double")


def test_blank_lines_are_ignored_but_counted_in_line_numbers() -> None:
    runs, errors = read(b"\n" + GOOD + b"\n   \n\r\n" + GOOD + b"\r\n")
    assert errors == []
    assert [line for line, _, _ in runs] == [2, 5]


def test_last_line_without_newline_and_utf8_bom() -> None:
    runs, errors = read(b"\xef\xbb\xbf" + GOOD + b"\n" + GOOD)
    assert errors == []
    assert [accepted for _, _, accepted in runs] == [1, 1]


def test_dotted_field_paths_in_json() -> None:
    rows = [{"spec": {"target_p": row["p"], "draft_q": row["q"]}, "u": row["r"]} for row in ROWS[:50]]
    runs, errors = read(jsonl_bytes(rows), FieldSpec(p="spec.target_p", q="spec.draft_q", r="u"))
    assert errors == []
    assert [accepted for _, _, accepted in runs] == expected_accepted(ROWS[:50])


def test_long_input_spans_many_blocks() -> None:
    rows = random_rows(30_000, seed=3, k_max=16)
    data = jsonl_bytes(rows)
    assert len(data) > 4 << 20  # more than one read block
    runs, errors = read(data)
    assert errors == []
    assert [accepted for _, _, accepted in runs] == expected_accepted(rows)
    assert [line for line, _, _ in runs] == list(range(1, len(rows) + 1))


def test_absurd_draft_lengths_are_bad_rows_not_memory() -> None:
    long_run = {"p": [0.5] * 1025, "q": [0.5] * 1025, "r": [0.1] * 1025}
    runs, [error] = read(jsonl_bytes([FIRST_EXAMPLE, long_run]))
    assert [line for line, _, _ in runs] == [1]
    assert error.line == 2 and error.message == "draft of 1025 tokens is longer than the 1024 a run may have"
    runs, errors = read(jsonl_bytes([{"p": [0.5] * 1024, "q": [0.5] * 1024, "r": [0.1] * 1024}]))
    assert errors == [] and runs == [(1, 1024, 1024)]
    greedy = FieldSpec(draft_tokens="d", target_tokens="t")
    _, [error] = read(jsonl_bytes([{"d": [1] * 2000, "t": [1] * 2000}]), greedy)
    assert "draft of 2000 tokens is longer" in error.message
