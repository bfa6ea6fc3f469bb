"""Real pipes and signals: `| head`, SIGINT, /dev/full, a closed stdout; exit status and one stderr line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import orjson
import pytest

from tests.helpers import (
    CORPUS,
    invoke,
    shell,
)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 9 MB of JSONL: more than a pipe buffer and more than one 4 MiB block."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    result = invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "8", "--seed", "1", "-o", str(path))
    assert result.exit_code == 0
    return path


@pytest.mark.parametrize(
    ("options", "first"),
    [
        ("-o jsonl", b'{"source":'),
        ("-o csv", b"source,line,k,accepted,emitted"),
        ("--max-rows 5000", "╭─ specaccept".encode()),
        ("-o markdown --group-by id", b"### specaccept"),
    ],
)
def test_head_ends_the_pipeline_quietly(big_log: Path, options: str, first: bytes) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli audit {big_log} {options} | head -1; echo "status $?"')
    # `sh -c 'a | head'` reports head's status; so ask for ours through PIPESTATUS-free means:
    lines = result.stdout.splitlines()
    assert lines[0].startswith(first)
    assert len(lines) == 2
    assert result.stderr == b""
    ours = shell(f'("$SPECACCEPT" -m specaccept_cli audit {big_log} {options}; echo "ours $?" >&2) | head -1')
    assert ours.stderr == b"ours 0\n"


def _feed_whole_blocks(stdin: IO[bytes], log: Path) -> threading.Thread:
    """Write the first whole blocks of `log` to `stdin` from a thread, and keep it open: the reader then
    streams results for them and waits for more, mid-input."""
    data = log.read_bytes()[: 5 << 20]  # one whole 4 MiB block, then the reader waits for more
    data = data[: data.rfind(b"\n") + 1]

    def feed() -> None:
        try:
            stdin.write(data)
            stdin.flush()
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed)
    writer.start()
    return writer


def test_sigint_mid_stream_dies_of_sigint_with_one_line(big_log: Path) -> None:
    """After cleaning up, the process kills itself with SIGINT (a shell shows 130), as Unix programs do."""
    command = [sys.executable, "-m", "specaccept_cli", "audit", "-", "-o", "jsonl"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(command, **pipes) as process:  # type: ignore[call-overload]
        stdout, stderr = process.stdout, process.stderr
        writer = _feed_whole_blocks(process.stdin, big_log)
        try:
            first = stdout.readline()  # results are streaming: the command is mid-input
            assert first.startswith(b'{"source":"<stdin>","line":1,')
            process.send_signal(signal.SIGINT)
            rest = stdout.read()  # drain, so a flush on the way out cannot block
            status = process.wait(timeout=60)
        finally:
            process.kill()
            writer.join()
        assert status == -signal.SIGINT
        assert stderr.read() == b"specaccept: interrupted\n"
    # Records before the interruption are whole lines; only the very last may be cut.
    *whole, _last = (first + rest).split(b"\n")
    assert all(orjson.loads(line)["source"] == "<stdin>" for line in whole)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
def test_full_disk_is_an_error_not_a_crash(big_log: Path, output: str) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli audit {big_log} -o {output} > /dev/full')
    assert result.returncode == 2
    assert result.stderr == b"specaccept: cannot write output: No space left on device\n"


@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
def test_closed_stdout_is_an_error_not_a_crash(output: str) -> None:
    seed = CORPUS / "q_zero.jsonl"
    result = shell(f'"$SPECACCEPT" -m specaccept_cli audit {seed} -o {output} --on-error skip >&-')
    assert result.returncode == 2
    assert result.stderr == b"specaccept: cannot write output: stdout is closed\n"


@pytest.mark.parametrize("output", ["json", "jsonl", "table"])
def test_closed_stderr_still_gives_the_output(output: str) -> None:
    """`2>&-`: the output is as usual; the skipped rows' table, which had nowhere to go, makes the status 2
    (as `2>/dev/full` does: a report is never dropped silently; `2>/dev/null` is how to discard it)."""
    seed = CORPUS / "q_zero.jsonl"
    closed = shell(f'"$SPECACCEPT" -m specaccept_cli audit {seed} -o {output} --on-error skip 2>&-')
    shown = shell(f'"$SPECACCEPT" -m specaccept_cli audit {seed} -o {output} --on-error skip 2>/dev/null')
    assert shown.returncode == 0 and closed.returncode == 2
    assert closed.stdout == shown.stdout and closed.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ctrl_c_stops_a_shell_loop_over_files(big_log: Path) -> None:
    """Ctrl-C (SIGINT to the whole foreground group) must stop `for f in ...; do specaccept audit $f; done`.

    bash ends such a loop only when the child it waited for died of SIGINT; a child that exits
    130 looks like one that handled the signal, and the loop goes on to the next file.
    """
    script = 'for i in 1 2 3; do "$SPECACCEPT" -m specaccept_cli audit - -o jsonl; echo "next $?"; done; echo "ended"'
    env = {**os.environ, "SPECACCEPT": sys.executable}
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    # Its own process group, like a terminal's foreground job: Ctrl-C signals the shell and the command.
    with subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True, **pipes) as loop:  # type: ignore[call-overload]
        stdout = loop.stdout
        writer = _feed_whole_blocks(loop.stdin, big_log)
        try:
            assert stdout.readline().startswith(b'{"source":"<stdin>","line":1,')  # mid-input
            os.killpg(loop.pid, signal.SIGINT)
            rest = stdout.read()
            loop.wait(timeout=60)
        finally:
            loop.kill()
            writer.join()
        assert b"next" not in rest and b"ended" not in rest
