"""SIGTERM, SIGHUP and a killed parent: real signals to real processes, the process tree read from /proc.

An audit told to stop cleans up as it does for Ctrl-C (workers stopped, the Parquet spool removed)
and dies of the signal it got; workers never outlive their parent, however it died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.helpers import IMPORT_MAIN, invoke

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")

# The parallel reader with small blocks, so that a few MB of stdin start the pool: the same code as
# with its 4 MiB blocks, reached without feeding it hundreds of MB.
SMALL_BLOCKS = (
    "import specaccept_cli.pipeline.parallel as parallel\n"
    "parallel.evaluate_source.__kwdefaults__.update(block_bytes=1 << 16, blocks_per_task=1)\n"
    + IMPORT_MAIN
    + "main()\n"
)


@pytest.fixture(scope="module")
def log_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """About 2 MB of whole JSONL lines: dozens of small blocks."""
    path = tmp_path_factory.mktemp("signals") / "log.jsonl"
    assert (
        invoke("simulate", "--runs", "5000", "--alpha", "0.8", "--k", "8", "--seed", "2", "-o", str(path)).exit_code
        == 0
    )
    return path.read_bytes()


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, ...), None when there is no such process."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line.rsplit(")", 1)[1].split()[0]


def _children(parent: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.append(int(entry))
    return children


def _alive(pid: int) -> bool:
    """Running or sleeping: a zombie has exited (here, unreaped by an init that does not reap)."""
    return _state(pid) not in (None, "Z", "X")


def _wait_until(condition: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


class _Audit:
    """`audit` as a real process, stdout and stderr to files (a pipe held by a stray worker never ends)."""

    def __init__(self, directory: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.stdout_path, self.stderr_path = directory / "stdout", directory / "stderr"
        with open(self.stdout_path, "wb") as stdout, open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, *args],
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                env={**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1", **(env or {})},
            )
        self.workers: list[int] = []

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stderr(self) -> bytes:
        return self.stderr_path.read_bytes()

    def close(self) -> None:
        """Whatever outlived the test (a stray worker is this test's failure, not the next one's) is killed."""
        for pid in [*self.workers, self.process.pid]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.stdin.close()


@pytest.fixture
def audits(tmp_path: Path) -> Iterator[list[_Audit]]:
    started: list[_Audit] = []
    yield started
    for audit in started:
        audit.close()


def _parallel_audit_mid_input(tmp_path: Path, log_bytes: bytes, audits: list[_Audit]) -> _Audit:
    """`audit - -j 2` that has started its two workers and waits for more of stdin (kept open)."""
    audit = _Audit(tmp_path, ["-c", SMALL_BLOCKS, "audit", "-", "-j", "2", "-o", "json"])
    audits.append(audit)
    audit.stdin.write(log_bytes)
    audit.stdin.flush()
    assert _wait_until(lambda: len(_children(audit.process.pid)) >= 2), "the pool did not start"
    audit.workers = _children(audit.process.pid)
    time.sleep(0.5)  # the workers are through their first tasks, waiting on the parent's pipe
    assert all(_alive(pid) for pid in audit.workers)
    return audit


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_termination_stops_the_workers_and_dies_of_the_signal(
    tmp_path: Path, log_bytes: bytes, audits: list[_Audit], signum: int
) -> None:
    audit = _parallel_audit_mid_input(tmp_path, log_bytes, audits)
    audit.process.send_signal(signum)
    status = audit.process.wait(timeout=60)
    assert status == -signum  # killed by it: a shell shows 128 + its number
    name = {signal.SIGTERM: "terminated (SIGTERM)", signal.SIGHUP: "hung up (SIGHUP)"}[signum]
    assert audit.stderr == f"specaccept: {name}\n".encode()
    assert _wait_until(lambda: not any(_alive(pid) for pid in audit.workers), timeout=10), "a worker outlived the audit"


def test_a_shell_sees_128_plus_the_signal() -> None:
    """What a supervisor's shell reports for the audit it sent SIGTERM to: 143, and the one line."""
    script = (
        'exec 3<&0; "$SPECACCEPT" -m specaccept_cli audit - <&3 & pid=$!; '  # stdin stays the test's open pipe
        'sleep 2; kill -TERM $pid; wait $pid; echo "status $?"'
    )
    env = {**os.environ, "SPECACCEPT": sys.executable}
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(["sh", "-c", script], env=env, **pipes) as shell:  # type: ignore[call-overload]
        try:
            shell.wait(timeout=60)
        finally:
            shell.kill()
        assert shell.stdout.read() == b"status 143\n"
        ours, *shells = shell.stderr.read().splitlines()
        assert ours == b"specaccept: terminated (SIGTERM)"
        assert shells in ([], [b"Terminated"])  # some shells report the job's death themselves


def test_workers_die_with_a_parent_that_is_killed(tmp_path: Path, log_bytes: bytes, audits: list[_Audit]) -> None:
    """SIGKILL leaves no cleanup to the parent: the kernel ends the workers with it."""
    audit = _parallel_audit_mid_input(tmp_path, log_bytes, audits)
    audit.process.kill()
    assert audit.process.wait(timeout=30) == -signal.SIGKILL
    assert _wait_until(lambda: not any(_alive(pid) for pid in audit.workers), timeout=10), (
        "a worker outlived its parent"
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_spooling_parquet_from_stdin_removes_the_spool(
    tmp_path: Path, audits: list[_Audit], signum: int
) -> None:
    """`cat x.parquet | specaccept audit -` copies stdin to a file in $TMPDIR (Parquet must seek)."""
    spools = tmp_path / "tmp"
    spools.mkdir()
    audit = _Audit(tmp_path, ["-m", "specaccept_cli", "audit", "-"], env={"TMPDIR": str(spools)})
    audits.append(audit)
    audit.stdin.write(b"PAR1" + bytes(3 << 20))  # the magic, then more than the copy's first chunk
    audit.stdin.flush()
    assert _wait_until(lambda: any(path.stat().st_size > 0 for path in spools.iterdir())), "no spool file"
    audit.process.send_signal(signum)
    assert audit.process.wait(timeout=60) == -signum
    assert list(spools.iterdir()) == []
