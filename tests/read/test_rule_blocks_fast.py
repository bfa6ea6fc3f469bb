"""The compiled reader on blocks of one chain rule other than `standard` (`jsonl_fast.fast_rule_batch`): the very
batch the exact path gives (its stand-in tokens, lines, extras and rules), or a refusal; drawn blocks hold valid
and invalid values, parameters, extras, the bonus token, rows of another rule, rows naming no rule."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.jsonl import parse_block
from specaccept_cli.read.jsonl_fast import compiled_reader, fast_rule_batch
from specaccept_cli.rule.batch import FieldSpec, RunBatch
from specaccept_cli.rule.registry import RULES, Rule
from tests.read.test_jsonl_fast import assert_same_batch
from tests.read.test_rule_rows import rule_rows

pytestmark = pytest.mark.skipif(not compiled_reader(), reason="the compiled reader is not built")

CHAIN_RULES = [rule for rule in RULES if rule.kind == "chain" and rule.name != "standard"]
MAX_LINE = 1 << 20
odd: st.SearchStrategy[object] = st.sampled_from([None, True, "0.5", -0.25, 1.5, 0, 1, 2, 2.0, -1, [], {}, 10**17])


def rarely_odd(usual: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Mostly `usual`, now and then a value of another kind (a block holds a bad one now and then)."""
    return st.integers(0, 200).flatmap(lambda dice: odd if dice == 0 else usual)


unit = rarely_odd(st.one_of(*[st.floats(min_value=0.0, max_value=1.0)] * 8, st.sampled_from([0, 1, 0.0, 1.0, -0.0])))
token = rarely_odd(st.one_of(*[st.integers(0, 5)] * 8, st.integers(0, 10**9), st.just(10**15 - 1)))


def value_of(name: str) -> st.SearchStrategy[object]:
    if "token" in name:
        return token
    if name in ("entropy", "residual"):
        return rarely_odd(st.floats(min_value=0.0, max_value=9.0))
    return unit


@st.composite
def row_of(draw: st.DrawFn, rule: Rule, names_rule: bool) -> dict[str, object]:
    k = draw(st.integers(0, 5))
    row: dict[str, object] = {}
    if names_rule:
        names = [rule.name] * 8 + [*rule.aliases, rule.name.upper(), "standard", "nope", 3]
        row["rule"] = draw(st.sampled_from(names))
    for name in (*rule.fields, *rule.optional):
        size = k + (name == "target_tokens" and draw(st.booleans())) if draw(st.integers(0, 60)) else k + 1
        values = draw(st.lists(value_of(name), min_size=size, max_size=size))
        if name == "residual" and values and draw(st.integers(0, 4)):
            values[-1] = None
        if draw(st.integers(0, 100)):
            row[name] = values
        elif draw(st.booleans()):
            row[name] = draw(st.sampled_from([None, 0.5]))
    if "q" not in row and draw(st.booleans()):
        row["q"] = [0.5] * k  # an engine's q, which greedy-draft does not use
    for param in rule.params:
        if draw(st.integers(0, 60)):
            row[param.name] = draw(rarely_odd(st.floats(min_value=0.0, max_value=2.0)))
    if draw(st.integers(0, 5)):
        row["id"] = draw(st.one_of(st.integers(0, 9), st.text(max_size=3), st.none()))
    return row


@st.composite
def blocks(draw: st.DrawFn) -> tuple[bytes, FieldSpec]:
    rule = draw(st.sampled_from(CHAIN_RULES))
    spec = draw(
        st.sampled_from(
            [
                FieldSpec(),
                FieldSpec(rule=rule.name),
                FieldSpec(rule=rule.name, rule_field=None),  # a `rule` key is then the rows' own
                FieldSpec(extras=("id",)),
                FieldSpec(extras=("id", "rule")),
            ]
        )
    )
    rows = draw(
        st.lists(row_of(rule, names_rule=spec.rule == "standard" or draw(st.booleans())), min_size=1, max_size=12)
    )
    if draw(st.integers(0, 6)) == 0:  # a row of another rule in the block
        other = draw(st.sampled_from(CHAIN_RULES))
        rows.insert(draw(st.integers(0, len(rows))), {**draw(row_of(other, True)), "rule": other.name})
    return b"\n".join(orjson.dumps(row) for row in rows), spec


