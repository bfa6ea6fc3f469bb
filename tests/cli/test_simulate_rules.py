"""`simulate --rule`: honest logs under every rule of the table, in its row contract, that recompute to the
accepted length the decoder decided; trees with `--tree`; and the options it refuses."""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from specaccept_cli.rule.contract import step_problem
from specaccept_cli.rule.registry import RULES, Rule, rule_named
from specaccept_cli.rule.steps import ChainSteps, TreeSteps, offsets_of
from tests.helpers import invoke

CHAIN_RULES = [rule for rule in RULES if rule.kind == "chain"]
TREE_RULES = [rule for rule in RULES if rule.kind == "tree"]


def shape_options(rule: Rule) -> tuple[str, ...]:
    return ("--tree", "2x3") if rule.kind == "tree" else ("--k", "1-6")


def rows_of(rule: Rule, runs: int, seed: int = 1) -> list[dict[str, Any]]:
    result = invoke("simulate", "--runs", str(runs), "--rule", rule.name, *shape_options(rule), "--seed", str(seed))
    assert result.exit_code == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout_bytes.splitlines()]


def as_float(name: str, value: Any) -> float:
    return math.nan if value is None else value  # block's last residual: null in the row


def recompute(rule: Rule, rows: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """The table's scalar and vectorized recomputes of every row, after checking it against the row contract."""
    params = {param.name: np.array([row.get(param.name, param.default) for row in rows]) for param in rule.params}
    if rule.kind == "chain":
        for row in rows:
            fields = {name: row[name] for name in rule.fields}
            assert step_problem(rule, fields, {name: row[name] for name in params if name in row}) is None, row
        dtype = {name: np.int64 if "token" in name else np.float64 for name in rule.fields}
        columns = {
            name: np.array([as_float(name, v) for row in rows for v in row[name]], dtype=dtype[name])
            for name in rule.fields
        }
        steps = ChainSteps(offsets_of([len(row[rule.fields[0]]) for row in rows]), columns, params)
        assert rule.chain_scalar is not None
        scalar = [rule.chain_scalar(*steps.step(index)) for index in range(len(steps))]
    else:
        for row in rows:
            parent = [node["parent"] for node in row["nodes"]]
            fields = {name: [node[name] for node in row["nodes"]] for name in rule.fields}
            assert step_problem(rule, fields, {}, parent) is None, row
        columns = {
            name: np.array(
                [node[name] for row in rows for node in row["nodes"]], dtype=np.int64 if "token" in name else np.float64
            )
            for name in rule.fields
        }
        parent_column = np.array([node["parent"] for row in rows for node in row["nodes"]], dtype=np.int64)
        tree = TreeSteps(offsets_of([len(row["nodes"]) for row in rows]), parent_column, columns, params)
        assert rule.tree_scalar is not None
        scalar = [rule.tree_scalar(*tree.step(index)) for index in range(len(tree))]
        steps = tree  # type: ignore[assignment]
    return scalar, rule.accepted(steps).tolist()


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_every_rule_writes_rows_that_recompute_to_the_decoders_accepted_length(rule: Rule) -> None:
    rows = rows_of(rule, 1500)
    assert len(rows) == 1500 and [row["id"] for row in rows] == list(range(1500))
    assert {row["rule"] for row in rows} == {rule.name}
    decided = [row["accepted"] for row in rows]
    scalar, vectorized = recompute(rule, rows)
    assert scalar == vectorized == decided
    assert max(decided) >= 3  # long accepts happen
    if rule.name != "tree-argmax":  # greedy decoding of a small Markov model falls into a cycle its top 2 holds
        assert min(decided) == 0  # and rejections at the first position
    if rule.kind == "tree":
        assert {len(row["nodes"]) for row in rows} == {2 + 4 + 8}  # whole 2x3 trees
        assert max(decided) == 3
    else:
        assert {len(row[rule.fields[0]]) for row in rows} == set(range(1, 7))  # --k 1-6


def test_block_rows_end_with_a_null_residual_and_keep_past_a_failing_position() -> None:
    rows = rows_of(rule_named("block"), 3000, seed=2)
    assert all(row["residual"][-1] is None for row in rows)
    standard = rule_named("standard")
    passes_later = 0
    for row in rows:
        assert standard.chain_scalar is not None
        chained = standard.chain_scalar({name: row[name] for name in ("p", "q", "r")}, {})
        passes_later += row["accepted"] > chained
    assert passes_later > 0  # block keeps some prefixes whose first failing position the chain rule stops at


def test_simulate_rule_is_reproducible_and_the_same_in_parquet(tmp_path: Path) -> None:
    for rule in ("block", "tree-target-cdf"):
        options = ("--tree", "3x2") if rule.startswith("tree") else ("--k", "4")
        base = ("simulate", "--runs", "300", "--rule", rule, *options, "--seed", "7")
        once, again = invoke(*base).stdout_bytes, invoke(*base).stdout_bytes
        assert once == again and once
        path = tmp_path / f"{rule}.parquet"
        assert invoke(*base, "-o", str(path)).exit_code == 0
        table = pq.read_table(path).to_pylist()
        lines = [orjson.loads(line) for line in once.splitlines()]
        assert len(table) == len(lines) == 300
        for stored, line in zip(table, lines):
            assert {key: value for key, value in stored.items()} == line


def test_the_same_seed_gives_the_same_models_under_every_chain_rule() -> None:
    """The rules decode the same pair of models: at one seed the standard and block logs draft alike at first."""
    first = rows_of(rule_named("standard"), 1)[0]
    block = rows_of(rule_named("block"), 1)[0]
    assert first["p"] == block["p"] and first["q"] == block["q"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rule", "standard", "--alpha", "0.5", "--k", "3"], "leave out --alpha"),
        (["--rule", "standard", "--k", "3", "--requests", "5"], "leave out --requests"),
        (["--rule", "standard", "--tree", "2x3"], "verifies chains: leave out --tree"),
        (["--rule", "standard"], "Missing option '--k'"),
        (["--rule", "tree-match", "--k", "3"], "verifies trees: give their shape with --tree"),
        (["--rule", "tree-match", "--tree", "2x3", "--k", "3"], "leave out --k"),
        (["--rule", "tree-match", "--tree", "2by3"], "is not a tree shape like 2x3"),
        (["--rule", "tree-match", "--tree", "0x3"], "at least one child per node"),
        (["--rule", "tree-match", "--tree", "4x6"], "5,460 nodes; at most 1,024"),
        (["--tree", "2x3"], "--tree needs --rule"),
        (["--rule", "strict", "--k", "3"], "unknown rule 'strict'"),
    ],
)
def test_simulate_rule_usage_errors(args: list[str], message: str) -> None:
    result = invoke("simulate", "--runs", "5", *args)
    assert result.exit_code == 2
    assert message in result.stderr, result.stderr


