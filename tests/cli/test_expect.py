"""`specaccept expect`: the i.i.d. model's closed forms as a calculator."""

from __future__ import annotations

import re

import orjson
import pytest

from tests.helpers import (
    invoke,
)


def test_the_seed_worked_number() -> None:
    result = invoke("expect", "--alpha", "0.8", "--k", "4", "-o", "json")
    assert result.exit_code == 0, result.stderr
    row = orjson.loads(result.stdout)
    assert row == {"alpha": 0.8, "k": 4, "tokens_per_pass": pytest.approx(3.3616)}
    assert "speedup" not in row
    assert "3.3616" in invoke("expect", "--alpha", "0.8", "--k", "4").stdout


def test_several_k_give_a_list_with_speedups() -> None:
    result = invoke("expect", "--alpha", "0.8", "--k", "2,4,8", "--cost-ratio", "0.1", "-o", "json")
    rows = orjson.loads(result.stdout)
    # k=2: 2.44 / 1.2; k=4: 3.3616 / 1.4; k=8: (1 - 0.8^9)/0.2 = 4.3289... / 1.8
    assert [row["k"] for row in rows] == [2, 4, 8]
    assert rows[0]["tokens_per_pass"] == pytest.approx(2.44)
    assert rows[0]["speedup"] == pytest.approx(2.44 / 1.2)
    assert rows[1]["speedup"] == pytest.approx(3.3616 / 1.4)
    assert rows[2]["tokens_per_pass"] == pytest.approx((1 - 0.8**9) / 0.2)


def test_range_and_alpha_one() -> None:
    rows = orjson.loads(invoke("expect", "--alpha", "1", "--k", "1-3", "-o", "json").stdout)
    assert [(row["k"], row["tokens_per_pass"]) for row in rows] == [(1, 2.0), (2, 3.0), (3, 4.0)]


def test_table_marks_the_best_k() -> None:
    # alpha 0.6, c 0.1: speedups k=1 1.4545, k=2 1.6333, k=3 1.6738, k=4 1.6469: best is 3
    result = invoke("expect", "--alpha", "0.6", "--k", "1-4", "--cost-ratio", "0.1")
    assert result.exit_code == 0
    best_lines = [line for line in result.stdout.splitlines() if "best" in line and "│" in line]
    assert len(best_lines) == 1
    assert "│ 3 │" in best_lines[0]
    assert "1.6738" in best_lines[0]
    assert "Best k in 1..32 at this alpha and cost ratio: 3." in result.stdout


def test_without_cost_ratio_no_k_is_marked() -> None:
    result = invoke("expect", "--alpha", "0.6", "--k", "1-4")
    assert not [line for line in result.stdout.splitlines() if "best" in line and "│" in line]
    assert "give it to find the best k" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alpha", "0.8", "--k", "x"], "not a draft length"),
        (["--alpha", "0.8", "--k", "5-2"], "not a draft length"),
        (["--alpha", "0.8", "--k", "-1"], "not a draft length"),
        (["--alpha", "0.8", "--k", "1-100000"], "--k goes up to 1024"),
        (["--alpha", "1.2", "--k", "4"], "--alpha"),
        (["--alpha", "0.8", "--k", "4", "--cost-ratio", "-1"], "--cost-ratio"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], message: str) -> None:
    result = invoke("expect", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_json_prints_rounded_figures_not_floating_point_noise() -> None:
    """(1 - 0.8^2) / 0.2 is 1.7999999999999998 in binary floating point; the calculator prints 1.8."""
    single = invoke("expect", "--alpha", "0.8", "--k", "1", "-o", "json")
    assert single.exit_code == 0, single.stderr
    assert single.stdout == '{"alpha":0.8,"k":1,"tokens_per_pass":1.8}\n'
    several = invoke("expect", "--alpha", "0.8", "--k", "1,2,8", "--cost-ratio", "0.05", "-o", "json")
    assert "99999" not in several.stdout and "00000" not in several.stdout
    rows = orjson.loads(several.stdout)
    assert [row["tokens_per_pass"] for row in rows] == [1.8, 2.44, 4.32891136]
    # Twelve significant digits of 1.8 / 1.05, 2.44 / 1.1 and 4.32891136 / 1.4.
    assert [row["speedup"] for row in rows] == [1.71428571429, 2.21818181818, 3.09207954286]


def test_rule_block_is_a_lower_bound_and_says_so() -> None:
    result = invoke("expect", "--rule", "block", "--alpha", "0.8", "--k", "4", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == '{"alpha":0.8,"k":4,"tokens_per_pass":3.3616,"rule":"block","bound":"at least"}\n'
    table = " ".join(invoke("expect", "--rule", "block", "--alpha", "0.8", "--k", "4").stdout.split())
    assert "3.3616" in table and "block: it keeps at least this many tokens per pass" in table


def test_rule_names_and_aliases_any_case_and_chain_rules_keep_the_closed_form() -> None:
    for name, canonical in [("standard", "standard"), ("GREEDY", "argmax"), ("greedy_draft", "greedy-draft")]:
        rows = orjson.loads(invoke("expect", "--rule", name, "--alpha", "0.8", "--k", "1,4", "-o", "json").stdout)
        assert [(row["rule"], row["tokens_per_pass"]) for row in rows] == [(canonical, 1.8), (canonical, 3.3616)]
        assert all("bound" not in row for row in rows)


def test_rule_tree_reads_alpha_per_depth() -> None:
    result = invoke("expect", "--rule", "tree-target-cdf", "--alpha", "0.5", "--k", "3", "--cost-ratio", "0.1")
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "1.8750" in text  # 1 + 0.5 + 0.25 + 0.125
    assert "--alpha is read as the conditional acceptance rate at every depth" in text


def test_without_rule_the_output_is_unchanged() -> None:
    assert invoke("expect", "--alpha", "0.8", "--k", "1", "-o", "json").stdout == (
        '{"alpha":0.8,"k":1,"tokens_per_pass":1.8}\n'
    )


def test_an_unknown_rule_is_a_usage_error_naming_the_known_ones() -> None:
    result = invoke("expect", "--rule", "strict", "--alpha", "0.8", "--k", "4")
    assert result.exit_code == 2
    assert "unknown rule 'strict'" in result.stderr and "tree-target-cdf" in result.stderr


@pytest.mark.parametrize(
    ("k", "mark"), [("4", None), ("8", "best"), ("2,4", "best listed"), ("1-10", "best")], ids=["4", "8", "2,4", "1-10"]
)
def test_the_table_and_its_last_line_agree_on_the_best_k(k: str, mark: str | None) -> None:
    # alpha 0.8, c 0.05: speedup peaks at k = 8 (3.0921); k = 4 gives 2.8013. One k is the best of one only.
    out = invoke("expect", "--alpha", "0.8", "--cost-ratio", "0.05", "--k", k).stdout
    assert "Best k in 1..32 at this alpha and cost ratio: 8." in out
    marked = [line for line in out.splitlines() if line.rstrip(" │").endswith("best") or "best listed" in line]
    if mark is None:
        assert marked == [] and "best" not in out.split("Best k")[0]
    else:
        assert len(marked) == 1 and f"│ {mark} │" in marked[0]
        assert (re.search(r"│ +8 │", marked[0]) is not None) == (mark == "best")
