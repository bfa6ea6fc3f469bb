"""The parallel JSONL reader gives exactly what the serial one gives: runs, lines, errors and their order.

Small `block_bytes` make small files span many blocks (and byte ranges), so every boundary case is met
without large inputs; a few real subprocesses check the CLI end to end (regular file, gzip on stdin)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.pipeline import parallel
from specaccept_cli.pipeline.parallel import evaluate_source, newline_aligned_ranges
from specaccept_cli.pipeline.request import ReadRequest
from specaccept_cli.read.jsonl import BLOCK_BYTES
from specaccept_cli.read.sources import Source
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES
from specaccept_cli.summary.state import Summary
from tests.helpers import (
    mixed_lines,
    run_process,
    spec_accept,
)

FIELDS = FieldSpec(extras=("id",))


def collect(source: Source, jobs: int, block_bytes: int, keep_runs: bool = True, **kwargs: object) -> tuple:
    """Per-run results, the summary and every error (skip-like: errors are collected, not raised)."""
    errors: list[tuple[str, int | None, str, bytes | None]] = []

    def on_error(error: InputError) -> None:
        errors.append((error.source, error.line, error.message, error.raw))

    runs: list[tuple[int, int, int, object]] = []
    summary = Summary()
    max_line_bytes = kwargs.pop("max_line_bytes", DEFAULT_MAX_LINE_BYTES)
    request = ReadRequest(fields=FIELDS, jobs=jobs, max_line_bytes=max_line_bytes)  # type: ignore[arg-type]
    for result in evaluate_source(
        source,
        request,
        on_error,
        keep_runs=keep_runs,
        block_bytes=block_bytes,
        **kwargs,  # type: ignore[arg-type]
    ):
        summary = summary + result.summary
        if keep_runs:
            assert result.batch is not None and result.outcome is not None
            runs += zip(
                result.batch.lines.tolist(),
                result.outcome.k.tolist(),
                result.outcome.accepted.tolist(),
                result.batch.extras["id"],
            )
    return runs, summary, errors


def file_source(path: Path) -> Source:
    return Source(str(path), path, path.stat().st_size)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("trailing", [True, False])
@pytest.mark.parametrize("blocks_per_task", [1, 3])
def test_ranges_give_exactly_the_serial_result(
    tmp_path: Path, newline: bytes, trailing: bool, blocks_per_task: int
) -> None:
    lines = mixed_lines(400, seed=len(newline) + trailing)
    data = newline.join(lines) + (newline if trailing else b"")
    path = tmp_path / "logs.jsonl"
    path.write_bytes(data)
    source = file_source(path)
    serial = collect(source, jobs=1, block_bytes=1024)
    parallel = collect(source, jobs=2, block_bytes=1024, blocks_per_task=blocks_per_task)
    assert parallel == serial
    runs, summary, errors = parallel
    assert summary.runs == len(runs) > 250
    assert len(errors) == 80  # every 5th of 400 lines
    # Against the oracle, line by line.
    for line, k, accepted, run_id in runs:
        row = orjson.loads(lines[line - 1])
        assert run_id == row["id"]
        assert (k, accepted) == (len(row["p"]), spec_accept(row["p"], row["q"], row["r"]))
    # The inputs really are cut into many ranges, and bad rows fall on their first and last lines.
    ranges = newline_aligned_ranges(path, len(data), 1024 * blocks_per_task)
    assert len(ranges) > 20 / blocks_per_task
    first_lines = {data[:start].count(b"\n") + 1 for start, _ in ranges}
    last_lines = {data[:end].rstrip(b"\n").count(b"\n") + 1 for _, end in ranges}
    bad_lines = {line for _, line, _, _ in errors}
    assert bad_lines & first_lines and bad_lines & last_lines


def test_summary_only_mode_matches(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(mixed_lines(300, seed=3)) + b"\n")
    gzipped = tmp_path / "logs.jsonl.gz"
    gzipped.write_bytes(gzip.compress(path.read_bytes()))
    _, with_runs, errors = collect(file_source(path), jobs=2, block_bytes=700)
    for source in (file_source(path), file_source(gzipped)):
        runs, summary_only, errors_again = collect(source, jobs=2, block_bytes=700, keep_runs=False)
        assert runs == [] and summary_only == with_runs
        assert [error[1:] for error in errors_again] == [error[1:] for error in errors]  # same lines, messages


def test_fail_mode_reports_the_first_bad_row_in_input_order(tmp_path: Path) -> None:
    lines = mixed_lines(300, seed=4, bad_every=1000)  # no bad rows ...
    lines[157] = b'{"p": [0.5], "q": [0.5], "r": [1.5]}'  # ... until here, then many
    lines[200:] = [b"oops"] * 100
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    def fail(error: InputError) -> None:
        raise error

    for jobs in (1, 2):
        with pytest.raises(InputError) as caught:
            for _ in evaluate_source(file_source(path), ReadRequest(fields=FIELDS, jobs=jobs), fail, block_bytes=512):
                pass
        assert (caught.value.line, caught.value.message) == (158, "r[0] = 1.5 is out of range (r must be in [0, 1])")


def test_byte_order_mark_only_on_the_first_line(tmp_path: Path) -> None:
    lines = mixed_lines(120, seed=5, bad_every=1000)
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    lines[60] = b"\xef\xbb\xbf" + lines[60]  # not the first line: a bad row
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(lines))
    serial = collect(file_source(path), jobs=1, block_bytes=600)
    assert collect(file_source(path), jobs=2, block_bytes=600) == serial
    assert [line for _, line, _, _ in serial[2]] == [61]
    assert serial[0][0][0] == 1


def test_overlong_lines_across_range_boundaries(tmp_path: Path) -> None:
    lines = mixed_lines(200, seed=6, bad_every=1000)
    for index in (0, 37, 38, 120, 198):
        lines[index] = b'{"p": [' + b"0.5, " * 400 + b'0.5], "q": [0.5], "r": [0.5]}'
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(lines))
    serial = collect(file_source(path), jobs=1, block_bytes=4096, max_line_bytes=1000)
    assert collect(file_source(path), jobs=2, block_bytes=4096, max_line_bytes=1000, blocks_per_task=1) == serial
    assert [line for _, line, _, _ in serial[2]] == [1, 38, 39, 121, 199]


def test_compressed_stream_blocks_go_to_workers(tmp_path: Path) -> None:
    lines = mixed_lines(300, seed=7)
    path = tmp_path / "logs.jsonl.gz"
    path.write_bytes(gzip.compress(b"\r\n".join(lines)))
    serial = collect(file_source(path), jobs=1, block_bytes=800)
    for blocks_per_task in (1, 3):
        parallel = collect(file_source(path), jobs=2, block_bytes=800, blocks_per_task=blocks_per_task)
        assert parallel == serial and len(serial[0]) > 200


def test_empty_and_tiny_files(tmp_path: Path) -> None:
    for data in (b"", b"\n", b"\n\n\n", b'{"p": [], "q": [], "r": []}'):
        path = tmp_path / "tiny.jsonl"
        path.write_bytes(data)
        assert collect(file_source(path), jobs=2, block_bytes=4) == collect(file_source(path), jobs=1, block_bytes=4)


def _parquet_with_bad_rows(path: Path, rows: int, seed: int) -> None:
    """Runs with a bad row (q = 0, p > 1, unequal lengths) every few hundred, in small record batches."""
    rng = np.random.default_rng(seed)
    p, q, r, ids = [], [], [], []
    for i in range(rows):
        k = int(rng.integers(0, 9))
        p.append(rng.random(k).tolist())
        q.append(rng.uniform(0.01, 1, k).tolist())
        r.append(rng.random(k).tolist())
        ids.append(f"r{i}")
        if i % 397 == 5 and k:
            [q[-1].__setitem__(0, 0.0), p[-1].__setitem__(0, 1.5), r[-1].pop()][i % 3]
    table = pa.table({"id": ids, "p": p, "q": q, "r": r})
    pq.write_table(table, path, row_group_size=700)


def test_parquet_on_threads_gives_exactly_the_serial_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches on two threads: the same runs, lines, summary and errors, in the same order, as one thread."""
    monkeypatch.setattr("specaccept_cli.read.parquet.BATCH_ROWS", 256)  # many batches, bad rows in several
    path = tmp_path / "logs.parquet"
    _parquet_with_bad_rows(path, 5000, seed=4)
    threaded, serial = (collect(file_source(path), jobs=jobs, block_bytes=64) for jobs in (2, 1))
    assert threaded == serial
    runs, summary, errors = threaded
    assert summary.runs == len(runs) and len(errors) > 10 and len(runs) + len(errors) == 5000
    assert [line for _, line, _, _ in errors] == sorted(line for _, line, _, _ in errors)


