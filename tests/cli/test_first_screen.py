"""The first screen: the answer first, numbers never cut, gates never look equal, names that say what they are."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.text import shown_against, shown_threshold
from specaccept_cli.views.rows import group_order
from tests.helpers import invoke, invoke_env, write_jsonl

KEPT = {"p": [0.9], "q": [0.5], "r": [0.1]}  # one token, kept
REJECTED = {"p": [0.1], "q": [0.5], "r": [0.9]}  # one token, rejected


@pytest.fixture(scope="module")
def near_gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha = 3009 / 5998 = 0.5016672..., which reads 0.5017 at four decimals."""
    path = tmp_path_factory.mktemp("gate") / "near.jsonl"
    return write_jsonl(path, [KEPT] * 3009 + [REJECTED] * 2989)


def test_a_failed_gate_never_reads_equal_to_its_threshold(near_gate: Path) -> None:
    result = invoke("audit", str(near_gate), "--min-alpha", "0.5017")
    assert result.exit_code == 1
    assert re.search(r"--min-alpha\s*│\s*0\.5017\s*│\s*0\.50167\s*│\s*failed", result.stdout), result.stdout
    assert "gate failed: alpha = 0.501667 is below --min-alpha 0.5017" in result.stderr
    markdown = invoke("audit", str(near_gate), "--min-alpha", "0.5017", "-o", "markdown").stdout
    assert "| --min-alpha | 0.5017 | 0.50167 | failed |" in markdown
    passed = invoke("audit", str(near_gate), "--min-alpha", "0.5")
    assert passed.exit_code == 0
    assert re.search(r"--min-alpha\s*│\s*0\.5\s*│\s*0\.5017\s*│\s*passed", passed.stdout)  # four decimals suffice


def skewed_sampler_log(path: Path, runs: int = 3000, seed: int = 3) -> Path:
    """r = u^1.3 instead of u: the sampler accepts too often; the i.i.d. model still fits such a log."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(runs):
        k = int(rng.integers(1, 6))
        q = rng.uniform(0.2, 1.0, k)
        p = np.clip(q * rng.uniform(0.5, 1.2, k), 0, 1)
        r = rng.uniform(0, 1, k) ** 1.3
        rows.append({"p": p.tolist(), "q": q.tolist(), "r": r.tolist()})
    return write_jsonl(path, rows)


def test_sampler_tests_show_by_default_and_gate_only_when_asked(tmp_path: Path) -> None:
    path = skewed_sampler_log(tmp_path / "skewed.jsonl")
    result = invoke("audit", str(path))
    assert result.exit_code == 0, result.stderr  # shown, not gated
    assert "Sampler health" in result.stdout
    assert re.search(r"r uniformity \(KS D\).*fails at 0\.001", result.stdout)
    markdown = invoke("audit", str(path), "-o", "markdown").stdout
    assert "### Sampler health" in markdown and "fails at 0.001" in markdown
    assert "sampler" not in orjson.loads(invoke("audit", str(path), "-o", "json").stdout)["state"]
    gated = invoke("audit", str(path), "--check-sampler")
    assert gated.exit_code == 1 and "sampler r uniformity" in gated.stderr
    greedy = write_jsonl(tmp_path / "greedy.jsonl", [{"d": [1, 2], "t": [1, 3]}])
    no_r = invoke("audit", str(greedy), "--draft-tokens-field", "d", "--target-tokens-field", "t")
    assert no_r.exit_code == 0 and "Sampler health" not in no_r.stdout  # no r logged: nothing to test


def test_numeric_groups_sort_by_value(tmp_path: Path) -> None:
    rows = [{**KEPT, "shard": shard} for shard in (0, 1, 10, 11, 2, 2, 2, 3)] + [KEPT]  # the last has no shard
    path = write_jsonl(tmp_path / "shards.jsonl", rows)
    table = invoke_env({"COLUMNS": "160"}, "audit", str(path), "--group-by", "shard").stdout
    keys = re.findall(r"^│ (\S+)\s+│", table.split("By shard")[1], flags=re.MULTILINE)
    assert keys == ["0", "1", "2", "3", "10", "11", "null"]
    words = write_jsonl(tmp_path / "words.jsonl", [{**KEPT, "m": m} for m in ("b", "a", "a")])
    table = invoke_env({"COLUMNS": "160"}, "audit", str(words), "--group-by", "m").stdout
    assert re.findall(r"^│ (\S+)\s+│", table.split("By m")[1], flags=re.MULTILINE) == ["a", "b"]  # largest first


@pytest.fixture(scope="module")
def varied_k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs with k in 1..12, a request id and a numeric field to group by."""
    directory = tmp_path_factory.mktemp("varied")
    simulated = directory / "sim.jsonl"
    assert invoke("simulate", "--runs", "3000", "--alpha", "0.7", "--k", "1-12", "--seed", "3", "-o", str(simulated))
    rows = [orjson.loads(line) for line in simulated.read_bytes().splitlines()]
    for index, row in enumerate(rows):
        row["request_id"] = f"req-{index}"
        row["k"] = len(row["p"])
        row["reported"] = 0  # what a broken server might report: mismatches to list
    return write_jsonl(directory / "varied.jsonl", rows)


