"""`audit`'s gates and --baseline: exit status on both sides of each threshold, messages, every output mode."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    invoke,
)


@pytest.mark.parametrize(
    ("option", "threshold", "status"),
    [
        ("--min-alpha", "0.75", 0),  # equal passes
        ("--min-alpha", "0.7", 0),
        ("--min-alpha", "0.7501", 1),
        ("--min-tokens-per-pass", "2", 0),
        ("--min-tokens-per-pass", "1.5", 0),
        ("--min-tokens-per-pass", "2.0001", 1),
        ("--min-acceptance-rate", "0.6", 0),
        ("--min-acceptance-rate", "0.59", 0),
        ("--min-acceptance-rate", "0.6001", 1),
    ],
)
def test_gate_exit_status_on_both_sides(hand_log: Path, option: str, threshold: str, status: int) -> None:
    result = invoke("audit", str(hand_log), option, threshold, "-o", "json")
    assert result.exit_code == status, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 3  # the normal output is printed either way
    if status:
        lines = result.stderr.splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("specaccept: gate failed: ")
        assert option in lines[0] and threshold in lines[0]
    else:
        assert result.stderr == ""


@pytest.mark.parametrize("output", ["table", "json", "markdown", "jsonl", "csv"])
def test_failed_gate_keeps_the_output_in_every_mode(hand_log: Path, output: str) -> None:
    result = invoke("audit", str(hand_log), "-o", output, "--min-alpha", "0.8", "--min-tokens-per-pass", "3")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "specaccept: gate failed: alpha = 0.75 is below --min-alpha 0.8",
        "specaccept: gate failed: tokens per pass = 2 is below --min-tokens-per-pass 3",
    ]
    assert result.stdout  # records, table, markdown or JSON: still there
    if output == "json":
        gates = orjson.loads(result.stdout)["gates"]
        assert [(g["option"], g["value"], g["passed"]) for g in gates] == [
            ("--min-alpha", 0.75, False),
            ("--min-tokens-per-pass", 2.0, False),
        ]


def test_table_view_shows_the_gates(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "--min-alpha", "0.5", "--min-acceptance-rate", "0.9")
    assert result.exit_code == 1
    assert "Gates" in result.stdout
    assert "passed" in result.stdout and "failed" in result.stdout


def test_a_gate_on_a_metric_without_value_fails(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = invoke("audit", str(empty), "--min-alpha", "0", "-o", "json")
    assert result.exit_code == 1
    assert "alpha has no value (no runs to estimate it from); --min-alpha 0 fails" in result.stderr
    assert invoke("audit", str(empty), "-o", "json").exit_code == 0  # no gate, no failure


@pytest.mark.parametrize(
    "args",
    [
        ["--min-alpha", "abc"],
        ["--min-alpha", "nan"],
        ["--min-alpha", "1.5"],
        ["--min-acceptance-rate", "-0.1"],
        ["--min-tokens-per-pass", "inf"],
        ["--min-tokens-per-pass", "0.5"],
        ["--max-drop", "1"],
        ["--significance", "0"],
        ["--significance", "x"],
    ],
)
def test_bad_gate_values_are_usage_errors(hand_log: Path, args: list[str]) -> None:
    result = invoke("audit", str(hand_log), *args)
    assert result.exit_code == 2
    assert args[0] in result.stderr


@pytest.mark.parametrize("option", ["--max-drop", "--significance"])
def test_comparison_options_need_a_baseline(hand_log: Path, option: str) -> None:
    result = invoke("audit", str(hand_log), option, "0.05")
    assert result.exit_code == 2
    assert f"{option} applies to a comparison: give --baseline too" in result.stderr


def test_audit_against_a_baseline_file(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    worse = tmp_path / "worse.jsonl"
    for path, alpha, seed in ((good, "0.8", "1"), (worse, "0.6", "2")):
        invoke("simulate", "--runs", "3000", "--alpha", alpha, "--k", "4", "--seed", seed, "-o", str(path))
    baseline = tmp_path / "main.json"
    assert invoke("audit", str(good), "-o", "json", "--summary-out", str(baseline)).exit_code == 0

    same = invoke("audit", str(good), "--baseline", str(baseline), "-o", "json")
    assert same.exit_code == 0
    assert [row["verdict"] for row in orjson.loads(same.stdout)["comparison"]["metrics"]] == ["ok", "ok"]

    table = invoke("audit", str(worse), "--baseline", str(baseline), "--max-rows", "0")
    assert table.exit_code == 1
    assert "Baseline comparison" in table.stdout and "regressed" in table.stdout
    lines = table.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lines if not line.startswith("specaccept: warning:")] == [
        "alpha regressed",
        "tokens per pass regressed",
    ]
    # runs without a cluster field: the comparison says what its standard errors cannot vouch for
    assert any("--cluster-field" in line for line in lines if line.startswith("specaccept: warning:"))
