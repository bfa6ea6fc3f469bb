"""Rows of every rule of the table through the JSONL readers (docs/rules.md, "How the audit reads them"): each
row recomputed by its own rule equals the `accepted` its decoder wrote, in a log of one rule and in one that mixes
every rule row by row, on every path (the compiled and the exact readers, stdin, --jobs 2); `--rule` names the
rule of rows without a `rule` field; a row missing its rule's fields is one error naming the field, the rule
and the way out."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specaccept_cli.read.jsonl import parse_block
from specaccept_cli.read.jsonl_fast import fast_batch
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.registry import RULES
from specaccept_cli.simulate import simulate_rule, write_rule_parquet
from tests.helpers import invoke, per_run, run_process

SHAPE = (2, 3)


def rule_rows(name: str, runs: int = 60, seed: int = 5) -> list[dict[str, object]]:
    tree = SHAPE if name.startswith("tree-") else None
    return [row for chunk in simulate_rule(name, runs, seed, k_low=1, k_high=5, tree=tree) for row in chunk]


def mixed_rows() -> list[dict[str, object]]:
    """Every rule's rows, one of each in turn."""
    logs = [rule_rows(rule.name, runs=25, seed=index) for index, rule in enumerate(RULES)]
    return [row for group in itertools.zip_longest(*logs) for row in group if row is not None]


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


@pytest.mark.parametrize("name", [rule.name for rule in RULES])
def test_each_rules_rows_recompute_to_their_accepted(tmp_path: Path, name: str) -> None:
    rows = rule_rows(name)
    result = invoke("audit", str(write(tmp_path / "log.jsonl", rows)), "-o", "jsonl")
    assert result.exit_code in (0, 1), result.stderr
    assert [run["accepted"] for run in per_run(result.stdout_bytes)] == [row["accepted"] for row in rows]


def test_a_log_mixing_every_rule_row_by_row_gives_every_rows_accepted_on_every_path(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "mixed.jsonl", rows)
    wanted = [row["accepted"] for row in rows]
    outputs = []
    for extra in ((), ("--jobs", "2")):
        result = invoke("audit", str(path), "-o", "jsonl", *extra)
        assert result.exit_code in (0, 1), result.stderr
        assert [run["accepted"] for run in per_run(result.stdout_bytes)] == wanted
        outputs.append(result.stdout_bytes)
    piped = invoke("audit", "-", "-o", "jsonl", input=path.read_bytes())
    assert [run["accepted"] for run in per_run(piped.stdout_bytes)] == wanted
    assert outputs[0] == outputs[1]
    summaries = [invoke("audit", str(path), "-o", "json", *extra).stdout_bytes for extra in ((), ("--jobs", "2"))]
    assert summaries[0] == summaries[1]


def test_blocks_cut_anywhere_give_the_same_runs() -> None:
    """Tiny blocks (one to seven lines) put rows of different rules in different blocks: the same runs."""
    lines = [orjson.dumps(row) for row in mixed_rows()]
    whole, errors = parse_block(b"\n".join(lines), 1, "log", FieldSpec())
    assert not errors and whole.rules is not None
    first, runs, names = 1, [], []
    for size in itertools.cycle(range(1, 8)):
        if first > len(lines):
            break
        batch, errors = parse_block(b"\n".join(lines[first - 1 : first - 1 + size]), first, "log", FieldSpec())
        assert not errors
        runs += batch.lines.tolist()
        names += batch.rules or ["standard"] * len(batch)
        first += size
    assert runs == whole.lines.tolist() and names == whole.rules


