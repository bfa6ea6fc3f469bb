"""Edge cases found by review: pipes given as paths, odd option values, colliding names, absurd sizes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import FIRST_EXAMPLE, invoke, jsonl_bytes, run_process, write_jsonl


def test_a_named_pipe_is_read_once_with_parallel_jobs(tmp_path: Path) -> None:
    """`audit <(zcat logs.gz)` hands over a pipe as a path: sniffing its format must not eat its bytes."""
    rows = [FIRST_EXAMPLE] * 20_000
    fifo = tmp_path / "logs.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as pipe:
            pipe.write(jsonl_bytes(rows))

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        result = run_process("audit", str(fifo), "-o", "json", "--jobs", "2", timeout=60)
    finally:
        writer.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 20_000


def test_parquet_column_error_always_exits_2(tmp_path: Path) -> None:
    """A column of the wrong type ends the read while a background thread decodes ahead: never an abort."""
    pq.write_table(
        pa.table({"p": ["x"] * 200_000, "q": [[0.5]] * 200_000, "r": [[0.1]] * 200_000}), tmp_path / "s.parquet"
    )
    for _ in range(6):
        result = run_process("audit", str(tmp_path / "s.parquet"), "-o", "json")
        assert result.returncode == 2, result.stderr
        assert b"column 'p' is string, not a list of numbers" in result.stderr


@pytest.mark.parametrize("value", [b"1e300", b"1180591620717411303424", b"-1", b"1.5", b'"3"'])
def test_reported_values_that_are_not_counts(tmp_path: Path, value: bytes) -> None:
    path = tmp_path / "rep.jsonl"
    good = orjson.dumps({**FIRST_EXAMPLE, "rep2": 1})
    path.write_bytes(good + b"\n" + orjson.dumps(FIRST_EXAMPLE)[:-1] + b',"rep2":' + value + b"}\n")
    result = invoke("audit", str(path), "--reported-field", "rep2")
    assert result.exit_code == 2
    assert f"{path}:2: 'rep2' is " in result.stderr and "not a non-negative count" in result.stderr


def test_bad_reported_counts_are_ordered_and_quarantined_alike_in_one_or_two_processes(tmp_path: Path) -> None:
    # Every 10 lines: line 1 has a reported count that is not one, line 2 a value error.
    block = [{**FIRST_EXAMPLE, "reported": "bad"}, {"p": [0.5], "q": [0.0], "r": [0.1], "reported": 0}]
    block += [{**FIRST_EXAMPLE, "reported": 1}] * 8
    path = write_jsonl(tmp_path / "mixed.jsonl", block * 3000)
    outputs = []
    for jobs in ("1", "2"):
        quarantine = tmp_path / f"q{jobs}.jsonl"
        args = ["--reported-field", "reported", "--on-error", "skip", "--quarantine", str(quarantine), "--jobs", jobs]
        result = run_process("audit", str(path), "-o", "json", *args)
        assert result.returncode == 0, result.stderr
        summary = orjson.loads(result.stdout)
        assert summary["skipped_rows"] == 6000
        assert [error["line"] for error in summary["errors"][:4]] == [1, 2, 11, 12]
        assert quarantine.read_bytes().count(b'"reported":"bad"') == 3000  # rows dropped for their count too
        outputs.append((summary["errors"], quarantine.read_bytes()))
    assert outputs[0] == outputs[1]
    failing = invoke("audit", str(path), "--reported-field", "reported")
    assert f"{path}:1: 'reported' is string 'bad'" in failing.stderr


def test_parquet_reported_nulls_are_quarantined(tmp_path: Path) -> None:
    table = pa.table({"p": [[0.5], [0.5]], "q": [[0.5], [0.5]], "r": [[0.1], [0.1]], "reported": [1, None]})
    pq.write_table(table, tmp_path / "rep.parquet")
    quarantine = tmp_path / "q.jsonl"
    args = ["--reported-field", "reported", "--on-error", "skip", "--quarantine", str(quarantine), "-o", "json"]
    result = invoke("audit", str(tmp_path / "rep.parquet"), *args)
    assert orjson.loads(result.stdout)["skipped_rows"] == 1
    assert orjson.loads(quarantine.read_bytes().splitlines()[0])["reported"] is None


def test_absurd_draft_lengths_are_bad_rows_not_memory(tmp_path: Path) -> None:
    long_run = {"p": [0.5] * 1025, "q": [0.5] * 1025, "r": [0.1] * 1025}
    path = write_jsonl(tmp_path / "long.jsonl", [FIRST_EXAMPLE, long_run])
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 2
    assert f"{path}:2: draft of 1025 tokens is longer than the 1024 a run may have" in result.stderr
    ok = write_jsonl(tmp_path / "ok.jsonl", [{"p": [0.5] * 1024, "q": [0.5] * 1024, "r": [0.1] * 1024}])
    assert orjson.loads(invoke("audit", str(ok), "-o", "json").stdout)["accepted_tokens"] == 1024
    greedy = write_jsonl(tmp_path / "greedy.jsonl", [{"d": [1] * 2000, "t": [1] * 2000}])
    result = invoke("audit", str(greedy), "--draft-tokens-field", "d", "--target-tokens-field", "t")
    assert "draft of 2000 tokens is longer" in result.stderr
    assert invoke("simulate", "--runs", "1", "--alpha", "0.5", "--k", "2000").exit_code == 2


@pytest.mark.parametrize("name", ["k", "source", "accepted", "line", "emitted"])
def test_id_fields_cannot_overwrite_the_tool_s_own_columns(tmp_path: Path, name: str) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{**FIRST_EXAMPLE, name: 99}])
    result = invoke("audit", str(path), "-o", "jsonl", "--id-field", name)
    assert result.exit_code == 2
    assert "would collide with the per-run column" in result.stderr
    reported = invoke("audit", str(path), "-o", "jsonl", "--reported-field", name, "--id-field", "mismatch")
    assert reported.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "-", "--check-sampler", "--sampler-significance", "nan"],
        ["audit", "-", "--cost-ratio", "nan"],
        ["audit", "-", "--cost-ratio", "inf"],
        ["expect", "--alpha", "nan", "--k", "4"],
        ["simulate", "--runs", "2", "--alpha", "nan", "--k", "3"],
        ["simulate", "--runs", "2", "--alpha", "0.5", "--k", "3", "--seed", "-1"],
        ["check", "--p", "[" * 100_000, "--q", "0.5", "--r", "0.1"],
    ],
)
def test_odd_option_values_are_usage_errors(args: list[str]) -> None:
    result = invoke(*args, input=jsonl_bytes([FIRST_EXAMPLE]))
    assert result.exit_code == 2, result.stdout
    assert "Traceback" not in result.stderr


def test_emoji_codes_in_data_stay_text(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / ":fire:.jsonl", [{**FIRST_EXAMPLE, "model": ":warning:"}])
    result = invoke("audit", str(path), "--group-by", "model")
    assert ":fire:.jsonl" in result.stdout and ":warning:" in result.stdout
    assert "🔥" not in result.stdout and "⚠" not in result.stdout


def test_markdown_cells_cannot_make_links_or_images(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"p": [0.5], "q": [0.0], "r": [0.1], "m": 1}, FIRST_EXAMPLE])
    result = invoke("audit", str(path), "-o", "markdown", "--on-error", "skip")
    assert "q\\[0\\]" in result.stdout
    from specaccept_cli.views.markdown import markdown_cell

    assert markdown_cell("![i](https://x)[l](https://y)") == "\\!\\[i\\](https://x)\\[l\\](https://y)"


def test_parquet_through_a_pipe_given_as_a_path(tmp_path: Path) -> None:
    source = tmp_path / "x.parquet"
    pq.write_table(pa.table({name: [[0.5], [0.5, 0.5]] for name in "pqr"}), source)
    fifo = tmp_path / "x.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as pipe:
            pipe.write(source.read_bytes())

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        result = run_process("audit", str(fifo), "-o", "json", timeout=60)
    finally:
        writer.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 2


def test_merge_refuses_shards_audited_differently(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    assert (
        invoke("simulate", "--runs", "300", "--alpha", "0.7", "--k", "4", "--seed", "2", "-o", str(path)).exit_code == 0
    )
    plain, sampled = tmp_path / "plain.json", tmp_path / "sampled.json"
    assert invoke("audit", str(path), "-o", "json", "--summary-out", str(plain)).exit_code == 0
    assert invoke("audit", str(path), "-o", "json", "--check-sampler", "--summary-out", str(sampled)).exit_code == 0
    result = invoke("merge", str(sampled), str(plain))
    assert result.exit_code == 2
    assert f"{plain}: has no sampler tally while {sampled} has" in result.stderr
    broken = orjson.loads(sampled.read_bytes())
    broken["state"]["sampler"]["significance"] = 2.0
    (tmp_path / "broken.json").write_bytes(orjson.dumps(broken))
    result = invoke("merge", str(tmp_path / "broken.json"))
    assert result.exit_code == 2 and "significance outside (0, 1)" in result.stderr
