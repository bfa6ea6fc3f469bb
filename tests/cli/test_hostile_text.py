"""Strings from data in every output: escaped, never live terminal codes, markup or workflow commands."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    CORPUS,
    FIRST_EXAMPLE,
    invoke,
    write_jsonl,
)

HOSTILE = "::error file=x::pwned\x1b[31m[bold]red[/bold]\r\n::warning::two\u202e"


def _no_live_text(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    for line in text.splitlines():
        assert not line.lstrip().startswith("::"), line


@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
def test_hostile_strings_from_data_are_defused_everywhere(tmp_path: Path, output: str) -> None:
    directory = tmp_path / "::error::dir"
    directory.mkdir()
    path = write_jsonl(
        directory / "::warning::\x1b[2Jlog.jsonl",
        [
            {**FIRST_EXAMPLE, "id": HOSTILE},
            {HOSTILE: 1, "q": [0.5], "r": [0.1]},  # missing p: the message lists this key
        ],
    )
    for source in (str(path), os.path.relpath(path)):
        result = invoke("audit", source, "-o", output, "--id-field", "id", "--group-by", "id", "--on-error", "skip")
        assert result.exit_code == 0
        _no_live_text(result.stdout)
        _no_live_text(result.stderr)
        assert "Skipped 1 bad row" in result.stderr
        assert "\\x1b" in result.stderr  # made visible, not dropped
        if output == "jsonl":  # JSON keeps the exact value: escaping decodes back to it
            assert orjson.loads(result.stdout.splitlines()[0])["id"] == HOSTILE
        if output == "table":
            assert "[bold]red[/bold]" not in result.stdout or "\\x1b" in result.stdout


def test_hostile_text_in_a_fail_mode_error_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{HOSTILE: 1, "q": [0.5], "r": [0.1]}])
    result = invoke("audit", str(path))
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    _no_live_text(result.stderr)
    assert "::error file=x::pwned\\x1b[31m[bold]red[/bold]\\x0d\\x0a::warning::two\\u202e" in line


def test_hostile_id_in_csv_is_one_line_per_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{**FIRST_EXAMPLE, "id": "::error::a\nb"}, {**FIRST_EXAMPLE, "id": "c"}])
    result = invoke("audit", str(path), "-o", "csv", "--id-field", "id")
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert lines[1].endswith(",\\x3a:error::a\\x0ab") and lines[2].endswith(",c")


def test_markdown_report_lists_skipped_input() -> None:
    corpus = CORPUS
    result = invoke("audit", str(corpus / "q_zero.jsonl"), "-o", "markdown", "--on-error", "skip")
    assert result.exit_code == 0
    assert "| skipped rows | 1 | bad rows left out (--on-error skip) |" in result.stdout
    assert "### Skipped input" in result.stdout
    assert (
        f"| {corpus / 'q_zero.jsonl'}:3 | q\\[1\\] = 0.0 is zero: a drafted token always has q > 0 |" in result.stdout
    )


INVISIBLE = "a\u061cb\u2060c\u2061d\u2064e\U000e0001\U000e0041\U000e007ff\u00adg"


@pytest.mark.parametrize("output", ["table", "csv"])
def test_invisible_format_characters_are_shown_in_tables_and_csv(tmp_path: Path, output: str) -> None:
    """Unicode's format characters (the Arabic letter mark, word joiners, invisible operators, tag
    characters, the soft hyphen) can hide text in a cell: every one is shown as an escape."""
    path = write_jsonl(tmp_path / "log.jsonl", [{**FIRST_EXAMPLE, "id": INVISIBLE}, {**FIRST_EXAMPLE, "id": "plain"}])
    options = ("--id-field", "id") if output == "csv" else ("--group-by", "id")
    result = invoke("audit", str(path), "-o", output, *options)
    assert result.exit_code == 0, result.stderr
    assert not any(char in result.stdout for char in INVISIBLE if not char.isascii())
    assert "\\u061c" in result.stdout and "\\U000e0041" in result.stdout and "\\xad" in result.stdout