def test_the_fast_path_declines_a_block_holding_another_rules_row() -> None:
    standard = [orjson.dumps(row) for row in rule_rows("standard", runs=5)]
    assert fast_batch(b"\n".join(standard), 1, "log", FieldSpec(), 1 << 20) is not None  # "rule": "standard"
    untagged = [orjson.dumps({key: row[key] for key in ("p", "q", "r")}) for row in rule_rows("standard", runs=5)]
    assert fast_batch(b"\n".join(untagged), 1, "log", FieldSpec(), 1 << 20) is not None
    assert fast_batch(b"\n".join(untagged), 1, "log", FieldSpec(rule="greedy-draft"), 1 << 20) is None
    other = orjson.dumps(rule_rows("greedy-draft", runs=1)[0])
    assert fast_batch(b"\n".join([*standard, other]), 1, "log", FieldSpec(), 1 << 20) is None


def test_rule_names_the_rule_of_rows_without_one(tmp_path: Path) -> None:
    rows = rule_rows("block")
    bare = write(tmp_path / "bare.jsonl", [{key: value for key, value in row.items() if key != "rule"} for row in rows])
    result = invoke("audit", str(bare), "-o", "jsonl", "--rule", "block-verification")  # an alias
    assert [run["accepted"] for run in per_run(result.stdout_bytes)] == [row["accepted"] for row in rows]
    own = write(tmp_path / "own.jsonl", [*rows[:3], {**rows[3], "rule": "standard"}])
    result = invoke("audit", str(own), "-o", "jsonl", "--rule", "greedy-draft")  # a row's own rule wins
    runs = per_run(result.stdout_bytes)
    assert [run["accepted"] for run in runs[:3]] == [row["accepted"] for row in rows[:3]]


def test_a_row_missing_its_rules_field_is_one_error_naming_field_rule_and_way_out(tmp_path: Path) -> None:
    rows = rule_rows("block", runs=3)
    del rows[1]["residual"]
    result = invoke("audit", str(write(tmp_path / "log.jsonl", rows)))
    assert result.exit_code == 2
    assert "log.jsonl:2" in result.stderr and "rule 'block' needs 'residual'" in result.stderr
    assert "--rule NAME" in result.stderr and "Traceback" not in result.stderr
    bare = write(tmp_path / "bare.jsonl", [{"p": [0.5], "r": [0.1]}])
    result = invoke("audit", str(bare), "--rule", "typical")
    assert result.exit_code == 2 and "rule 'typical' needs 'entropy'" in result.stderr
    result = invoke("audit", str(write(tmp_path / "q.jsonl", [{"rule": "block", "p": [0.5], "r": [0.1]}])))
    assert result.exit_code == 2 and "needs 'q'" in result.stderr and "--q-field" in result.stderr


@pytest.mark.parametrize(
    ("value", "wording"), [("nope", "not a rule this audit knows"), (3, "not a rule name"), ([], "not a rule name")]
)
def test_a_row_naming_no_known_rule_is_an_error(tmp_path: Path, value: object, wording: str) -> None:
    path = write(tmp_path / "log.jsonl", [{"rule": value, "p": [0.5], "q": [0.5], "r": [0.1]}])
    result = invoke("audit", str(path))
    assert result.exit_code == 2 and wording in result.stderr and "log.jsonl:1" in result.stderr


def test_a_bad_value_is_named_with_its_place(tmp_path: Path) -> None:
    rows = rule_rows("tree-target-cdf", runs=2)
    nodes = rows[0]["nodes"]
    assert isinstance(nodes, list)
    nodes[2]["coin"] = 1.5
    result = invoke("audit", str(write(tmp_path / "log.jsonl", rows)))
    assert result.exit_code == 2 and "nodes[2].coin = 1.5" in result.stderr


def test_standard_rows_keep_their_threshold_statistics_beside_other_rules(tmp_path: Path) -> None:
    """The stand-in tokens of other rules' runs add nothing p/q- or r-based: the standard runs' sums are theirs."""
    standard = rule_rows("standard")
    alone = orjson.loads(invoke("audit", str(write(tmp_path / "a.jsonl", standard)), "-o", "json").stdout_bytes)
    mixed = [row for pair in zip(standard, rule_rows("argmax")) for row in pair]
    both = orjson.loads(invoke("audit", str(write(tmp_path / "b.jsonl", mixed)), "-o", "json").stdout_bytes)
    for name in ("sampled_tokens", "threshold_sum_fixed", "examined_threshold_sum_fixed", "one_hot_draft_tokens"):
        assert both["state"][name] == alone["state"][name], name
    assert both["runs"] == 2 * alone["runs"]