def test_the_headline_comes_first_then_the_first_runs(varied_k: Path) -> None:
    result = invoke("audit", str(varied_k), "--min-alpha", "0.9")
    summary = orjson.loads(invoke("audit", str(varied_k), "-o", "json").stdout)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("╭─ specaccept")
    panel = "\n".join(lines[: lines.index(next(line for line in lines if line.startswith("╰"))) + 1])
    low, high = summary["alpha_ci"]
    assert f"│ runs             {summary['runs']:,} " in panel
    assert f"{summary['alpha']:.4f}, 95% interval [{low:.4f}, {high:.4f}]" in panel
    assert f"{summary['tokens_per_pass']:.4f} observed, {summary['tokens_per_pass_predicted']:.4f} predicted" in panel
    assert f'{summary["acceptance_rate"]:.4f} accepted / drafted ("Avg Draft acceptance rate")' in panel
    assert re.search(r"│ fail +alpha = [0-9.]+ is below 0\.9 \(--min-alpha\)", panel)
    assert re.search(r"│ ok +sampler ok · .*no evidence against the i\.i\.d\. model", panel)
    assert f"Runs of {varied_k}" in result.stdout  # the first runs by default, with the rows' request id
    assert "… and 2,990 more runs: -o jsonl or -o csv writes all" in result.stdout
    shown = invoke("audit", str(varied_k), "--max-rows", "2", "--id-field", "request_id").stdout
    runs = [line for line in shown.split(f"Runs of {varied_k}")[1].splitlines() if line.startswith("│")]
    assert [line.split("│")[-2].strip() for line in runs] == ["req-0", "req-1"]  # the id column, per run
    assert "… and 2,998 more runs" in shown
    assert "Runs" not in invoke("audit", str(varied_k), "--max-rows", "0").stdout


def test_per_position_names_say_which_rate_is_vllm_s(varied_k: Path) -> None:
    summary = orjson.loads(invoke("audit", str(varied_k), "-o", "json").stdout)
    logged = summary["conventions"]["vllm"]["per_position"]
    unconditional = [row["unconditional_rate"] for row in summary["per_position"]]
    assert logged[0] == unconditional[0] and logged[5] < unconditional[5]  # every draft vs drafts of position 6
    table = invoke_env({"COLUMNS": "200"}, "audit", str(varied_k), "--conventions", "--full").stdout
    flat = " ".join(table.split())  # captions wrap to their table's width
    assert "unconditional = accepted / drafts of that position (runs with k >= i)" in flat
    assert '"Per-position acceptance rate" divides by every draft instead' in flat
    assert re.search(r"vllm +│ per_position .*│ accepted at i / every draft: its \"Per-position acceptance", table)
    assert "(vLLM's)" not in table


def _whole_numbers_shown(table: str, summary: dict[str, object], columns: int) -> None:
    cells = [line for line in table.splitlines() if line.startswith(("│", "┃"))]
    assert not any("…" in line for line in cells)  # Rich marks a cut cell with an ellipsis
    assert all(len(line) <= columns for line in table.splitlines()), columns
    groups = summary["groups"]
    assert isinstance(groups, dict)
    section = table.split(f"By {summary['group_by']}")[1].splitlines()
    for key, group in groups.items():
        row = next(line for line in section if line.startswith(f"│ {key} "))
        assert f"{group['runs']:,}" in row and f"{group['alpha']:.4f}" in row, (columns, row)


