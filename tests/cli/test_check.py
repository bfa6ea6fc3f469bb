"""`check`: the number alone, --explain, bad input, and a start-up that pays for no numpy, pyarrow or rich."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import (
    IMPORT_MAIN,
    invoke,
)


def test_check_prints_the_number_alone() -> None:
    result = invoke("check", "--p", "0.9,0.2,0.8", "--q", "0.5,0.8,0.4", "--r", "0.1,0.5,0.2")
    assert result.exit_code == 0
    assert result.stdout == "1\n"


@pytest.mark.parametrize(
    ("p", "q", "r", "expected"),
    [
        ("[0.5, 0.5]", "[0.5, 0.5]", "[0.3, 0.9]", "2"),
        ("0.9,0.9", "0.3,0.3", "0.99,0.99", "2"),
        ("0.5", "1.0", "0.5", "1"),
        ("0.1", "0.9", "0.5", "0"),
        ("", "", "", "0"),
        ("[]", "[]", "[]", "0"),
    ],
)
def test_check_seed_edge_cases(p: str, q: str, r: str, expected: str) -> None:
    result = invoke("check", "--p", p, "--q", q, "--r", r)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == expected


def test_check_explain_names_the_stopping_token() -> None:
    result = invoke("check", "--p", "0.9,0.2,0.8", "--q", "0.5,0.8,0.4", "--r", "0.1,0.5,0.2", "--explain")
    lines = result.stdout.splitlines()
    assert lines[0] == "1"
    assert "Token 2 stopped the run" in result.stdout
    assert "rejected" in result.stdout and "would pass" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--p", "0.5,x", "--q", "0.5,0.5", "--r", "0.1,0.1"], "item 1 ('x') is not a number"),
        (["--p", "0.5", "--q", "0", "--r", "0.1"], "q[0] = 0.0 is zero"),
        (["--p", "0.5,0.5", "--q", "0.5", "--r", "0.1"], "different lengths (2, 1, 1)"),
        (["--p", "nan", "--q", "0.5", "--r", "0.1"], "not a finite number"),
        (["--p", "[0.5", "--q", "0.5", "--r", "0.1"], "not a JSON array"),
        (["--p", "1.5", "--q", "0.5", "--r", "0.1"], "out of range"),
    ],
)
def test_check_invalid_input_exits_2(args: list[str], message: str) -> None:
    result = invoke("check", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_check_imports_neither_numpy_nor_pyarrow_nor_rich() -> None:
    code = (
        "import atexit, sys\n"
        "def heavy():\n"  # main() ends the process; its exit handlers run first
        "    loaded = sorted(name for name in ('numpy', 'pyarrow', 'rich', 'orjson') if name in sys.modules)\n"
        "    print(loaded, file=sys.stderr)\n"
        "atexit.register(heavy)\n"
        + IMPORT_MAIN
        + "sys.argv = ['specaccept', 'check', '--p', '0.9,0.2,0.8', '--q', '0.5,0.8,0.4', '--r', '0.1,0.5,0.2']\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert result.stdout == b"1\n"
    assert result.stderr.strip().splitlines()[-1] == b"[]"


@pytest.mark.parametrize(
    "item",
    ["\u0661", "\u0660.\u0665", "\uff11", "\u0967", ".5", "5.", "+0.5", "00.5", "0x1", "1_0", "0.5\u3000"],
)
def test_check_reads_numbers_as_json_does(item: str) -> None:
    """What a JSON log could not hold as a number is no number here either (float() alone takes
    Arabic-Indic and fullwidth digits, a leading + or a bare decimal point)."""
    with pytest.raises(ValueError):
        json.loads(f"[{item}]")
    result = invoke("check", "--p", f"0.5,{item}", "--q", "1,1", "--r", "0.1,0.1")
    assert result.exit_code == 2
    assert "item 1 (" in result.stderr and "is not a number" in result.stderr


@pytest.mark.parametrize("items", ["0.5, 1", " 0.5,1e0 ", "0.5,1E-0", "[0.5, 1]", "5e-1,1.0"])
def test_check_takes_every_json_number_and_blanks_around_it(items: str) -> None:
    result = invoke("check", "--p", items, "--q", "1,1", "--r", "0.5,1")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "2\n"