def test_parquet_on_threads_fails_at_the_first_bad_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specaccept_cli.read.parquet.BATCH_ROWS", 256)
    path = tmp_path / "logs.parquet"
    _parquet_with_bad_rows(path, 3000, seed=5)
    raised = []
    for jobs in (2, 1):
        with pytest.raises(InputError) as caught:
            for _ in evaluate_source(file_source(path), ReadRequest(fields=FIELDS, jobs=jobs), _raise):
                pass
        raised.append(str(caught.value))
    assert raised[0] == raised[1] and ":6:" in raised[0]


def test_parquet_on_threads_hands_on_the_batches_before_a_damaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row group that fails to decode: every run before it is handed on first, then the file's error."""
    monkeypatch.setattr("specaccept_cli.read.parquet.BATCH_ROWS", 256)
    path = tmp_path / "logs.parquet"
    _parquet_with_bad_rows(path, 3000, seed=6)
    data = bytearray(path.read_bytes())
    footer = pq.ParquetFile(path).metadata
    damaged = footer.row_group(2).column(2)  # q of the third row group
    start = damaged.data_page_offset + 40
    data[start : start + 64] = bytes(64)
    path.write_bytes(bytes(data))
    outcomes = []
    for jobs in (2, 1):
        handed: list[int] = []
        bad: list[InputError] = []
        with pytest.raises(InputError) as caught:
            for result in evaluate_source(file_source(path), ReadRequest(fields=FIELDS, jobs=jobs), bad.append):
                handed.append(result.runs)
        outcomes.append((handed, len(bad), str(caught.value)))
    assert outcomes[0] == outcomes[1]
    handed, bad, message = outcomes[0]
    assert "cannot read Parquet data in row group 2 after 1280 rows" in message
    assert sum(handed) + bad == 1280 and bad > 0  # every row before the damage: a run, or a bad row


