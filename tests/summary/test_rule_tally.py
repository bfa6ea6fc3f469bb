"""The per-rule tally (`summary.rules`): runs per rule, additive, saved and read back (a file without it is
"standard only"); first-rejection chain rules in the (k, a) counts and alpha, block and tree runs in their own
accepted-length histograms, named by a warning; per-run records name a run's rule when it is not `standard`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from specaccept_cli.summary.files import summary_from_object
from specaccept_cli.summary.rules import RuleTally, in_counts
from tests.helpers import invoke, invoke_env, per_run
from tests.read.test_rule_rows import mixed_rows, rule_rows, write


def test_which_rules_feed_the_counts() -> None:
    assert all(in_counts(name) for name in ("standard", "greedy-draft", "sample-match", "argmax", "typical"))
    assert not any(in_counts(name) for name in ("block", "tree-residual", "tree-target-cdf", "tree-match"))


def test_the_tally_adds_like_the_whole() -> None:
    names = ["standard", "block", "argmax", "tree-match", "block", "standard", "tree-match"]
    accepted = np.array([1, 3, 0, 2, 0, 4, 2], dtype=np.int64)
    whole = RuleTally.of_runs(names, accepted)
    assert whole.runs == {"argmax": 1, "block": 2, "tree-match": 2}
    assert whole.accepted["block"].tolist() == [1, 0, 0, 1] and whole.accepted["tree-match"].tolist() == [0, 0, 2]
    halves = RuleTally.of_runs(names[:3], accepted[:3]) + RuleTally.of_runs(names[3:], accepted[3:])
    assert halves == whole
    assert whole.runs_by_rule(counted_runs=3) == {"standard": 2, "argmax": 1, "block": 2, "tree-match": 2}
    assert whole.tokens_per_pass("block") == 2.5
    assert RuleTally.from_dict(orjson.loads(orjson.dumps(whole.to_dict()))) == whole


def test_the_json_summary_names_its_rules_and_leaves_block_and_trees_out_of_alpha(tmp_path: Path) -> None:
    rows = mixed_rows()
    result = invoke("audit", str(write(tmp_path / "mixed.jsonl", rows)), "-o", "json")
    data = orjson.loads(result.stdout_bytes)
    by_rule: dict[str, int] = {}
    for row in rows:
        by_rule[str(row["rule"])] = by_rule.get(str(row["rule"]), 0) + 1
    assert data["rules"] == {name: by_rule[name] for name in data["rules"]} and set(data["rules"]) == set(by_rule)
    outside = {"block", "tree-residual", "tree-target-cdf", "tree-argmax", "tree-match"}
    assert set(data["outside_alpha"]) == outside
    assert data["runs"] == sum(count for name, count in by_rule.items() if name not in outside)
    for name in outside:
        mine = [int(row["accepted"]) for row in rows if row["rule"] == name]  # type: ignore[call-overload]
        histogram = data["outside_alpha"][name]["accepted_histogram"]
        assert histogram == {str(a): mine.count(a) for a in sorted(set(mine))}
        assert data["outside_alpha"][name]["tokens_per_pass"] == sum(mine) / len(mine) + 1
    counted = [row for row in rows if row["rule"] not in outside]
    assert data["accepted_tokens"] == sum(int(row["accepted"]) for row in counted)  # type: ignore[call-overload]


def test_a_warning_names_the_runs_left_out_of_alpha(tmp_path: Path) -> None:
    result = invoke_env({"COLUMNS": "400"}, "audit", str(write(tmp_path / "b.jsonl", rule_rows("block"))))
    assert "60 block runs left out of alpha" in result.stdout and "tokens per pass" in result.stdout


def test_a_standard_log_writes_no_tally_and_an_old_file_reads_as_standard_only(tmp_path: Path) -> None:
    data = orjson.loads(
        invoke("audit", str(write(tmp_path / "s.jsonl", rule_rows("standard"))), "-o", "json").stdout_bytes
    )
    assert "rules" not in data and "rules" not in data["state"]
    assert summary_from_object(data).rules is None


def test_merge_of_two_halves_is_the_whole(tmp_path: Path) -> None:
    rows = mixed_rows()
    paths = [write(tmp_path / f"h{index}.jsonl", half) for index, half in enumerate((rows[:120], rows[120:]))]
    for index, path in enumerate(paths):
        invoke("audit", str(path), "--summary-out", str(tmp_path / f"s{index}.json"), "-q")
    merged = orjson.loads(invoke("merge", str(tmp_path / "s0.json"), str(tmp_path / "s1.json")).stdout_bytes)
    invoke("audit", str(write(tmp_path / "all.jsonl", rows)), "--summary-out", str(tmp_path / "all.json"), "-q")
    whole = orjson.loads((tmp_path / "all.json").read_bytes())
    for key in ("rules", "outside_alpha", "runs", "alpha", "accepted_tokens"):
        assert merged[key] == whole[key], key
    assert merged["state"]["rules"] == whole["state"]["rules"]


def test_per_run_records_name_a_runs_rule_when_it_is_not_standard(tmp_path: Path) -> None:
    rows = mixed_rows()
    runs = per_run(invoke("audit", str(write(tmp_path / "m.jsonl", rows)), "-o", "jsonl").stdout_bytes)
    assert [run.get("rule", "standard") for run in runs] == [row["rule"] for row in rows]


def test_a_log_of_tree_runs_alone_is_not_empty(tmp_path: Path) -> None:
    """Every run apart from the counts: the first screen says so, and never that nothing was read."""
    path = write(tmp_path / "tree.jsonl", rule_rows("tree-match"))
    result = invoke_env({"COLUMNS": "400"}, "audit", str(path), "-o", "markdown")
    assert result.exit_code == 0, result.stderr
    assert "0 in alpha; 60 more apart (tree-match)" in result.stdout
    assert "nothing was read" not in result.stdout and "60 tree-match runs left out of alpha" in result.stdout


def test_id_field_rule_writes_each_rows_own_rule_once(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "m.jsonl", rows)
    lines = invoke("audit", str(path), "-o", "jsonl", "--id-field", "rule").stdout_bytes.splitlines()
    assert all(line.count(b'"rule"') == 1 for line in lines)
    assert [orjson.loads(line)["rule"] for line in lines] == [row["rule"] for row in rows]
    table = invoke("audit", str(path), "-o", "csv", "--id-field", "rule").stdout.splitlines()
    assert table[0] == "source,line,k,accepted,emitted,rule"
    assert [line.rsplit(",", 1)[1] for line in table[1:]] == [row["rule"] for row in rows]
