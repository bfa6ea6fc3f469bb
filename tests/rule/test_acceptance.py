"""Acceptance: logs written by hand under every rule of the table, read back on every path.

The rows here are not `specaccept simulate`'s: each rule has its own generator below, written from the row
contract of docs/rules.md with random numbers and the edge cases a real log holds (ties r == threshold, p == 0,
q tiny, trees whose siblings come interleaved in the node list, several depth-1 nodes, depth-1 trees, k = 1,
empty drafts). Each row's true accepted length comes from a second, independent reading of the contract (the
small routines `*_truth` below, not the package's scalar references), so a misreading on either side shows.
Every path must give every row's accepted length and the same summary: JSONL, gzip, a real pipe into stdin,
Parquet with nested lists and structs, `--jobs 2`, a Dask cluster on 127.0.0.1, and `merge` of two halves.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import invoke, invoke_env, per_run, run_process

Row = dict[str, Any]
Rng = np.random.Generator

# --- values a real log holds, with the edge cases it also holds ------------------------------------------------


def unit(rng: Rng) -> float:
    """A probability in [0, 1]: often 0 or 1, sometimes subnormal, else uniform."""
    pick = rng.random()
    if pick < 0.1:
        return 0.0
    if pick < 0.2:
        return 1.0
    if pick < 0.25:
        return float(rng.choice([5e-324, 1e-300, 2.0**-60]))
    return float(rng.random())


def draft_q(rng: Rng) -> float:
    """A draft probability in (0, 1]: sometimes 1, sometimes tiny."""
    pick = rng.random()
    if pick < 0.1:
        return 1.0
    if pick < 0.2:
        return float(rng.choice([5e-324, 1e-300, 1e-17]))
    return float(1.0 - rng.random())  # (0, 1]


def coin_near(rng: Rng, threshold: float) -> float:
    """A uniform that often sits exactly on a threshold in [0, 1] (a tie) or one ulp either side of it."""
    pick = rng.random()
    if pick < 0.3:
        return threshold
    if pick < 0.4 and threshold < 1.0:
        return math.nextafter(threshold, 2.0)
    if pick < 0.5 and threshold > 0.0:
        return math.nextafter(threshold, -1.0)
    if pick < 0.55:
        return 0.0
    if pick < 0.6:
        return 1.0
    return float(rng.random())


def draft_length(rng: Rng) -> int:
    return int(rng.choice([0, 1, 1, 2, 3, 4, 6]))


# --- independent readings of the contract: one small routine per rule ------------------------------------------


def first_failure(passes: list[bool]) -> int:
    return next((index for index, passed in enumerate(passes) if not passed), len(passes))


def standard_truth(row: Row) -> int:
    return first_failure([r <= min(1.0, p / q) for p, q, r in zip(row["p"], row["q"], row["r"], strict=True)])


def greedy_draft_truth(row: Row) -> int:
    return first_failure([r <= p for p, r in zip(row["p"], row["r"], strict=True)])


def token_truth(row: Row) -> int:
    return first_failure([d == t for d, t in zip(row["draft_tokens"], row["target_tokens"], strict=False)])


def block_ratios(p: list[float], q: list[float]) -> list[float]:
    ratios, w = [], 1.0
    for pj, qj in zip(p, q, strict=True):
        w = min(1.0, w * pj / qj)
        ratios.append(w)
    return ratios


def block_tests(row: Row) -> list[float]:
    """h_j of the contract for each position (w_(k-1) at the last)."""
    ratios, k = block_ratios(row["p"], row["q"]), len(row["p"])
    out = []
    for j, w in enumerate(ratios):
        if j == k - 1:
            out.append(w)
        else:
            residual = row["residual"][j]
            out.append(1.0 if residual + 1 - w == 0 else residual / (residual + 1 - w))
    return out


def block_truth(row: Row) -> int:
    passing = [j + 1 for j, h in enumerate(block_tests(row)) if row["r"][j] <= h]
    return max(passing, default=0)


def typical_truth(row: Row) -> int:
    bound = [min(row["epsilon"], row["delta"] * math.exp(-h)) for h in row["entropy"]]
    return first_failure([p > b for p, b in zip(row["p"], bound, strict=True)])


def children_of(nodes: list[Row]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        children.setdefault(node["parent"], []).append(index)
    return children


def walk(nodes: list[Row], passes: Callable[[int, list[int]], bool]) -> int:
    """Into the first child (in list order) whose test passes, given its earlier-tried siblings; stop at none."""
    children, current, depth = children_of(nodes), -1, 0
    while True:
        tried: list[int] = []
        for child in children.get(current, []):
            if passes(child, tried):
                current, depth = child, depth + 1
                break
            tried.append(child)
        else:
            return depth


def tree_residual_truth(row: Row) -> int:
    nodes = row["nodes"]
    return walk(nodes, lambda n, _: nodes[n]["r"] <= min(1.0, nodes[n]["p"] / nodes[n]["q"]))


def tree_target_cdf_truth(row: Row) -> int:
    nodes = row["nodes"]
    single, acc = row.get("threshold_single", 1.0), row.get("threshold_acc", 1.0)

    def passes(node: int, tried: list[int]) -> bool:
        total = 0.0
        for sibling in [*tried, node]:
            total += nodes[sibling]["p"]
        return bool(nodes[node]["coin"] <= total / acc or nodes[node]["p"] >= single)

    return walk(nodes, passes)


def tree_argmax_truth(row: Row) -> int:
    nodes = row["nodes"]
    return walk(nodes, lambda n, _: nodes[n]["token"] == nodes[n]["target_token"])


def tree_match_truth(row: Row) -> int:
    """Every root-to-leaf path's matched prefix; the longest one."""
    nodes, children = row["nodes"], children_of(row["nodes"])

    def deepest(node: int) -> int:
        if nodes[node]["token"] != nodes[node]["target_token"]:
            return 0
        return 1 + max((deepest(child) for child in children.get(node, [])), default=0)

    return max((deepest(child) for child in children.get(-1, [])), default=0)