def _raise(error: InputError) -> None:
    raise error


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 12 MB of JSONL: several byte ranges and blocks at the default block size."""
    path = tmp_path_factory.mktemp("big") / "logs.jsonl"
    done = run_process("simulate", "--runs", "40000", "--alpha", "0.8", "--k", "1-8", "--seed", "3", "-o", str(path))
    assert done.returncode == 0
    assert path.stat().st_size > 5 * BLOCK_BYTES
    return path


def test_cli_jobs_give_identical_per_run_output_and_summary(big_log: Path) -> None:
    outputs = {}
    for jobs in ("1", "2"):
        per_run = run_process("audit", str(big_log), "-o", "jsonl", "--jobs", jobs)
        summary = run_process("audit", str(big_log), "-o", "json", "--jobs", jobs)
        assert per_run.returncode == summary.returncode == 0
        outputs[jobs] = (per_run.stdout, summary.stdout)
    assert outputs["1"] == outputs["2"]
    assert outputs["2"][0].count(b"\n") == orjson.loads(outputs["2"][1])["runs"] == 40000


def test_cli_gzip_on_stdin_with_a_bad_row_in_a_late_block(big_log: Path, tmp_path: Path) -> None:
    data = bytearray(big_log.read_bytes())
    lines = data.split(b"\n")
    lines[30000] = b'{"p": [0.5], "q": [0.5], "r": [-0.25]}'
    packed = gzip.compress(b"\n".join(lines))
    results = []
    for jobs in ("1", "2"):
        done = run_process("audit", "-", "-o", "jsonl", "--jobs", jobs, input=packed)  # a real pipe
        results.append((done.returncode, done.stdout, done.stderr))
    assert results[0] == results[1]
    status, stdout, stderr = results[1]
    assert status == 2
    assert stderr.decode().strip() == "specaccept: <stdin>:30001: r[0] = -0.25 is out of range (r must be in [0, 1])"
    assert 0 < stdout.count(b"\n") < 30000  # runs of the blocks before the bad row's, in order


def _die(*args: object) -> None:
    os._exit(9)  # what the out-of-memory killer does to a worker


def test_a_worker_that_dies_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specaccept_cli.errors import SpecacceptError

    monkeypatch.setattr(parallel, "_range_task", _die)
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(mixed_lines(300, seed=8)))
    with pytest.raises(SpecacceptError, match="a worker process died"):
        collect(file_source(path), jobs=2, block_bytes=512)


_PARSE_RANGE = parallel.parse_range


def _unreadable(work: parallel.Work, path: str, start: int, end: int) -> object:
    if start > 0:  # the first range reads fine: the error comes from a later one
        raise PermissionError(13, "Permission denied")
    return _PARSE_RANGE(work, path, start, end)


def test_an_error_in_a_worker_is_the_same_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "parse_range", _unreadable)
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(mixed_lines(300, seed=8, bad_every=1000)))
    with pytest.raises(InputError) as caught:
        collect(file_source(path), jobs=2, block_bytes=512)
    assert str(caught.value) == f"{path}: cannot read: Permission denied"


def test_many_groups_cross_processes_as_columns(big_log: Path) -> None:
    """Every run its own group (`id`), on several processes: the same groups, in the same order, as on one."""
    summaries = {
        jobs: run_process("audit", str(big_log), "-o", "json", "--group-by", "id", "--max-groups", "0", "--jobs", jobs)
        for jobs in ("1", "2")
    }
    assert summaries["1"].returncode == summaries["2"].returncode == 0
    assert summaries["1"].stdout == summaries["2"].stdout
    groups = orjson.loads(summaries["2"].stdout)["groups"]
    assert len(groups) == 40000 and sum(group["runs"] for group in groups.values()) == 40000
