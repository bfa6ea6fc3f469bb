"""Every output is written the careful way: never over an input, in place into devices, FIFOs and
descriptors, through symlinks, whole (short writes and full disks), and still when `| head` leaves.

Real files, real FIFOs, a device node made with mknod and a 64 KiB tmpfs (both as root, skipped
otherwise), real pipes into `head`, /dev/full.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    BAD_LINES,
    ROWS,
    invoke,
    invoke_env,
    jsonl_bytes,
    save,
    shell,
    simulated,
    without_provenance,
    write_jsonl,
    write_parquet,
)

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NO_SPACE = b"specaccept: cannot write output: No space left on device\n"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """300 runs and one bad row (for --on-error skip and --quarantine)."""
    path = tmp_path / "logs.jsonl"
    path.write_bytes(jsonl_bytes(ROWS) + BAD_LINES[0] + b"\n")
    return path


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 9 MB of JSONL: its per-run records fill any pipe buffer."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    assert (
        invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "8", "--seed", "1", "-o", str(path)).exit_code
        == 0
    )
    return path


def _summary_file(directory: Path, name: str) -> Path:
    return save(simulated(500, 0.7, seed=len(name)), directory / name)


# --- an output that is an input -------------------------------------------------------------------


def _cases(tmp_path: Path, log: Path) -> dict[str, tuple[list[str], Path, str]]:
    """Command lines whose output is one of their inputs: (arguments, the input at risk, the option)."""
    a, b = _summary_file(tmp_path, "a.json"), _summary_file(tmp_path, "b.json")
    shards = tmp_path / "shards"
    shards.mkdir()
    shard = write_parquet(shards / "part-0.parquet", [dict(row) for row in ROWS[:50]], 20)
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    hard = tmp_path / "hard.jsonl"
    os.link(log, hard)
    return {
        "quarantine": (["audit", str(log), "--on-error", "skip", "--quarantine", str(log)], log, "--quarantine"),
        "summary-out": (["audit", str(log), "--on-error", "skip", "--summary-out", str(log)], log, "--summary-out"),
        "html": (["audit", str(log), "--on-error", "skip", "--html", str(log)], log, "--html"),
        "baseline": (
            ["audit", str(log), "--on-error", "skip", "--baseline", str(a), "--summary-out", str(a)],
            a,
            "--summary-out",
        ),
        "report": (["report", str(log), "--on-error", "skip", "-o", str(log)], log, "-o"),
        "report of summaries": (["report", "--summary", str(a), "--summary", str(b), "-o", str(b)], b, "-o"),
        "merge": (["merge", str(a), str(b), "-o", str(a)], a, "-o"),
        "a symlink to it": (
            ["audit", str(log), "--on-error", "skip", "--summary-out", str(link)],
            log,
            "--summary-out",
        ),
        "a hard link to it": (
            ["audit", str(log), "--on-error", "skip", "--summary-out", str(hard)],
            log,
            "--summary-out",
        ),
        "a shard in a folder": (["audit", str(shards), "--summary-out", str(shard)], shard, "--summary-out"),
        "another spelling": (
            ["audit", str(log), "--on-error", "skip", "--html", f"{tmp_path}/./logs.jsonl"],
            log,
            "--html",
        ),
    }


CASES = [
    "quarantine",
    "summary-out",
    "html",
    "baseline",
    "report",
    "report of summaries",
    "merge",
    "a symlink to it",
    "a hard link to it",
    "a shard in a folder",
    "another spelling",
]


@pytest.mark.parametrize("case", CASES)
def test_an_output_that_is_an_input_is_refused_before_reading(tmp_path: Path, log: Path, case: str) -> None:
    args, at_risk, option = _cases(tmp_path, log)[case]
    before = at_risk.read_bytes()
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"specaccept: {option} ")
    assert "is the input" in result.stderr and "writing it would destroy the input" in result.stderr
    assert result.stdout == ""  # refused before anything was read or shown
    assert at_risk.read_bytes() == before
    assert not list(tmp_path.glob(".specaccept-*"))


def test_stdout_into_an_input_is_refused(tmp_path: Path, log: Path) -> None:
    """`>> logs.jsonl` would grow the input while it is read; `< logs.jsonl` with an output over it destroys it."""
    before = log.read_bytes()
    appended = shell(f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip -o json >> {log}')
    assert appended.returncode == 2
    assert appended.stderr == f"specaccept: stdout is the input {log}: writing it would destroy the input\n".encode()
    over_stdin = shell(f'"$SPECACCEPT" -m specaccept_cli audit - --on-error skip --summary-out {log} < {log}')
    assert over_stdin.returncode == 2
    assert over_stdin.stderr == (
        f"specaccept: --summary-out {log} is the input stdin: writing it would destroy the input\n".encode()
    )
    a, b = _summary_file(tmp_path, "a.json"), _summary_file(tmp_path, "b.json")
    summary = a.read_bytes()
    merged = shell(f'"$SPECACCEPT" -m specaccept_cli merge {a} {b} >> {a}')
    assert merged.returncode == 2 and b"stdout is the input" in merged.stderr
    compared = shell(f'"$SPECACCEPT" -m specaccept_cli diff {a} {b} -o json >> {b}')
    assert compared.returncode == 2 and b"stdout is the input" in compared.stderr
    step = invoke_env({"GITHUB_STEP_SUMMARY": str(log)}, "audit", str(log), "--on-error", "skip", "--github")
    assert step.exit_code == 2
    assert step.stderr.startswith(f"specaccept: $GITHUB_STEP_SUMMARY {log} is the input {log}")
    assert log.read_bytes() == before and a.read_bytes() == summary


def test_two_outputs_that_are_one_file_are_refused(tmp_path: Path, log: Path) -> None:
    out = tmp_path / "out.json"  # not made yet: the same resolved path
    result = invoke(
        "audit", str(log), "--on-error", "skip", "--summary-out", str(out), "--html", f"{tmp_path}/x/../out.json"
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: --html {tmp_path}/x/../out.json is the same file as --summary-out {out}: "
        "one would overwrite the other\n"
    )
    assert not out.exists()
    # `> out.json` while --summary-out replaced out.json would send stdout to a file no longer there.
    redirected = shell(f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip --summary-out {out} > {out}')
    assert redirected.returncode == 2
    assert b"stdout is the same file as --summary-out" in redirected.stderr


# --- what the path is: a symlink, a FIFO, a device, a descriptor ---------------------------------


def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path: Path, log: Path) -> None:
    folder = tmp_path / "kept"
    folder.mkdir()
    target = folder / "summary.json"
    target.write_bytes(b"old")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    dangling = tmp_path / "next.json"
    dangling.symlink_to(folder / "not-yet.json")
    for path in (link, dangling):
        result = invoke("audit", str(log), "--on-error", "skip", "--summary-out", str(path))
        assert result.exit_code == 0, result.stderr
        assert path.is_symlink()
    assert orjson.loads(target.read_bytes())["runs"] == len(ROWS)
    assert orjson.loads((folder / "not-yet.json").read_bytes())["runs"] == len(ROWS)
    assert sorted(item.name for item in folder.iterdir()) == ["not-yet.json", "summary.json"]  # no temporary left


def test_a_replaced_file_keeps_its_permissions(tmp_path: Path, log: Path) -> None:
    private = tmp_path / "private.json"
    private.write_bytes(b"old")
    private.chmod(0o600)
    assert invoke("audit", str(log), "--on-error", "skip", "--summary-out", str(private)).exit_code == 0
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert orjson.loads(private.read_bytes())["runs"] == len(ROWS)


@contextlib.contextmanager
def _drained_fifo(path: Path) -> Iterator[list[bytes]]:
    """A named pipe at `path` that a thread reads to its end while the block runs; what it read, after."""
    os.mkfifo(path)
    got: list[bytes] = []

    def drain() -> None:
        with open(path, "rb") as reader:
            got.append(reader.read())

    reader = threading.Thread(target=drain, daemon=True)  # a FIFO replaced by a file leaves it waiting
    reader.start()
    try:
        yield got
    finally:
        reader.join(timeout=30)
        assert not reader.is_alive(), "nothing was written into the FIFO"


def test_a_fifo_is_written_into_never_replaced(tmp_path: Path, log: Path) -> None:
    plain = tmp_path / "plain.json"
    assert invoke("audit", str(log), "--on-error", "skip", "--summary-out", str(plain)).exit_code == 0
    outputs = {
        "summary": ["audit", str(log), "--on-error", "skip", "--summary-out"],
        "quarantine": ["audit", str(log), "--on-error", "skip", "-q", "--quarantine"],
        "report": ["report", str(log), "--on-error", "skip", "-o"],
        "simulate": ["simulate", "--runs", "50", "--alpha", "0.8", "--k", "4", "--seed", "3", "-o"],
    }
    read: dict[str, bytes] = {}
    for name, args in outputs.items():
        fifo = tmp_path / f"{name}.fifo"
        with _drained_fifo(fifo) as got:
            result = invoke(*args, str(fifo))
        assert result.exit_code == 0, result.stderr
        assert stat.S_ISFIFO(fifo.stat().st_mode)
        read[name] = got[0]
    assert without_provenance(read["summary"]) == without_provenance(plain.read_bytes())
    assert read["quarantine"] == BAD_LINES[0] + b"\n"
    assert read["report"].startswith(b"<!DOCTYPE html>")
    simulated_file = tmp_path / "sim.jsonl"
    invoke("simulate", "--runs", "50", "--alpha", "0.8", "--k", "4", "--seed", "3", "-o", str(simulated_file))
    assert read["simulate"] == simulated_file.read_bytes()


@pytest.mark.skipif(not IS_ROOT, reason="mknod needs root")
def test_a_device_node_is_written_into_never_replaced(tmp_path: Path, log: Path) -> None:
    """As root, replacing `/dev/null` would turn it into a regular file for the whole machine."""
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the null device
    except PermissionError:
        pytest.skip("no permission to make device nodes here")
    a, b = _summary_file(tmp_path, "a.json"), _summary_file(tmp_path, "b.json")
    for args in (
        ["audit", str(log), "--on-error", "skip", "--summary-out", str(node), "--quarantine", str(tmp_path / "q")],
        ["audit", str(log), "--on-error", "skip", "-q", "--html", str(node)],
        ["merge", str(a), str(b), "-o", str(node)],
        ["simulate", "--runs", "20", "--alpha", "0.8", "--k", "4", "-o", str(node)],
        ["simulate", "--runs", "20", "--alpha", "0.8", "--k", "4", "-o", f"{node}.parquet"],
    ):
        if args[-1].endswith(".parquet"):  # a link named like Parquet, to the same device
            Path(args[-1]).symlink_to(node)
        result = invoke(*args)
        assert result.exit_code == 0, result.stderr
        assert stat.S_ISCHR(node.stat().st_mode)
        assert node.stat().st_size == 0
    assert stat.S_ISCHR(os.stat(f"{node}.parquet").st_mode) and Path(f"{node}.parquet").is_symlink()
    both = invoke("audit", str(log), "--on-error", "skip", "--summary-out", str(node), "--html", str(node))
    assert both.exit_code == 0, both.stderr  # a device twice overwrites nothing
    assert stat.S_ISCHR(node.stat().st_mode)


def _descriptor_link(directory: Path, fd: int) -> Path:
    """A link to /proc/self/fd/N, as /dev/stdout and /dev/fd/N are (here: no risk to the real /dev as root)."""
    link = directory / f"fd{fd}"
    link.symlink_to(f"/proc/self/fd/{fd}")
    return link


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_descriptor_link_writes_into_the_stream_the_shell_opened(tmp_path: Path, log: Path) -> None:
    """`--summary-out /dev/stdout > out.json`: the summary and then stdout, both in out.json.

    Resolved to out.json and replaced, the summary would have pulled the file from under stdout
    (and as root, a replaced /dev/stdout is a regular file for every program on the machine).
    """
    out, stdout = tmp_path / "out.json", _descriptor_link(tmp_path, 1)
    command = f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip -o json --summary-out {stdout} > {out}'
    result = shell(command)
    assert result.returncode == 0, result.stderr
    saved, printed = orjson.loads(b"[" + out.read_bytes().replace(b"}\n{", b"},\n{") + b"]")
    assert saved["runs"] == printed["runs"] == len(ROWS)
    assert stdout.is_symlink()
    fd3 = _descriptor_link(tmp_path, 3)
    command = f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip -q --quarantine {fd3} 3> {tmp_path}/q'
    assert shell(command).returncode == 0
    assert (tmp_path / "q").read_bytes() == BAD_LINES[0] + b"\n"
    closed = shell(
        f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip --summary-out {_descriptor_link(tmp_path, 7)}'
    )
    assert closed.returncode == 2
    assert closed.stderr == f"specaccept: cannot write --summary-out {tmp_path}/fd7: descriptor is not open\n".encode()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fd1", "fd3", "fd7", "logs.jsonl", "out.json", "q"]


# --- short writes, full disks -----------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB tmpfs, mounted for the test and unmounted after it (root only)."""
    if not IS_ROOT or shutil.which("mount") is None:
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


