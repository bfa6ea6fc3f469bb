"""Every source kind, through the real CLI: JSONL (plain, gzip, bz2, xz, zstd, stdin), Parquet files and shards."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import pty
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tests.conftest import FIRST_EXAMPLE, invoke, jsonl_bytes, run_process, spec_accept, write_jsonl


def random_rows(n: int, seed: int = 0, k_max: int = 8) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        k = rng.randint(0, k_max)
        q = [rng.uniform(0.01, 1.0) for _ in range(k)]
        p = [rng.random() for _ in range(k)]
        r = [rng.random() for _ in range(k)]
        rows.append({"id": f"req-{i}", "p": p, "q": q, "r": r})
    return rows


def expected_accepted(rows: list[dict[str, object]]) -> list[int]:
    return [spec_accept(row["p"], row["q"], row["r"]) for row in rows]  # type: ignore[arg-type]


def per_run(stdout: bytes) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stdout.splitlines()]


ROWS = random_rows(300, seed=1)


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
        "builtins.__import__ = fake\n"
        "from specaccept_cli.cli import main\n"
        f"sys.argv = ['specaccept', 'audit', {str(path)!r}]\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert result.returncode == 2
    assert b"zstd" in result.stderr and b"specaccept[zstd]" in result.stderr
    assert b"Traceback" not in result.stderr


def test_blank_lines_are_ignored_but_counted_in_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "gaps.jsonl"
    path.write_bytes(b"\n" + orjson.dumps(FIRST_EXAMPLE) + b"\n   \n\r\n" + orjson.dumps(FIRST_EXAMPLE) + b"\r\n")
    result = invoke("audit", str(path), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert [r["line"] for r in per_run(result.stdout_bytes)] == [2, 5]


def test_last_line_without_newline_and_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(FIRST_EXAMPLE) + b"\n" + orjson.dumps(FIRST_EXAMPLE))
    result = invoke("audit", str(path), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert [r["accepted"] for r in per_run(result.stdout_bytes)] == [1, 1]


def test_dotted_field_paths_in_json(tmp_path: Path) -> None:
    rows = [{"spec": {"target_p": row["p"], "draft_q": row["q"]}, "u": row["r"]} for row in ROWS[:50]]
    path = write_jsonl(tmp_path / "nested.jsonl", rows)
    result = invoke(
        "audit", str(path), "-o", "jsonl", "--p-field", "spec.target_p", "--q-field", "spec.draft_q", "--r-field", "u"
    )
    assert result.exit_code == 0, result.stderr
    assert [r["accepted"] for r in per_run(result.stdout_bytes)] == expected_accepted(ROWS[:50])


def test_long_input_spans_many_blocks(tmp_path: Path) -> None:
    rows = random_rows(30_000, seed=3, k_max=16)
    path = write_jsonl(tmp_path / "big.jsonl", rows)
    assert path.stat().st_size > 4 << 20  # more than one read block
    result = invoke("audit", str(path), "-o", "jsonl")
    records = per_run(result.stdout_bytes)
    assert [r["accepted"] for r in records] == expected_accepted(rows)
    assert [r["line"] for r in records] == list(range(1, len(rows) + 1))


def _list_type(kind: str, value_type: pa.DataType, k: int) -> pa.DataType:
    if kind == "list":
        return pa.list_(value_type)
    if kind == "large_list":
        return pa.large_list(value_type)
    return pa.list_(value_type, k)


@pytest.mark.parametrize("kind", ["list", "large_list", "fixed_size_list"])
@pytest.mark.parametrize("value_type", [pa.float32(), pa.float64()])
def test_parquet_shard_directory(tmp_path: Path, kind: str, value_type: pa.DataType) -> None:
    k = 5
    rows = random_rows(400, seed=2, k_max=k)
    if kind == "fixed_size_list":
        rows = [row for row in rows if len(row["p"]) == k]  # type: ignore[arg-type]
    shard_dir = tmp_path / "shards" / "day=1"
    shard_dir.mkdir(parents=True)
    list_type = _list_type(kind, value_type, k)
    halves = [rows[: len(rows) // 2], rows[len(rows) // 2 :]]
    for index, part in enumerate(halves):
        table = pa.table({name: pa.array([row[name] for row in part], type=list_type) for name in ("p", "q", "r")})
        pq.write_table(table, shard_dir / f"part-{index}.parquet", row_group_size=37)
    (tmp_path / "shards" / "_SUCCESS").write_text("")
    result = invoke("audit", str(tmp_path / "shards"), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = per_run(result.stdout_bytes)
    # The rule sees each value as the file stores it (float32 widened exactly to float64).
    widened = [
        {name: [float(pa.scalar(x, value_type).as_py()) for x in row[name]] for name in ("p", "q", "r")}  # type: ignore[attr-defined]
        for row in rows
    ]
    assert [r["accepted"] for r in records] == expected_accepted(widened)
    assert [r["line"] for r in records] == list(range(1, len(halves[0]) + 1)) + list(range(1, len(halves[1]) + 1))
    assert records[0]["source"].endswith("part-0.parquet")
    assert records[-1]["source"].endswith("part-1.parquet")


def test_parquet_struct_column_and_id_field(tmp_path: Path) -> None:
    rows = ROWS[:40]
    spec = pa.array([{"target_p": row["p"], "draft_q": row["q"], "u": row["r"]} for row in rows])
    table = pa.table({"request": pa.array([row["id"] for row in rows]), "spec": spec})
    pq.write_table(table, tmp_path / "nested.parquet")
    result = invoke(
        "audit",
        str(tmp_path / "nested.parquet"),
        "-o",
        "jsonl",
        "--p-field",
        "spec.target_p",
        "--q-field",
        "spec.draft_q",
        "--r-field",
        "spec.u",
        "--id-field",
        "request",
    )
    assert result.exit_code == 0, result.stderr
    records = per_run(result.stdout_bytes)
    assert [r["accepted"] for r in records] == expected_accepted(rows)
    assert [r["request"] for r in records] == [row["id"] for row in rows]


def test_parquet_detected_by_magic_without_extension_and_on_stdin(tmp_path: Path) -> None:
    table = pa.table({name: pa.array([row[name] for row in ROWS[:60]]) for name in ("p", "q", "r")})
    path = tmp_path / "export.bin"
    pq.write_table(table, path)
    result = invoke("audit", str(path), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert [r["accepted"] for r in per_run(result.stdout_bytes)] == expected_accepted(ROWS[:60])
    piped = run_process("audit", "-", "-o", "jsonl", input=path.read_bytes())
    assert piped.returncode == 0, piped.stderr
    assert [r["accepted"] for r in per_run(piped.stdout)] == expected_accepted(ROWS[:60])


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


def test_prefetched_batches_keep_order_errors_and_stop_early() -> None:
    import threading

    from specaccept_cli.read.parquet import _prefetched

    assert list(_prefetched(iter(range(50)))) == list(range(50))

    def broken() -> Iterator[int]:
        yield 1
        raise OSError("disk went away")

    reader = _prefetched(broken())
    assert next(reader) == 1
    with pytest.raises(OSError, match="disk went away"):
        next(reader)

    started = threading.active_count()
    endless = _prefetched(iter(range(10**9)))
    assert next(endless) == 0
    endless.close()  # the consumer stops early (a broken pipe, fail mode): the thread must end too
    for _ in range(50):
        if threading.active_count() <= started:
            break
        threading.Event().wait(0.05)
    assert threading.active_count() <= started
