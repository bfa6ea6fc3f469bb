"""The first screen on engine input that only bounds alpha: whole-input figures equal to a seeded truth,
bounds that hold it, and gates and baselines taken on them, in every view (terminal, markdown, HTML, JSON,
the GitHub step summary)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.engines import counters, llama_perpos_line, prom_text, simulate, vllm_full_line
from tests.helpers import invoke, invoke_env
from tests.payloads import (
    Request,
    aiperf_record,
    jsonl,
    llamacpp_completion,
    requests,
    sglang_generate,
    trtllm_response,
    vllm_response,
    vllm_summary_only,
)


class Truth:
    """The figures of a batch of requests, from its steps."""

    def __init__(self, batch: list[Request]) -> None:
        self.accepted = sum(sum(r.accepted) for r in batch)
        self.drafted = sum(sum(r.drafted) for r in batch)
        self.steps = sum(r.steps for r in batch)
        self.examined = sum(r.examined for r in batch)
        self.alpha = self.accepted / self.examined
        self.tokens_per_pass = 1 + self.accepted / self.steps
        self.rate = self.accepted / self.drafted


@pytest.fixture(scope="module")
def short_drafts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth, list[Request]]:
    """300 requests in vLLM's summary shape, a tenth of their steps drafted short: most requests only bounded."""
    batch = requests(11, count=300, ragged=0.1, steps=(5, 110))
    path = tmp_path_factory.mktemp("payloads") / "summary.jsonl"
    path.write_bytes(jsonl([vllm_summary_only(r) for r in batch]))
    return path, Truth(batch), batch


def audit_json(*args: str) -> dict:
    result = invoke("audit", *args, "-o", "json", "-q")
    assert result.exit_code in (0, 1), result.stderr
    data: dict = orjson.loads(result.stdout)
    return data


def audited(directory: Path, writer: Callable[[Request], dict], batch: list[Request]) -> tuple[Path, dict]:
    """The batch written by `writer` as a JSONL file, and its `audit -o json`."""
    path = directory / f"{writer.__name__}.jsonl"
    path.write_bytes(jsonl([writer(r) for r in batch]))
    return path, audit_json(str(path))


def shown_bounds(text: str) -> tuple[float, float]:
    found = re.search(r"between (\d\.\d{4}) and (\d\.\d{4})", text)
    assert found, text
    return float(found.group(1)), float(found.group(2))


def test_whole_input_figures_equal_the_truth_and_the_bounds_hold_it(short_drafts: tuple[Path, Truth, list]) -> None:
    path, truth, batch = short_drafts
    data = audit_json(str(path))
    assert data["runs"] == truth.steps
    assert data["accepted_tokens"] == truth.accepted and data["drafted_tokens"] == truth.drafted
    assert data["tokens_per_pass"] == pytest.approx(truth.tokens_per_pass, rel=1e-12)
    assert data["acceptance_rate"] == pytest.approx(truth.rate, rel=1e-12)
    histogram = [0] * 5
    for request in batch:
        for a in request.accepted:
            histogram[a] += 1
    assert [data["accepted_histogram"][str(a)] for a in range(5)] == histogram
    assert data["alpha"] is None and data["identification"]["alpha"] == "bounded"
    low, high = data["alpha_bounds"]
    assert low <= truth.alpha <= high
    ci_low, ci_high = data["alpha_bounds_ci"]
    assert ci_low < low <= high < ci_high
    assert data["requests_exact"] + data["requests_bounded"] == 300 and data["requests_bounded"] > 200
    assert data["clustering"] == {"over": "requests", "field": "request_id", "requests": 300}
    # Nothing from the exact requests alone: no i.i.d. check, no per-position conditional rates, no conventions.
    assert data["iid_check"] is None and data["per_position"] == [] and data["conventions"] == {}