def _fill_leaving(disk: Path, free: int) -> None:
    """Fill `disk` until `free` bytes are left: an output larger than that is cut by a short write."""
    info = os.statvfs(disk)
    (disk / "filler").write_bytes(b"\0" * (info.f_bavail * info.f_frsize - free))
    info = os.statvfs(disk)
    assert info.f_bavail * info.f_frsize == free


def _long_named_bad_log(directory: Path) -> Path:
    """Many bad rows in a file with a long name: its markdown lists them, and outgrows one page."""
    path = directory / ("x" * 200 + ".jsonl")
    path.write_bytes(jsonl_bytes(ROWS) + b"".join(BAD_LINES[0] + b"\n" for _ in range(30)))
    return path


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("output", ["json", "jsonl", "csv", "markdown", "table"])
def test_a_full_disk_mid_output_is_an_error_not_a_short_file(
    tmp_path: Path, big_log: Path, small_disk: Path, output: str, unbuffered: bool
) -> None:
    """One page left: the first write is cut short; the rest must be written, so the disk's refusal is seen."""
    source = _long_named_bad_log(tmp_path) if output == "markdown" else big_log
    full = " --full" if output == "table" else ""  # every table: more than the one page left on the disk
    expected = invoke("audit", str(source), "-o", output, "--on-error", "skip", "-q", *full.split()).stdout_bytes
    assert len(expected) > 4096
    _fill_leaving(small_disk, 4096)
    env = "PYTHONUNBUFFERED=1 " if unbuffered else ""
    result = shell(
        f'{env}"$SPECACCEPT" -m specaccept_cli audit {source} -o {output}{full} --on-error skip 2>&1 > {small_disk}/out'
    )
    assert result.returncode == 2
    assert result.stdout.endswith(NO_SPACE)
    assert b"Traceback" not in result.stdout
    assert expected.startswith((small_disk / "out").read_bytes())


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
def test_simulate_onto_a_full_disk_is_an_error(small_disk: Path, unbuffered: bool) -> None:
    _fill_leaving(small_disk, 4096)
    env = "PYTHONUNBUFFERED=1 " if unbuffered else ""
    simulate = '"$SPECACCEPT" -m specaccept_cli simulate --runs 2000 --alpha 0.8 --k 4'
    piped = shell(f"{env}{simulate} > {small_disk}/out.jsonl")
    assert piped.returncode == 2
    assert piped.stderr == NO_SPACE
    named = shell(f"{env}{simulate} -o {small_disk}/named.jsonl")
    assert named.returncode == 2
    assert named.stderr == f"specaccept: cannot write {small_disk}/named.jsonl: No space left on device\n".encode()
    assert sorted(path.name for path in small_disk.iterdir()) == ["filler", "out.jsonl"]  # no half file, no temporary