def tree_depth(nodes: list[Row]) -> int:
    depth: list[int] = []
    for node in nodes:
        depth.append(1 if node["parent"] < 0 else depth[node["parent"]] + 1)
    return max(depth)


# --- generators: one per rule ----------------------------------------------------------------------------------


def standard_row(rng: Rng) -> Row:
    k = draft_length(rng)
    p = [unit(rng) for _ in range(k)]
    q = [draft_q(rng) for _ in range(k)]
    return {"p": p, "q": q, "r": [coin_near(rng, min(1.0, pj / qj)) for pj, qj in zip(p, q, strict=True)]}


def greedy_draft_row(rng: Rng) -> Row:
    k = draft_length(rng)
    p = [unit(rng) for _ in range(k)]
    row: Row = {"p": p, "r": [coin_near(rng, pj) for pj in p]}
    if rng.random() < 0.5:  # a q the rule ignores, even one the seed's rule would refuse (0)
        row["q"] = [float(rng.choice([0.0, 1e-300, 0.5, 1.0])) for _ in range(k)]
    return row


def token_row(rng: Rng, with_p: bool) -> Row:
    k = draft_length(rng)
    target = [int(rng.integers(0, 5)) for _ in range(k + 1)]  # k drafted positions and the bonus
    draft = [token if rng.random() < 0.7 else int(rng.integers(0, 5)) for token in target[:k]]
    row: Row = {"draft_tokens": draft, "target_tokens": target if rng.random() < 0.3 else target[:k]}
    if with_p and rng.random() < 0.5:
        row["p"] = [unit(rng) for _ in range(k)]
    return row


def block_row(rng: Rng) -> Row:
    k = draft_length(rng)
    p = [unit(rng) for _ in range(k)]
    q = [draft_q(rng) for _ in range(k)]
    ratios = block_ratios(p, q)
    residual: list[float | None] = []
    for j in range(k - 1):
        pick = rng.random()  # 0 (and 0/0 when w = 1), the whole w, or a share of it
        residual.append(0.0 if pick < 0.2 else ratios[j] if pick < 0.3 else float(rng.random() * ratios[j]))
    if k:
        residual.append(None)
    row: Row = {"p": p, "q": q, "residual": residual}
    row["r"] = [coin_near(rng, min(1.0, h)) for h in block_tests({**row, "r": None})]
    return row


def typical_row(rng: Rng) -> Row:
    k = draft_length(rng)
    epsilon, delta = float(rng.choice([0.09, 0.3, 0.5])), float(rng.choice([0.3, 0.6, 1.0]))
    entropy = [float(rng.choice([0.0, 0.0, 0.5, 2.0, 800.0])) for _ in range(k)]
    p = []
    for h in entropy:  # on entropy 0 the bound is min(epsilon, delta) exactly: a tie p == bound is rejected
        p.append(min(epsilon, delta) if h == 0.0 and rng.random() < 0.5 else unit(rng))
    return {"p": p, "entropy": entropy, "epsilon": epsilon, "delta": delta}


