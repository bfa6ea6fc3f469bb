"""`audit` of per-request payloads: each request a cluster through every estimate, gate, merge, group and window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from msgspec.structs import replace

from specaccept_cli.pipeline import summarise
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.state import Summary
from tests import payloads as sim
from tests.helpers import invoke, run_process


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def truth_alpha(batch: list[sim.Request]) -> float:
    return sum(sum(r.accepted) for r in batch) / sum(r.examined for r in batch)


def audit_json(*args: str) -> dict:
    result = invoke("audit", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    data: dict = orjson.loads(result.stdout)
    return data


def test_vllm_payloads_give_the_exact_alpha_with_an_interval_over_requests(tmp_path: Path) -> None:
    batch = sim.requests(21, count=60, spread=0.5, ragged=0.2)
    path = write(tmp_path / "responses.jsonl", sim.jsonl([sim.vllm_response(r) for r in batch]))
    data = audit_json(str(path))
    assert data["runs"] == sum(r.steps for r in batch)
    assert data["alpha"] == pytest.approx(truth_alpha(batch), abs=1e-12)
    assert data["cluster_field"] == "request_id" and data["clusters"] == 60
    assert "cluster-robust over 60 clusters" in data["alpha_ci_method"]
    assert data["engine"]["requests"] == 60 and data["engine"]["formats"] == ["vllm-metrics"]


def test_every_engine_shape_reads_to_the_same_truth(tmp_path: Path) -> None:
    batch = sim.requests(22, count=25)
    expected = truth_alpha(batch)
    for name, writer in [
        ("trt.jsonl", sim.trtllm_response),
        ("sgl.jsonl", sim.sglang_generate),
        ("aiperf.jsonl", sim.aiperf_record),
        ("detailed.jsonl", lambda r: sim.vllm_response(r, detailed=True)),
    ]:
        data = audit_json(str(write(tmp_path / name, sim.jsonl([writer(r) for r in batch]))))
        assert data["alpha"] == pytest.approx(expected, abs=1e-12), name
        assert data["clusters"] == 25, name


def test_a_stream_capture_piped_into_a_real_process_is_read_by_content() -> None:
    batch = sim.requests(23, count=8)
    capture = sim.sse([sim.vllm_response(r, stream=True) for r in batch])
    result = run_process("audit", "-", "-o", "json", input=capture)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["clusters"] == 8


def test_totals_only_give_bounds_that_contain_the_truth(tmp_path: Path) -> None:
    batch = sim.requests(24, count=30, ragged=0.4)
    data = audit_json(str(write(tmp_path / "llama.jsonl", sim.jsonl([sim.llamacpp_completion(r) for r in batch]))))
    low, high = data["engine"]["alpha_bounds_all_intervals"]
    assert low <= truth_alpha(batch) <= high
    assert data["engine"]["bounded_intervals"] == 30 and data["alpha_bounds"] == [low, high]
    # Totals without a step count: runs are bounds holding the truth, never the 0 of no exact request.
    low_steps, high_steps = data["runs_bounds"]
    assert data["runs"] is None and low_steps <= sum(r.steps for r in batch) <= high_steps


def test_a_bad_payload_is_file_and_line_exit_2_or_skipped_and_counted(tmp_path: Path) -> None:
    batch = sim.requests(25, count=5)
    lines = [sim.vllm_response(r) for r in batch]
    lines[2]["metrics"]["speculative_decoding"]["num_spec_steps"] += 1
    path = write(tmp_path / "bad.jsonl", sim.jsonl(lines))
    failed = invoke("audit", str(path))
    assert failed.exit_code == 2
    assert f"{path}:3: bad per-request payload: the histogram counts" in failed.stderr
    assert "Traceback" not in failed.stderr
    skipped = invoke("audit", str(path), "-o", "json", "--on-error", "skip")
    assert skipped.exit_code == 0, skipped.stderr
    data = orjson.loads(skipped.stdout)
    assert data["clusters"] == 4 and data["engine"]["bad_lines"] == 1


def test_schema_drift_is_in_the_summary_once(tmp_path: Path) -> None:
    lines = [sim.vllm_response(r) for r in sim.requests(26, count=3)]
    for line in lines:
        line["metrics"]["speculative_decoding"]["num_rejected_tokens"] = 1
    path = write(tmp_path / "drift.jsonl", sim.jsonl(lines))
    data = audit_json(str(path))
    (drift,) = data["engine"]["schema_drift"]
    assert "num_rejected_tokens" in drift and data["clusters"] == 3
    table = invoke("audit", str(path))
    assert table.exit_code == 0
    assert table.stderr.count("specaccept: warning: vLLM vllm-metrics carries fields") == 1


def test_merged_halves_are_the_whole_with_the_same_clusters(tmp_path: Path) -> None:
    batch = sim.requests(27, count=40, spread=0.6)
    whole = write(tmp_path / "all.jsonl", sim.jsonl([sim.vllm_response(r) for r in batch]))
    first = write(tmp_path / "a.jsonl", sim.jsonl([sim.vllm_response(r) for r in batch[:25]]))
    second = write(tmp_path / "b.jsonl", sim.jsonl([sim.vllm_response(r) for r in batch[25:]]))
    for name, path in (("a.json", first), ("b.json", second), ("all.json", whole)):
        assert invoke("audit", str(path), "--summary-out", str(tmp_path / name), "-q").exit_code == 0
    merged = invoke("merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert merged.exit_code == 0, merged.stderr
    together, alone = orjson.loads(merged.stdout), orjson.loads((tmp_path / "all.json").read_bytes())
    for key in ("runs", "alpha", "alpha_ci", "clusters", "tokens_per_pass_ci"):
        assert together[key] == alone[key], key


def test_two_jobs_give_the_bytes_of_one(tmp_path: Path) -> None:
    batch = sim.requests(28, count=30)
    paths = [
        str(write(tmp_path / f"part{i}.jsonl", sim.jsonl([sim.vllm_response(r) for r in batch[i::3]])))
        for i in range(3)
    ]
    one = invoke("audit", *paths, "-o", "json", "-j", "1")
    two = invoke("audit", *paths, "-o", "json", "-j", "2")
    assert one.exit_code == two.exit_code == 0
    assert one.stdout == two.stdout


def test_groups_and_windows_carry_the_requests(tmp_path: Path) -> None:
    batch = sim.requests(29, count=30)
    lines = [sim.vllm_response(r) for r in batch]
    for index, line in enumerate(lines):
        line["model"] = "draft-a" if index % 2 else "draft-b"
    path = write(tmp_path / "g.jsonl", sim.jsonl(lines))
    data = audit_json(str(path), "--group-by", "model")
    assert sorted(data["groups"]) == ["draft-a", "draft-b"]
    assert sum(group["clusters"] for group in data["groups"].values()) == 30
    for group in data["groups"].values():
        assert "clusters of request_id" in group["alpha_ci_method"]
    windows = audit_json(str(path), "--window", "200")
    assert sum(window["runs"] for window in windows["windows"]) == data["runs"]
    typo = invoke("audit", str(path), "--group-by", "modle")
    assert typo.exit_code == 2 and "did you mean 'model'" in typo.stderr


def test_the_baseline_gate_compares_over_requests(tmp_path: Path) -> None:
    good = sim.requests(30, count=50)
    worse = [
        sim.Request(r.request_id, r.k, r.drafted, tuple(max(a - 1, 0) for a in r.accepted))
        for r in sim.requests(31, count=50)
    ]
    base = write(tmp_path / "base.jsonl", sim.jsonl([sim.vllm_response(r) for r in good]))
    assert invoke("audit", str(base), "--summary-out", str(tmp_path / "base.json"), "-q").exit_code == 0
    same = write(tmp_path / "same.jsonl", sim.jsonl([sim.vllm_response(r) for r in sim.requests(32, count=50)]))
    drop = write(tmp_path / "drop.jsonl", sim.jsonl([sim.vllm_response(r) for r in worse]))
    assert invoke("audit", str(same), "--baseline", str(tmp_path / "base.json"), "-q").exit_code == 0
    assert invoke("audit", str(drop), "--baseline", str(tmp_path / "base.json"), "-q").exit_code == 1


def test_summarise_as_a_library_takes_payloads_unchanged(tmp_path: Path) -> None:
    batch = sim.requests(33, count=12)
    path = write(tmp_path / "lib.jsonl", sim.jsonl([sim.trtllm_response(r) for r in batch]))
    summary = summarise([str(path)], plan=Plan())
    assert summary.clusters is not None and summary.clusters.clusters == 12
    assert np.array_equal(summary.counts[: batch[0].k + 1, : batch[0].k + 1], sim.truth_counts(batch))


def test_windows_of_time_place_each_request_at_its_created_time(tmp_path: Path) -> None:
    batch = sim.requests(34, count=24)
    lines = [sim.vllm_response(r) for r in batch]
    for index, line in enumerate(lines):
        line["created"] = 1787364000 + 600 * index  # on the hour, one request every ten minutes: six an hour
    path = write(tmp_path / "timed.jsonl", sim.jsonl(lines))
    data = audit_json(str(path), "--time-field", "created", "--window", "1h")
    assert [window["runs"] for window in data["windows"]] == [
        sum(r.steps for r in batch[hour * 6 : hour * 6 + 6]) for hour in range(4)
    ]
    del lines[3]["created"]
    untimed = invoke("audit", str(write(tmp_path / "untimed.jsonl", sim.jsonl(lines))), "--time-field", "created")
    assert untimed.exit_code == 2 and "untimed.jsonl:4: this request carries no time" in untimed.stderr


def test_requests_summed_in_blocks_are_the_requests_summed_one_by_one(tmp_path: Path, monkeypatch) -> None:
    from specaccept_cli.read.payloads import parse_payloads
    from specaccept_cli.summary import requests as reading

    batch = sim.requests(35, count=40, ragged=0.3)
    lines = [sim.vllm_response(r) for r in batch[:30]] + [sim.vllm_summary_only(r) for r in batch[30:]]  # some bounded
    path = write(tmp_path / "mixed.jsonl", sim.jsonl(lines))
    monkeypatch.setattr(reading, "BLOCK_REQUESTS", 7)
    in_blocks = summarise([str(path)])
    one_by_one = Summary()
    for item in parse_payloads(path.read_bytes().splitlines(), str(path)):
        line, record = item  # type: ignore[misc]
        part = reading.request_part(record, str(path), line, Plan(), lambda error: None)
        assert part is not None
        one_by_one = one_by_one + part.summary
    assert in_blocks.clusters == one_by_one.clusters and in_blocks.clusters is not None
    assert np.array_equal(in_blocks.counts, one_by_one.counts)
    lines_read = replace(in_blocks.engine, lines=0, metrics_lines=0, ignored_lines=0)  # the source's line counts
    assert lines_read == one_by_one.engine and one_by_one.engine.bounded > 0
