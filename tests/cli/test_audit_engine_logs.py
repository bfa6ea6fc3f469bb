"""`specaccept audit` on what serving engines write: metrics log lines and Prometheus scrapes, end to end."""

from __future__ import annotations

import gzip
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.pipeline import summarise
from specaccept_cli.summary.intervals import interval_runs, interval_time
from tests.engines import (
    counters,
    prom_text,
    sglang_meta,
    simulate,
    truth_hist,
    vllm_full_line,
)
from tests.helpers import fed_fifo, invoke, run_process
from tests.read.test_engine_logs import SAMPLES

K = 4
ORDINARY = (
    '(APIServer pid=4242) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=4242) INFO 11-30 13:00:01 [loggers.py:123] Engine 000: Avg prompt throughput: 52.3 tokens/s",
)


def server_log(seed: int = 3, intervals: int = 5) -> tuple[list[str], np.ndarray]:
    """A vLLM server log: ordinary lines around one metrics line per interval; and every run's accepted length."""
    lines: list[str] = []
    all_accepted = []
    for i in range(intervals):
        lengths, accepted = simulate(seed + i, runs=150 + 40 * i, k=K, alpha=0.75)
        lines += [*ORDINARY, vllm_full_line(*counters(lengths, accepted, K))]
        all_accepted.append(accepted)
    return lines, np.concatenate(all_accepted)


