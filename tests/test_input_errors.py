"""Invalid rows: one line naming source, line and what is wrong; exit status 2; never a traceback."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import FIRST_EXAMPLE, invoke, run_process

GOOD = orjson.dumps(FIRST_EXAMPLE)

CASES = [
    # (bad line, words the message must contain)
    (b'{"p": [0.9, 0.2], "q": [0.5, 0.8], "r": [0.1,', ["invalid JSON", "column"]),
    (b'{"p": [NaN], "q": [0.5], "r": [0.1]}', ["NaN or Infinity"]),
    (b"[1, 2, 3]", ["not an object", "array"]),
    (b'{"q": [0.5], "r": [0.1], "extra": 1}', ["missing field 'p'", "q, r, extra"]),
    (b'{"p": 0.5, "q": [0.5], "r": [0.1]}', ["'p' is number, not a list"]),
    (b'{"p": [0.5, "x"], "q": [0.5, 0.5], "r": [0.1, 0.1]}', ["p[1] is not a number", "string"]),
    (b'{"p": [true], "q": [0.5], "r": [0.1]}', ["p[0] is not a number", "boolean"]),
    (b'{"p": [null], "q": [0.5], "r": [0.1]}', ["p[0] is not a number", "null"]),
    (b'{"p": [0.5, 0.5], "q": [0.5], "r": [0.1, 0.1]}', ["different lengths (2, 1, 2)"]),
    (b'{"p": [0.5, 1.5], "q": [0.5, 0.5], "r": [0.1, 0.1]}', ["p[1] = 1.5", "out of range"]),
    (b'{"p": [0.5], "q": [0.0], "r": [0.1]}', ["q[0] = 0.0", "q > 0"]),
    (b'{"p": [0.5], "q": [-0.2], "r": [0.1]}', ["q[0] = -0.2", "out of range"]),
    (b'{"p": [0.5], "q": [0.5], "r": [1.01]}', ["r[0] = 1.01", "out of range"]),
    (b'{"p": [1e400], "q": [0.5], "r": [0.1]}', ["column 8", "too large", "Infinity"]),
    (b'{"p": [' + b"1" * 400 + b'], "q": [0.5], "r": [0.1]}', ["column 8", "too large"]),
    (b'{"p": [0.5], "q": [0.5], "r": [0.1], "bad": "\xff"}', ["not valid UTF-8"]),
]


@pytest.mark.parametrize(("bad", "words"), CASES)
def test_bad_jsonl_row(tmp_path: Path, bad: bytes, words: list[str]) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_bytes(GOOD + b"\n" + GOOD + b"\n" + bad + b"\n" + GOOD + b"\n")
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{path}:3:" in lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def test_the_first_bad_row_is_reported_whatever_its_kind(tmp_path: Path) -> None:
    """A value error found per batch must not hide behind a later parse error found per line."""
    path = tmp_path / "two.jsonl"
    path.write_bytes(b'{"p": [2.0], "q": [0.5], "r": [0.1]}\n{not json\n')
    result = invoke("audit", str(path))
    assert result.exit_code == 2
    assert f"{path}:1: p[0] = 2.0" in result.stderr


def test_custom_field_names_appear_in_messages(tmp_path: Path) -> None:
    path = tmp_path / "nested.jsonl"
    path.write_bytes(b'{"spec": {"tp": [0.5, 7]}, "q": [0.5, 0.5], "r": [0.1, 0.1]}\n')
    result = invoke("audit", str(path), "--p-field", "spec.tp")
    assert result.exit_code == 2
    assert "spec.tp[1] = 7" in result.stderr
    missing = invoke("audit", str(path), "--p-field", "spec.target_p")
    assert "missing field 'spec.target_p'" in missing.stderr and "tp" in missing.stderr


def test_missing_path_is_an_input_error() -> None:
    result = invoke("audit", "/nonexistent/logs.jsonl")
    assert result.exit_code == 2
    assert "/nonexistent/logs.jsonl: no such file or directory" in result.stderr


def test_directory_without_parquet(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    result = invoke("audit", str(tmp_path))
    assert result.exit_code == 2
    assert "no .parquet files" in result.stderr


def test_bad_field_path_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("audit", "--p-field", "spec..p", "-")
    assert result.exit_code == 2
    assert "dotted field path" in result.stderr


def test_parquet_bad_value_names_the_row(tmp_path: Path) -> None:
    table = pa.table(
        {"p": [[0.5], [0.5, 0.7], [0.2]], "q": [[0.5], [0.5, 0.0], [0.4]], "r": [[0.1], [0.2, 0.3], [0.5]]}
    )
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    result = invoke("audit", str(path))
    assert result.exit_code == 2
    assert f"{path}:2: q[1] = 0.0 is zero" in result.stderr


def test_parquet_nulls_and_length_mismatch(tmp_path: Path) -> None:
    table = pa.table({"p": [[0.5], None, [0.2]], "q": [[0.5], [0.4], [0.4]], "r": [[0.1], [0.2], [0.5]]})
    pq.write_table(table, tmp_path / "nulls.parquet")
    result = invoke("audit", str(tmp_path / "nulls.parquet"))
    assert result.exit_code == 2
    assert "nulls.parquet:2: 'p' is null" in result.stderr
    table = pa.table({"p": [[0.5], [0.5, 0.5]], "q": [[0.5], [0.4]], "r": [[0.1], [0.2, 0.1]]})
    pq.write_table(table, tmp_path / "ragged.parquet")
    result = invoke("audit", str(tmp_path / "ragged.parquet"))
    assert "ragged.parquet:2: p, q and r have different lengths (2, 1, 2)" in result.stderr


def test_parquet_missing_column_lists_the_columns(tmp_path: Path) -> None:
    pq.write_table(pa.table({"p": [[0.5]], "q": [[0.5]], "u": [[0.1]]}), tmp_path / "cols.parquet")
    result = invoke("audit", str(tmp_path / "cols.parquet"))
    assert result.exit_code == 2
    assert "missing column 'r' (columns: p, q, u)" in result.stderr


def test_parquet_column_that_is_not_a_list(tmp_path: Path) -> None:
    pq.write_table(pa.table({"p": [0.5], "q": [[0.5]], "r": [[0.1]]}), tmp_path / "flat.parquet")
    result = invoke("audit", str(tmp_path / "flat.parquet"))
    assert result.exit_code == 2
    assert "column 'p' is double, not a list of numbers" in result.stderr


def test_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    import gzip

    data = gzip.compress(GOOD + b"\n" * 1 + (GOOD + b"\n") * 2000)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    result = run_process("audit", str(path), "-o", "json")
    assert result.returncode == 2
    assert f"{path}: compressed stream is truncated or corrupt".encode() in result.stderr
    assert b"Traceback" not in result.stderr
