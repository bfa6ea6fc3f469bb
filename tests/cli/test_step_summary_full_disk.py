"""`$GITHUB_STEP_SUMMARY` on a full disk: the report is appended whole or not at all, and the failed gate's
annotation, its stderr line and exit 1 survive. On a real 64 KiB tmpfs (as root, unmounted after)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import BAD_LINES, ROWS, jsonl_bytes, run_process

PREVIOUS = b"## an earlier step's summary\n"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if not (hasattr(os, "geteuid") and os.geteuid() == 0) or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=False)


def _step_summary_leaving(disk: Path, free: int) -> Path:
    """The step summary file, holding an earlier step's report, on `disk` filled until `free` bytes are left."""
    summary = disk / "step_summary.md"
    summary.write_bytes(PREVIOUS)
    info = os.statvfs(disk)
    (disk / "filler").write_bytes(b"\0" * (info.f_bavail * info.f_frsize - free))
    assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize == free
    return summary


def _bad_log(directory: Path) -> Path:
    """A log whose markdown report (30 bad rows listed under a long name) is larger than one page."""
    path = directory / ("x" * 200 + ".jsonl")
    path.write_bytes(jsonl_bytes(ROWS) + b"".join(BAD_LINES[0] + b"\n" for _ in range(30)))
    return path


def _audit(log: Path, summary: Path, *gates: str) -> subprocess.CompletedProcess[bytes]:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    return run_process("audit", str(log), "--on-error", "skip", "-q", "--github", *gates, env=env)


def test_a_failed_gate_survives_a_full_step_summary(tmp_path: Path, small_disk: Path) -> None:
    summary = _step_summary_leaving(small_disk, 4096)
    result = _audit(_bad_log(tmp_path), summary, "--min-alpha", "0.99")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr  # the gate's status, not an output error's 2
    assert summary.read_bytes() == PREVIOUS  # not half a report
    assert "::error title=specaccept gate::" in stderr
    assert "specaccept: gate failed: alpha = " in stderr  # the gate's own line
    assert f"specaccept: cannot append to $GITHUB_STEP_SUMMARY ({summary}): No space left on device" in stderr
    assert "the step summary is left as it was" in stderr


def test_a_full_step_summary_with_every_gate_passing_is_exit_2(tmp_path: Path, small_disk: Path) -> None:
    summary = _step_summary_leaving(small_disk, 4096)
    result = _audit(_bad_log(tmp_path), summary, "--min-alpha", "0.01")
    assert result.returncode == 2
    assert summary.read_bytes() == PREVIOUS
    assert result.stderr.decode().count("cannot append to $GITHUB_STEP_SUMMARY") == 1


def test_a_report_that_fits_is_appended_whole(tmp_path: Path, small_disk: Path) -> None:
    summary = _step_summary_leaving(small_disk, 32768)
    result = _audit(_bad_log(tmp_path), summary, "--min-alpha", "0.99")
    assert result.returncode == 1
    written = summary.read_bytes()
    assert written.startswith(PREVIOUS + b"### specaccept") and written.endswith(b"\n") and len(written) > 4096
