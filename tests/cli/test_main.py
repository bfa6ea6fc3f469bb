"""The group: --help of every command, --version, `python -m`, usage errors, full disks."""

from __future__ import annotations

from pathlib import Path

import pytest

from specaccept_cli import __version__
from tests.helpers import (
    FIRST_EXAMPLE,
    all_commands,
    invoke,
    jsonl_bytes,
    run_process,
    shell,
)


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


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "-", "--check-sampler", "--sampler-significance", "nan"],
        ["audit", "-", "--cost-ratio", "nan"],
        ["audit", "-", "--cost-ratio", "inf"],
        ["expect", "--alpha", "nan", "--k", "4"],
        ["simulate", "--runs", "2", "--alpha", "nan", "--k", "3"],
        ["simulate", "--runs", "2", "--alpha", "0.5", "--k", "3", "--seed", "-1"],
        ["check", "--p", "[" * 100_000, "--q", "0.5", "--r", "0.1"],
    ],
)
def test_odd_option_values_are_usage_errors(args: list[str]) -> None:
    result = invoke(*args, input=jsonl_bytes([FIRST_EXAMPLE]))
    assert result.exit_code == 2, result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "command",
    [
        "check --p 0.5 --q 0.5 --r 0.1",
        "check --p 0.5 --q 0.5 --r 0.1 --explain",
        "simulate --runs 10 --alpha 0.5 --k 3",
        "expect --alpha 0.8 --k 1-8",
    ],
)
def test_every_command_reports_a_full_disk(command: str) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli {command} > /dev/full')
    assert result.returncode == 2
    assert result.stderr == b"specaccept: cannot write output: No space left on device\n"
    closed = shell(f'"$SPECACCEPT" -m specaccept_cli {command} >&-')
    assert closed.returncode == 2
    assert closed.stderr == b"specaccept: cannot write output: stdout is closed\n"