def tree_parents(rng: Rng) -> list[int]:
    """A tree in tried order: parents listed first, siblings interleaved with other nodes, several depth-1 nodes."""
    shape = rng.random()
    if shape < 0.15:
        return [-1] * int(rng.integers(1, 5))  # depth 1
    if shape < 0.25:
        return [index - 1 for index in range(int(rng.integers(1, 6)))]  # a chain
    size = int(rng.integers(2, 13))
    return [-1] + [int(rng.integers(-1, index)) for index in range(1, size)]


def tree_residual_row(rng: Rng) -> Row:
    nodes = []
    for parent in tree_parents(rng):
        p, q = unit(rng), draft_q(rng)
        nodes.append({"parent": parent, "p": p, "q": q, "r": coin_near(rng, min(1.0, p / q))})
    return {"nodes": nodes}


def tree_target_cdf_row(rng: Rng) -> Row:
    parents = tree_parents(rng)
    row: Row = {}
    pick = rng.random()
    if pick < 0.3:
        row |= {"threshold_single": 1.0, "threshold_acc": 1.0}
    elif pick < 0.6:
        row |= {"threshold_single": float(rng.choice([0.3, 0.5, 0.9])), "threshold_acc": float(rng.choice([0.5, 0.7]))}
    single, acc = row.get("threshold_single", 1.0), row.get("threshold_acc", 1.0)
    coin = {parent: float(rng.random()) for parent in set(parents)}  # one coin per parent, shared by siblings
    nodes: list[Row] = []
    running: dict[int, float] = {}
    for parent in parents:
        left = 1.0 - running.get(parent, 0.0)  # siblings' tokens differ: their p add up to at most 1
        p = single if single <= left and rng.random() < 0.1 else float(rng.random() * left)
        total = running.get(parent, 0.0) + p
        running[parent] = total
        if rng.random() < 0.2:  # the parent's coin sits on this child's cumulative threshold
            coin[parent] = min(1.0, total / acc)
        nodes.append({"parent": parent, "p": p})
    for node in nodes:
        node["coin"] = coin[node["parent"]]
    return {"nodes": nodes, **row}


def tree_token_row(rng: Rng) -> Row:
    """Siblings share the target's token at their parent; their own tokens sometimes repeat."""
    parents = tree_parents(rng)
    target = {parent: int(rng.integers(0, 4)) for parent in set(parents)}
    nodes = []
    for parent in parents:
        token = target[parent] if rng.random() < 0.5 else int(rng.integers(0, 4))
        nodes.append({"parent": parent, "token": token, "target_token": target[parent]})
    return {"nodes": nodes}


# name -> (generator, truth, is a tree)
RULES: dict[str, tuple[Callable[[Rng], Row], Callable[[Row], int], bool]] = {
    "standard": (standard_row, standard_truth, False),
    "greedy-draft": (greedy_draft_row, greedy_draft_truth, False),
    "sample-match": (lambda rng: token_row(rng, with_p=True), token_truth, False),
    "block": (block_row, block_truth, False),
    "typical": (typical_row, typical_truth, False),
    "argmax": (lambda rng: token_row(rng, with_p=False), token_truth, False),
    "tree-residual": (tree_residual_row, tree_residual_truth, True),
    "tree-target-cdf": (tree_target_cdf_row, tree_target_cdf_truth, True),
    "tree-argmax": (tree_token_row, tree_argmax_truth, True),
    "tree-match": (tree_token_row, tree_match_truth, True),
}
ROWS_PER_RULE = 60


def hidden_log(name: str, seed: int, runs: int = ROWS_PER_RULE) -> tuple[list[Row], list[int]]:
    generate, truth, _ = RULES[name]
    rng = np.random.default_rng(seed)
    rows = [{"rule": name, "request_id": f"req-{index % 7}", **generate(rng)} for index in range(runs)]
    return rows, [truth(row) for row in rows]


