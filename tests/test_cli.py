"""Commands end to end: audit's four outputs, check, simulate, --help and --version."""

from __future__ import annotations

import csv
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from specaccept_cli import __version__
from specaccept_cli.summary.formulas import expected_tokens_per_pass
from tests.conftest import FIRST_EXAMPLE, all_commands, invoke, run_process, write_jsonl

# Three runs worked by hand:
#   seed example: k=3, a=1 (examined 2)
#   all kept:     k=2, a=2 (examined 2)
#   empty draft:  k=0, a=0 (examined 0)
HAND_ROWS = [
    {**FIRST_EXAMPLE, "id": "a"},
    {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99], "id": "b"},
    {"p": [], "q": [], "r": [], "id": "c"},
]


@pytest.fixture
def hand_log(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)


def test_audit_json_summary_by_hand(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "-o", "json")
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["schema"] == "specaccept.summary/1"
    assert summary["runs"] == 3
    assert summary["drafted_tokens"] == 5
    assert summary["accepted_tokens"] == 3
    assert summary["examined_tokens"] == 4
    assert summary["alpha"] == 3 / 4
    assert summary["acceptance_rate"] == 3 / 5
    assert summary["mean_accepted"] == 1.0
    assert summary["tokens_per_pass"] == 2.0


def test_audit_jsonl_records(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "-o", "jsonl", "--id-field", "id")
    records = [orjson.loads(line) for line in result.stdout_bytes.splitlines()]
    assert records == [
        {"source": str(hand_log), "line": 1, "k": 3, "accepted": 1, "emitted": 2, "id": "a"},
        {"source": str(hand_log), "line": 2, "k": 2, "accepted": 2, "emitted": 3, "id": "b"},
        {"source": str(hand_log), "line": 3, "k": 0, "accepted": 0, "emitted": 1, "id": "c"},
    ]


def test_audit_csv_records(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "-o", "csv", "--id-field", "id", "--id-field", "missing.field")
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["source", "line", "k", "accepted", "emitted", "id", "missing.field"]
    assert rows[1] == [str(hand_log), "1", "3", "1", "2", "a", ""]
    assert [row[3] for row in rows[1:]] == ["1", "2", "0"]


def test_audit_table_view(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "--max-rows", "2")
    assert result.exit_code == 0
    out = result.stdout
    rows = [line.split("│")[1:-1] for line in out.splitlines() if line.startswith("│") and str(hand_log)[:8] in line]
    assert [[cell.strip() for cell in row[1:]] for row in rows] == [["1", "3", "1", "2"], ["2", "2", "2", "3"]]
    assert "1 more run" in out
    assert "alpha" in out and "0.7500" in out
    assert "tokens per pass" in out and "2.0000" in out
    assert "accepted/drafted understates it" in out


def test_empty_input_is_zero_runs_in_every_mode(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    summary = orjson.loads(invoke("audit", str(empty), "-o", "json").stdout)
    assert summary["runs"] == 0
    assert summary["alpha"] is None and summary["tokens_per_pass"] is None
    assert invoke("audit", str(empty), "-o", "jsonl").stdout == ""
    assert invoke("audit", str(empty), "-o", "csv").stdout == "source,line,k,accepted,emitted\n"
    table = invoke("audit", str(empty))
    assert table.exit_code == 0 and "—" in table.stdout


def test_data_strings_are_escaped_in_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative name: the source column does not fold it
    hostile = Path("[bold red]x\x1b[31m.jsonl")
    write_jsonl(hostile, [FIRST_EXAMPLE])
    result = invoke("audit", str(hostile))
    assert "[bold red]x\\x1b[31m.jsonl" in result.stdout
    assert "\x1b" not in result.stdout


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


def test_simulate_is_honest_and_reproducible(tmp_path: Path) -> None:
    path = tmp_path / "sim.jsonl"
    assert (
        invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "4", "--seed", "3", "-o", str(path)).exit_code
        == 0
    )
    again = invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "4", "--seed", "3").stdout_bytes
    assert path.read_bytes() == again
    summary = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert summary["runs"] == 20000 and summary["drafted_tokens"] == 80000
    assert abs(summary["alpha"] - 0.8) < 0.01  # sd of alpha-hat here is about 0.003
    assert abs(summary["tokens_per_pass"] - expected_tokens_per_pass(0.8, 4)) < 0.03


def test_simulate_parquet_and_gzip_and_k_range(tmp_path: Path) -> None:
    parquet = tmp_path / "sim.parquet"
    gz = tmp_path / "sim.jsonl.gz"
    for path in (parquet, gz):
        result = invoke("simulate", "--runs", "3000", "--alpha", "0.6", "--k", "1-8", "--seed", "5", "-o", str(path))
        assert result.exit_code == 0, result.stderr
    a = orjson.loads(invoke("audit", str(parquet), "-o", "json").stdout)
    b = orjson.loads(invoke("audit", str(gz), "-o", "json").stdout)
    assert a == {**b}  # same seed, same runs, whichever the format
    ks = {k for k, _, _ in a["state"]["joint_counts"]}
    assert ks == set(range(1, 9))


@pytest.mark.parametrize("alpha", ["0", "1"])
def test_simulate_extremes(alpha: str) -> None:
    out = invoke("simulate", "--runs", "200", "--alpha", alpha, "--k", "3", "--seed", "1").stdout
    summary = orjson.loads(invoke("audit", "-", "-o", "json", input=out).stdout)
    assert summary["accepted_tokens"] == (0 if alpha == "0" else 600)


def test_simulate_bad_k_is_a_usage_error() -> None:
    result = invoke("simulate", "--runs", "1", "--alpha", "0.5", "--k", "8-1")
    assert result.exit_code == 2
    assert "--k" in result.stderr


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert __version__ in result.stdout


@pytest.mark.parametrize("command", [[], *([name] for name in all_commands())])
def test_every_command_has_help(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.stdout


def test_python_dash_m_works() -> None:
    result = run_process("check", "--p", "0.5", "--q", "1.0", "--r", "0.5")
    assert result.returncode == 0
    assert result.stdout == b"1\n"


def test_unknown_option_is_a_usage_error() -> None:
    result = run_process("audit", "--no-such-option")
    assert result.returncode == 2
    assert b"No such option" in result.stderr


def _stderr_on_a_terminal(*args: str) -> bytes:
    primary, secondary = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-m", "specaccept_cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=secondary,
            env={**os.environ, "TERM": "xterm-256color"},
            check=True,
            timeout=120,
        )
    finally:
        os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the other side is closed
            break
        if not chunk:
            break
        output += chunk
    os.close(primary)
    return output


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(tmp_path: Path) -> None:
    path = tmp_path / "sim.jsonl"
    invoke("simulate", "--runs", "20000", "--alpha", "0.7", "--k", "6", "--seed", "1", "-o", str(path))
    shown = _stderr_on_a_terminal("audit", str(path), "-o", "json")
    assert b"reading" in shown and b"runs" in shown
    assert _stderr_on_a_terminal("audit", str(path), "-o", "json", "-q") == b""
    piped = run_process("audit", str(path), "-o", "json")
    assert piped.returncode == 0 and piped.stderr == b""