@pytest.mark.parametrize("columns", [60, 80, 100, 120])
def test_narrow_terminals_never_cut_a_number(varied_k: Path, columns: int) -> None:
    options = (
        "--group-by",
        "k",
        "--cost-ratio",
        "0.05",
        "--conventions",
        "--max-rows",
        "3",
        "--id-field",
        "request_id",
        "--reported-field",
        "reported",
    )
    summary = orjson.loads(invoke("audit", str(varied_k), *options, "-o", "json").stdout)
    table = invoke_env(
        {"COLUMNS": str(columns)}, "audit", str(varied_k), *options, "--min-alpha", "0.7", "--full"
    ).stdout
    _whole_numbers_shown(table, summary, columns)
    for header in ("tokens/pass", "accepted", "unconditional", "statistic", "threshold", "recomputed"):
        assert header in table or columns < 80, header
    for value in (f"{summary['alpha']:.4f}", f"{summary['drafted_tokens']:,}", f"{summary['speedup']:.4f}"):
        assert value in table


def test_headline_verdicts_name_each_failed_check(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    good = write_jsonl(tmp_path / "good.jsonl", [KEPT, REJECTED] * 200)
    assert invoke("audit", str(good), "--summary-out", str(baseline), "-o", "json").exit_code == 0
    worse = write_jsonl(
        tmp_path / "worse.jsonl", [{**REJECTED, "reported": 1}] * 300 + [{**KEPT, "reported": 1}] * 100 + [{"p": 1}]
    )
    options = ("--baseline", str(baseline), "--reported-field", "reported", "--on-error", "skip")
    markdown = invoke("audit", str(worse), *options, "-o", "markdown").stdout
    verdict = [line for line in markdown.splitlines() if line.startswith(("- **fail**: ", "- **warn**: "))]
    assert [line.split(":")[0] for line in verdict] == ["- **fail**"] * 2 + ["- **warn**"] * 6
    assert verdict[0].startswith("- **fail**: alpha regressed: 0.5 -> 0.25 (-50.00%), a drop of more than 0.02")
    assert verdict[1].startswith("- **fail**: tokens per pass regressed: 1.5 -> 1.25 (-16.67%)")
    assert verdict[2:6] == [
        "- **warn**: 300 of 400 reported counts mismatch, most explained by bonus-counted (300 runs, 300 by it alone)"
        " (--max-mismatches)",
        "- **warn**: sampler calibration fails: p = 4.71e-18 &lt; 0.001 (--check-sampler)",
        "- **warn**: sampler r uniformity fails: p = 5.08e-149 &lt; 0.001 (--check-sampler)",
        "- **warn**: skipped 1 bad row (--max-errors)",
    ]
    assert verdict[6].startswith("- **warn**: alpha is not constant over the log (p = 4.5e-65 &lt; 0.01)")
    over_runs = "intervals are over runs, not requests: they hold only for a replayed prompt set"
    assert verdict[7] == f"- **warn**: {over_runs} (--cluster-field)"


def test_group_order_is_numeric_only_for_json_numbers() -> None:
    assert group_order({"0": 5, "1": 5, "10": 9, "2": 1, "null": 3}) == ["0", "1", "2", "10", "null"]
    assert group_order({"-1.5": 1, "2e3": 1, "3": 1}) == ["-1.5", "3", "2e3"]
    assert group_order({"1_0": 1, "2": 3}) == ["2", "1_0"]  # not JSON numbers: largest first


@given(
    value=st.floats(0, 10, allow_nan=False),
    threshold=st.one_of(st.floats(0, 10, allow_nan=False), st.integers(0, 10**6).map(lambda n: n / 10**4)),
)
def test_a_shown_value_is_never_read_as_its_threshold_or_across_it(value: float, threshold: float) -> None:
    shown = float(shown_against(value, threshold))
    assert shown != threshold or value == threshold  # a value that differs never reads equal
    assert (shown < threshold) == (value < threshold)  # rounding never carries it to the other side
    assert float(shown_threshold(threshold)) == threshold
