"""A write killed mid-way (a real kill -9) leaves its temporary file beside the target, never a partial target;
the next write into that folder removes it, and only such files: never one a live writer holds, never a
young one, never a user's file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from specaccept_cli.cli.destinations import LEFTOVER_SECONDS, remove_leftovers

HOLDING_WRITER = """
import sys, time
from specaccept_cli.cli.destinations import opened, target
with opened(target(sys.argv[1])) as raw:
    raw.write(b"x" * 100_000)
    raw.flush()
    print("writing", flush=True)
    time.sleep(120)
"""


def _simulate(runs: int, name: str) -> list[str]:
    options = ["--runs", str(runs), "--alpha", "0.7", "--k", "8", "--seed", "1", "-o", name]
    return [sys.executable, "-m", "specaccept_cli", "simulate", *options]


def _temporaries(folder: Path) -> list[Path]:
    return sorted(folder.glob(".specaccept-*.tmp"))


def _age(path: Path) -> None:
    """As if the file had been left there for longer than a write that is still going keeps it untouched."""
    then = time.time() - 2 * LEFTOVER_SECONDS
    os.utime(path, (then, then))


def _killed_mid_write(folder: Path, name: str) -> Path:
    """A real `simulate -o` killed with SIGKILL while its output is half written: its temporary file."""
    process = subprocess.Popen(
        _simulate(3_000_000, name),
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline and process.poll() is None, "the write never started"
        found = _temporaries(folder)
        if found and found[0].stat().st_size > 0:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert not (folder / name).exists()  # the target is never partial
    (left,) = _temporaries(folder)
    return left


def _holding(folder: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A writer of ours alive in the middle of its write (it holds its temporary file)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDING_WRITER, str(folder / name)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stdout.readline() == b"writing\n"
    return process, next(path for path in _temporaries(folder) if path.stat().st_size == 100_000)


def test_the_next_write_removes_what_a_killed_write_left_and_nothing_else(tmp_path: Path) -> None:
    left = _killed_mid_write(tmp_path, "runs.jsonl")
    young = left.read_bytes()
    # Right after the kill the file is young: a write that is still going looks the same, so it stays.
    assert remove_leftovers(str(tmp_path)) == 0 and left.exists()
    live, held = _holding(tmp_path, "other.jsonl")
    try:
        users = [tmp_path / ".specaccept-notes.tmp", tmp_path / "specaccept-abcdefgh.tmp", tmp_path / "x.tmp"]
        for path in users:
            path.write_text("mine")
        for path in [left, held, *users]:
            _age(path)
        subprocess.run(_simulate(10, "runs.jsonl"), cwd=tmp_path, check=True)
        assert young and not left.exists()  # the dead write's leftover is gone
        assert held.exists() and held.stat().st_size == 100_000  # the live writer's file is untouched
        assert all(path.read_text() == "mine" for path in users)
        assert (tmp_path / "runs.jsonl").read_bytes().count(b"\n") == 10
    finally:
        live.send_signal(signal.SIGKILL)  # a second real kill mid-write: now that file is a leftover too
        live.communicate(timeout=30)
    _age(held)
    assert remove_leftovers(str(tmp_path)) == 1 and not held.exists()
    assert not (tmp_path / "other.jsonl").exists()