def write_lines(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def histogram(data: dict) -> list[int]:
    """The summary's accepted-length histogram as a list by a (it is keyed by a as text)."""
    return [data["accepted_histogram"].get(str(a), 0) for a in range(K + 1)]


def audit_json(*args: str) -> dict:
    result = invoke("audit", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    data: dict = orjson.loads(result.stdout)
    return data


def test_a_compressed_vllm_log_gives_the_exact_histogram_of_its_runs(tmp_path: Path) -> None:
    lines, accepted = server_log()
    data = audit_json(str(write_lines(tmp_path / "server.log.gz", lines)))
    examined = int(np.minimum(accepted + 1, K).sum())
    assert data["runs"] == accepted.shape[0]
    assert histogram(data) == truth_hist(accepted, K)
    assert data["alpha"] == pytest.approx(accepted.sum() / examined, abs=0)
    assert data["expected_alpha"] is None  # no r, no p/q: r-free and r-based results are null
    engine = data["engine"]
    assert engine["engines"] == ["vllm"] and engine["intervals"] == engine["recovered_intervals"] == 5
    assert engine["lines"] == 15 and engine["metrics_lines"] == 5 and engine["ignored_lines"] == 10
    assert engine["alpha_bounds_all_intervals"] is None


def test_server_output_piped_into_stdin_is_recognised(tmp_path: Path) -> None:
    lines, accepted = server_log(seed=9, intervals=2)
    result = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", "-", "-o", "json"],
        input=("\n".join(lines) + "\n").encode(),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert histogram(orjson.loads(result.stdout)) == truth_hist(accepted, K)


def test_the_library_front_door_reads_engine_logs_too(tmp_path: Path) -> None:
    lines, accepted = server_log(seed=5, intervals=3)
    summary = summarise([str(write_lines(tmp_path / "server.log", lines))])
    assert summary.runs == accepted.shape[0] and summary.accepted_tokens == accepted.sum()
    assert summary.engine is not None and summary.engine.recovered == 3


@pytest.mark.parametrize("output", ["jsonl", "csv"])
def test_per_run_output_is_refused_before_anything_is_written(tmp_path: Path, output: str) -> None:
    path = write_lines(tmp_path / "server.log", server_log(intervals=1)[0])
    result = invoke("audit", str(path), "-o", output)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "interval counters, not runs" in result.stderr and "-o table, json or markdown" in result.stderr


def test_per_run_output_of_engine_output_through_a_pipe_is_refused_once_read(tmp_path: Path) -> None:
    """A pipe given as a path is not looked at before the read (that would eat its bytes): refused after it."""
    data = write_lines(tmp_path / "server.log", server_log(intervals=2)[0]).read_bytes()
    with fed_fifo(tmp_path / "server.fifo", data) as fifo:
        result = run_process("audit", str(fifo), "-o", "jsonl", timeout=60)
    assert result.returncode == 2
    assert result.stdout == b""
    assert b"output was read: engine metrics hold interval counters, not runs" in result.stderr
    assert b"Traceback" not in result.stderr


def test_two_scrapes_audit_their_difference_and_a_restart_is_said(tmp_path: Path) -> None:
    lengths, accepted = simulate(21, runs=900, k=K, alpha=0.7)
    first = counters(lengths[:300], accepted[:300], K)
    both = counters(lengths, accepted, K)
    before = write_lines(tmp_path / "before.prom", prom_text(first))
    after = write_lines(tmp_path / "after.prom", prom_text(both))
    data = audit_json(str(before), str(after))
    assert data["runs"] == 600
    assert histogram(data) == truth_hist(accepted[300:], K)
    assert data["engine"]["counter_resets"] == 0
    # The other way round the counters went down: a restart, counted from zero like increase().
    swapped = audit_json(str(after), str(before))
    assert swapped["runs"] == 300 and swapped["engine"]["counter_resets"] == 1
    assert any("counter reset" in example for example in swapped["engine"]["examples"])


def test_group_by_a_label_and_a_label_no_interval_has(tmp_path: Path) -> None:
    lengths, accepted = simulate(4, runs=400, k=K, alpha=0.8)
    scrape = prom_text(counters(lengths[:100], accepted[:100], K), 'engine="0",model_name="small"')
    scrape += prom_text(counters(lengths[100:], accepted[100:], K), 'engine="0",model_name="large"')
    path = write_lines(tmp_path / "metrics.prom", scrape)
    data = audit_json(str(path), "--group-by", "model_name")
    assert {key: group["runs"] for key, group in data["groups"].items()} == {"small": 100, "large": 300}
    result = invoke("audit", str(path), "--group-by", "modle")
    assert result.exit_code == 2
    assert "no interval carries the label 'modle'" in result.stderr and "model_name" in result.stderr
    assert "did you mean" not in result.stderr  # too far from any label to guess
    result = invoke("audit", str(path), "--group-by", "model_nme")
    assert result.exit_code == 2
    assert "to group by; did you mean 'model_name'? (labels: engine, model_name)" in result.stderr


def test_a_bad_metrics_line_fails_or_is_skipped_and_quarantined(tmp_path: Path) -> None:
    lines, _ = server_log(intervals=2)
    bad = lines[2].replace("Accepted: ", "Accepted: 99999", 1)  # per-position counts no longer add up
    path = write_lines(tmp_path / "server.log", [*lines, bad])
    failed = invoke("audit", str(path))
    assert failed.exit_code == 2 and f"{path}:7:" in failed.stderr
    quarantine = tmp_path / "bad.log"
    skipped = invoke("audit", str(path), "--on-error", "skip", "--quarantine", str(quarantine), "-o", "json")
    assert skipped.exit_code == 0, skipped.stderr
    data = orjson.loads(skipped.stdout)
    assert data["skipped_rows"] == 1 and data["engine"]["bad_lines"] == 1 and data["engine"]["intervals"] == 2
    assert quarantine.read_text() == bad + "\n"


def test_hostile_label_text_stays_data_in_the_terminal(tmp_path: Path) -> None:
    lengths, accepted = simulate(8, runs=50, k=K, alpha=0.8)
    labels = 'engine="0",model_name="[bold red]x[/] \\u001b[2J"'
    path = write_lines(tmp_path / "metrics.prom", prom_text(counters(lengths, accepted, K), labels))
    result = invoke("audit", str(path), "--group-by", "model_name")
    assert result.exit_code == 0, result.stderr
    assert "[bold red]x[/]" in result.stdout and "\x1b" not in result.stdout


def test_gates_baseline_summary_out_and_merge_work_on_engine_metrics(tmp_path: Path) -> None:
    saved = []
    for seed in (30, 31):
        log = write_lines(tmp_path / f"server-{seed}.log", server_log(seed=seed, intervals=4)[0])
        saved.append(tmp_path / f"summary-{seed}.json")
        result = invoke("audit", str(log), "--summary-out", str(saved[-1]), "--min-alpha", "0.99")
        assert result.exit_code == 1 and "--min-alpha" in result.stderr
    merged = invoke("merge", *map(str, saved))
    assert merged.exit_code == 0, merged.stderr
    parts = [orjson.loads(path.read_bytes()) for path in saved]
    total = orjson.loads(merged.stdout)
    assert total["engine"]["intervals"] == 8 and total["runs"] == sum(part["runs"] for part in parts)
    compared = invoke("audit", str(tmp_path / "server-30.log"), "--baseline", str(saved[1]))
    assert compared.exit_code == 0, compared.stderr


def test_bounds_only_logs_give_bounds_not_a_number(tmp_path: Path) -> None:
    data = audit_json(str(SAMPLES / "llamacpp.log"))
    # The four per-request lines' totals, over the whole log: 158 + 200 + 105 + 381 of 289 + 347 + 198 + 620.
    assert data["accepted_tokens"] == 844 and data["drafted_tokens"] == 1454
    assert data["acceptance_rate"] == 844 / 1454 and data["identification"]["acceptance_rate"] == "exact"
    # llama.cpp writes no step count: runs, tokens per pass and alpha are bounds, never a subset's number.
    assert data["runs"] is None and data["alpha"] is None and data["tokens_per_pass"] is None
    low_steps, high_steps = data["runs_bounds"]
    assert 4 <= low_steps < high_steps <= 1454  # each step drafted at least one token
    low, high = data["alpha_bounds"]
    assert 0 < low < high < 1 and data["engine"]["alpha_bounds_all_intervals"] == [low, high]
    ci_low, ci_high = data["alpha_bounds_ci"]
    assert ci_low < low and high < ci_high <= 1
    assert data["identification"]["alpha"] == "bounded" and data["intervals_bounded"] == 4
    assert data["engine"]["running_totals"] == 1  # llama.cpp's statistics line repeats the requests' counts
    markdown = invoke("audit", str(SAMPLES / "llamacpp.log"), "-o", "markdown")
    assert "### Engine metrics: llama.cpp" in markdown.stdout and "draft acceptance" in markdown.stdout


def test_format_named_for_compressed_stdin_and_a_log_without_metrics(tmp_path: Path) -> None:
    lines, accepted = server_log(seed=40, intervals=2)
    result = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", "-", "--format", "vllm-log", "-o", "json"],
        input=gzip.compress(("\n".join(lines) + "\n").encode()),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["runs"] == accepted.shape[0]
    plain = write_lines(tmp_path / "plain.log", list(ORDINARY))
    missing = invoke("audit", str(plain), "--format", "vllm-log")
    assert missing.exit_code == 2 and "no vllm-log metrics lines among its 2 lines" in missing.stderr


def test_sglang_responses_in_a_jsonl_file_are_recognised_and_grouped_by_request(tmp_path: Path) -> None:
    metas = [sglang_meta(80 + i, 25, 3, 0.75, f"req-{i}") for i in range(4)]
    path = write_lines(tmp_path / "responses.jsonl.gz", [orjson.dumps({"meta_info": m}).decode() for m, _ in metas])
    data = audit_json(str(path), "--group-by", "id")
    truth = np.concatenate([accepted for _, accepted in metas])
    assert data["runs"] == 100 and data["accepted_tokens"] == truth.sum()
    # Read as per-request payloads: each request is a cluster (the old interval reader stays under --format).
    assert data["engine"]["formats"] == ["sglang-meta-info"] and data["engine"]["recovered_intervals"] == 4
    assert data["engine"]["requests"] == 4 and "4 clusters of request_id" in data["alpha_ci_method"]
    assert sorted(data["groups"]) == ["req-0", "req-1", "req-2", "req-3"]
    # The same file named as runs is read as runs, and says what is missing.
    as_runs = invoke("audit", str(path), "--format", "jsonl")
    assert as_runs.exit_code == 2 and "missing field 'p'" in as_runs.stderr


# ---------------------------------------------------------------------------------------------
# Intervals over time: windows and the drift test


def test_an_intervals_runs_are_spread_so_any_window_gets_its_share() -> None:
    counts = np.zeros((5, 5), dtype=np.int64)
    counts[4] = [90, 40, 25, 10, 35]
    k, accepted = interval_runs(counts)
    assert np.bincount(accepted, minlength=5).tolist() == counts[4].tolist() and set(k.tolist()) == {4}
    share = np.cumsum(accepted) - np.arange(1, accepted.shape[0] + 1) * accepted.mean()
    assert np.abs(share).max() <= 5 * 4  # at most (cells x k) tokens away from proportional, anywhere


def test_vllm_clock_times_take_the_latest_year_not_in_the_future() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    assert interval_time("01-02 11:59:00", now) == datetime(2026, 1, 2, 11, 59, tzinfo=UTC).timestamp()
    assert interval_time("12-31 23:00:00", now) == datetime(2025, 12, 31, 23, tzinfo=UTC).timestamp()
    assert interval_time("2025-03-05 10:21:05") == datetime(2025, 3, 5, 10, 21, 5, tzinfo=UTC).timestamp()
    assert interval_time("1764507600000") == 1764507600.0  # a Prometheus sample time stamp, in ms
    assert interval_time("yesterday") is None and interval_time(None) is None


def stepped_log(step_at: int, intervals: int = 40) -> tuple[list[str], int]:
    """A vLLM log whose alpha steps from 0.8 to 0.65 at interval `step_at`, one interval a minute."""
    lines, runs = [], 0
    for i in range(intervals):
        lengths, accepted = simulate(500 + i, runs=300, k=K, alpha=0.8 if i < step_at else 0.65)
        clock = f"11-30 12:{i:02d}:00"
        lines.append(vllm_full_line(*counters(lengths, accepted, K)).replace("11-30 13:00:01", clock))
        runs += 300
    return lines, runs


def test_engine_intervals_have_windows_and_a_drift_test(tmp_path: Path) -> None:
    lines, runs = stepped_log(step_at=20)
    path = write_lines(tmp_path / "server.log", lines)
    drifting = invoke("audit", str(path), "--check-drift", "-o", "json")
    assert drifting.exit_code == 1 and "drift" in drifting.stderr
    data = orjson.loads(drifting.stdout)
    assert data["windows_by"]["order"] == "input" and sum(w["runs"] for w in data["windows"]) == runs
    drift = data["drift"]
    assert drift["p_value"] < 1e-6 and abs(drift["change_at"] - runs / 2) < runs * 0.05
    assert drift["alpha_before"] > 0.75 > drift["alpha_after"]
    by_minute = audit_json(str(path), "--time-field", "timestamp", "--window", "5m")
    assert [w["runs"] for w in by_minute["windows"]] == [1500] * 8
    steady = write_lines(tmp_path / "steady.log", stepped_log(step_at=40)[0])
    assert invoke("audit", str(steady), "--check-drift", "--significance", "0.001").exit_code == 0


def test_a_time_field_needs_time_stamps_on_the_metrics_lines(tmp_path: Path) -> None:
    result = invoke("audit", str(SAMPLES / "vllm-v1-perpos.log"), "--time-field", "timestamp")
    assert result.exit_code == 0, result.stderr  # MM-DD hh:mm:ss: placed in the latest such moment
    lengths, accepted = simulate(9, runs=200, k=K, alpha=0.7)
    scrape = write_lines(tmp_path / "now.prom", prom_text(counters(lengths, accepted, K)))  # no time stamp
    timeless = invoke("audit", str(scrape), "--time-field", "timestamp")
    assert timeless.exit_code == 2 and "carries no time stamp" in timeless.stderr


def test_the_report_of_an_engine_log_shows_what_the_engine_printed(tmp_path: Path) -> None:
    lines, runs = stepped_log(step_at=20)
    report = tmp_path / "report.html"
    result = invoke("report", str(write_lines(tmp_path / "server.log", lines)), "-o", str(report))
    assert result.exit_code == 0, result.stderr
    page = report.read_text()
    assert "<h2>Engine metrics: vLLM</h2>" in page and "Avg Draft acceptance rate" in page
    assert 'data-plot="timeline"' in page and f"{runs:,}" in page
