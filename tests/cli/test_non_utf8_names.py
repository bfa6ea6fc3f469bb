"""A file name that is not UTF-8 (legal on Linux) in every output: shown with its odd bytes as `\\xNN`.

Python decodes such a name with lone surrogates, which no UTF-8 output can hold: JSON, CSV, the
summary file and the HTML report crashed on them. The names here are real bytes on disk.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.helpers import FIRST_EXAMPLE, run_process

SHOWN = "bad\\xff.jsonl"  # how every output names b"bad\xff.jsonl"


def _odd(directory: Path, name: bytes = b"bad\xff.jsonl") -> str:
    """A JSONL log at DIRECTORY/NAME, NAME bytes that are not UTF-8; the path as Python's str for it."""
    path = os.path.join(os.fsencode(directory), name)
    with open(path, "wb") as handle:
        handle.write(orjson.dumps(FIRST_EXAMPLE) + b"\n" + orjson.dumps({**FIRST_EXAMPLE, "id": "r2"}) + b"\n")
    return os.fsdecode(path)


@pytest.mark.parametrize("output", ["json", "jsonl", "csv", "markdown", "table"])
def test_every_output_form_names_the_file(tmp_path: Path, output: str) -> None:
    result = run_process("audit", _odd(tmp_path), "-o", output, "--id-field", "id")
    assert result.returncode == 0, result.stderr
    stdout = result.stdout.decode()  # valid UTF-8
    if output == "json":
        assert [item["name"] for item in orjson.loads(stdout)["provenance"]["inputs"]] == [f"{tmp_path}/{SHOWN}"]
    elif output == "jsonl":
        assert {orjson.loads(line)["source"] for line in stdout.splitlines()} == {f"{tmp_path}/{SHOWN}"}
    elif output == "csv":
        assert stdout.splitlines()[1].startswith(f"{tmp_path}/{SHOWN},1,")


def test_summary_out_and_report_with_odd_names_on_both_sides(tmp_path: Path) -> None:
    summary = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"out\xfe.json"))
    result = run_process("audit", _odd(tmp_path), "--summary-out", summary)
    assert result.returncode == 0, result.stderr
    data = orjson.loads(Path(summary).read_bytes())
    assert [item["name"] for item in data["provenance"]["inputs"]] == [f"{tmp_path}/{SHOWN}"]
    html = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"report\xfd.html"))
    result = run_process("report", "--summary", summary, "-o", html)
    assert result.returncode == 0, result.stderr
    assert Path(html).read_text().startswith("<!DOCTYPE html>")
    assert "report\\xfd.html" in result.stderr.decode()


def test_a_directory_holding_such_a_shard(tmp_path: Path) -> None:
    _odd(tmp_path)
    _odd(tmp_path, b"good.jsonl")
    result = run_process("audit", str(tmp_path), "-o", "jsonl")
    assert result.returncode == 0, result.stderr
    names = {orjson.loads(line)["source"] for line in result.stdout.decode().splitlines()}
    assert names == {f"{tmp_path}/{SHOWN}", f"{tmp_path}/good.jsonl"}


def test_an_error_line_names_the_file(tmp_path: Path) -> None:
    path = os.path.join(os.fsencode(tmp_path), b"e\xfd.jsonl")
    with open(path, "wb") as handle:
        handle.write(b'{"p":"x","q":[1],"r":[0]}\n')
    result = run_process("audit", os.fsdecode(path))
    assert result.returncode == 2
    assert (
        result.stderr.decode()
        == f"specaccept: {tmp_path}/e\\xfd.jsonl:1: 'p' is the string 'x', not a list of numbers; "
        "name the field that holds p with --p-field NAME (a dotted path reaches inside objects)\n"
    )


def test_summaries_with_odd_names_merge_diff_and_report(tmp_path: Path) -> None:
    first = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"first\xfa.json"))
    second = str(tmp_path / "second.json")
    assert run_process("audit", _odd(tmp_path), "--summary-out", first, "-q", "-o", "json").returncode == 0
    other = tmp_path / "other.jsonl"
    other.write_bytes(orjson.dumps(FIRST_EXAMPLE) + b"\n")
    assert run_process("audit", str(other), "--summary-out", second, "-q", "-o", "json").returncode == 0
    merged = run_process("merge", first, second)
    assert merged.returncode == 0, merged.stderr
    assert f"{tmp_path}/first\\xfa.json" in orjson.loads(merged.stdout)["provenance"]["merged_from"]
    compared = run_process("diff", first, second, "-o", "json")
    assert compared.returncode in (0, 1), compared.stderr
    assert orjson.loads(compared.stdout)["baseline_file"] == f"{tmp_path}/first\\xfa.json"
    report = run_process("report", "--summary", first, "--summary", second, "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    baseline = run_process("audit", str(other), "--baseline", first, "-o", "json")
    assert baseline.returncode in (0, 1), baseline.stderr
    assert b"Traceback" not in baseline.stderr