def exact(text: bytes, first_line: int, fields: FieldSpec) -> tuple[RunBatch, list[InputError]]:
    lines: list[bytes | None] = list(text.split(b"\n"))
    return parse_block(lines, first_line, "x", fields, MAX_LINE)


def assert_same(fast: RunBatch, expected: RunBatch) -> None:
    assert_same_batch(fast, expected)
    assert fast.rules == expected.rules


@given(blocks(), st.integers(1, 10**6))
def test_the_compiled_rule_path_gives_the_exact_batch_or_declines(block: tuple[bytes, FieldSpec], first: int) -> None:
    text, fields = block
    fast = fast_rule_batch(text, first, "x", fields, MAX_LINE)
    expected, errors = exact(text, first, fields)
    if fast is not None:
        assert not errors
        assert_same(fast, expected)
    batch, _ = parse_block(text, first, "x", fields, MAX_LINE)  # the block as the reader hands it over
    assert_same(batch, expected)


@pytest.mark.parametrize("rule", [rule.name for rule in CHAIN_RULES])
def test_valid_logs_of_every_chain_rule_take_the_compiled_path(rule: str) -> None:
    rows = rule_rows(rule, runs=80)
    text = b"\n".join(orjson.dumps(row) for row in rows)
    fields = FieldSpec(extras=("request_id",))
    fast = fast_rule_batch(text, 7, "x", fields, MAX_LINE)
    assert fast is not None and fast.rules == [rule] * len(rows)
    assert_same(fast, exact(text, 7, fields)[0])
    untagged = b"\n".join(orjson.dumps({k: v for k, v in row.items() if k != "rule"}) for row in rows)
    assert fast_rule_batch(untagged, 1, "x", FieldSpec(), MAX_LINE) is None  # `standard` rows lacking p, q, r
    by_option = fast_rule_batch(untagged, 1, "x", FieldSpec(rule=rule), MAX_LINE)
    assert by_option is not None and by_option.rules == [rule] * len(rows)
    teams = b"\n".join(orjson.dumps({**row, "rule": "team-a"}) for row in rows)
    ignored = fast_rule_batch(teams, 1, "x", FieldSpec(rule=rule, rule_field=None), MAX_LINE)
    assert ignored is not None and ignored.rules == [rule] * len(rows)
    assert_same(ignored, exact(teams, 1, FieldSpec(rule=rule, rule_field=None))[0])
    assert by_option.offsets.tobytes() == fast.offsets.tobytes() and by_option.p.tobytes() == fast.p.tobytes()


def test_declines_what_the_exact_path_words_a_message_about() -> None:
    row = {"rule": "block", "p": [0.5, 0.5], "q": [0.5, 0.5], "r": [0.1, 0.2], "residual": [0.3, None]}
    assert fast_rule_batch(orjson.dumps(row), 1, "x", FieldSpec(), MAX_LINE) is not None
    for changed in (
        {"residual": [None, None]},  # a null before the last position
        {"residual": [-0.5, None]},
        {"q": [0.0, 0.5]},
        {"p": [0.5]},  # another length
        {"r": [0.1, True]},
        {"rule": "blocks"},
    ):
        text = orjson.dumps({**row, **changed})
        assert fast_rule_batch(text, 1, "x", FieldSpec(), MAX_LINE) is None
        assert exact(text, 1, FieldSpec())[1], changed  # the exact path names it
    typical = {"rule": "typical", "p": [0.5], "entropy": [1.0], "epsilon": 0.3}
    assert fast_rule_batch(orjson.dumps(typical), 1, "x", FieldSpec(), MAX_LINE) is None  # delta has no default
    assert "needs 'delta'" in str(exact(orjson.dumps(typical), 1, FieldSpec())[1][0])


# --- Parquet: a rule's rows read from their columns (`parquet._gather_chain`) ----------------------------------

nullable_unit = st.one_of(*[st.floats(min_value=0.0, max_value=1.0)] * 20, st.sampled_from([None, -0.5, 1.5, 0.0]))
nullable_token = st.one_of(*[st.integers(0, 6)] * 20, st.sampled_from([None, -1]))


