"""The group: --help of every command, --version, `python -m`, usage errors, full disks."""

from __future__ import annotations

import subprocess
import sys
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


# --- leaving: no interpreter teardown once everything is written (`cli._leave`) ----------------


def _python(code: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)


def test_leaving_writes_what_is_buffered_and_runs_the_exit_handlers() -> None:
    """Output still in the buffers and what an atexit handler prints both arrive; the status is kept."""
    result = _python(
        "import atexit, sys\n"
        "from specaccept_cli.cli import _leave\n"
        "atexit.register(lambda: sys.stdout.write('handler ran\\n'))\n"
        "sys.stdout.write('x' * 100_000 + 'partial')\n"
        "_leave(3)\n"
    )
    assert result.returncode == 3, result.stderr
    assert result.stdout == b"x" * 100_000 + b"partialhandler ran\n"


def test_leaving_waits_for_a_thread_still_running() -> None:
    """A thread that has not finished is never cut short: the ordinary exit waits for it."""
    result = _python(
        "import sys, threading, time\n"
        "from specaccept_cli.cli import _leave\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    sys.stdout.write('late\\n')\n"
        "threading.Thread(target=late).start()\n"
        "_leave(0)\n"
    )
    assert (result.returncode, result.stdout) == (0, b"late\n")


def test_leaving_with_a_message_exits_as_python_does() -> None:
    result = _python("from specaccept_cli.cli import _leave\n_leave('one line')\n")
    assert (result.returncode, result.stdout, result.stderr) == (1, b"", b"one line\n")


def test_a_large_output_through_a_slow_pipe_arrives_whole(tmp_path: Path) -> None:
    """Every line of `-o jsonl` reaches a reader that takes its time, and the status is the command's."""
    log = tmp_path / "runs.jsonl"
    log.write_bytes(jsonl_bytes([FIRST_EXAMPLE] * 50_000))
    status = tmp_path / "status"
    audit = f'"$SPECACCEPT" -m specaccept_cli audit -o jsonl {log}'
    result = shell(f"{{ {audit}; echo $? > {status}; }} | (sleep 1; wc -l)")
    assert (result.returncode, status.read_text()) == (0, "0\n"), result.stderr
    assert int(result.stdout) == 50_000