# --- Parquet: the same rows as nested lists and structs (`nodes` a list of structs) ---------------------------

NODE = pa.struct(
    [
        ("parent", pa.int64()),
        ("p", pa.float64()),
        ("q", pa.float64()),
        ("r", pa.float64()),
        ("coin", pa.float64()),
        ("token", pa.int64()),
        ("target_token", pa.int64()),
    ]
)
FLOATS, INTS = pa.list_(pa.float64()), pa.list_(pa.int64())
EVERY_RULES_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("request_id", pa.string()),
        ("rule", pa.string()),
        *((name, FLOATS) for name in ("p", "q", "r", "residual", "entropy")),
        ("draft_tokens", INTS),
        ("target_tokens", INTS),
        ("nodes", pa.list_(NODE)),
        *((name, pa.float64()) for name in ("epsilon", "delta", "threshold_single", "threshold_acc")),
        ("accepted", pa.int64()),
    ]
)


def write_parquet(path: Path, rows: list[dict[str, object]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=EVERY_RULES_SCHEMA), path, row_group_size=97)
    return path


def records_without_source(stdout: bytes) -> list[dict[str, object]]:
    return [{key: value for key, value in run.items() if key != "source"} for run in per_run(stdout)]


@pytest.mark.parametrize("name", [rule.name for rule in RULES])
def test_each_rules_parquet_as_simulate_writes_it_gives_the_jsonl_results(tmp_path: Path, name: str) -> None:
    tree = SHAPE if name.startswith("tree-") else None
    written = tmp_path / "log.parquet"
    write_rule_parquet(simulate_rule(name, 60, 5, k_low=1, k_high=5, tree=tree), str(written))
    rows = rule_rows(name)
    from_parquet = invoke("audit", str(written), "-o", "jsonl")
    assert from_parquet.exit_code in (0, 1), from_parquet.stderr
    assert [run["accepted"] for run in per_run(from_parquet.stdout_bytes)] == [row["accepted"] for row in rows]
    from_jsonl = invoke("audit", str(write(tmp_path / "log.jsonl", rows)), "-o", "jsonl")
    assert records_without_source(from_parquet.stdout_bytes) == records_without_source(from_jsonl.stdout_bytes)


def test_every_path_gives_the_same_bytes_on_a_log_mixing_every_rule(tmp_path: Path) -> None:
    """JSONL, Parquet, stdin (both), --jobs 2 (both), and merge of two halves' summaries."""
    rows = mixed_rows()
    jsonl, parquet = write(tmp_path / "m.jsonl", rows), write_parquet(tmp_path / "m.parquet", rows)
    wanted = [row["accepted"] for row in rows]
    records = []
    for path in (jsonl, parquet):
        for extra in ((), ("--jobs", "2")):
            result = invoke("audit", str(path), "-o", "jsonl", *extra)
            assert [run["accepted"] for run in per_run(result.stdout_bytes)] == wanted
            records.append(records_without_source(result.stdout_bytes))
        piped = run_process("audit", "-", "-o", "jsonl", input=path.read_bytes())  # a real pipe: Parquet is spooled
        records.append(records_without_source(piped.stdout))
    assert all(record == records[0] for record in records)

    def figures(*args: str) -> dict[str, object]:
        data = orjson.loads(invoke("audit", *args, "-o", "json").stdout_bytes)
        state = {f"state.{key}": value for key, value in data.pop("state").items() if key != "windows"}
        return {key: value for key, value in data.items() if key not in ("provenance", "windows", "drift")} | state

    whole = figures(str(jsonl))
    assert figures(str(parquet)) == whole and figures(str(parquet), "--jobs", "2") == whole
    halves = [write_parquet(tmp_path / "a.parquet", rows[:110]), write(tmp_path / "b.jsonl", rows[110:])]
    for index, half in enumerate(halves):
        invoke("audit", str(half), "--summary-out", str(tmp_path / f"s{index}.json"), "-q")
    merged = orjson.loads(invoke("merge", str(tmp_path / "s0.json"), str(tmp_path / "s1.json")).stdout_bytes)
    for key in ("runs", "alpha", "accepted_tokens", "rules", "outside_alpha", "per_position"):
        assert merged[key] == whole[key], key
    assert merged["state"]["rules"] == whole["state.rules"]