def test_the_headline_says_bounded_in_words_in_every_view(
    short_drafts: tuple[Path, Truth, list], tmp_path: Path
) -> None:
    path, truth, _ = short_drafts
    data = audit_json(str(path))
    low, high = data["alpha_bounds"]
    terminal = invoke("audit", str(path)).stdout
    flat = " ".join(terminal.replace("│", " ").split())
    assert shown_bounds(flat) == (round(low, 4), round(high, 4))
    assert "of 300 requests drafted short" in flat and f"runs {truth.steps:,}" in flat
    assert f"{truth.tokens_per_pass:.4f} observed" in flat and "predicted" not in flat.split("tokens per pass")[1][:60]
    assert "vLLM's rate" in flat and "alpha looks constant" not in flat
    markdown = invoke("audit", str(path), "-o", "markdown").stdout
    assert shown_bounds(markdown) == (round(low, 4), round(high, 4)) and "drafted short" in markdown
    report = tmp_path / "report.html"
    assert invoke("report", str(path), "-o", str(report)).exit_code == 0
    html = report.read_text()
    assert "alpha (accepted / examined), bounds" in html and f"[{low:.4f}, {high:.4f}]" in html
    summary = tmp_path / "step-summary.md"
    github = invoke_env({"GITHUB_STEP_SUMMARY": str(summary)}, "audit", str(path), "--github", "-q")
    assert github.exit_code == 0, github.stderr
    assert shown_bounds(summary.read_text()) == (round(low, 4), round(high, 4))


def test_gates_act_on_the_whole_input_and_on_the_bounds(short_drafts: tuple[Path, Truth, list]) -> None:
    path, truth, _ = short_drafts
    data = audit_json(str(path))
    ci_low, ci_high = data["alpha_bounds_ci"]

    def status(*gate: str) -> tuple[int, str]:
        result = invoke("audit", str(path), *gate, "-q", "-o", "json")
        return result.exit_code, result.stderr

    # Exact over the whole input: the gate is on the true value, on either side of it.
    assert status("--min-tokens-per-pass", f"{truth.tokens_per_pass - 0.005:.6f}")[0] == 0
    assert status("--min-tokens-per-pass", f"{truth.tokens_per_pass + 0.005:.6f}")[0] == 1
    assert status("--min-acceptance-rate", f"{truth.rate - 0.0005:.6f}")[0] == 0
    assert status("--min-acceptance-rate", f"{truth.rate + 0.0005:.6f}")[0] == 1
    # Bounded: passed below the interval, failed above it, inconclusive inside (a warning; --strict-bounds fails).
    assert status("--min-alpha", f"{ci_low - 0.01:.4f}")[0] == 0
    code, stderr = status("--min-alpha", f"{ci_high + 0.01:.4f}")
    assert code == 1 and "top of its bounds' 95% interval" in stderr
    inside = f"{(ci_low + ci_high) / 2:.4f}"
    assert status("--min-alpha", inside)[0] == 0
    warned = invoke("audit", str(path), "--min-alpha", inside, "-o", "json")
    assert "the input cannot decide it" in warned.stderr and "--strict-bounds" in warned.stderr
    code, stderr = status("--min-alpha", inside, "--strict-bounds")
    assert code == 1 and "gate inconclusive" in stderr


def test_a_baseline_on_bounds_regresses_only_when_the_favourable_values_do(tmp_path: Path) -> None:
    same = [requests(seed, count=150, ragged=0.1, steps=(20, 80)) for seed in (21, 22)]
    worse = [
        Request(r.request_id, r.k, r.drafted, tuple(max(0, a - 1) if i % 2 else a for i, a in enumerate(r.accepted)))
        for r in requests(23, count=150, ragged=0.1, steps=(20, 80))
    ]
    paths = []
    for name, batch in (("base", same[0]), ("same", same[1]), ("worse", worse)):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(jsonl([vllm_summary_only(r) for r in batch]))
        paths.append(path)
    base_json = tmp_path / "base.json"
    assert invoke("audit", str(paths[0]), "--summary-out", str(base_json), "-q", "-o", "json").exit_code == 0
    ok = invoke("audit", str(paths[1]), "--baseline", str(base_json), "-o", "json")
    comparison = orjson.loads(ok.stdout)["comparison"]
    assert ok.exit_code == 0 and comparison["alpha"]["verdict"] == "ok"
    assert comparison["alpha"]["baseline_bounds"] is not None and comparison["alpha"]["current_bounds"] is not None
    # The detectable drop is one figure: --max-drop plus the part beyond it.
    alpha = comparison["alpha"]
    assert alpha["detectable_drop"] == pytest.approx(comparison["max_drop"] + alpha["minimum_detectable_drop"])
    bad = invoke("audit", str(paths[2]), "--baseline", str(base_json), "-o", "json")
    assert bad.exit_code == 1 and "regressed" in bad.stderr