# Another spelling of each rule's name a row may carry (docs/rules.md: aliases, any case, `_` for `-`).
SPELLINGS = {
    "standard": "Seed",
    "greedy-draft": "R_LE_P",
    "sample-match": "match",
    "block": "block-verification",
    "typical": "Medusa_Typical",
    "argmax": "greedy",
    "tree-residual": "SpecInfer",
    "tree-target-cdf": "sglang-tree",
    "tree-argmax": "TREE_GREEDY",
    "tree-match": "Tree_Match",
}
CANONICAL = {spelling: name for name, spelling in SPELLINGS.items()}


def canonical(row: Row) -> str:
    return CANONICAL.get(row["rule"], row["rule"])


def mixed_log() -> tuple[list[Row], list[int]]:
    """Every rule's rows, in a random order (seeded), a fifth of them naming their rule by another spelling."""
    pairs = [pair for index, name in enumerate(RULES) for pair in zip(*hidden_log(name, 100 + index), strict=True)]
    rng = np.random.default_rng(7)
    for row, _ in pairs:
        if rng.random() < 0.2:
            row["rule"] = SPELLINGS[row["rule"]]
    order = rng.permutation(len(pairs))
    return [pairs[i][0] for i in order], [pairs[i][1] for i in order]


def capacity(row: Row) -> int:
    if "nodes" in row:
        return tree_depth(row["nodes"])
    return len(row["draft_tokens"] if "draft_tokens" in row else row["p"])


def expected_summary(rows: list[Row], accepted: list[int]) -> dict[str, Any]:
    """What the JSON summary must say, from the independent readings alone."""
    pairs = list(zip(rows, accepted, strict=True))
    chain = [(capacity(row), a) for row, a in pairs if canonical(row) != "block" and "nodes" not in row]
    rules: dict[str, int] = {}
    for row in rows:
        rules[canonical(row)] = rules.get(canonical(row), 0) + 1
    apart: dict[str, dict[str, Any]] = {}
    for name in ("block", "tree-residual", "tree-target-cdf", "tree-argmax", "tree-match"):
        runs = [(capacity(row), a) for row, a in zip(rows, accepted, strict=True) if canonical(row) == name]
        if not runs:
            continue
        histogram: dict[str, int] = {}
        for _, a in runs:
            histogram[str(a)] = histogram.get(str(a), 0) + 1
        deepest = max(c for c, _ in runs)
        rates = [
            (d, sum(1 for c, a in runs if a >= d - 1 and c >= d), sum(1 for _, a in runs if a >= d))
            for d in range(1, deepest + 1)
        ]
        apart[name] = {
            "runs": len(runs),
            "histogram": dict(sorted(histogram.items(), key=lambda item: int(item[0]))),
            "rates": [rate for rate in rates if rate[1]],
            "tokens_per_pass": sum(a + 1 for _, a in runs) / len(runs),
        }
    deepest_chain = max((k for k, _ in chain), default=0)
    positions = [
        (
            j,
            sum(1 for k, _ in chain if k >= j),
            sum(1 for k, a in chain if k >= j and a >= j - 1),
            sum(1 for _, a in chain if a >= j),
        )
        for j in range(1, deepest_chain + 1)
    ]
    histogram = {str(a): sum(1 for _, b in chain if b == a) for a in range(deepest_chain + 1)}
    return {
        "runs": len(chain),
        "positions": positions,
        "histogram": histogram,
        "drafted_tokens": sum(k for k, _ in chain),
        "accepted_tokens": sum(a for _, a in chain),
        "examined_tokens": sum(min(a + 1, k) for k, a in chain),
        "rules": rules,
        "apart": apart,
    }


def summary_of(data: dict[str, Any]) -> dict[str, Any]:
    """The same figures, as the JSON summary gives them."""
    apart = {}
    for name, entry in data.get("outside_alpha", {}).items():
        apart[name] = {
            "runs": entry["runs"],
            "histogram": {key: value for key, value in entry["accepted_histogram"].items() if value},
            "rates": [
                (rate["depth"], rate["reached"], rate["kept"]) for rate in entry["depth_rates"] if rate["reached"]
            ],
            "tokens_per_pass": entry["tokens_per_pass"],
        }
    return {
        "runs": data["runs"],
        "positions": [
            (row["position"], row["drafts"], row["reached"], row["accepted"]) for row in data["per_position"]
        ],
        "histogram": data["accepted_histogram"],
        "drafted_tokens": data["drafted_tokens"],
        "accepted_tokens": data["accepted_tokens"],
        "examined_tokens": data["examined_tokens"],
        "rules": data.get("rules", {"standard": data["runs"]}),  # a standard log alone names no rule (docs/rules.md)
        "apart": apart,
    }


