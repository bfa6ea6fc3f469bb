"""The per-rule tally (`summary.rules`): runs per rule, additive, saved and read back (a file without it is
"standard only"); first-rejection chain rules in the (k, a) counts and alpha, block and tree runs in their own
accepted-length histograms, named by a warning; per-run records name a run's rule when it is not `standard`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.summary.files import summary_from_object
from specaccept_cli.summary.rules import RuleTally, in_counts
from tests.helpers import invoke, invoke_env, per_run
from tests.read.test_rule_rows import mixed_rows, rule_rows, write

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
    # The summary names the rule its runs were recomputed by; the state keeps no tally, as files always had.
    assert data["rules"] == {"standard": data["runs"]} and "rules" not in data["state"]
    assert summary_from_object(data).rules is None
    engine = orjson.loads(invoke("audit", str(EXAMPLES / "vllm-server.log"), "-o", "json").stdout_bytes)
    assert "rules" not in engine  # an engine's own counts: no run was recomputed by any rule


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
    # The headline gives the tree's own tokens per pass with its interval, never a chain's dashes, and no
    # engine's accepted / drafted (no chain was drafted); the warning speaks of trees only.
    data = orjson.loads(invoke("audit", str(path), "-o", "json").stdout_bytes)
    figures = data["outside_alpha"]["tree-match"]
    low, high = figures["tokens_per_pass_interval"]
    text = " ".join(invoke_env({"COLUMNS": "400"}, "audit", str(path)).stdout.split())
    assert f"{figures['tokens_per_pass']:.4f} [{low:.4f}, {high:.4f}] (tree-match)" in text
    assert "not a chain's: tree-match keeps no per-token rate" in text
    assert "Avg Draft acceptance rate" not in text and "block verification" not in text
    # Beside chain runs, the chain's figure first and the rule's after it.
    mixed = write(tmp_path / "mixed.jsonl", rule_rows("standard") + rule_rows("block"))
    shown = " ".join(invoke_env({"COLUMNS": "400"}, "audit", str(mixed), "-o", "markdown").stdout.split())
    block = orjson.loads(invoke("audit", str(mixed), "-o", "json").stdout_bytes)["outside_alpha"]["block"]
    assert "observed" in shown and f"{block['tokens_per_pass']:.4f}" in shown and "(block)" in shown
    assert "block verification keeps the longest prefix" in shown and "a tree keeps" not in shown


def test_id_field_rule_writes_each_rows_own_rule_once(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "m.jsonl", rows)
    lines = invoke("audit", str(path), "-o", "jsonl", "--id-field", "rule").stdout_bytes.splitlines()
    assert all(line.count(b'"rule"') == 1 for line in lines)
    assert [orjson.loads(line)["rule"] for line in lines] == [row["rule"] for row in rows]
    table = invoke("audit", str(path), "-o", "csv", "--id-field", "rule").stdout.splitlines()
    assert table[0] == "source,line,k,accepted,emitted,rule"
    assert [line.rsplit(",", 1)[1] for line in table[1:]] == [row["rule"] for row in rows]


# --- per request, by (capacity, accepted), argmax, groups --------------------------------------------------


def _tally_of_runs(seed: int, runs: int = 400) -> tuple[RuleTally, list[str], np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    names = [str(name) for name in rng.choice(["standard", "block", "tree-match", "argmax"], size=runs)]
    k = rng.integers(1, 7, size=runs)
    accepted = np.minimum(rng.integers(0, 7, size=runs), k)
    keys = rng.integers(0, 30, size=runs).astype(np.uint64)
    return RuleTally.of_runs(names, accepted, k, "request_id", keys), names, accepted, k, keys


def test_the_per_request_tally_adds_by_key_and_reads_back() -> None:
    whole, names, accepted, k, keys = _tally_of_runs(3)
    assert set(whole.joint) == set(whole.clusters) == {"block", "tree-match"}
    cut = 137
    halves = RuleTally.of_runs(names[:cut], accepted[:cut], k[:cut], "request_id", keys[:cut]) + RuleTally.of_runs(
        names[cut:], accepted[cut:], k[cut:], "request_id", keys[cut:]
    )
    assert halves == whole
    block = [index for index, name in enumerate(names) if name == "block"]
    sums = whole.clusters["block"].sums
    assert int(sums.runs.sum()) == len(block) == whole.runs["block"]
    assert np.unique(keys[block]).tolist() == sorted(sums.keys.tolist())
    # Reached at depth d: runs that kept d - 1 and whose capacity goes to d (a full run of k = d - 1 does not).
    for depth in range(1, 7):
        reached = sum(1 for i in block if accepted[i] >= depth - 1 and k[i] >= depth)
        assert int(sums.reached[:, depth - 1].sum()) == reached
    read = RuleTally.from_dict(orjson.loads(orjson.dumps(whole.to_dict())))
    assert read == whole and read.clusters["block"] == whole.clusters["block"]
    assert whole.without_clusters().clusters == {} and whole.without_clusters().joint == whole.joint


def _hostile(data: dict[str, object], change: str) -> dict[str, object]:
    spoiled = orjson.loads(orjson.dumps(data))
    rules = spoiled["rules"]
    if change == "joint off its histogram":
        rules["joint_counts"]["block"][0][2] += 1
    elif change == "impossible cell":
        rules["joint_counts"]["block"][0] = [2, 3, rules["joint_counts"]["block"][0][2]]
    elif change == "clusters off the joint counts":
        block = rules["joint_counts"]["block"]
        rules["joint_counts"]["block"] = [[k + 1, a, n] for k, a, n in block]  # the histogram still adds up
    elif change == "clusters without joint":
        del rules["joint_counts"]["block"]
    elif change == "not a column":
        rules["clusters"]["block"]["kept"] = "AAAA"
    elif change == "clusters by another field":
        rules["clusters"]["block"]["field"] = "session"
    return spoiled


@pytest.mark.parametrize(
    "change",
    [
        "joint off its histogram",
        "impossible cell",
        "clusters off the joint counts",
        "clusters without joint",
        "not a column",
        "clusters by another field",
    ],
)
def test_a_hostile_saved_tally_is_one_line_naming_the_file(tmp_path: Path, change: str) -> None:
    rows = mixed_rows()
    saved = tmp_path / "s.json"
    invoke("audit", str(write(tmp_path / "m.jsonl", rows)), "--summary-out", str(saved), "-q")
    data = orjson.loads(saved.read_bytes())
    assert set(data["state"]["rules"]["clusters"]) == {
        "block",
        "tree-residual",
        "tree-target-cdf",
        "tree-argmax",
        "tree-match",
    }
    data["state"] = _hostile(data["state"], change)
    spoiled = tmp_path / "spoiled.json"
    spoiled.write_bytes(orjson.dumps(data))
    for args in (("merge", str(spoiled), str(saved)), ("diff", str(saved), str(spoiled))):
        result = invoke(*args)
        assert result.exit_code == 2, (change, args, result.stdout)
        assert "Traceback" not in result.stderr and "spoiled.json" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_file_from_before_the_joint_counts_reads_as_it_did(tmp_path: Path) -> None:
    """No joint counts, no per-request sums: the histogram's rates (every run able to go one deeper), and in a
    log of requests no interval; the file adds to a new one with what both know."""
    from specaccept_cli.rule.expected import conditional_rates

    rows = mixed_rows()
    saved = tmp_path / "s.json"
    invoke("audit", str(write(tmp_path / "m.jsonl", rows)), "--summary-out", str(saved), "-q")
    data = orjson.loads(saved.read_bytes())
    for key in ("joint_counts", "clusters"):
        del data["state"]["rules"][key]
    old = tmp_path / "old.json"
    old.write_bytes(orjson.dumps(data))
    merged = orjson.loads(invoke("merge", str(old)).stdout_bytes)
    for name, entry in merged["outside_alpha"].items():
        histogram = [
            entry["accepted_histogram"].get(str(a), 0) for a in range(max(map(int, entry["accepted_histogram"])) + 1)
        ]
        assert [rate["rate"] for rate in entry["depth_rates"]] == conditional_rates(histogram), name
        assert entry["intervals_over"] == "none" and entry["tokens_per_pass_interval"] is None
    assert "joint_counts" not in merged["state"]["rules"]
    # With a new summary of other runs (provenance aside): the sum keeps no per-request sums for these rules.
    other = [dict(row, request_id=f"other-{row['request_id']}") for row in rows]
    invoke("audit", str(write(tmp_path / "o.jsonl", other)), "--summary-out", str(tmp_path / "n.json"), "-q")
    both = orjson.loads(invoke("merge", str(old), str(tmp_path / "n.json")).stdout_bytes)
    assert all(entry["intervals_over"] == "none" for entry in both["outside_alpha"].values())
    assert both["outside_alpha"]["block"]["runs"] == 2 * merged["outside_alpha"]["block"]["runs"]


def test_clustered_figures_are_over_requests_and_add_up_on_every_path(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "m.jsonl", rows)
    outputs = [invoke("audit", str(path), "-o", "json", *extra).stdout_bytes for extra in ((), ("--jobs", "2"))]
    assert outputs[0] == outputs[1]
    data = orjson.loads(outputs[0])
    requests = len({row["request_id"] for row in rows})
    for entry in data["outside_alpha"].values():
        assert entry["intervals_over"] == "requests" and entry["requests"] == requests
        assert any(rate["interval"] is not None for rate in entry["depth_rates"])
    # The same runs read without their request ids: intervals over runs, the same rates.
    alone = [{key: value for key, value in row.items() if key != "request_id"} for row in rows]
    plain = orjson.loads(invoke("audit", str(write(tmp_path / "a.jsonl", alone)), "-o", "json").stdout_bytes)
    for name, entry in plain["outside_alpha"].items():
        assert entry["intervals_over"] == "runs"
        assert [rate["rate"] for rate in entry["depth_rates"]] == [
            rate["rate"] for rate in data["outside_alpha"][name]["depth_rates"]
        ]
    # Requests alike within and unlike between: the interval over requests is wider than over runs.
    alike: list[dict[str, object]] = []
    for request in range(12):
        depth = 1 + request % 4
        for step in range(30):
            row = dict(rule_rows("tree-match", runs=1, seed=1000 * request + step)[0])
            alike.append(row | {"request_id": f"r{request}", "accepted": None} | _tree_of_depth(row, depth))
    tree_rows = [{key: value for key, value in row.items() if key != "accepted"} for row in alike]
    over_requests = orjson.loads(
        invoke("audit", str(write(tmp_path / "t.jsonl", tree_rows)), "-o", "json").stdout_bytes
    )
    apart = [{key: value for key, value in row.items() if key != "request_id"} for row in tree_rows]
    over_runs = orjson.loads(invoke("audit", str(write(tmp_path / "u.jsonl", apart)), "-o", "json").stdout_bytes)
    wide = over_requests["outside_alpha"]["tree-match"]["tokens_per_pass_interval"]
    narrow = over_runs["outside_alpha"]["tree-match"]["tokens_per_pass_interval"]
    assert wide[1] - wide[0] > 1.5 * (narrow[1] - narrow[0])


def _tree_of_depth(row: dict[str, object], depth: int) -> dict[str, object]:
    """A chain-shaped tree of `depth` nodes whose every node matches: accepted depth = depth."""
    nodes = [{"parent": index - 1, "token": 7, "target_token": 7} for index in range(depth)]
    return {"nodes": nodes}


def test_greedy_token_id_runs_are_named_argmax(tmp_path: Path) -> None:
    greedy = tmp_path / "g.jsonl"
    greedy.write_bytes(
        b'{"draft_tokens": [1, 2, 3], "target_tokens": [1, 2, 4]}\n'
        b'{"draft_tokens": [1, 2], "target_tokens": [1, 2]}\n'
        b'{"draft_tokens": [5], "target_tokens": [1]}\n'
    )
    fields = ("--draft-tokens-field", "draft_tokens", "--target-tokens-field", "target_tokens")
    data = orjson.loads(invoke("audit", str(greedy), *fields, "-o", "json").stdout_bytes)
    assert data["rules"] == {"argmax": 3} and data["outside_alpha"] == {}
    screen = invoke_env({"COLUMNS": "200"}, "audit", str(greedy), *fields, "-o", "markdown").stdout
    assert "3 (argmax)" in screen
    mixed = invoke_env({"COLUMNS": "400"}, "audit", str(write(tmp_path / "m.jsonl", mixed_rows()))).stdout
    assert "125 (25 standard, 25 argmax, 25 greedy-draft, 25 sample-match, 25 typical) in alpha;" in mixed
    # A summary of token-id runs and one of (p, q, r) runs add to both rules (`merge` refuses the two settings).
    from specaccept_cli.pipeline import summarise
    from specaccept_cli.rule.batch import FieldSpec
    from specaccept_cli.summary.files import summary_object

    token_ids = summarise([str(greedy)], FieldSpec(draft_tokens="draft_tokens", target_tokens="target_tokens"))
    standard = summarise([str(write(tmp_path / "s.jsonl", rule_rows("standard")))], FieldSpec()).without_clusters()
    both = summary_object(token_ids + standard)
    assert both["rules"] == {"standard": 60, "argmax": 3} and both["runs"] == 63
    assert summary_object(standard + token_ids)["rules"] == both["rules"]
    invoke("audit", str(greedy), *fields, "--summary-out", str(tmp_path / "g.json"), "-q")
    # A saved summary from before the tally (no `rules`) reads as it did, its token-id runs named argmax.
    old = orjson.loads((tmp_path / "g.json").read_bytes())
    del old["state"]["rules"]
    (tmp_path / "old.json").write_bytes(orjson.dumps(old))
    again = orjson.loads(invoke("merge", str(tmp_path / "old.json")).stdout_bytes)
    assert again["rules"] == {"argmax": 3} and "rules" not in again["state"] and again["runs"] == 3


def test_each_group_carries_its_block_and_tree_runs(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "m.jsonl", rows)
    outputs = [
        invoke("audit", str(path), "--group-by", "rule", "-o", "json", *extra).stdout_bytes
        for extra in ((), ("--jobs", "2"))
    ]
    assert outputs[0] == outputs[1]
    data = orjson.loads(outputs[0])
    tree = data["groups"]["tree-match"]
    assert tree["runs"] == 0 and tree["rules"] == {"tree-match": 25}
    mine = [int(row["accepted"]) for row in rows if row["rule"] == "tree-match"]  # type: ignore[call-overload]
    assert tree["outside_alpha"]["tree-match"]["tokens_per_pass"] == sum(mine) / len(mine) + 1
    assert tree["outside_alpha"]["tree-match"]["intervals_over"] == "requests"
    assert tree["outside_alpha"] == {"tree-match": data["outside_alpha"]["tree-match"]}
    assert data["groups"]["argmax"]["rules"] == {"argmax": 25} and data["groups"]["standard"]["rules"] == {
        "standard": 25
    }
    # Groups by request: each request's rule tallies add up to the whole's.
    by_request = orjson.loads(invoke("audit", str(path), "--group-by", "request_id", "-o", "json").stdout_bytes)
    for name in ("block", "tree-residual"):
        runs = sum(
            group.get("outside_alpha", {}).get(name, {}).get("runs", 0) for group in by_request["groups"].values()
        )
        assert runs == data["outside_alpha"][name]["runs"]
    # Merged halves: the same groups.
    for index, half in enumerate((rows[:130], rows[130:])):
        part = write(tmp_path / f"h{index}.jsonl", half)
        invoke("audit", str(part), "--group-by", "rule", "--summary-out", str(tmp_path / f"g{index}.json"), "-q")
    merged = orjson.loads(invoke("merge", str(tmp_path / "g0.json"), str(tmp_path / "g1.json")).stdout_bytes)
    for key, group in data["groups"].items():
        assert merged["groups"][key]["state"] == group["state"], key
        assert merged["groups"][key].get("outside_alpha") == group.get("outside_alpha"), key
    # The terminal's groups table says how many runs are apart and their tokens per pass.
    table = invoke_env({"COLUMNS": "220"}, "audit", str(path), "--group-by", "rule")
    line = next(line for line in table.stdout.splitlines() if "│ tree-match " in line)
    cells = [cell.strip() for cell in line.split("│")[1:-1]]
    assert cells[1] == "0" and cells[-2:] == ["25", f"{sum(mine) / len(mine) + 1:.4f}"]
    assert "apart: block and tree runs" in " ".join(table.stdout.split())