def test_a_parquet_row_missing_its_rules_field_is_named_by_its_row(tmp_path: Path) -> None:
    rows = rule_rows("block", runs=4)
    rows[2]["residual"] = None
    result = invoke("audit", str(write_parquet(tmp_path / "log.parquet", rows)))
    assert result.exit_code == 2 and "log.parquet:3" in result.stderr and "needs 'residual'" in result.stderr
    bare = tmp_path / "bare.parquet"
    pq.write_table(pa.table({"p": [[0.5]], "r": [[0.1]]}), bare)
    ok = invoke("audit", str(bare), "--rule", "greedy-draft", "-o", "jsonl")
    assert [run["accepted"] for run in per_run(ok.stdout_bytes)] == [1]


def test_a_typical_row_without_its_thresholds_names_them_and_the_way_out(tmp_path: Path) -> None:
    row = {key: value for key, value in rule_rows("typical", runs=1)[0].items() if key != "delta"}
    result = invoke("audit", str(write(tmp_path / "log.jsonl", [row])))
    assert result.exit_code == 2 and "rule 'typical' needs 'delta'" in result.stderr and "--rule NAME" in result.stderr


def test_groups_and_per_request_tallies_are_the_same_on_every_path(tmp_path: Path) -> None:
    """`--group-by`: each group's block and tree runs, per request, from JSONL, Parquet, --jobs 2 and merge."""
    rows = mixed_rows()
    jsonl, parquet = write(tmp_path / "m.jsonl", rows), write_parquet(tmp_path / "m.parquet", rows)

    def grouped(*args: str) -> dict[str, object]:
        data = orjson.loads(invoke("audit", *args, "--group-by", "rule", "-o", "json").stdout_bytes)
        return {"groups": data["groups"], "outside_alpha": data["outside_alpha"], "rules": data["state"]["rules"]}

    whole = grouped(str(jsonl))
    for args in ((str(parquet),), (str(parquet), "--jobs", "2"), (str(jsonl), "--jobs", "2")):
        assert grouped(*args) == whole, args
    groups = whole["groups"]
    assert isinstance(groups, dict)
    for name in ("block", "tree-residual", "tree-target-cdf", "tree-argmax", "tree-match"):
        assert groups[name]["runs"] == 0 and set(groups[name]["outside_alpha"]) == {name}
        assert groups[name]["state"]["rules"]["clusters"][name]["field"] == "request_id"
    halves = [write_parquet(tmp_path / "a.parquet", rows[:110]), write(tmp_path / "b.jsonl", rows[110:])]
    for index, half in enumerate(halves):
        invoke("audit", str(half), "--group-by", "rule", "--summary-out", str(tmp_path / f"s{index}.json"), "-q")
    merged = orjson.loads(invoke("merge", str(tmp_path / "s0.json"), str(tmp_path / "s1.json")).stdout_bytes)
    assert merged["outside_alpha"] == whole["outside_alpha"] and merged["state"]["rules"] == whole["rules"]
    for key, group in groups.items():
        assert merged["groups"][key].get("outside_alpha") == group.get("outside_alpha"), key
        assert merged["groups"][key]["state"].get("rules") == group["state"].get("rules"), key
