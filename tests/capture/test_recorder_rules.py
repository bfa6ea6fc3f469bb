"""The recorder under every rule of the table: chain steps with their rule's fields, tree steps as `nodes`, in
the row contract, through both formats; the rows recompute with the table to the count the engine reported."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specaccept_cli.capture import Recorder
from specaccept_cli.rule.registry import RULES, Rule, rule_named
from specaccept_cli.simulate import simulate_rule
from tests.capture.test_recorder import rows_of
from tests.cli.test_simulate_rules import recompute

CONTRACT_KEYS = ("id", "request_id", "rule", "accepted")


def engine_steps(rule: Rule, runs: int = 200) -> list[dict[str, Any]]:
    """Steps an engine running the rule would hand over: the simulator's honest rows."""
    tree = (2, 3) if rule.kind == "tree" else None
    return [row for chunk in simulate_rule(rule.name, runs, 3, k_low=1, k_high=6, tree=tree) for row in chunk]


def record(recorder: Recorder, rule: Rule, row: dict[str, Any], index: int) -> bool:
    params = {param.name: row[param.name] for param in rule.params if param.name in row}
    common = {"request_id": row["request_id"], "step": index, "accepted": row["accepted"], "params": params}
    if rule.kind == "tree":
        return recorder.record_step(rule.name, nodes=row["nodes"], **common)
    fields = {name: row[name] for name in (*rule.fields, *rule.optional, *rule.ignored) if name in row}
    if "residual" in fields:  # an engine hands over arrays: block's last residual as NaN
        fields["residual"] = np.array([np.nan if v is None else v for v in fields["residual"]])
    return recorder.record_step(rule.name, fields, **common)


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_every_rule_is_recorded_in_its_row_contract_and_recomputes(tmp_path: Path, rule: Rule, form: str) -> None:
    steps = engine_steps(rule)
    with Recorder(tmp_path, form, block_rows=64, handle_sigterm=False) as recorder:
        assert all(record(recorder, rule, row, index) for index, row in enumerate(steps))
    assert recorder.stats.written == len(steps) and recorder.stats.bad_values == 0
    rows = rows_of(tmp_path)
    assert [row["rule"] for row in rows] == [rule.name] * len(steps)
    assert [row["accepted"] for row in rows] == [row["accepted"] for row in steps]
    for stored, given in zip(rows, steps):
        for name, value in given.items():
            if name not in ("id", "request_id", "accepted"):
                assert stored[name] == value, name
    scalar, vectorized = recompute(rule, rows)
    assert scalar == vectorized == [row["accepted"] for row in steps]


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
def test_rules_mix_row_by_row_with_the_fast_path(tmp_path: Path, form: str) -> None:
    """record() rows (p, q, r, tagged or not) and record_step() rows of chains and trees in one part."""
    block_rule, tree_rule = rule_named("block"), rule_named("tree-target-cdf")
    block_rows, tree_rows = engine_steps(block_rule, 3), engine_steps(tree_rule, 3)
    with Recorder(tmp_path, form, handle_sigterm=False) as recorder:
        assert recorder.record([0.5], [0.5], [0.2], accepted=1)
        assert recorder.record([0.2, 0.9], [0.5, 0.5], [0.3, 0.1], accepted=1, rule="greedy_draft", model="m")
        for index, (chain, tree) in enumerate(zip(block_rows, tree_rows)):
            assert record(recorder, block_rule, chain, index)
            assert record(recorder, tree_rule, tree, index)
    rows = rows_of(tmp_path)
    assert len(rows) == 8 and len(recorder.stats.parts) == 1
    assert [row.get("rule") for row in rows] == [None, "greedy-draft"] + ["block", "tree-target-cdf"] * 3
    assert rows[1]["p"] == [0.2, 0.9] and rows[1]["model"] == "m"
    trees = [row for row in rows if row.get("rule") == "tree-target-cdf"]
    assert all(row.get("p") is None and len(row["nodes"]) == 14 for row in trees)
    assert recompute(tree_rule, trees)[1] == [row["accepted"] for row in tree_rows]
    blocks = [row for row in rows if row.get("rule") == "block"]
    assert recompute(block_rule, blocks)[1] == [row["accepted"] for row in block_rows]
    if form == "jsonl":
        assert "rule" not in rows[0] and "nodes" not in rows[0] and "p" not in trees[0]


def test_a_step_that_breaks_its_rules_contract_is_refused_counted_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    level = caplog.at_level(logging.WARNING, logger="specaccept.capture")
    with level, Recorder(tmp_path, "jsonl", handle_sigterm=False) as recorder:
        assert not recorder.record_step("block", {"p": [0.5], "q": [0.5], "r": [0.5]})  # no residual
        assert not recorder.record_step("greedy-draft", {"p": [1.5], "r": [0.1]})
        assert not recorder.record_step("sample-match", {"draft_tokens": [1, 2], "target_tokens": [1]})
        assert not recorder.record_step("tree-match", nodes=[{"parent": 1, "token": 1, "target_token": 1}])
        assert not recorder.record_step("tree-match", {"token": [1]})  # a tree rule needs nodes
        assert not recorder.record_step("typical", {"p": [0.5], "entropy": [1.0]}, params={"delta": 0.3})
        assert not recorder.record_step("strict", {"p": [0.5]})
        assert not recorder.record_step("argmax", {"draft_tokens": [1], "target_tokens": [1]}, nodes=[])  # a chain
        assert not recorder.record_step("greedy-draft", {"p": [0.5], "r": [0.1]}, residual="label")
        assert not recorder.record([0.5], [0.5], [0.5], rule="block")  # not a p, q, r rule
        assert not recorder.record_step("greedy-draft", {"p": ["0.5"], "r": [True]})  # text and bools: no numbers
        typical = {"p": [0.5], "entropy": [1.0]}
        assert not recorder.record_step("typical", typical, params={"epsilon": "0.1", "delta": 0.3})
        assert recorder.record_step("greedy-draft", {"p": [0.5], "q": [0.9], "r": [0.1]})  # q is kept, ignored
    assert recorder.stats.bad_values == 12 and recorder.stats.written == 1
    messages = [record.getMessage() for record in caplog.records]
    assert sum("a step was refused" in message for message in messages) == 1
    assert "rule 'block' needs 'residual'" in " ".join(messages)
    assert rows_of(tmp_path)[0] == {**rows_of(tmp_path)[0], "rule": "greedy-draft", "q": [0.9]}


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
def test_a_steps_labels_are_written_beside_its_fields(tmp_path: Path, form: str) -> None:
    """Labels of record_step rows (the transformers capture's `committed`, `position`, `generator`) are kept in
    both formats, also in a block where record() rows carry a label of a step field's name (`draft_tokens`)."""
    with Recorder(tmp_path / "c", format=form, handle_sigterm=False) as recorder:
        assert recorder.record([0.5], [0.5], [0.2], request_id="a", step=0, accepted=1, draft_tokens=[7], committed=1)
        fields = {"draft_tokens": [7, 8], "target_tokens": [7, 9]}
        assert recorder.record_step("argmax", fields, request_id="a", step=1, accepted=1, committed=0, position=5)
    rows = rows_of(tmp_path / "c")
    assert [row["committed"] for row in rows] == [1, 0] and rows[1]["position"] == 5
    assert [row["draft_tokens"] for row in rows] == [[7], [7, 8]]