@st.composite
def parquet_row(draw: st.DrawFn) -> dict[str, object]:
    rule = draw(st.sampled_from(CHAIN_RULES))
    k = draw(st.integers(0, 4))
    row: dict[str, object] = {"rule": draw(st.sampled_from([rule.name] * 10 + ["nope"]))}  # no standard row
    for name in (*rule.fields, *rule.optional):
        size = k + (name == "target_tokens" and draw(st.booleans())) if draw(st.integers(0, 25)) else k + 1
        strategy = nullable_token if "token" in name else nullable_unit
        values = draw(st.lists(strategy, min_size=size, max_size=size))
        if name == "residual" and values and draw(st.booleans()):
            values[-1] = None
        row[name] = values if draw(st.integers(0, 40)) else None
    for param in rule.params:
        row[param.name] = draw(
            st.one_of(*[st.floats(min_value=0.0, max_value=1.0)] * 10, st.sampled_from([None, -1.0]))
        )
    return row


@given(st.lists(parquet_row(), min_size=1, max_size=25))
def test_parquet_rows_read_from_columns_give_what_their_jsonl_gives(rows: list[dict[str, object]]) -> None:
    """The same rows as Parquet (nested lists) and as JSONL: the same runs, the same bad rows and messages."""
    import pyarrow as pa

    from specaccept_cli.read.parquet import runs_of_record_batch
    from tests.read.test_rule_rows import EVERY_RULES_SCHEMA

    table = pa.Table.from_pylist(rows, schema=EVERY_RULES_SCHEMA)
    from_parquet, parquet_errors = runs_of_record_batch(table.to_batches()[0], 1, "x", FieldSpec())
    from_jsonl, jsonl_errors = exact(b"\n".join(orjson.dumps(row) for row in table.to_pylist()), 1, FieldSpec())
    assert [(error.line, error.message) for error in parquet_errors] == [
        (error.line, error.message) for error in jsonl_errors
    ]
    assert from_parquet.lines.tolist() == from_jsonl.lines.tolist() and from_parquet.rules == from_jsonl.rules
    for name in ("offsets", "p", "q", "r"):
        assert getattr(from_parquet, name).tobytes() == getattr(from_jsonl, name).tobytes(), name


TREE_RULES = [rule for rule in RULES if rule.kind == "tree"]


@st.composite
def parquet_tree_row(draw: st.DrawFn) -> dict[str, object]:
    rule = draw(st.sampled_from(TREE_RULES))
    size = draw(st.integers(0, 7))
    nodes: list[object] = []
    for index in range(size):
        node: dict[str, object] = {
            "parent": draw(st.one_of(*[st.integers(-1, index - 1)] * 12, st.sampled_from([None, index, -2])))
        }
        for name in rule.fields:
            node[name] = draw(nullable_token if "token" in name else nullable_unit)
        nodes.append(node if draw(st.integers(0, 40)) else None)
    row: dict[str, object] = {"rule": rule.name, "nodes": nodes if draw(st.integers(0, 30)) else None}
    for param in rule.params:
        row[param.name] = draw(st.one_of(*[st.floats(min_value=0.0, max_value=1.0)] * 10, st.just(None)))
    return row


@given(st.lists(parquet_tree_row(), min_size=1, max_size=20))
def test_parquet_trees_read_from_columns_give_what_their_jsonl_gives(rows: list[dict[str, object]]) -> None:
    """Tree rows as Parquet (`nodes` a list of structs) and as JSONL: the same runs, bad rows and messages."""
    import pyarrow as pa

    from specaccept_cli.read.parquet import runs_of_record_batch
    from tests.read.test_rule_rows import EVERY_RULES_SCHEMA

    table = pa.Table.from_pylist(rows, schema=EVERY_RULES_SCHEMA)
    from_parquet, parquet_errors = runs_of_record_batch(table.to_batches()[0], 1, "x", FieldSpec())
    text = b"\n".join(orjson.dumps({k: v for k, v in row.items() if v is not None}) for row in table.to_pylist())
    from_jsonl, jsonl_errors = exact(text, 1, FieldSpec())
    assert [(error.line, error.message) for error in parquet_errors] == [
        (error.line, error.message) for error in jsonl_errors
    ]
    assert from_parquet.lines.tolist() == from_jsonl.lines.tolist() and from_parquet.rules == from_jsonl.rules
    for name in ("offsets", "p", "q", "r"):
        assert getattr(from_parquet, name).tobytes() == getattr(from_jsonl, name).tobytes(), name