def test_llama_cpp_timings_are_never_a_blank_ok(tmp_path: Path) -> None:
    batch = requests(31, count=50, ragged=0.2)
    truth = Truth(batch)
    path, data = audited(tmp_path, llamacpp_completion, batch)
    assert data["accepted_tokens"] == truth.accepted and data["drafted_tokens"] == truth.drafted
    low_steps, high_steps = data["runs_bounds"]
    assert low_steps <= truth.steps <= high_steps and data["runs"] is None
    low, high = data["alpha_bounds"]
    assert low <= truth.alpha <= high
    low_tpp, high_tpp = data["tokens_per_pass_bounds"]
    assert low_tpp <= truth.tokens_per_pass <= high_tpp
    flat = " ".join(invoke("audit", str(path)).stdout.replace("│", " ").split())
    assert "llama.cpp's draft acceptance" in flat and "vLLM's rate" not in flat
    assert f"between {low_steps:,} and {high_steps:,}" in flat and "give totals only" in flat
    assert "runs 0" not in flat and "None" not in flat


def test_llama_cpp_lines_name_the_engine_and_v0_is_null(tmp_path: Path) -> None:
    lines, accepted_total, drafted_total = [], 0, 0
    for seed in range(6):
        lengths, accepted = simulate(seed, 40, 4, 0.7, variable=True)
        steps, drafted, kept, per_position = counters(lengths, accepted, 4)
        lines.append(
            f"slot print_timing: id  0 | task {seed} | " + llama_perpos_line(drafted, kept, steps, per_position)
        )
        accepted_total += kept
        drafted_total += drafted
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    data = audit_json(str(path))
    assert data["accepted_tokens"] == accepted_total and data["drafted_tokens"] == drafted_total
    assert data["conventions"] == {} or data["conventions"]["vllm_v0"]["acceptance_rate"] is None
    flat = " ".join(invoke("audit", str(path)).stdout.replace("│", " ").split())
    assert "llama.cpp's draft acceptance" in flat and "ok runs 0" not in flat


def test_exact_payloads_keep_their_point_estimate(tmp_path: Path) -> None:
    batch = requests(41, count=40, ragged=0.2)
    truth = Truth(batch)
    _, data = audited(tmp_path, detailed, batch)
    assert data["alpha"] == pytest.approx(truth.alpha, rel=1e-12) and data["alpha_bounds"] is None
    assert data["identification"]["alpha"] == "exact"


def detailed(request: Request) -> dict:
    return vllm_response(request, detailed=True)


def aiperf_summary(request: Request) -> dict:
    """An AIPerf record without the optional per-step arrays: a histogram and totals."""
    record = aiperf_record(request)
    for key in ("per_step_accepted", "per_step_drafted"):
        del record["spec_decode_acceptance"][key]
    return record


@pytest.mark.parametrize(
    "writer", [vllm_summary_only, trtllm_response, aiperf_summary, llamacpp_completion], ids=lambda w: w.__name__
)
def test_every_payload_shape_gives_whole_input_figures_and_bounds_holding_the_truth(writer, tmp_path: Path) -> None:
    batch = requests(51, count=60, ragged=0.15)
    truth = Truth(batch)
    path, data = audited(tmp_path, writer, batch)
    assert data["accepted_tokens"] == truth.accepted and data["drafted_tokens"] == truth.drafted
    assert data["acceptance_rate"] == pytest.approx(truth.rate, rel=1e-12)
    how = data["identification"]
    if how["runs"] == "exact":
        assert data["runs"] == truth.steps
        assert data["tokens_per_pass"] == pytest.approx(truth.tokens_per_pass, rel=1e-12)
    else:
        low, high = data["runs_bounds"]
        assert low <= truth.steps <= high
        low, high = data["tokens_per_pass_bounds"]
        assert low <= truth.tokens_per_pass <= high
    assert how["alpha"] == "bounded" and data["alpha"] is None
    low, high = data["alpha_bounds"]
    assert low <= truth.alpha <= high
    headline = " ".join(invoke("audit", str(path)).stdout.replace("│", " ").split())
    assert shown_bounds(headline) == (round(low, 4), round(high, 4)) and "ok runs 0" not in headline


