"""`audit --cost-ratio C` on runs outside alpha: each rule's advice by its own model. A tree's tokens per pass when
cut at depth D come from its per-depth rates (1 + c_1 + c_1 c_2 + ...), its speedup divides by 1 + D c, and depths
past the input's are never extrapolated; block, whose decisions are joint, gets no per-k figure, only its observed
speedup and where its floor comes from; a named engine tree divides by its steps."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from specaccept_cli.summary.files import read_summary_file, summary_object, summary_of
from tests.cli.test_audit_tree import DRAFT_TOKENS, STEPS, TOPK, sglang_tree_request
from tests.helpers import invoke, run_process

COST = 0.1


@pytest.fixture(scope="module")
def mixed_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree-target-cdf log (trees 2 wide, 3 deep) and a block log (k = 4), decoded by real small models."""
    directory = tmp_path_factory.mktemp("advice")
    parts = []
    for args in (["--rule", "tree-target-cdf", "--tree", "2x3"], ["--rule", "block", "--k", "4"]):
        result = invoke("simulate", "--runs", "1500", *args, "--seed", "3")
        assert result.exit_code == 0, result.stderr
        parts.append(result.stdout_bytes)
    path = directory / "mixed.jsonl"
    path.write_bytes(b"".join(parts))
    return path


