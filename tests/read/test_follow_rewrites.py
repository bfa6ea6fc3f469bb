"""A followed file truncated and written again past the read position between two looks (`copytruncate` on a
busy log): read again from its start, said, nothing lost. On real files, truncated for real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from specaccept_cli.read.follow import FollowedStream
from tests.helpers import expected_accepted, jsonl_bytes, random_rows


def _lines(prefix: bytes, count: int) -> bytes:
    return b"".join(prefix + b" %06d\n" % i for i in range(count))


def _read_lines(stream: FollowedStream, count: int) -> list[bytes]:
    """`count` lines from the stream; a guard ends the read (stop) if they never come, so a failure is a count."""
    out: list[bytes] = []

    def read() -> None:
        while len(out) < count:
            chunk = stream.read(1 << 16)
            if not chunk:
                return
            out.extend(chunk.splitlines())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=20)
    stream.stop.set()
    reader.join(timeout=5)
    return out


def _copytruncate(path: Path, data: bytes) -> None:
    """What logrotate's copytruncate and a busy writer do: the same file emptied in place, then written past
    where it was read."""
    before = os.stat(path)
    with path.open("r+b") as handle:
        handle.truncate(0)
    with path.open("ab") as handle:
        handle.write(data)
    after = os.stat(path)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino) and after.st_size > before.st_size


def test_a_file_truncated_and_refilled_past_the_read_position_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(_lines(b"old", 1501))
    stream = FollowedStream("server.log", threading.Event(), path=path, poll=0.01)
    first: list[bytes] = []
    while len(first) < 1501:  # the whole file as it was, then the reader is at its end
        first += stream.read(1 << 16).splitlines()
    _copytruncate(path, _lines(b"new", 2501))
    again = _read_lines(stream, 2501)
    stream.close()
    assert len(first) == 1501
    assert again == _lines(b"new", 2501).splitlines()  # every new line, from the first, once
    assert stream.events.truncations == 1 and stream.events.rotations == 0
    assert stream.events.notes == [
        "server.log: truncated and written again past the read position; read again from its start"
    ]


def test_a_line_cut_by_the_truncation_is_ended_not_joined_to_the_new_first_line(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(_lines(b"old", 300) + b"half a li")
    stream = FollowedStream("server.log", threading.Event(), path=path, poll=0.01)
    first: list[bytes] = []
    while len(first) < 300:
        first += stream.read(1 << 16).splitlines()
    _copytruncate(path, _lines(b"new", 900))
    again = _read_lines(stream, 901)
    stream.close()
    assert again[0] == b"half a li" and again[1:] == _lines(b"new", 900).splitlines()


def test_a_file_that_only_grew_is_never_read_twice(tmp_path: Path) -> None:
    """The check must not fire on a file appended to: the bytes before the read position are still there."""
    path = tmp_path / "server.log"
    path.write_bytes(_lines(b"a", 2000))
    stream = FollowedStream("server.log", threading.Event(), path=path, poll=0.01)
    got: list[bytes] = []
    while len(got) < 2000:
        got += stream.read(1 << 16).splitlines()
    with path.open("ab") as handle:
        handle.write(_lines(b"b", 3000))
    got += _read_lines(stream, 3000)
    stream.close()
    assert got == (_lines(b"a", 2000) + _lines(b"b", 3000)).splitlines()
    assert stream.events.truncations == 0


def test_audit_follow_counts_every_run_of_a_log_rewritten_within_one_poll(tmp_path: Path) -> None:
    rows = random_rows(4002, seed=44)
    log = tmp_path / "server.jsonl"
    log.write_bytes(jsonl_bytes(rows[:1501]))
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "specaccept_cli", "audit", "--follow", str(log), "--every", "1s", "-o", "jsonl"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while True:  # interval records until the first 1,501 runs are counted
        assert time.monotonic() < deadline, "the first lines were never counted"
        record = json.loads(process.stdout.readline())
        if record["total"]["runs"] == 1501:
            break
    _copytruncate(log, jsonl_bytes(rows[1501:]))  # 2,501 rows, past the old read position, in one write
    while True:
        assert time.monotonic() < deadline, "the rewritten file was not read to its end"
        record = json.loads(process.stdout.readline())
        if record["total"]["runs"] >= 4002:
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    final = json.loads(out.splitlines()[-1])
    assert final["final"] is True and final["total"]["runs"] == 4002
    assert final["total"]["accepted_tokens"] == sum(expected_accepted(rows))
    assert "truncated and written again past the read position" in err.decode()