def test_sglang_payloads_say_their_full_drafts_assumption(tmp_path: Path) -> None:
    # Only a pass that accepted all k drafts proves a chain of k (an EAGLE tree's nodes are counted the same way,
    # read.payloads.sglang.chain_width): requests without one are bounded, so these are the ones that have one.
    batch = [r for r in requests(52, count=120) if max(r.accepted) == r.k][:40]
    assert len(batch) == 40
    truth = Truth(batch)
    path, data = audited(tmp_path, sglang_generate, batch)
    assert data["alpha"] == pytest.approx(truth.alpha, rel=1e-12) and data["runs"] == truth.steps
    assert data["identification"]["alpha"] == "exact if every draft was full"
    headline = " ".join(invoke("audit", str(path)).stdout.replace("│", " ").split())
    assert "SGLang's accept rate" in headline and "exact only if every draft was full" in headline


def test_vllm_lines_and_scrapes_of_ragged_drafts_give_whole_input_figures(tmp_path: Path) -> None:
    """Variable draft lengths (an n-gram drafter): vLLM's counters pin steps, accepted and drafted, not alpha."""
    log, scrape, totals, examined = [], [], [0, 0, 0, [0] * 5], 0
    first = (0, 0, 0)
    for seed in range(8):
        lengths, accepted = simulate(100 + seed, 300, 5, 0.72, variable=True)
        drafts, drafted, kept, per_position = counters(lengths, accepted, 5)
        log.append(vllm_full_line(drafts, drafted, kept, per_position))
        examined += int(np.minimum(accepted + 1, lengths).sum())
        totals = [
            totals[0] + drafts,
            totals[1] + drafted,
            totals[2] + kept,
            [a + b for a, b in zip(totals[3], per_position)],
        ]
        scrape += [*prom_text((totals[0], totals[1], totals[2], totals[3])), ""]
        first = first if seed else (drafts, drafted, kept)
    steps, drafted, kept = totals[0], totals[1], totals[2]
    for name, lines in (("server.log", log), ("metrics.prom", scrape)):
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        data = audit_json(str(path))
        # A series of scrapes counts from its first scrape: the differences after it.
        base = (0, 0, 0) if name == "server.log" else first
        assert data["accepted_tokens"] == kept - base[2] and data["drafted_tokens"] == drafted - base[1], name
        assert data["runs"] == steps - base[0], name
        if name == "server.log":
            assert data["tokens_per_pass"] == pytest.approx(1 + kept / steps, rel=1e-12)
            low, high = data["alpha_bounds"]
            assert low <= kept / examined <= high and data["alpha"] is None
        headline = " ".join(invoke("audit", str(path)).stdout.replace("│", " ").split())
        assert "vLLM's rate" in headline and "ok runs 0" not in headline


def test_a_followed_stream_of_bounded_payloads_shows_the_bounds_live(short_drafts: tuple[Path, Truth, list]) -> None:
    path, truth, _ = short_drafts
    with path.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "specaccept_cli", "audit", "--follow", "--every", "1s", "-o", "jsonl"],
            stdin=stdin,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    records = [orjson.loads(line) for line in done.stdout.splitlines() if line.strip()]
    total = next(record["total"] for record in reversed(records) if "total" in record)
    assert total["runs"] == truth.steps and total["accepted_tokens"] == truth.accepted
    assert total["alpha"] is None and total["identification"]["alpha"] == "bounded"
    low, high = total["alpha_bounds"]
    assert low <= truth.alpha <= high