def same_figures(got: dict[str, Any], wanted: dict[str, Any]) -> None:
    for name, entry in wanted["apart"].items():
        assert got["apart"][name]["tokens_per_pass"] == pytest.approx(entry["tokens_per_pass"], rel=1e-12), name
        got["apart"][name]["tokens_per_pass"] = entry["tokens_per_pass"]
    assert got == wanted


# --- writing the logs -----------------------------------------------------------------------------------------


def jsonl(rows: list[Row]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


NODE = pa.struct(
    [
        ("parent", pa.int64()),
        *((name, pa.float64()) for name in ("p", "q", "r", "coin")),
        ("token", pa.int64()),
        ("target_token", pa.int64()),
    ]
)
SCHEMA = pa.schema(
    [
        ("rule", pa.string()),
        ("request_id", pa.string()),
        *((name, pa.list_(pa.float64())) for name in ("p", "q", "r", "residual", "entropy")),
        ("draft_tokens", pa.list_(pa.int64())),
        ("target_tokens", pa.list_(pa.int64())),
        ("nodes", pa.list_(NODE)),
        *((name, pa.float64()) for name in ("epsilon", "delta", "threshold_single", "threshold_acc")),
    ]
)


def write_parquet(path: Path, rows: list[Row]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path, row_group_size=53)
    return path


def accepted_of(stdout: bytes) -> list[int]:
    return [int(run["accepted"]) for run in per_run(stdout)]  # type: ignore[call-overload]


def records(stdout: bytes) -> list[dict[str, object]]:
    return [{key: value for key, value in run.items() if key != "source"} for run in per_run(stdout)]


def audit_json(*args: str, input: bytes | None = None) -> dict[str, Any]:
    result = invoke("audit", *args, "-o", "json", input=input)
    assert result.exit_code in (0, 1), result.stderr
    data: dict[str, Any] = orjson.loads(result.stdout_bytes)
    return data


# --- the tests ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(RULES))
def test_each_rules_hidden_log_gives_every_rows_true_accepted_length(tmp_path: Path, name: str) -> None:
    rows, truth = hidden_log(name, seed=sorted(RULES).index(name))
    path = tmp_path / "log.jsonl"
    path.write_bytes(jsonl(rows))
    result = invoke("audit", str(path), "-o", "jsonl")
    assert result.exit_code in (0, 1), result.stderr
    assert accepted_of(result.stdout_bytes) == truth
    same_figures(summary_of(audit_json(str(path))), expected_summary(rows, truth))
    if RULES[name][2]:
        assert [run["k"] for run in per_run(result.stdout_bytes)] == [tree_depth(row["nodes"]) for row in rows]
    # the same rows without a rule field, named by --rule
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(jsonl([{key: value for key, value in row.items() if key != "rule"} for row in rows]))
    named = invoke("audit", str(bare), "-o", "jsonl", "--rule", name.upper().replace("-", "_"))
    assert named.exit_code in (0, 1), named.stderr
    assert accepted_of(named.stdout_bytes) == truth
    assert audit_json(str(bare), "--rule", name).get("rules", {"standard": len(rows)}) == {name: len(rows)}
    spread = invoke("audit", str(bare), "-o", "jsonl", "--rule", name, "--jobs", "2")
    assert records(spread.stdout_bytes) == records(named.stdout_bytes)
    # and in Parquet, nested lists and structs, with its rule column and without (a null rule: --rule names it)
    parquet = write_parquet(tmp_path / "log.parquet", rows)
    from_parquet = invoke("audit", str(parquet), "-o", "jsonl")
    assert records(from_parquet.stdout_bytes) == records(result.stdout_bytes)
    untagged = write_parquet(tmp_path / "bare.parquet", [{**row, "rule": None} for row in rows])
    named = invoke("audit", str(untagged), "-o", "jsonl", "--rule", name)
    assert named.exit_code in (0, 1), named.stderr
    assert records(named.stdout_bytes) == records(result.stdout_bytes)


def test_a_log_mixing_every_rule_row_by_row_gives_the_same_runs_and_summary_on_every_path(tmp_path: Path) -> None:
    rows, truth = mixed_log()
    wanted = expected_summary(rows, truth)
    data = jsonl(rows)
    plain, zipped = tmp_path / "m.jsonl", tmp_path / "m.jsonl.gz"
    plain.write_bytes(data)
    zipped.write_bytes(gzip.compress(data))
    parquet = write_parquet(tmp_path / "m.parquet", rows)

    whole = audit_json(str(plain))
    same_figures(summary_of(whole), wanted)
    runs = invoke("audit", str(plain), "-o", "jsonl").stdout_bytes
    assert accepted_of(runs) == truth
    table = invoke("audit", str(plain), "-o", "csv", "--id-field", "rule").stdout.splitlines()
    assert table[0] == "source,line,k,accepted,emitted,rule"
    assert [int(line.split(",")[3]) for line in table[1:]] == truth

    def figures(summary: dict[str, Any]) -> dict[str, Any]:
        kept = {key: value for key, value in summary.items() if key not in ("provenance", "windows", "drift")}
        kept["state"] = {key: value for key, value in summary["state"].items() if key != "windows"}
        return kept

    for args in ((str(zipped),), (str(parquet),), (str(plain), "--jobs", "2"), (str(parquet), "--jobs", "2")):
        result = invoke("audit", *args, "-o", "jsonl")
        assert result.exit_code in (0, 1), (args, result.stderr)
        assert records(result.stdout_bytes) == records(runs), args
        assert figures(audit_json(*args)) == figures(whole), args
    for source in (data, gzip.compress(data), parquet.read_bytes()):  # a real pipe into stdin
        piped = run_process("audit", "-", "-o", "jsonl", input=source)
        assert piped.returncode in (0, 1), piped.stderr
        assert accepted_of(piped.stdout) == truth
        summary = run_process("audit", "-", "-o", "json", input=source)
        same_figures(summary_of(orjson.loads(summary.stdout)), wanted)

    # merge of two halves' saved summaries is the whole's
    half = len(rows) // 2
    parts = [write_parquet(tmp_path / "a.parquet", rows[:half]), tmp_path / "b.jsonl.gz"]
    parts[1].write_bytes(gzip.compress(jsonl(rows[half:])))
    for index, part in enumerate(parts):
        saved = invoke("audit", str(part), "--summary-out", str(tmp_path / f"s{index}.json"), "-q")
        assert saved.exit_code in (0, 1), saved.stderr
    merged = orjson.loads(invoke("merge", str(tmp_path / "s0.json"), str(tmp_path / "s1.json")).stdout_bytes)
    same_figures(summary_of(merged), wanted)
    for key in ("alpha", "outside_alpha", "per_position", "accepted_histogram", "rules"):
        assert merged[key] == whole[key], key
    assert merged["state"]["rules"] == whole["state"]["rules"]


def test_a_log_mixing_every_rule_on_a_dask_cluster(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    rows, truth = mixed_log()
    plain = tmp_path / "m.jsonl"
    plain.write_bytes(jsonl(rows))
    parquet = write_parquet(tmp_path / "m.parquet", rows)
    paths = (str(plain), str(parquet))
    saved = tmp_path / "cluster.json"
    spread = invoke("audit", *paths, "-o", "jsonl", "--scheduler", "local:2", "--summary-out", str(saved))
    assert spread.exit_code in (0, 1), spread.stderr
    assert accepted_of(spread.stdout_bytes) == truth + truth
    merged = orjson.loads(invoke("merge", str(saved)).stdout_bytes)
    here = audit_json(*paths)
    for key in ("runs", "alpha", "outside_alpha", "per_position", "accepted_histogram", "rules"):
        assert merged[key] == here[key], key
    doubled = expected_summary(rows + rows, truth + truth)
    same_figures(summary_of(merged), doubled)


def test_the_first_screen_counts_the_requests_of_runs_kept_apart_from_alpha(tmp_path: Path) -> None:
    """A tree log's runs come from 7 requests, none of them in alpha: the headline says 7, not 0."""
    rows, _ = hidden_log("tree-target-cdf", seed=3)
    path = tmp_path / "log.jsonl"
    path.write_bytes(jsonl(rows))
    wide = {"COLUMNS": "250"}  # one line whatever the terminal: the words are what is checked
    shown = " ".join(invoke_env(wide, "audit", str(path)).stdout.split())
    assert "clustered by request_id: 7 requests, 0 with runs in alpha" in shown
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(jsonl(rows + hidden_log("standard", seed=4)[0]))
    assert "clustered by request_id: 7 requests " in " ".join(invoke_env(wide, "audit", str(mixed)).stdout.split())
