"""The column-wise reading of rows of other rules than `standard` (`rule.rows.RuleRows`) against the per-row
reference (`rule.rows.row_step`, then its steps gathered one by one): on drawn blocks mixing every rule, valid
and invalid rows, trees of many shapes, the same rows are refused with the same messages and the rows taken
give the same drafted and accepted lengths, bit for bit."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.registry import RULES, Rule, rule_named
from specaccept_cli.rule.rows import RuleRows, reference_steps, row_step

OTHER_RULES = [rule for rule in RULES if rule.name != "standard"]

unit = st.floats(min_value=0.0, max_value=1.0)
# Values a row may hold where a number belongs: mostly good ones, and every kind of bad one now and then.
odd: st.SearchStrategy[object] = st.sampled_from(
    [None, True, False, "0.5", -0.25, 1.5, math.inf, -math.inf, math.nan, 0, 1, 2, -1, [], {}]
)
number = st.one_of(unit, unit, unit, unit, unit, unit, st.sampled_from([0.0, 1.0, 5e-324, 0.5, 0]), odd)
token = st.one_of(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3), st.integers(0, 2**64), odd)
entropy = st.one_of(st.floats(min_value=0.0, max_value=50.0), odd)


def value_of(name: str) -> st.SearchStrategy[object]:
    if "token" in name:
        return token
    if name == "entropy":
        return entropy
    return number


@st.composite
def chain_row(draw: st.DrawFn, rule: Rule) -> dict[str, object]:
    k = draw(st.integers(0, 5))
    row: dict[str, object] = {}
    for name in (*rule.fields, *rule.optional):
        size = k if draw(st.integers(0, 11)) else draw(st.integers(0, 6))  # now and then another length
        if name == "target_tokens" and draw(st.booleans()):
            size += 1  # the bonus position's token
        values = draw(st.lists(value_of(name), min_size=size, max_size=size))
        if name == "residual" and values and draw(st.integers(0, 3)):
            values[-1] = None  # the last position has none
        row[name] = draw(st.sampled_from([values] * 12 + [None, 0.5, "x"]))
        if row[name] is None and draw(st.booleans()):
            del row[name]
    return row


@st.composite
def tree_row(draw: st.DrawFn, rule: Rule) -> dict[str, object]:
    size = draw(st.integers(0, 9))
    nodes: list[object] = []
    for index in range(size):
        node: dict[str, object] = {
            "parent": draw(
                st.one_of(st.integers(-1, index - 1), st.integers(-1, index - 1), st.integers(-3, index + 1), odd)
            )
        }
        for name in rule.fields:
            if draw(st.integers(0, 40)):
                node[name] = draw(value_of(name))
        nodes.append(node if draw(st.integers(0, 60)) else [node])
    if rule.name == "tree-target-cdf" and nodes and draw(st.booleans()):  # one coin per parent, as engines log
        coin = draw(unit)
        for item in nodes:
            if isinstance(item, dict) and "coin" in item:
                item["coin"] = coin
    return {"nodes": draw(st.sampled_from([nodes] * 12 + [None, [], "nodes"]))}


@st.composite
def row_of(draw: st.DrawFn) -> tuple[Rule, dict[str, object]]:
    rule = draw(st.sampled_from(OTHER_RULES))
    row: dict[str, object] = draw(tree_row(rule) if rule.kind == "tree" else chain_row(rule))
    for param in rule.params:
        choice = draw(st.integers(0, 9))
        if choice < 6:
            row[param.name] = draw(st.floats(min_value=0.0, max_value=2.0))
        elif choice < 8:
            row[param.name] = draw(odd)
    return rule, row


def reference(rows: list[tuple[Rule, dict[str, object]]]) -> tuple[dict[int, str], dict[int, tuple[int, int]]]:
    """Row by row: the message of each bad row, and (drafted, accepted) of each good one."""
    fields = FieldSpec()
    problems: dict[int, str] = {}
    steps: dict[str, list[tuple[int, Any]]] = {}
    for index, (rule, row) in enumerate(rows):
        step = row_step(row, rule, fields)
        if isinstance(step, str):
            problems[index] = step
        else:
            steps.setdefault(rule.name, []).append((index, step))
    lengths: dict[int, tuple[int, int]] = {}
    for name, taken in steps.items():
        rule = rule_named(name)
        gathered, drafted = reference_steps(rule, [step for _, step in taken])
        accepted = rule.accepted(gathered)
        for (index, _), k, a in zip(taken, drafted.tolist(), accepted.tolist()):
            lengths[index] = (k, a)
    return problems, lengths


def column_wise(rows: list[tuple[Rule, dict[str, object]]]) -> tuple[dict[int, str], dict[int, tuple[int, int]]]:
    reader = RuleRows(FieldSpec())
    added = reader.add([row for _, row in rows], [rule for rule, _ in rows])
    problems = {index: problem for index, problem in enumerate(added) if problem is not None}
    taken = [index for index, problem in enumerate(added) if problem is None]
    for place, problem in reader.check().items():
        problems[taken[place]] = problem
    drafted, accepted, names = reader.accepted()
    good = [index for index in taken if index not in problems]
    assert names == [rows[index][0].name for index in good]
    return problems, {index: (k, a) for index, k, a in zip(good, drafted.tolist(), accepted.tolist())}


@given(st.lists(row_of(), max_size=40))
def test_column_wise_rows_equal_the_per_row_reference(rows: list[tuple[Rule, dict[str, object]]]) -> None:
    assert column_wise(rows) == reference(rows)


@given(st.lists(row_of(), max_size=40), st.integers(0, 40))
def test_a_block_read_in_two_parts_gives_the_same(rows: list[tuple[Rule, dict[str, object]]], cut: int) -> None:
    """Rows given in two calls of `add` are numbered on: the same messages and lengths as in one."""
    reader = RuleRows(FieldSpec())
    added = reader.add([row for _, row in rows[:cut]], [rule for rule, _ in rows[:cut]])
    added += reader.add([row for _, row in rows[cut:]], [rule for rule, _ in rows[cut:]])
    taken = [index for index, problem in enumerate(added) if problem is None]
    problems = {index: problem for index, problem in enumerate(added) if problem is not None}
    problems |= {taken[place]: problem for place, problem in reader.check().items()}
    drafted, accepted, _ = reader.accepted()
    good = [index for index in taken if index not in problems]
    assert (problems, dict(zip(good, zip(drafted.tolist(), accepted.tolist())))) == reference(rows)


def test_valid_rows_of_every_rule_are_all_taken_without_the_reference() -> None:
    """The usual rows (lists of floats, trees of dicts) go through the columns alone: none is doubted."""
    rng = np.random.default_rng(3)
    rows: list[tuple[Rule, dict[str, object]]] = []
    for rule in OTHER_RULES:
        for _ in range(20):
            if rule.kind == "tree":
                nodes = [
                    {
                        "parent": index - 1,
                        **{name: 1 if "token" in name else float(rng.random()) for name in rule.fields},
                    }
                    for index in range(4)
                ]
                rows.append((rule, {"nodes": nodes}))
            else:
                k = int(rng.integers(1, 6))
                row: dict[str, object] = {
                    name: rng.integers(0, 3, k).tolist() if "token" in name else rng.random(k).tolist()
                    for name in rule.fields
                }
                if "residual" in row:
                    row["residual"] = [*row["residual"][:-1], None]  # type: ignore[index]
                rows.append((rule, {**row, **{param.name: 0.5 for param in rule.params}}))
    problems, lengths = column_wise(rows)
    assert not problems and len(lengths) == len(rows)
    assert (problems, lengths) == reference(rows)
