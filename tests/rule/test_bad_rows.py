"""Bad rows of every rule, read by `audit`: one line naming the file, the line, the field, what is wrong and the
way out, exit status 2, no traceback; `--on-error skip` reads past the row and counts it. Trees whose parents
are not a tree (forward, out of range, a cycle), `nodes` that is not a list, and a tree of 10^5 nodes in one row
(read in linear time, or refused by name when deeper than a run may be)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH
from tests.helpers import invoke, run_process

GOOD: dict[str, dict[str, Any]] = {
    "standard": {"p": [0.5, 0.2], "q": [0.5, 0.4], "r": [0.1, 0.9]},
    "greedy-draft": {"p": [0.5, 0.2], "r": [0.1, 0.9]},
    "sample-match": {"draft_tokens": [3, 4], "target_tokens": [3, 5]},
    "block": {"p": [0.2, 0.9], "q": [0.5, 0.3], "r": [0.9, 0.3], "residual": [0.25, None]},
    "typical": {"p": [0.5, 0.2], "entropy": [0.1, 0.2], "epsilon": 0.3, "delta": 0.6},
    "argmax": {"draft_tokens": [3, 4], "target_tokens": [3, 5]},
    "tree-residual": {
        "nodes": [{"parent": -1, "p": 0.5, "q": 0.5, "r": 0.1}, {"parent": 0, "p": 0.1, "q": 1.0, "r": 0.5}]
    },
    "tree-target-cdf": {"nodes": [{"parent": -1, "p": 0.3, "coin": 0.2}, {"parent": 0, "p": 0.9, "coin": 0.1}]},
    "tree-argmax": {
        "nodes": [{"parent": -1, "token": 1, "target_token": 1}, {"parent": 0, "token": 2, "target_token": 3}]
    },
    "tree-match": {
        "nodes": [{"parent": -1, "token": 1, "target_token": 1}, {"parent": 0, "token": 2, "target_token": 3}]
    },
}
# per rule, the fields a row (or each of a tree's nodes) must carry
NEEDS = {
    "standard": ["p", "q", "r"],
    "greedy-draft": ["p", "r"],
    "sample-match": ["draft_tokens", "target_tokens"],
    "block": ["p", "q", "r", "residual"],
    "typical": ["p", "entropy", "epsilon", "delta"],
    "argmax": ["draft_tokens", "target_tokens"],
    "tree-residual": ["nodes", "nodes[].parent", "nodes[].p", "nodes[].q", "nodes[].r"],
    "tree-target-cdf": ["nodes", "nodes[].parent", "nodes[].p", "nodes[].coin"],
    "tree-argmax": ["nodes", "nodes[].parent", "nodes[].token", "nodes[].target_token"],
    "tree-match": ["nodes", "nodes[].parent", "nodes[].token", "nodes[].target_token"],
}
# per rule, bad values: (field to change, value, a word of what the message must say)
BAD: dict[str, list[tuple[str, object, str]]] = {
    "standard": [("q", [0.0, 0.4], "q[0]"), ("r", [0.1, "x"], "r[1]")],
    "greedy-draft": [("p", [1.5, 0.2], "p[0]"), ("r", [0.1, -0.1], "r[1]")],
    "sample-match": [
        ("draft_tokens", [3, -1], "draft_tokens[1]"),
        ("target_tokens", [3], "length"),
        ("p", [1.5, 0.2], "p[0]"),  # optional, held to its range when given
        ("p", [0.5], "length"),
    ],
    "block": [("residual", [-0.25, None], "residual[0]"), ("q", [0.0, 0.3], "q[0]"), ("residual", 0.25, "not a list")],
    "typical": [("entropy", [0.1, "x"], "entropy[1]"), ("epsilon", -1.0, "epsilon"), ("delta", "x", "delta")],
    "argmax": [("target_tokens", [3, 1.5], "target_tokens[1]"), ("draft_tokens", "34", "not a list")],
    "tree-residual": [("nodes[1].q", 0.0, "nodes[1].q"), ("nodes[0].r", 2.0, "nodes[0].r")],
    "tree-target-cdf": [("nodes[1].coin", 1.5, "nodes[1].coin"), ("threshold_acc", "x", "threshold_acc")],
    "tree-argmax": [("nodes[0].token", "a", "nodes[0].token"), ("nodes[1].parent", 1, "nodes[1].parent")],
    "tree-match": [
        ("nodes[1].parent", 5, "nodes[1].parent"),
        ("nodes", {"parent": -1}, "not a list"),
        ("nodes", [1, 2], "not a list of objects"),
        ("nodes", "abc", "not a list"),
        ("nodes", [], "empty"),
        ("nodes[0].parent", True, "nodes[0].parent"),
        ("nodes[0].parent", -1.0, "nodes[0].parent"),
    ],
}


def with_change(rule: str, field: str, value: object, drop: bool = False) -> dict[str, Any]:
    """The rule's good row with `field` set to `value` or dropped (`nodes[].x`: node 1's `x`; `nodes[i].x`)."""
    row: dict[str, Any] = orjson.loads(orjson.dumps({"rule": rule, **GOOD[rule]}))
    place, name = row, field
    if field.startswith("nodes["):
        index, name = field[len("nodes[") :].split("].")
        place = row["nodes"][int(index or 1)]
    if drop:
        del place[name]
    else:
        place[name] = value
    return row


def audit_log(tmp_path: Path, bad: dict[str, Any], *args: str) -> tuple[int, str, bytes]:
    """`audit` of three rows: a good one, `bad`, a good one."""
    good = {"rule": bad["rule"], **GOOD[bad["rule"]]}
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in (good, bad, good)))
    result = invoke("audit", str(path), *args)
    return result.exit_code, result.stderr, result.stdout_bytes


def assert_one_line(exit_code: int, stderr: str, *words: str) -> None:
    assert exit_code == 2, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "log.jsonl:2:" in stderr, stderr
    for word in words:
        assert word in stderr, (word, stderr)
    assert "--on-error skip" in stderr or "--rule NAME" in stderr or "-field NAME" in stderr, stderr  # the way out


def skipped_and_counted(tmp_path: Path, bad: dict[str, Any]) -> None:
    exit_code, stderr, stdout = audit_log(tmp_path, bad, "--on-error", "skip", "-o", "json")
    assert exit_code in (0, 1), stderr
    data = orjson.loads(stdout)
    assert data["skipped_rows"] == 1
    assert sum(data.get("rules", {"standard": data["runs"]}).values()) == 2


@pytest.mark.parametrize(("rule", "field"), [(rule, field) for rule, fields in NEEDS.items() for field in fields])
def test_a_row_missing_a_field_its_rule_needs(tmp_path: Path, rule: str, field: str) -> None:
    bad = with_change(rule, field, None, drop=True)
    exit_code, stderr, _ = audit_log(tmp_path, bad)
    assert_one_line(exit_code, stderr, field.split(".")[-1])
    skipped_and_counted(tmp_path, bad)


@pytest.mark.parametrize(
    ("rule", "field", "value", "word"), [(rule, *case) for rule, cases in BAD.items() for case in cases]
)
def test_a_row_with_a_bad_value(tmp_path: Path, rule: str, field: str, value: object, word: str) -> None:
    bad = with_change(rule, field, value)
    exit_code, stderr, _ = audit_log(tmp_path, bad)
    assert_one_line(exit_code, stderr, word)
    skipped_and_counted(tmp_path, bad)


@pytest.mark.parametrize(
    ("parents", "word"),
    [
        ([-1, 2, 0], "nodes[1].parent = 2"),  # forward
        ([-1, 0, 7], "nodes[2].parent = 7"),  # out of range
        ([-1, -2, 0], "nodes[1].parent = -2"),
        ([1, 0], "nodes[0].parent = 1"),  # a cycle
        ([-1, 1], "nodes[1].parent = 1"),  # its own parent
    ],
)
def test_parents_that_are_no_tree_in_tried_order(tmp_path: Path, parents: list[int], word: str) -> None:
    nodes = [{"parent": parent, "token": 1, "target_token": 1} for parent in parents]
    exit_code, stderr, _ = audit_log(tmp_path, {"rule": "tree-match", "nodes": nodes})
    assert_one_line(exit_code, stderr, word)


def huge_tree(depth: int, nodes: int, rule: str = "tree-target-cdf") -> dict[str, Any]:
    """A spine of `depth` nodes with the rest as siblings at depth 1 (tried after the spine's first node)."""
    parents = [index - 1 for index in range(depth)] + [-1] * (nodes - depth)
    if rule == "tree-match":
        return {"rule": rule, "nodes": [{"parent": parent, "token": 1, "target_token": 1} for parent in parents]}
    return {"rule": rule, "nodes": [{"parent": parent, "p": 1e-6, "coin": 0.5} for parent in parents]}


@pytest.mark.parametrize("rule", ["tree-target-cdf", "tree-match"])
def test_a_tree_of_a_hundred_thousand_nodes_in_one_row(tmp_path: Path, rule: str) -> None:
    """10^5 nodes: a wide tree of depth at most a run's longest draft is read (in a subprocess, so the test's
    timeout catches a quadratic recompute); deeper is refused by name, as an overlong chain is."""
    wide = tmp_path / "wide.jsonl"
    row = huge_tree(MAX_DRAFT_LENGTH, 100_000, rule)
    if rule == "tree-target-cdf":  # the siblings at depth 1 add up: the 5 * 10^5-th would pass, the walk stops
        row["nodes"][0]["coin"] = row["nodes"][-1]["coin"] = 1.0
    wide.write_bytes(orjson.dumps(row) + b"\n")
    result = run_process("audit", str(wide), "-o", "jsonl", timeout=30)
    assert result.returncode in (0, 1), result.stderr
    wanted = MAX_DRAFT_LENGTH if rule == "tree-match" else 0
    assert orjson.loads(result.stdout)["accepted"] == wanted
    deep = tmp_path / "log.jsonl"
    deep.write_bytes(orjson.dumps(huge_tree(100_000, 100_000, rule)) + b"\n")
    result = run_process("audit", str(deep), timeout=30)
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr and "log.jsonl:1:" in stderr, stderr
    too_deep = f"nodes[{MAX_DRAFT_LENGTH}] lies at depth {MAX_DRAFT_LENGTH + 1}: a tree is no deeper than the"
    assert too_deep in stderr, stderr


def test_rows_without_q_and_without_a_rule_name_the_rule_that_takes_none(tmp_path: Path) -> None:
    """A vLLM EAGLE / MTP / n-gram log carries no q: the way out names `--rule greedy-draft` beside `--q-field`,
    in JSONL and in Parquet, and the rule then reads the rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = tmp_path / "log.jsonl"
    jsonl.write_bytes(b'{"p": [0.5, 0.2], "r": [0.1, 0.3]}\n')
    parquet = tmp_path / "log.parquet"
    pq.write_table(pa.table({"p": [[0.5, 0.2]], "r": [[0.1, 0.3]]}), parquet)
    for path in (jsonl, parquet):
        result = invoke("audit", str(path))
        assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert "--q-field NAME" in result.stderr and "--rule greedy-draft" in result.stderr, result.stderr
        named = invoke("audit", str(path), "--rule", "greedy-draft", "-o", "jsonl")
        assert orjson.loads(named.stdout_bytes)["accepted"] == 1


@pytest.mark.parametrize(("rule", "field"), [(rule, field) for rule, fields in NEEDS.items() for field in fields])
def test_a_parquet_row_missing_a_field_its_rule_needs(tmp_path: Path, rule: str, field: str) -> None:
    """The same rows in Parquet (nested lists and structs): the missing value is a null, named as in JSONL."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.rule.test_acceptance import SCHEMA

    good = {"rule": rule, **GOOD[rule]}
    path = tmp_path / "log.parquet"
    pq.write_table(pa.Table.from_pylist([good, with_change(rule, field, None, drop=True), good], schema=SCHEMA), path)
    result = invoke("audit", str(path))
    assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "log.parquet:2:" in result.stderr, result.stderr
    assert field.split(".")[-1] in result.stderr, result.stderr
    skipped = invoke("audit", str(path), "--on-error", "skip", "-o", "json")
    assert skipped.exit_code in (0, 1) and orjson.loads(skipped.stdout_bytes)["skipped_rows"] == 1, skipped.stderr
