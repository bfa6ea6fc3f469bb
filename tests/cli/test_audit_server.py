"""`audit --reported-field`, `--check-sampler` and greedy logs, end to end on real files."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
import pytest

from specaccept_cli.cli.ways_out import SKIP
from tests.helpers import (
    FIRST_EXAMPLE,
    invoke,
    invoke_env,
    write_jsonl,
)
from tests.specdec import greedy_runs, model_pair, speculative_runs


@pytest.fixture(scope="module")
def buggy_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target, draft = model_pair(vocab=12, quality=0.5, seed=11)
    rows = [
        {"request_id": f"req-{i}", **row}
        for i, row in enumerate(speculative_runs(target, draft, runs=2000, k=5, seed=11, fault="no-prefix-break"))
    ]
    return write_jsonl(tmp_path_factory.mktemp("logs") / "buggy.jsonl", rows)


@pytest.fixture(scope="module")
def honest_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target, draft = model_pair(vocab=12, quality=0.5, seed=12)
    rows = list(speculative_runs(target, draft, runs=2000, k=5, seed=12))
    return write_jsonl(tmp_path_factory.mktemp("logs") / "honest.jsonl", rows)


def test_reported_counts_in_the_summary(buggy_log: Path) -> None:
    result = invoke("audit", str(buggy_log), "--reported-field", "reported", "-o", "json")
    assert result.exit_code == 0, result.stderr  # no gate asked for
    summary = orjson.loads(result.stdout)
    assert summary["reported_runs"] == 2000
    assert summary["mismatches"] > 100
    top = summary["diagnosis"][0]
    assert top["rule"] == "no-prefix-break" and top["explains"] == summary["mismatches"]
    # not double counted: runs only it explains, plus those several rules explain, are all the mismatches
    assert top["alone"] + summary["explained_by_several"] == summary["mismatches"]
    assert 0 < top["alone"] < summary["mismatches"]
    assert [item["explains"] for item in summary["diagnosis"]] == sorted(
        (item["explains"] for item in summary["diagnosis"]), reverse=True
    )
    assert summary["unexplained"] == 0
    first = summary["mismatch_examples"][0]
    assert first["source"] == str(buggy_log) and first["reported"] > first["recomputed"]
    assert "no-prefix-break" in first["rules"]


def test_per_run_records_gain_reported_and_mismatch(buggy_log: Path) -> None:
    jsonl = invoke("audit", str(buggy_log), "--reported-field", "reported", "-o", "jsonl", "--id-field", "request_id")
    records = [orjson.loads(line) for line in jsonl.stdout_bytes.splitlines()]
    assert len(records) == 2000
    assert all(r["mismatch"] == (r["reported"] != r["accepted"]) for r in records)
    assert list(records[0]) == ["source", "line", "k", "accepted", "emitted", "reported", "mismatch", "request_id"]
    table = list(
        csv.reader(io.StringIO(invoke("audit", str(buggy_log), "--reported-field", "reported", "-o", "csv").stdout))
    )
    assert table[0] == ["source", "line", "k", "accepted", "emitted", "reported", "mismatch"]
    assert {row[6] for row in table[1:]} == {"true", "false"}


def test_max_mismatches_gate_both_sides(buggy_log: Path, honest_log: Path) -> None:
    mismatches = orjson.loads(invoke("audit", str(buggy_log), "--reported-field", "reported", "-o", "json").stdout)[
        "mismatches"
    ]
    at_limit = invoke("audit", str(buggy_log), "--reported-field", "reported", "--max-mismatches", str(mismatches))
    assert at_limit.exit_code == 0
    over = invoke("audit", str(buggy_log), "--reported-field", "reported", "--max-mismatches", str(mismatches - 1))
    assert over.exit_code == 1
    assert f"mismatches: {mismatches} > --max-mismatches {mismatches - 1}" in over.stderr
    assert "no-prefix-break" in over.stderr
    assert "First mismatching runs" in over.stdout  # the normal output is still printed
    honest = invoke("audit", str(honest_log), "--reported-field", "reported", "--max-mismatches", "0", "-o", "json")
    assert honest.exit_code == 0
    assert orjson.loads(honest.stdout)["mismatches"] == 0


def test_bad_reported_value_is_an_input_error(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [{"p": [0.5], "q": [0.5], "r": [0.1], "reported": 1}, {"p": [0.5], "q": [0.5], "r": [0.1], "reported": "x"}],
    )
    result = invoke("audit", str(path), "--reported-field", "reported")
    assert result.exit_code == 2
    assert f"{path}:2: 'reported' is the string 'x', not a non-negative count" in result.stderr


def test_max_mismatches_needs_a_reported_field(honest_log: Path) -> None:
    result = invoke("audit", str(honest_log), "--max-mismatches", "0")
    assert result.exit_code == 2
    assert "--max-mismatches needs --reported-field" in result.stderr


def test_check_sampler_passes_honest_and_fails_biased(tmp_path: Path, honest_log: Path) -> None:
    honest = invoke("audit", str(honest_log), "--check-sampler", "-o", "json")
    assert honest.exit_code == 0, honest.stderr
    summary = orjson.loads(honest.stdout)
    assert summary["calibration"]["ok"] is True and summary["r_uniformity"]["ok"] is True
    assert summary["calibration"]["observed"] == summary["accepted_tokens"]
    assert summary["r_uniformity"]["draws"] == summary["drafted_tokens"]
    target, draft = model_pair(vocab=12, quality=0.6, seed=13)
    biased = write_jsonl(
        tmp_path / "biased.jsonl", speculative_runs(target, draft, runs=3000, k=5, seed=13, r_power=1.3)
    )
    result = invoke("audit", str(biased), "--check-sampler")
    assert result.exit_code == 1
    assert "sampler calibration: p = " in result.stderr and "sampler r uniformity: p = " in result.stderr
    assert "Sampler health" in result.stdout and "fails at 0.001" in result.stdout
    loose = invoke("audit", str(biased), "--check-sampler", "--sampler-significance", "1e-300", "-o", "json")
    assert loose.exit_code == 0  # nothing is that unlikely here
    assert orjson.loads(loose.stdout)["sampler_significance"] == 1e-300


def test_greedy_jsonl(tmp_path: Path) -> None:
    target, draft = model_pair(vocab=40, quality=0.5, seed=14)
    rows = list(greedy_runs(target, draft, runs=400, k=4, seed=14))
    path = write_jsonl(tmp_path / "greedy.jsonl", rows)
    args = ("audit", str(path), "--draft-tokens-field", "draft_tokens", "--target-tokens-field", "target_tokens")
    records = [orjson.loads(line) for line in invoke(*args, "-o", "jsonl").stdout_bytes.splitlines()]
    assert [r["accepted"] for r in records] == [row["accepted"] for row in rows]
    summary = orjson.loads(invoke(*args, "-o", "json").stdout)
    assert 0 < summary["accepted_tokens"] < summary["drafted_tokens"]
    assert summary["alpha"] == summary["accepted_tokens"] / summary["examined_tokens"]
    assert summary["state"]["sampled_tokens"] == 0
    sampler = invoke(*args, "--check-sampler")
    assert sampler.exit_code == 2 and "greedy" in sampler.stderr


def test_greedy_by_hand_and_bad_rows(tmp_path: Path) -> None:
    rows = [
        {"d": [5, 6, 7], "t": [5, 6, 9, 1]},  # k+1 targets: accepted 2
        {"d": [5, 6], "t": [5, 6]},  # k targets: accepted 2 (all)
        {"d": [], "t": [3]},  # empty draft
        {"d": ["a", "b"], "t": ["a", "c", "d"]},  # string token ids
    ]
    path = write_jsonl(tmp_path / "hand.jsonl", rows)
    args = ("audit", str(path), "--draft-tokens-field", "d", "--target-tokens-field", "t", "-o", "jsonl")
    assert [orjson.loads(line)["accepted"] for line in invoke(*args).stdout_bytes.splitlines()] == [2, 2, 0, 1]
    bad = write_jsonl(tmp_path / "bad.jsonl", [rows[0], {"d": [1, 2, 3], "t": [1]}])
    result = invoke("audit", str(bad), "--draft-tokens-field", "d", "--target-tokens-field", "t")
    assert result.exit_code == 2
    assert f"{bad}:2: 't' has 1 entries; 3 drafted tokens need 3 or 4" in result.stderr
    floats = write_jsonl(tmp_path / "floats.jsonl", [{"d": [1.5], "t": [1]}])
    result = invoke("audit", str(floats), "--draft-tokens-field", "d", "--target-tokens-field", "t")
    assert "d[0] is 1.5, not a token id" in result.stderr
    nulls = write_jsonl(tmp_path / "nulls.jsonl", [{"d": [1, None], "t": [1, 2]}])
    result = invoke("audit", str(nulls), "--draft-tokens-field", "d", "--target-tokens-field", "t")
    assert result.exit_code == 2 and result.stderr.endswith(f"{nulls}:1: d[1] is null, not a token id; {SKIP}\n")
    half = invoke("audit", str(path), "--draft-tokens-field", "d")
    assert half.exit_code == 2 and "both --draft-tokens-field and --target-tokens-field" in half.stderr


def test_markdown_shows_the_server_audits(buggy_log: Path) -> None:
    """A CI step summary must show why --max-mismatches or --check-sampler failed."""
    args = ("audit", str(buggy_log), "--reported-field", "reported", "--check-sampler", "--max-mismatches", "0")
    result = invoke(*args, "-o", "markdown")
    assert result.exit_code == 1
    assert "### Reported counts" in result.stdout and "### Sampler health" in result.stdout
    assert "| no-prefix-break |" in result.stdout
    assert f"| {buggy_log} | 1 |" in result.stdout or f"| {buggy_log} |" in result.stdout


@pytest.mark.parametrize("value", [b"1e300", b"1180591620717411303424", b"-1", b"1.5", b'"3"'])
def test_reported_values_that_are_not_counts(tmp_path: Path, value: bytes) -> None:
    path = tmp_path / "rep.jsonl"
    good = orjson.dumps({**FIRST_EXAMPLE, "rep2": 1})
    path.write_bytes(good + b"\n" + orjson.dumps(FIRST_EXAMPLE)[:-1] + b',"rep2":' + value + b"}\n")
    result = invoke("audit", str(path), "--reported-field", "rep2")
    assert result.exit_code == 2
    assert f"{path}:2: 'rep2' is " in result.stderr and "not a non-negative count" in result.stderr


@pytest.mark.parametrize(
    ("fault", "verdict", "words"),
    [
        ("greedy-draft", "design", "the engine's design, not a bug"),
        ("strict-inequality", "lossy", "a loss of exactness"),
    ],
)
def test_the_rule_a_servers_counts_follow_is_named_with_its_verdict(
    tmp_path: Path, fault: str, verdict: str, words: str
) -> None:
    """A log whose reported counts follow r <= p (vLLM without draft probabilities) or a strict `<` is named as
    such: in -o json, the table and the failing gate's line."""
    target, draft = model_pair(vocab=12, quality=0.3, seed=3, top_k=3)
    rows = list(speculative_runs(target, draft, runs=1500, k=6, seed=8, fault=fault, r_levels=256))
    log = write_jsonl(tmp_path / "server.jsonl", rows)
    summary = orjson.loads(invoke("audit", str(log), "--reported-field", "reported", "-o", "json").stdout)
    named = summary["server_rule"]
    assert named["rule"] == fault and named["verdict"] == verdict and named["in_short"] == words
    assert named["alone"] > 0 and named["evidence"][0]["source"] == str(log)
    table = invoke_env({"COLUMNS": "200"}, "audit", str(log), "--reported-field", "reported")
    assert f"verdict: {fault}" in table.stdout
    gate = invoke("audit", str(log), "--reported-field", "reported", "--max-mismatches", "0")
    assert gate.exit_code == 1
    assert f"verdict on {fault}: {words}" in gate.stderr


def test_an_honest_log_names_no_rule(honest_log: Path) -> None:
    summary = orjson.loads(invoke("audit", str(honest_log), "--reported-field", "reported", "-o", "json").stdout)
    assert summary["mismatches"] == 0 and summary["server_rule"] is None