def audit_json(*args: str) -> dict[str, Any]:
    result = invoke("audit", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = orjson.loads(result.stdout)
    return data


def test_a_tree_rules_advice_cuts_the_tree_at_each_known_depth(mixed_log: Path) -> None:
    data = audit_json(str(mixed_log), "--cost-ratio", str(COST))
    figures = data["outside_alpha"]["tree-target-cdf"]
    advice = data["rule_advice"]["tree-target-cdf"]
    rates = [rate["rate"] for rate in figures["depth_rates"]]
    deepest = max(int(depth) for depth in figures["accepted_histogram"])
    assert advice["model"] == "tree" and advice["known_depth"] == deepest == len(rates)
    reach, tokens = 1.0, 1.0
    for row, rate in zip(advice["by_depth"], rates, strict=True):
        reach *= rate
        tokens += reach
        assert row["tokens_per_pass"] == pytest.approx(tokens, rel=1e-12)
        assert row["speedup"] == pytest.approx(tokens / (1 + row["depth"] * COST), rel=1e-12)
    # Cut at its deepest depth the tree keeps what it kept: the last row is the observed tokens per pass.
    assert advice["by_depth"][-1]["tokens_per_pass"] == pytest.approx(figures["tokens_per_pass"], rel=1e-12)
    best = max(advice["by_depth"], key=lambda row: row["speedup"])
    assert advice["best_depth"] == best["depth"]
    # The tally keeps each tree's depth (every tree here is 3 deep): a draft pass per level, exact.
    assert advice["draft_passes_per_verify_pass"] == 3 and advice["speedup_bound"] == "exact"
    assert advice["draft_passes_from"] == "the runs' capacities"
    assert advice["speedup"] == pytest.approx(figures["tokens_per_pass"] / (1 + 3 * COST), rel=1e-12)


def test_a_summary_saved_without_capacities_bounds_the_speedup(mixed_log: Path, tmp_path: Path) -> None:
    """A summary from before the tally kept each run's capacity: the deepest accepted stands in for the trees'
    depth and the drafts' length, so the observed speedup is an upper bound, and says so."""
    saved = audit_json(str(mixed_log))
    for key in ("joint_counts", "clusters"):  # neither was kept then
        saved["state"]["rules"].pop(key, None)
    path = tmp_path / "old.json"
    path.write_bytes(orjson.dumps(saved))
    result = invoke("report", "--summary", str(path), "--cost-ratio", str(COST), "-o", str(tmp_path / "report.html"))
    assert result.exit_code == 0, result.stderr
    data = summary_object(summary_of(read_summary_file(str(path)), str(path)), cost_ratio=COST)
    for name in ("tree-target-cdf", "block"):
        advice = data["rule_advice"][name]
        deepest = max(int(depth) for depth in data["outside_alpha"][name]["accepted_histogram"])
        assert advice["speedup_bound"] == "at most" and advice["draft_passes_per_verify_pass"] == deepest
        assert advice["draft_passes_from"] == "deepest accepted (assumed)"
        tokens = data["outside_alpha"][name]["tokens_per_pass"]
        assert advice["speedup"] == pytest.approx(tokens / (1 + deepest * COST), rel=1e-12)
    assert "at most" in html.unescape((tmp_path / "report.html").read_text())


def test_block_gets_no_per_k_figure_and_names_its_floor(mixed_log: Path) -> None:
    data = audit_json(str(mixed_log), "--cost-ratio", str(COST))
    advice = data["rule_advice"]["block"]
    assert advice["model"] == "at-least-chain" and advice["by_depth"] == [] and advice["best_depth"] is None
    assert "at least the chain model" in advice["floor"] and advice["speedup_bound"] == "exact"
    # Every draft was 4 long: sum(a + 1) / sum(1 + 4 c) over the block runs.
    assert advice["draft_passes_per_verify_pass"] == 4
    assert advice["speedup"] == pytest.approx(advice["tokens_per_pass"] / (1 + 4 * COST), rel=1e-12)
    assert advice["tokens_per_pass"] == pytest.approx(data["outside_alpha"]["block"]["tokens_per_pass"])
    assert "rule_advice" not in audit_json(str(mixed_log))  # the cost ratio is a question: no question, no key


def test_the_first_screen_draws_each_rules_advice_and_no_chain_table(mixed_log: Path) -> None:
    result = invoke("audit", str(mixed_log), "--cost-ratio", str(COST))
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Draft length at alpha" not in text  # no chain runs were counted: no chain alpha to advise from
    assert "tree-target-cdf cut at depth D" in text and "best" in text
    assert "Deeper than 3 is not known from this input" in text
    assert "block decides jointly" in text and "expect --rule block --alpha A --k K" in text
    assert "observed speedup tokens per pass / (1 + c x draft passes) = at most" not in text
    assert "3 draft passes per verify pass on average (one per level of each tree)" in text
    assert "4 draft passes per verify pass on average (one per drafted position)" in text


def test_the_html_report_has_a_speedup_card_per_rule(mixed_log: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = invoke("audit", str(mixed_log), "--cost-ratio", str(COST), "--html", str(page))
    assert result.exit_code == 0, result.stderr
    shown = html.unescape(page.read_text())
    assert "speedup, tree-target-cdf" in shown and "speedup, block" in shown and "best depth" in shown


def engine_tree_log(directory: Path, passes: int = 60) -> Path:
    """SGLang tree requests whose passes never kept depth 3 (the rate there 0): the histogram stops at 2."""
    rng = np.random.default_rng(5)
    lines = []
    for index in range(12):
        request = sglang_tree_request(f"r{index}", rng, passes)
        meta = request["meta_info"]
        histogram = meta["spec_correct_drafts_histogram"]
        capped = [*histogram[:2], histogram[2] + histogram[3]]  # every depth-3 pass stopped at 2 instead
        accepted = sum(depth * n for depth, n in enumerate(capped))
        meta |= {
            "spec_correct_drafts_histogram": capped,
            "spec_num_correct_drafts": accepted,
            "spec_accept_rate": accepted / meta["spec_num_proposed_drafts"],
            "completion_tokens": 1 + accepted + passes,
        }
        lines.append(orjson.dumps(request))
    path = directory / "sglang.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_named_engine_tree_divides_by_its_steps_and_knows_every_level(tmp_path: Path) -> None:
    path = engine_tree_log(tmp_path)
    data = audit_json(str(path), "--tree", f"{TOPK},{STEPS},{DRAFT_TOKENS}", "--cost-ratio", str(COST))
    tree, advice = data["tree"], data["tree"]["advice"]
    assert advice["speedup_bound"] == "exact" and advice["draft_passes_per_verify_pass"] == STEPS
    assert advice["speedup"] == pytest.approx(tree["tokens_per_pass"] / (1 + STEPS * COST), rel=1e-12)
    # Every pass could reach depth 3 and none kept it: known, not extrapolated; cutting there keeps nothing more.
    assert advice["known_depth"] == STEPS and [row["depth"] for row in advice["by_depth"]] == [1, 2, 3]
    two, three = advice["by_depth"][1], advice["by_depth"][2]
    assert three["tokens_per_pass"] == pytest.approx(two["tokens_per_pass"], rel=1e-12)
    assert advice["best_depth"] in (1, 2)
    screen = " ".join(
        invoke("audit", str(path), "--tree", f"{TOPK},{STEPS},{DRAFT_TOKENS}", "--cost-ratio", str(COST)).stdout.split()
    )
    assert "with 3 draft passes per verify pass (the tree's steps)" in screen
    assert "sum(a + 1) / sum(k c + 1)" not in screen  # the chain's figure would take the tree's 7 nodes as k


def test_expect_says_what_the_best_k_means_under_the_rule() -> None:
    block = " ".join(
        invoke("expect", "--rule", "block", "--alpha", "0.8", "--k", "1-8", "--cost-ratio", "0.2").stdout.split()
    )
    assert "The best k marked is the floor's" in block
    tree = invoke("expect", "--rule", "tree-argmax", "--alpha", "0.8", "--k", "1-8", "--cost-ratio", "0.2").stdout
    chain = invoke("expect", "--alpha", "0.8", "--k", "1-8", "--cost-ratio", "0.2").stdout
    assert "best depth by the tree's model" in " ".join(tree.split())
    # One rate at every depth and a draft pass per level: the tree's model marks the chain's best k.
    marked = [line.split()[1] for line in tree.splitlines() if line.rstrip("│ ").endswith("best")]
    assert marked and marked == [line.split()[1] for line in chain.splitlines() if line.rstrip("│ ").endswith("best")]


def test_a_report_of_summaries_refuses_the_options_it_would_not_use(mixed_log: Path, tmp_path: Path) -> None:
    """`report --summary` only draws: a --summary-out or a gate given to it would be silently ignored, so they
    are refused by name (exit 2), and nothing is written; the options it uses still work."""
    saved, page, out = tmp_path / "s.json", tmp_path / "r.html", tmp_path / "out.json"
    assert invoke("audit", str(mixed_log), "--summary-out", str(saved)).exit_code == 0
    refused = invoke(
        "report", "--summary", str(saved), "-o", str(page), "--summary-out", str(out), "--min-alpha", "0.5"
    )
    assert refused.exit_code == 2
    assert "--min-alpha, --summary-out have no effect with --summary" in " ".join(refused.stderr.split())
    assert not page.exists() and not out.exists()
    args = ("report", "--summary", str(saved), "-o", str(page), "--cost-ratio", str(COST))
    # A scheduler set in the environment is set for every command: not refused.
    drawn = run_process(*args, env={"DASK_SCHEDULER_ADDRESS": "tcp://127.0.0.1:1"})
    assert drawn.returncode == 0, drawn.stderr.decode()
    assert "speedup, tree-target-cdf" in html.unescape(page.read_text())


def test_the_html_cards_of_runs_outside_alpha_give_their_own_figures(mixed_log: Path, tmp_path: Path) -> None:
    """Block and tree runs alone: a tokens-per-pass card per rule with its interval, no chain's tokens card of
    dashes, and the alpha card saying why it has no value."""
    page = tmp_path / "report.html"
    assert invoke("report", str(mixed_log), "-o", str(page)).exit_code == 0
    shown = " ".join(re.sub(r"<[^>]+>", " ", html.unescape(page.read_text())).split())
    data = audit_json(str(mixed_log))
    for name in ("tree-target-cdf", "block"):
        figures = data["outside_alpha"][name]
        low, high = figures["tokens_per_pass_interval"]
        assert f"tokens per pass, {name} {figures['tokens_per_pass']:.3f}" in shown
        assert f"95% interval [{low:.4f}, {high:.4f}]; {figures['runs']:,} runs, not in alpha" in shown
    assert "not a chain's: tree-target-cdf, block" in shown or "not a chain's: block, tree-target-cdf" in shown
    assert "tokens per pass — " not in shown
