"""Every way a live audit stops keeps what it read, and stdout into a pipe stays JSON lines to the end.

Real subprocesses, real pipes, FIFOs and signals (issues 35 and 36: a doubled SIGTERM, SIGHUP, a long
unfinished line, a FIFO's writer closing or falling silent, a followed file replaced by a directory).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from tests.helpers import expected_accepted, jsonl_bytes, random_rows

ENV = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
SPECACCEPT = [sys.executable, "-m", "specaccept_cli"]
ROWS = random_rows(400, seed=35)
LINES = jsonl_bytes(ROWS).splitlines(keepends=True)
CHECK_JSON_LINES = "import json, sys\nprint(len([json.loads(line) for line in sys.stdin]))\n"


def _start(*args: str, stdin: int | None = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*SPECACCEPT, *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)


def _first_record(process: subprocess.Popen[bytes], timeout: float = 30) -> dict[str, object]:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = process.stdout.readline()
    assert line and time.monotonic() < deadline, "no record"
    record: dict[str, object] = json.loads(line)
    return record


def _stopped(process: subprocess.Popen[bytes], signum: int) -> tuple[bytes, bytes]:
    """Send `signum`, and collect stdout and stderr with stdin (the writer) still open until the process ends."""
    collected: dict[str, bytes] = {}

    def collect(name: str, stream: IO[bytes] | None) -> None:
        collected[name] = stream.read() if stream is not None else b""

    readers = [
        threading.Thread(target=collect, args=("out", process.stdout)),
        threading.Thread(target=collect, args=("err", process.stderr)),
    ]
    for reader in readers:
        reader.start()
    process.send_signal(signum)
    process.wait(timeout=30)
    for reader in readers:
        reader.join(timeout=10)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return collected["out"], collected["err"]


def _records(out: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def _accepted(count: int) -> int:
    return sum(expected_accepted(ROWS[:count]))


# --- the output contract -----------------------------------------------------------------------


WRITER = """
import sys, time
lines = open(sys.argv[1], "rb").read().splitlines(True)
for start in range(0, len(lines), 50):
    sys.stdout.buffer.write(b"".join(lines[start : start + 50]))
    sys.stdout.flush()
    time.sleep(0.4)