def test_a_summary_that_does_not_fit_leaves_the_old_one_whole(tmp_path: Path, big_log: Path, small_disk: Path) -> None:
    old = small_disk / "summary.json"
    old.write_bytes(b'{"old": true}\n')
    _fill_leaving(small_disk, 4096)
    result = invoke("audit", str(big_log), "-q", "--summary-out", str(old), "--html", str(small_disk / "r.html"))
    assert result.exit_code == 2
    assert result.stderr == f"specaccept: cannot write {old}: No space left on device\n"
    assert old.read_bytes() == b'{"old": true}\n'
    assert sorted(path.name for path in small_disk.iterdir()) == ["filler", "summary.json"]


# --- stdout closed early, /dev/full ------------------------------------------------------------------


@pytest.mark.parametrize("options", ["-o jsonl", "-o csv", "-o json", "--max-rows 5000"])
def test_head_closing_stdout_still_gets_the_side_outputs_written(tmp_path: Path, big_log: Path, options: str) -> None:
    summary, html, quarantine = tmp_path / "s.json", tmp_path / "r.html", tmp_path / "q.jsonl"
    sides = f"--summary-out {summary} --html {html} --on-error skip --quarantine {quarantine}"
    result = shell(f'("$SPECACCEPT" -m specaccept_cli audit {big_log} {options} {sides}; echo "ours $?" >&2) | head -1')
    assert len(result.stdout.splitlines()) == 1
    assert result.stderr == b"ours 0\n"
    assert orjson.loads(summary.read_bytes())["runs"] == 20_000
    assert html.read_bytes().rstrip().endswith(b"</html>")
    assert quarantine.read_bytes() == b""  # no bad row: an empty quarantine, still written
    without = shell(f'("$SPECACCEPT" -m specaccept_cli audit {big_log} {options}; echo "ours $?" >&2) | head -1')
    assert without.stderr == b"ours 0\n"  # with nothing else to write, `| head` still ends the run at once


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", ["--version", "--help", "audit --help", "expect --alpha 0.8 --k 4"])
def test_click_output_into_a_full_device_is_one_line(args: str) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli {args} > /dev/full')
    assert result.returncode == 2
    assert result.stderr == NO_SPACE


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_stderr_is_exit_2_and_no_traceback(tmp_path: Path, log: Path) -> None:
    missing = shell(f'"$SPECACCEPT" -m specaccept_cli audit {tmp_path}/missing.jsonl 2>/dev/full')
    assert missing.returncode == 2
    usage = shell('"$SPECACCEPT" -m specaccept_cli audit --no-such-option 2>/dev/full')
    assert usage.returncode == 2
    skipped = shell(f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip -o json 2>/dev/full')
    assert skipped.returncode == 2  # the skipped rows could not be listed
    assert orjson.loads(skipped.stdout)["runs"] == len(ROWS)  # the output itself is whole
    quiet = shell(
        f'"$SPECACCEPT" -m specaccept_cli audit {write_jsonl(tmp_path / "ok.jsonl", ROWS)} -o json 2>/dev/full'
    )
    assert quiet.returncode == 0  # nothing to say on stderr: nothing failed
