"""A valid row whose p/q overflows a double (a subnormal q) is read in silence on every path: the
threshold min(1, p/q) is 1, and no numpy RuntimeWarning reaches stderr."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import run_process

ROWS = [{"p": [0.5, 0.5], "q": [1e-320, 0.25], "r": [0.999, 0.5]}, {"p": [0.5], "q": [1.0], "r": [0.2]}]


def _log(tmp_path: Path, kind: str) -> Path:
    if kind == "parquet":
        path = tmp_path / "overflow.parquet"
        pq.write_table(pa.Table.from_pylist(ROWS), path)
    else:
        path = tmp_path / "overflow.jsonl"
        path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in ROWS))
    return path


@pytest.mark.parametrize(
    ("kind", "options", "env"),
    [
        ("jsonl", (), {}),
        ("jsonl", (), {"SPECACCEPT_NO_EXTENSIONS": "1"}),
        ("jsonl", ("-j", "2"), {}),
        ("jsonl", ("--group-by", "p"), {}),
        ("parquet", (), {}),
        ("parquet", (), {"SPECACCEPT_NO_EXTENSIONS": "1"}),
        ("parquet", ("--group-by", "p"), {}),
    ],
    ids=["jsonl", "jsonl-pure", "jsonl-j2", "jsonl-group", "parquet", "parquet-pure", "parquet-group"],
)
def test_no_warning_and_exact_lengths(tmp_path: Path, kind: str, options: tuple[str, ...], env: dict[str, str]) -> None:
    result = run_process("audit", str(_log(tmp_path, kind)), "-o", "jsonl", *options, env=env)
    assert result.returncode == 0
    assert result.stderr == b""
    assert [orjson.loads(line)["accepted"] for line in result.stdout.splitlines()] == [2, 1]


def test_summary_and_check_are_silent(tmp_path: Path) -> None:
    summary = run_process("audit", str(_log(tmp_path, "parquet")), "-o", "json")
    assert summary.returncode == 0 and summary.stderr == b""
    assert orjson.loads(summary.stdout)["accepted_tokens"] == 3
    check = run_process("check", "--p", "0.5,0.5", "--q", "1e-320,0.25", "--r", "0.999,0.5", "--explain")
    assert check.returncode == 0 and check.stderr == b""