"""


def test_a_follow_into_a_pipe_writes_json_lines_only_and_the_human_summary_to_stderr(tmp_path: Path) -> None:
    # writer | specaccept audit --follow --every 1s | python -c 'json.loads every line': real processes and pipes.
    (tmp_path / "log.jsonl").write_bytes(b"".join(LINES))
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "check.py").write_text(CHECK_JSON_LINES)
    line = (
        '"$PY" writer.py log.jsonl | "$PY" -m specaccept_cli audit --follow --every 1s --min-alpha 0.01 2>err.txt'
        ' | tee out.jsonl | "$PY" check.py; echo "${PIPESTATUS[*]}"'
    )
    done = subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, capture_output=True, env={**ENV, "PY": sys.executable}, timeout=120
    )
    statuses = done.stdout.decode().split()
    err = (tmp_path / "err.txt").read_text()
    assert statuses[-4:] == ["0", "0", "0", "0"], (done.stdout, done.stderr, err[-800:])
    records = _records((tmp_path / "out.jsonl").read_bytes())
    assert int(statuses[0]) == len(records) >= 2  # the checker parsed every line of stdout as JSON
    final = records[-1]
    assert final["final"] is True and final["kind"] == "final" and records[0]["kind"] == "period"
    assert final["total"]["runs"] == len(ROWS)  # type: ignore[index]
    assert final["total"]["accepted_tokens"] == _accepted(len(ROWS))  # type: ignore[index]
    assert all(not record["final"] for record in records[:-1])
    assert "Gates" in err and f"{len(ROWS)}" in err  # the human view of the final summary, on stderr


def test_nothing_reaches_stdout_before_an_input_error(tmp_path: Path) -> None:
    packed = tmp_path / "x.jsonl.gz"
    packed.write_bytes(gzip.compress(b"".join(LINES)))
    for output in ("jsonl", "table"):
        process = _start("audit", "--follow", str(packed), "--every", "1s", "-o", output, stdin=subprocess.DEVNULL)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 2 and out == b""
        assert b"is compressed" in err and b"Traceback" not in err


# --- stop signals ------------------------------------------------------------------------------


@pytest.mark.parametrize("gap", [0.05, 0.5])
def test_the_same_stop_signal_twice_in_a_moment_is_one_request_to_stop(gap: float, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(LINES))
    summary = tmp_path / "summary.json"
    process = _start("audit", "--follow", str(log), "--every", "1s", "-o", "json", "--summary-out", str(summary))
    time.sleep(2.5)
    process.send_signal(signal.SIGTERM)  # as GNU timeout does: the child, then (a moment later) its group
    time.sleep(gap)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    assert json.loads(out)["runs"] == len(ROWS)
    assert json.loads(summary.read_bytes())["runs"] == len(ROWS)


def test_gnu_timeout_ends_a_follow_with_its_summary_every_time(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(LINES))
    runs = [
        subprocess.Popen(
            ["timeout", "8", *SPECACCEPT, "audit", "--follow", str(log), "-o", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=ENV,
        )
        for _ in range(3)
    ]
    for process in runs:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 124, err.decode()  # timeout's own status: it ended the command
        assert json.loads(out)["runs"] == len(ROWS), err.decode()


def test_a_later_second_signal_still_quits_at_once(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(LINES))
    script = (
        "import threading, time\nfrom specaccept_cli.cli.live import stopping_on_signals\n"
        "stop = threading.Event()\nwith stopping_on_signals(stop):\n"
        "    print('ready', flush=True)\n    stop.wait(30)\n    print('stopping', flush=True)\n    time.sleep(30)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=ENV)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    process.send_signal(signal.SIGHUP)
    assert process.stdout.readline() == b"stopping\n"
    time.sleep(0.3)
    process.send_signal(signal.SIGHUP)  # within the moment: the same request
    time.sleep(1.2)
    assert process.poll() is None
    process.send_signal(signal.SIGHUP)  # a second request
    assert process.wait(timeout=10) == -signal.SIGHUP
    process.stdout.close()


def test_sighup_ends_a_follow_as_sigterm_does(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl", "--summary-out", str(summary))
    assert process.stdin is not None
    process.stdin.write(b"".join(LINES[:150]))
    process.stdin.flush()
    assert _first_record(process)["schema"] == "specaccept.interval/1"
    time.sleep(1.2)
    out, err = _stopped(process, signal.SIGHUP)
    assert process.returncode == 0, err.decode()
    assert _records(out)[-1]["total"]["runs"] == 150  # type: ignore[index]
    assert json.loads(summary.read_bytes())["runs"] == 150


def test_an_unfinished_line_of_megabytes_at_a_stop_is_told_and_the_summary_kept(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl", "--summary-out", str(summary))
    assert process.stdin is not None
    process.stdin.write(b"".join(LINES[:100]))
    unfinished = b'{"p": [' + b"0.5, " * (3 << 19)  # 7.5 MiB of a line still being written
    process.stdin.write(unfinished)
    process.stdin.flush()
    time.sleep(2.5)
    out, err = _stopped(process, signal.SIGTERM)
    assert process.returncode == 0, err.decode()[-500:]
    assert _records(out)[-1]["total"]["runs"] == 100  # type: ignore[index]
    assert f"unfinished last line ({len(unfinished)} bytes) not read".encode() in err
    assert json.loads(summary.read_bytes())["runs"] == 100


# --- a FIFO as the followed path ---------------------------------------------------------------


def test_a_followed_fifo_ends_when_its_writer_closes(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)
    process = _start("audit", "--follow", str(fifo), "--every", "1s", "-o", "jsonl", stdin=subprocess.DEVNULL)
    with fifo.open("wb") as writer:  # opens once the audit has opened the FIFO
        for start in range(0, 300, 100):
            writer.write(b"".join(LINES[start : start + 100]))
            writer.flush()
            time.sleep(0.3)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    final = _records(out)[-1]
    assert final["final"] is True and final["total"]["runs"] == 300  # type: ignore[index]
    assert final["total"]["accepted_tokens"] == _accepted(300)  # type: ignore[index]
    assert fifo.exists() and not fifo.is_file()  # left as it was


def test_a_stop_while_a_fifos_writer_is_silent_is_quick_and_tells_the_unfinished_line(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)
    process = _start("audit", "--follow", str(fifo), "--every", "1s", "-o", "jsonl", stdin=subprocess.DEVNULL)
    writer = fifo.open("wb")
    writer.write(b"".join(LINES[:50]) + b'{"p": [0.5')
    writer.flush()
    _first_record(process)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    took = time.monotonic() - started
    writer.close()
    assert process.returncode == 0, err.decode()
    assert took < 5, f"stopping took {took:.1f}s"
    assert _records(out)[-1]["total"]["runs"] == 50  # type: ignore[index]
    assert b"unfinished last line (10 bytes) not read" in err


# --- a followed file replaced by a directory ---------------------------------------------------


def test_a_followed_file_replaced_by_a_directory_reports_what_was_read_and_the_error(tmp_path: Path) -> None:
    log = tmp_path / "server.jsonl"
    log.write_bytes(b"".join(LINES[:100]))
    summary = tmp_path / "summary.json"
    process = _start(
        "audit", "--follow", str(log), "--every", "1s", "-o", "jsonl", "--summary-out", str(summary),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    _first_record(process)
    log.unlink()
    log.mkdir()
    out, err = process.communicate(timeout=30)
    shutil.rmtree(log)
    assert process.returncode == 2
    final = _records(out)[-1]
    assert final["final"] is True and final["total"]["runs"] == 100  # type: ignore[index]
    assert json.loads(summary.read_bytes())["runs"] == 100
    lines = [line for line in err.decode().splitlines() if line.startswith("specaccept: ")]
    assert any(f"{log}: is a directory now" in line for line in lines), err.decode()
    assert b"Traceback" not in err