def test_aliases_name_the_rule_in_the_rows() -> None:
    result = invoke("simulate", "--runs", "2", "--rule", "SGLANG_TREE", "--tree", "2x2", "--seed", "1")
    assert result.exit_code == 0, result.stderr
    assert [orjson.loads(line)["rule"] for line in result.stdout_bytes.splitlines()] == ["tree-target-cdf"] * 2


def test_a_greedy_draft_log_read_under_the_seeds_rule_is_named_greedy_draft_by_design(tmp_path: Path) -> None:
    """Items 4 and 5 together: a simulated vLLM log verified with r <= p (its `accepted` the engine's count),
    audited under the seed's rule, is named greedy-draft with the verdict `design`; a standard log has no
    mismatch at all."""
    for rule, expected in (("standard", None), ("greedy-draft", "design")):
        path = tmp_path / f"{rule}.jsonl.gz"
        made = invoke("simulate", "--runs", "3000", "--rule", rule, "--k", "1-6", "--seed", "4", "-o", str(path))
        assert made.exit_code == 0, made.stderr
        # Read by its own `rule` field, every row's count is explained: no mismatch (issue 42, the row contract).
        own = orjson.loads(invoke("audit", str(path), "--reported-field", "accepted", "-o", "json").stdout)
        assert own["mismatches"] == 0
        # Under the seed's rule: the rows as an engine that does not name its rule writes them.
        untagged = tmp_path / f"{rule}-untagged.jsonl"
        rows = [orjson.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
        untagged.write_bytes(
            b"".join(orjson.dumps({k: v for k, v in row.items() if k != "rule"}) + b"\n" for row in rows)
        )
        audit = invoke("audit", str(untagged), "--reported-field", "accepted", "-o", "json")
        summary = orjson.loads(audit.stdout)
        if expected is None:
            assert summary["mismatches"] == 0 and summary["server_rule"] is None
        else:
            named = summary["server_rule"]
            assert summary["mismatches"] > 0 and summary["unexplained"] == 0
            assert named["rule"] == "greedy-draft" and named["verdict"] == expected
            assert named["explains"] == summary["mismatches"]
