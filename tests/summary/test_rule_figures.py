"""What the first screen says of a block or tree rule (`RuleFigures`): tokens per pass with its interval, the
accepted-depth histogram and the per-depth conditional rates with their score intervals, never a chain's alpha;
the same figures in the terminal, `-o json`, markdown and the HTML report."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.rule.expected import conditional_rates, tokens_per_pass
from specaccept_cli.summary.rule_figures import figures_of, rule_figures
from specaccept_cli.summary.rules import RuleTally
from tests.helpers import invoke, invoke_env, per_run
from tests.read.test_rule_rows import mixed_rows, rule_rows, write


def test_per_depth_rates_follow_the_histogram_and_give_its_tokens_per_pass() -> None:
    figures = figures_of("tree-match", np.array([10, 20, 30, 40, 0], dtype=np.int64))
    assert figures.tree and figures.runs == 100 and figures.histogram == (10, 20, 30, 40)  # no empty tail
    assert [(rate.depth, rate.reached, rate.kept) for rate in figures.depth_rates] == [
        (1, 100, 90),
        (2, 90, 70),
        (3, 70, 40),
    ]
    rates = [rate.rate for rate in figures.depth_rates]
    assert rates == conditional_rates([10, 20, 30, 40])
    assert figures.tokens_per_pass == pytest.approx(3.0) == tokens_per_pass([r for r in rates if r is not None])
    assert figures.interval is not None and 1.0 <= figures.interval[0] < 3.0 < figures.interval[1] <= 4.0
    for rate in figures.depth_rates:
        assert rate.interval is not None and rate.rate is not None
        assert 0.0 <= rate.interval[0] < rate.rate < rate.interval[1] <= 1.0
    # More runs with the same shares: narrower intervals, the same rates.
    wider = figures_of("tree-match", np.array([1, 2, 3, 4], dtype=np.int64))
    assert (
        wider.interval is not None and figures.interval[1] - figures.interval[0] < wider.interval[1] - wider.interval[0]
    )
    assert [rate.rate for rate in wider.depth_rates] == rates


def test_a_rate_no_run_reached_is_unknown_and_block_is_not_a_tree() -> None:
    figures = figures_of("block", np.array([0, 0, 5], dtype=np.int64))
    assert not figures.tree and figures.tokens_per_pass == 3.0
    assert [rate.rate for rate in figures.depth_rates] == [1.0, 1.0]
    lonely = figures_of("tree-residual", np.array([1], dtype=np.int64))
    assert lonely.depth_rates == () and lonely.interval is None and lonely.tokens_per_pass == 1.0
    tally = RuleTally.of_runs(["block", "standard", "tree-argmax"], np.array([2, 1, 0], dtype=np.int64))
    assert [figures.name for figures in rule_figures(tally)] == ["block", "tree-argmax"]


def _tree_histogram(rows: list[dict[str, object]], name: str) -> list[int]:
    accepted = [int(row["accepted"]) for row in rows if row["rule"] == name]  # type: ignore[call-overload]
    return np.bincount(accepted).tolist()


def _depth_rates(runs: list[dict[str, object]], name: str) -> list[tuple[int, int, int]]:
    """(depth, reached, kept) from per-run records: a run reaches d when it kept d - 1 and its capacity (block's
    drafted length, a tree's depth) goes to d; it keeps d when it accepted d."""
    mine = [(int(run["k"]), int(run["accepted"])) for run in runs if run.get("rule") == name]  # type: ignore[call-overload]
    deepest = max(k for k, _ in mine)
    rows = []
    for depth in range(1, deepest + 1):
        reached = sum(1 for k, a in mine if a >= depth - 1 and k >= depth)
        if reached:
            rows.append((depth, reached, sum(1 for _, a in mine if a >= depth)))
    return rows


def test_json_gives_each_rule_outside_alpha_its_depth_rates(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "m.jsonl", rows)
    data = orjson.loads(invoke("audit", str(path), "-o", "json").stdout_bytes)
    runs = per_run(invoke("audit", str(path), "-o", "jsonl").stdout_bytes)
    differs = 0
    for name in ("block", "tree-residual", "tree-target-cdf", "tree-argmax", "tree-match"):
        entry = data["outside_alpha"][name]
        histogram = _tree_histogram(rows, name)
        wanted = _depth_rates(runs, name)
        assert [(rate["depth"], rate["reached"], rate["kept"]) for rate in entry["depth_rates"]] == wanted
        assert [rate["rate"] for rate in entry["depth_rates"]] == [kept / reached for _, reached, kept in wanted]
        differs += [rate["rate"] for rate in entry["depth_rates"]] != conditional_rates(histogram)
        assert entry["depth_rates"][0]["reached"] == entry["runs"] == sum(histogram)
        # The rows carry request ids: the intervals are over the requests, whose runs the tally keeps apart.
        assert entry["intervals_over"] == "requests" and entry["requests"] == len({row["request_id"] for row in rows})
        low, high = entry["tokens_per_pass_interval"]
        assert low <= entry["tokens_per_pass"] <= high
        assert "alpha" not in entry
    assert differs  # block's drafts differ in length: the histogram alone would count a full run as reaching on
    # Without request ids the runs are the units, as for every interval of a log without requests.
    alone = [{key: value for key, value in row.items() if key != "request_id"} for row in rows]
    data = orjson.loads(invoke("audit", str(write(tmp_path / "a.jsonl", alone)), "-o", "json").stdout_bytes)
    for name in ("block", "tree-residual", "tree-target-cdf", "tree-argmax", "tree-match"):
        entry = data["outside_alpha"][name]
        low, high = entry["tokens_per_pass_interval"]
        assert low <= entry["tokens_per_pass"] <= high and entry["intervals_over"] == "runs"
        assert entry["requests"] is None


def test_every_view_draws_a_table_per_tree_rule(tmp_path: Path) -> None:
    path = write(tmp_path / "tree.jsonl", rule_rows("tree-residual"))
    histogram = np.bincount([int(row["accepted"]) for row in rule_rows("tree-residual")]).tolist()  # type: ignore[call-overload]
    first = conditional_rates(histogram)[0]
    assert first is not None
    terminal = invoke_env({"COLUMNS": "200"}, "audit", str(path))
    assert terminal.exit_code == 0, terminal.stderr
    words = " ".join(terminal.stdout.split())  # a table's title wraps at the table's width
    assert "tree-residual: " in words and "tokens per pass over 60 runs (not in alpha)" in words
    assert "runs ending there" in words and f"{first:.4f}" in words
    assert "requests (cluster-robust)" in words  # the rows carry request ids
    alone = [{key: value for key, value in row.items() if key != "request_id"} for row in rule_rows("tree-residual")]
    unclustered = invoke_env({"COLUMNS": "200"}, "audit", str(write(tmp_path / "alone.jsonl", alone)))
    assert "intervals over runs" in " ".join(unclustered.stdout.split())
    markdown = invoke_env({"COLUMNS": "80"}, "audit", str(path), "-o", "markdown").stdout
    assert "### tree-residual: " in markdown and "| depth | runs ending there |" in markdown
    assert f"| 1 | {histogram[1]} | 60 | {60 - histogram[0]} | {first:.4f} |" in markdown
    invoke("report", str(path), "-o", str(tmp_path / "r.html"))
    report = html.unescape((tmp_path / "r.html").read_text())
    assert "<h2>tree-residual: " in report and "<th>depth</th>" in report


def test_a_standard_log_shows_no_rule_table(tmp_path: Path) -> None:
    result = invoke_env({"COLUMNS": "200"}, "audit", str(write(tmp_path / "s.jsonl", rule_rows("standard"))))
    assert "runs ending there" not in result.stdout and "not in alpha" not in result.stdout
