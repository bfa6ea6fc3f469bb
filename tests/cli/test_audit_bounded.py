"""`audit -o json` of payloads with short drafts, through the CLI on real files: the whole-input figures equal
the seeded truth, alpha is null and its bounds hold the truth, and the summaries of two halves merge to the
whole's bounds."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from tests import payloads as sim
from tests.helpers import invoke
from tests.study.payloads import SHAPES, log_truth

EXACT = 1e-12


def audit(path: Path, *args: str) -> dict:
    result = invoke("audit", str(path), "-o", "json", *args)
    assert result.exit_code == 0, result.stderr
    data: dict = orjson.loads(result.stdout)
    return data


def close(value: float | None, truth: float) -> bool:
    return value is not None and math.isclose(value, truth, rel_tol=EXACT, abs_tol=0.0)


@pytest.mark.parametrize("shape", ["vllm-summary", "aiperf"])
def test_whole_input_figures_equal_the_truth_and_alpha_is_bounded(tmp_path: Path, shape: str) -> None:
    batch = sim.requests(3201, count=40, k=4, spread=1.0, ragged=0.1)
    truth = log_truth(batch)
    assert 0 < truth.bounded < 40  # some requests drafted short (bounded), some did not (exact)
    path = tmp_path / "payloads.jsonl"
    path.write_bytes(sim.jsonl([SHAPES[shape][1](request) for request in batch]))
    data = audit(path)
    assert data["runs"] == truth.runs
    assert data["accepted_tokens"] == truth.accepted and data["drafted_tokens"] == truth.drafted
    assert close(data["tokens_per_pass"], truth.tokens_per_pass)
    assert close(data["acceptance_rate"], truth.acceptance_rate)
    histogram = [data["accepted_histogram"][str(a)] for a in range(len(truth.histogram))]
    assert histogram == list(truth.histogram)
    assert data["alpha"] is None and data["alpha_ci"] is None and data["examined_tokens"] is None
    assert data["identification"]["alpha"] == "bounded" and data["identification"]["runs"] == "exact"
    assert data["requests_bounded"] == truth.bounded and data["requests_exact"] == 40 - truth.bounded
    low, high = data["examined_bounds"]
    assert low <= truth.examined <= high
    bounds, interval = data["alpha_bounds"], data["alpha_bounds_ci"]
    assert bounds[0] <= truth.alpha <= bounds[1] and bounds[0] < bounds[1]
    assert bounds == [truth.accepted / high, truth.accepted / low]
    assert interval[0] < bounds[0] and bounds[1] < interval[1] <= 1.0


def test_llamacpp_totals_bound_runs_and_tokens_per_pass(tmp_path: Path) -> None:
    batch = sim.requests(3202, count=30, k=4, ragged=0.1)
    truth = log_truth(batch)
    path = tmp_path / "llama.jsonl"
    path.write_bytes(sim.jsonl([sim.llamacpp_completion(request) for request in batch]))
    data = audit(path)
    assert data["accepted_tokens"] == truth.accepted and data["drafted_tokens"] == truth.drafted
    assert close(data["acceptance_rate"], truth.acceptance_rate)
    assert data["alpha"] is None and data["tokens_per_pass"] is None
    assert data["identification"]["runs"] == "bounded" and data["requests_bounded"] == 30
    assert data["runs_bounds"][0] <= truth.runs <= data["runs_bounds"][1]
    assert data["tokens_per_pass_bounds"][0] <= truth.tokens_per_pass <= data["tokens_per_pass_bounds"][1]
    assert data["alpha_bounds"][0] <= truth.alpha <= data["alpha_bounds"][1]


def test_the_summaries_of_two_halves_merge_to_the_bounds_of_the_whole(tmp_path: Path) -> None:
    batch = sim.requests(3203, count=60, k=4, ragged=0.3)
    truth = log_truth(batch)
    lines = [sim.vllm_summary_only(request) for request in batch]
    for name, part in (("first", lines[:25]), ("second", lines[25:]), ("whole", lines)):
        (tmp_path / f"{name}.jsonl").write_bytes(sim.jsonl(part))
        audit(tmp_path / f"{name}.jsonl", "--summary-out", str(tmp_path / f"{name}.summary.json"))
    merged = invoke("merge", str(tmp_path / "first.summary.json"), str(tmp_path / "second.summary.json"))
    assert merged.exit_code == 0, merged.stderr
    halves, whole = orjson.loads(merged.stdout), orjson.loads((tmp_path / "whole.summary.json").read_bytes())
    for key in ("runs", "accepted_tokens", "drafted_tokens", "examined_bounds", "alpha_bounds", "requests_bounded"):
        assert halves[key] == whole[key], key
    assert halves["alpha"] is None and halves["alpha_bounds"][0] <= truth.alpha <= halves["alpha_bounds"][1]
    # the same units, so the same interval (up to the order of float sums)
    assert halves["alpha_bounds_ci"] == pytest.approx(whole["alpha_bounds_ci"], rel=1e-12)
    assert halves["alpha_bounds_standard_errors"] == pytest.approx(whole["alpha_bounds_standard_errors"], rel=1e-9)


def test_a_request_read_in_two_files_merges(tmp_path: Path) -> None:
    """llama.cpp responses of one id in two files are one request: its summary reads back and merges."""
    batch = sim.requests(3204, count=4, k=4, ragged=0.3)
    lines = [{**sim.llamacpp_completion(request), "id": "chatcmpl-1"} for request in batch]
    (tmp_path / "a.jsonl").write_bytes(sim.jsonl(lines[:3]))
    (tmp_path / "b.jsonl").write_bytes(sim.jsonl(lines[3:]))
    for name in "ab":
        audit(tmp_path / f"{name}.jsonl", "--summary-out", str(tmp_path / f"{name}.summary.json"))
    merged = invoke("merge", str(tmp_path / "a.summary.json"), str(tmp_path / "b.summary.json"))
    assert merged.exit_code == 0, merged.stderr
    data = orjson.loads(merged.stdout)
    truth = log_truth(batch)
    assert data["accepted_tokens"] == truth.accepted and data["requests_bounded"] == 1
    assert data["alpha_bounds"][0] <= truth.alpha <= data["alpha_bounds"][1]
