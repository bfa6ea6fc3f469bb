"""The fast paths inside `parse_block` (top-level keys, array('d') conversion) answer like the general ones."""

from __future__ import annotations

import orjson
import pytest

from specaccept_cli.read.jsonl import parse_block
from specaccept_cli.rule.batch import FieldSpec
from tests.test_parallel import mixed_lines


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"p": [1, 0, 1.0, 0.0, 0.5], "q": [1, 1.0, 0.5, 1, 0.25], "r": [0, 1, 0.0, 1.0, 0.5]}', None),
        (
            b'{"p": [0.5, 1.0, true], "q": [0.5, 0.5, 0.5], "r": [0.1, 0.1, 0.1]}',
            "p[2] is not a number (got boolean true)",
        ),
        (b'{"p": [0.5], "q": [false], "r": [0.1]}', "q[0] is not a number (got boolean false)"),
        (b'{"p": [0.5, 0.5], "q": [0.5, 0.5], "r": [0.1, "0.1"]}', "r[1] is not a number (got string '0.1')"),
        (b'{"p": [0.5], "q": [0.5], "r": [null]}', "r[0] is not a number (got null null)"),
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
