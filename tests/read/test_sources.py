"""Every source kind: JSONL plain and compressed (gzip, bz2, xz, zstd), stdin, named pipes, missing paths."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tests.helpers import (
    FIRST_EXAMPLE,
    GOOD,
    IMPORT_MAIN,
    ROWS,
    expected_accepted,
    fed_fifo,
    invoke,
    jsonl_bytes,
    per_run,
    run_process,
    write_jsonl,
)


@pytest.mark.parametrize(
    ("suffix", "compress"),
    [
        (".jsonl", lambda b: b),
        (".jsonl.gz", gzip.compress),
        (".jsonl.bz2", bz2.compress),
        (".jsonl.xz", lzma.compress),
        (".jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
        (".log", gzip.compress),  # compression found by magic bytes, not by name
    ],
)
def test_jsonl_files_plain_and_compressed(tmp_path: Path, suffix: str, compress: object) -> None:
    path = tmp_path / f"logs{suffix}"
    path.write_bytes(compress(jsonl_bytes(ROWS)))  # type: ignore[operator]
    result = invoke("audit", str(path), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = per_run(result.stdout_bytes)
    assert [r["accepted"] for r in records] == expected_accepted(ROWS)
    assert [r["line"] for r in records] == list(range(1, len(ROWS) + 1))
    assert {r["source"] for r in records} == {str(path)}


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_compressed_file_is_decompressed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    """Telling a .jsonl.gz from SGLang responses reads its text ahead; the reader gets those bytes again
    (for an object on s3:// that saves a second GET), and every run and line comes out as from the plain file."""
    import specaccept_cli.read.sources as sources
    from specaccept_cli.pipeline import summarise
    from specaccept_cli.rule.batch import RunBatch

    rows = ROWS * 40  # 3 MB: far beyond the 64 KiB read ahead, and blocks enough for the pool
    plain, packed = tmp_path / "logs.jsonl", tmp_path / "logs.jsonl.gz"
    plain.write_bytes(jsonl_bytes(rows))
    packed.write_bytes(gzip.compress(jsonl_bytes(rows)))
    opened: list[str] = []
    decompress = sources.decompress
    monkeypatch.setattr(sources, "decompress", lambda raw, name: opened.append(name) or decompress(raw, name))
    lines: list[int] = []

    def keep(batch: RunBatch, outcome: object, columns: object) -> None:
        lines.extend(batch.lines.tolist())

    summary = summarise([str(packed)], jobs=jobs, sink=keep)
    assert opened == [str(packed)]
    assert lines == list(range(1, len(rows) + 1))
    assert summary.runs == len(rows)
    assert np.array_equal(summary.counts, summarise([str(plain)], jobs=1).counts)


def test_gzip_on_stdin_through_a_real_pipe() -> None:
    result = run_process("audit", "-", "-o", "jsonl", input=gzip.compress(jsonl_bytes(ROWS)))
    assert result.returncode == 0, result.stderr
    records = per_run(result.stdout)
    assert [r["accepted"] for r in records] == expected_accepted(ROWS)
    assert records[0]["source"] == "<stdin>"


def test_stdin_is_the_default_when_it_is_a_pipe() -> None:
    result = run_process("audit", "-o", "json", input=jsonl_bytes([FIRST_EXAMPLE]))
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["runs"] == 1
    assert summary["accepted_tokens"] == 1


def test_no_input_reads_an_empty_non_terminal_stdin() -> None:
    """CI has no terminal and no stdin: /dev/null is an empty input, not an error."""
    result = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", "-o", "json"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 0


def test_no_input_on_a_terminal_is_a_usage_error() -> None:
    primary, secondary = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "specaccept_cli", "audit"],
            stdin=secondary,
            capture_output=True,
            check=False,
            timeout=60,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert result.returncode == 2
    assert b"no input" in result.stderr
    assert b"Traceback" not in result.stderr


def test_zstd_without_the_extra_names_it(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(jsonl_bytes(ROWS[:3])))
    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def fake(name, *a, **k):\n"
        "    if name == 'zstandard': raise ImportError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = fake\n" + IMPORT_MAIN + f"sys.argv = ['specaccept', 'audit', {str(path)!r}]\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert result.returncode == 2
    assert b"zstd" in result.stderr and b"specaccept[zstd]" in result.stderr
    assert b"Traceback" not in result.stderr
    # Skipped like any unreadable source, per-run output of the others written, whatever the output.
    good = write_jsonl(tmp_path / "good.jsonl", ROWS[:5])
    for output in ("jsonl", "json"):
        argv = ["specaccept", "audit", str(path), str(good), "-o", output, "--on-error", "skip"]
        skipping = code.replace(f"sys.argv = ['specaccept', 'audit', {str(path)!r}]", f"sys.argv = {argv!r}")
        result = subprocess.run([sys.executable, "-c", skipping], capture_output=True, check=False)
        assert result.returncode == 0, result.stderr
        assert b"specaccept[zstd]" in result.stderr
        if output == "jsonl":
            assert [r["line"] for r in per_run(result.stdout)] == [1, 2, 3, 4, 5]
        else:
            assert orjson.loads(result.stdout)["skipped_sources"] == 1


