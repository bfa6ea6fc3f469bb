"""`audit --tree TOPK,STEPS,DRAFT_TOKENS`: SGLang's engine counts of an EAGLE tree read per depth. The per-depth
conditional rates are exact from the requests' `spec_correct_drafts_histogram` summed; `spec_accept_rate` (over
tree nodes: verify passes x (draft tokens - 1)) keeps its name and is never shown as alpha; no chain's alpha."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from specaccept_cli.rule.expected import conditional_rates
from specaccept_cli.summary.depths import DepthTally
from tests.helpers import invoke, invoke_env

TOPK, STEPS, DRAFT_TOKENS = 4, 3, 8  # a tree SGLang chooses for many models: 7 drafted nodes, 3 levels
RATES = (0.9, 0.8, 0.6)  # the chance a pass that reached depth d - 1 keeps a node at depth d


def sglang_tree_request(request_id: str, rng: np.random.Generator, passes: int) -> dict[str, Any]:
    """A /generate response of SGLang >= 0.5.12 serving a tree: meta_info under its own field names."""
    depths = np.zeros(passes, dtype=np.int64)
    alive = np.ones(passes, dtype=bool)
    for rate in RATES:
        alive &= rng.random(passes) < rate
        depths += alive
    histogram = np.bincount(depths, minlength=STEPS + 1).tolist()
    accepted = int(depths.sum())
    proposed = passes * (DRAFT_TOKENS - 1)  # SGLang counts a tree's nodes: passes x (num_draft_tokens - 1)
    return {
        "text": "...",
        "meta_info": {
            "id": request_id,
            "completion_tokens": 1 + accepted + passes,
            "spec_verify_ct": passes,
            "spec_accept_rate": accepted / proposed,
            "spec_accept_length": (1 + accepted + passes) / passes,
            "spec_num_correct_drafts": accepted,
            "spec_num_proposed_drafts": proposed,
            "spec_correct_drafts_histogram": histogram,
        },
    }


@pytest.fixture
def tree_log(tmp_path: Path) -> tuple[Path, list[int]]:
    rng = np.random.default_rng(42)
    requests = [sglang_tree_request(f"r{index}", rng, int(rng.integers(20, 80))) for index in range(30)]
    path = tmp_path / "sglang.jsonl"
    path.write_bytes(b"".join(orjson.dumps(request) + b"\n" for request in requests))
    summed = np.sum([request["meta_info"]["spec_correct_drafts_histogram"] for request in requests], axis=0)
    return path, [int(n) for n in summed]


def audit_json(*args: str) -> dict[str, Any]:
    result = invoke("audit", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = orjson.loads(result.stdout)
    return data


def test_per_depth_rates_are_exact_from_the_summed_histograms(tree_log: tuple[Path, list[int]]) -> None:
    path, summed = tree_log
    data = audit_json(str(path), "--tree", f"{TOPK},{STEPS},{DRAFT_TOKENS}")
    tree = data["tree"]
    assert tree["shape"] == {"topk": TOPK, "steps": STEPS, "draft_tokens": DRAFT_TOKENS}
    assert tree["runs"] == sum(summed) == data["runs"]
    assert tree["accepted_histogram"] == {str(depth): n for depth, n in enumerate(summed) if n}
    assert [rate["rate"] for rate in tree["depth_rates"]] == conditional_rates(summed)  # exact: same integers
    assert [rate["reached"] for rate in tree["depth_rates"]] == [sum(summed[d:]) for d in range(STEPS)]
    for rate in tree["depth_rates"]:
        low, high = rate["interval"]
        assert low < rate["rate"] < high
    low, high = tree["tokens_per_pass_interval"]
    assert low < tree["tokens_per_pass"] < high and tree["tokens_per_pass"] == pytest.approx(data["tokens_per_pass"])
    assert tree["intervals_over"] == "requests"
    assert not [entry for entry in data["verdict"] if entry["check"] == "tree"]
    # No chain's alpha for a tree: the bounds over chain depths are not called too wide to act on.
    assert not any("alpha is only known" in entry["text"] for entry in data["verdict"])


def test_the_first_screen_names_sglangs_rate_over_tree_nodes(tree_log: tuple[Path, list[int]]) -> None:
    path, summed = tree_log
    result = invoke_env({"COLUMNS": "200"}, "audit", str(path), "--tree", f"{TOPK},{STEPS},{DRAFT_TOKENS}")
    assert result.exit_code == 0, result.stderr
    words = " ".join(result.stdout.split())
    assert "alpha not a chain's: a tree (topk 4, 3 steps, 8 draft tokens)" in words
    assert "accepted / tree nodes (verify passes x 7), not alpha (spec_accept_rate)" in words
    assert "tree (topk 4, 3 steps, 8 draft tokens): " in words and "per depth" in words
    first = conditional_rates(summed)[0]
    assert first is not None and f"{first:.4f}" in words
    markdown = invoke("audit", str(path), "--tree", "4,3,8", "-o", "markdown").stdout
    assert "### tree (topk 4, 3 steps, 8 draft tokens): " in markdown and "| depth | runs ending there |" in markdown


def test_without_tree_the_engine_counts_read_as_before(tree_log: tuple[Path, list[int]]) -> None:
    path, _ = tree_log
    data = audit_json(str(path))
    assert "tree" not in data
    assert any("alpha is only known" in entry["text"] for entry in data["verdict"])


def test_a_pass_deeper_than_the_trees_steps_says_the_shape_is_wrong(tree_log: tuple[Path, list[int]]) -> None:
    path, _ = tree_log
    data = audit_json(str(path), "--tree", "4,2,8")
    (entry,) = [entry for entry in data["verdict"] if entry["check"] == "tree"]
    assert entry["status"] == "warn" and "deeper than the 2 steps" in entry["text"]


def test_a_log_of_runs_has_no_engine_histogram_to_read_as_a_tree(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b'{"p": [0.9, 0.8], "q": [1.0, 1.0], "r": [0.1, 0.2]}\n' * 3)
    data = audit_json(str(path), "--tree", "4,3,8")
    assert "tree" not in data
    (entry,) = [entry for entry in data["verdict"] if entry["check"] == "tree"]
    assert "no engine's accepted-depth histogram" in entry["text"]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("4,3", "is not TOPK,STEPS,DRAFT_TOKENS"),
        ("4,x,8", "is not TOPK,STEPS,DRAFT_TOKENS"),
        ("4,-3,8", "is not TOPK,STEPS,DRAFT_TOKENS"),
        ("0,3,8", "must be at least 1"),
        ("4,9,8", "DRAFT_TOKENS - 1 nodes at least STEPS"),
    ],
)
def test_a_bad_tree_shape_is_a_usage_error(tree_log: tuple[Path, list[int]], value: str, said: str) -> None:
    result = invoke("audit", str(tree_log[0]), "--tree", value)
    assert result.exit_code == 2 and said in result.stderr and "Traceback" not in result.stderr


def test_the_html_report_shows_the_tree_and_no_alpha_card_figure(
    tree_log: tuple[Path, list[int]], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    result = invoke("report", str(tree_log[0]), "--tree", "4,3,8", "-o", str(page))
    assert result.exit_code == 0, result.stderr
    text = html.unescape(page.read_text())
    assert "<h2>tree (topk 4, 3 steps, 8 draft tokens): " in text
    assert "not a chain's: a tree (topk 4, 3 steps, 8 draft tokens)" in text
    assert "alpha (accepted / examined), bounds" not in text
    plain = tmp_path / "plain.html"
    assert invoke("report", str(tree_log[0]), "-o", str(plain)).exit_code == 0
    assert "alpha (accepted / examined), bounds" in html.unescape(plain.read_text())


def test_the_rates_intervals_are_over_requests(tree_log: tuple[Path, list[int]]) -> None:
    """The sandwich over requests (CR1) from the additive depth tally equals the one computed request by request."""
    path, _ = tree_log
    requests = [orjson.loads(line)["meta_info"]["spec_correct_drafts_histogram"] for line in path.read_bytes().split()]
    tally = DepthTally()
    for histogram in requests:
        tally = tally + DepthTally.of_histogram(histogram)
    for depth in range(1, STEPS + 1):
        kept = np.array([sum(h[depth:]) for h in requests], dtype=float)
        reached = np.array([sum(h[depth - 1 :]) for h in requests], dtype=float)
        rate = kept.sum() / reached.sum()
        groups = len(requests)
        error = np.sqrt(((kept - rate * reached) ** 2).sum() * groups / (groups - 1)) / reached.sum()
        found = tally.rate_error(depth)
        assert found is not None and found[0] == rate and found[1] == pytest.approx(error, rel=1e-9)
    data = audit_json(str(path), "--tree", "4,3,8")
    assert data["engine"]["depths"] == tally.to_dict()


def test_two_halves_merged_give_the_wholes_depth_tally(tree_log: tuple[Path, list[int]], tmp_path: Path) -> None:
    path, _ = tree_log
    lines = path.read_bytes().splitlines(keepends=True)
    halves = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    halves[0].write_bytes(b"".join(lines[:12]))
    halves[1].write_bytes(b"".join(lines[12:]))
    for index, half in enumerate(halves):
        assert invoke("audit", str(half), "--summary-out", str(tmp_path / f"s{index}.json"), "-q").exit_code == 0
    merged = invoke("merge", str(tmp_path / "s0.json"), str(tmp_path / "s1.json"))
    assert merged.exit_code == 0, merged.stderr
    whole = audit_json(str(path))
    assert orjson.loads(merged.stdout_bytes)["engine"]["depths"] == whole["engine"]["depths"]
    assert whole["engine"]["depths"]["requests"] == len(lines)


def test_a_report_of_saved_summaries_reads_them_as_the_tree_named(
    tree_log: tuple[Path, list[int]], tmp_path: Path
) -> None:
    saved = tmp_path / "s.json"
    assert invoke("audit", str(tree_log[0]), "--summary-out", str(saved), "-q").exit_code == 0
    page = tmp_path / "r.html"
    result = invoke("report", "--summary", str(saved), "--tree", "4,3,8", "-o", str(page))
    assert result.exit_code == 0, result.stderr
    assert "<h2>tree (topk 4, 3 steps, 8 draft tokens): " in html.unescape(page.read_text())