def test_format_option_overrides_detection(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "logs.parquet", [FIRST_EXAMPLE])  # misnamed
    assert invoke("audit", str(path), "--format", "jsonl", "-o", "json").exit_code == 0
    wrong = invoke("audit", str(path), "-o", "json")
    assert wrong.exit_code == 2
    assert "Parquet" in wrong.stderr and "Traceback" not in wrong.stderr


def test_multiple_inputs_are_read_in_order(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", ROWS[:10])
    second = tmp_path / "b.jsonl.gz"
    second.write_bytes(gzip.compress(jsonl_bytes(ROWS[10:25])))
    result = invoke("audit", str(first), str(second), "-o", "jsonl")
    records = per_run(result.stdout_bytes)
    assert [r["source"] for r in records] == [str(first)] * 10 + [str(second)] * 15
    assert [r["accepted"] for r in records] == expected_accepted(ROWS[:25])


def test_missing_path_is_an_input_error() -> None:
    result = invoke("audit", "/nonexistent/logs.jsonl")
    assert result.exit_code == 2
    assert "/nonexistent/logs.jsonl: no such file or directory" in result.stderr


def test_directory_without_parquet_or_jsonl(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "summary.json").write_text("{}")  # a folder of saved summaries is no log
    (tmp_path / ".hidden.jsonl").write_bytes(GOOD + b"\n")  # nor is a hidden file (a part being written)
    result = invoke("audit", str(tmp_path))
    assert result.exit_code == 2
    assert "directory holds no .parquet or .jsonl files" in result.stderr


def test_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    import gzip

    data = gzip.compress(GOOD + b"\n" * 1 + (GOOD + b"\n") * 2000)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    result = run_process("audit", str(path), "-o", "json")
    assert result.returncode == 2
    assert f"{path}: compressed stream is truncated or corrupt".encode() in result.stderr
    assert b"Traceback" not in result.stderr


def test_zstd_starting_with_a_skippable_frame(tmp_path: Path) -> None:
    """pzstd writes a skippable frame first; its magic is not the frame magic, and it must still be zstd."""
    import struct

    import zstandard

    row = orjson.dumps(FIRST_EXAMPLE) + b"\n"
    skippable = struct.pack("<II", 0x184D2A50, 4) + b"size"
    frame = zstandard.ZstdCompressor().compress(row)
    path = tmp_path / "logs.jsonl.zst"
    path.write_bytes(skippable + frame + skippable + frame)
    summary = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert summary["runs"] == 2 and summary["accepted_tokens"] == 2
    path.write_bytes((skippable + frame)[:-3])
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 2
    assert "compressed stream is truncated or corrupt after 0 lines (zstd stream ended inside a frame)" in result.stderr


def test_a_named_pipe_is_read_once_with_parallel_jobs(tmp_path: Path) -> None:
    """`audit <(zcat logs.gz)` hands over a pipe as a path: sniffing its format must not eat its bytes."""
    rows = [FIRST_EXAMPLE] * 20_000
    with fed_fifo(tmp_path / "logs.fifo", jsonl_bytes(rows)) as fifo:
        result = run_process("audit", str(fifo), "-o", "json", "--jobs", "2", timeout=60)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 20_000
    # Per-run output checks a source's format before writing anything: a pipe is not looked at then.
    with fed_fifo(tmp_path / "again.fifo", jsonl_bytes(rows[:50])) as fifo:
        result = run_process("audit", str(fifo), "-o", "jsonl", timeout=60)
    assert result.returncode == 0, result.stderr
    assert [record["line"] for record in per_run(result.stdout)] == list(range(1, 51))


def test_parquet_through_a_pipe_given_as_a_path(tmp_path: Path) -> None:
    source = tmp_path / "x.parquet"
    pq.write_table(pa.table({name: [[0.5], [0.5, 0.5]] for name in "pqr"}), source)
    with fed_fifo(tmp_path / "x.fifo", source.read_bytes()) as fifo:
        result = run_process("audit", str(fifo), "-o", "json", timeout=60)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 2
