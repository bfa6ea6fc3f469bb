"""Hostile sizes and hand-edited inputs: each ends in one accurate line and exit 2, never a traceback or a wrong total.

Counts beyond 64 bits, summaries that decompress without end, damaged Parquet pages, a byte order mark alone,
an object deleted while it is read, a `--scheduler` that is not a Dask scheduler, and running out of memory.
"""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.helpers import FIRST_EXAMPLE, invoke, write_jsonl


def _saved_summary(tmp_path: Path) -> dict[str, object]:
    path = write_jsonl(tmp_path / "log.jsonl", [FIRST_EXAMPLE] * 3)
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 0
    data: dict[str, object] = orjson.loads(result.stdout_bytes)
    return data


# --- a hand-edited summary: counts are JSON integers in range, or the file is refused --------------------------------


@pytest.mark.parametrize(
    ("count", "said"),
    [
        ('" 375 "', "joint_counts holds the string ' 375 ' where a whole number belongs"),
        ('"4"', "joint_counts holds the string '4' where a whole number belongs"),
        (4.0, "joint_counts holds 4.0, a decimal number where a whole number belongs"),
        (2.5, "joint_counts holds 2.5, not a whole number"),
        ("true", "joint_counts holds a boolean where a whole number belongs"),
        (None, "joint_counts holds null where a whole number belongs"),
        (-3, "counters out of range: joint_counts holds -3, outside 0 to 2**63-1"),
        (2**63, "counters out of range: joint_counts holds 9223372036854775808, outside 0 to 2**63-1"),
        # Beyond 64 bits, JSON readers give a number back as a float.
        (10**30, "counters out of range: joint_counts holds 1e+30, outside 0 to 2**63-1"),
    ],
)
def test_a_hand_edited_run_count_is_refused_with_what_it_holds(tmp_path: Path, count: object, said: str) -> None:
    data = _saved_summary(tmp_path)
    state = data["state"]
    assert isinstance(state, dict)
    state["joint_counts"][0][2] = "COUNT"  # spelt out as a hand would (orjson writes no integer beyond 64 bits)
    path = tmp_path / "edited.json"
    path.write_bytes(orjson.dumps(data).replace(b'"COUNT"', str(count).encode() if count is not None else b"null"))
    for command in (("merge", str(path)), ("diff", str(path), str(path))):
        result = invoke(*command)
        assert result.exit_code == 2, command
        assert result.stderr == f"specaccept: {path}: not a usable summary: {said}\n", command


@pytest.mark.parametrize("key", ["passing_tokens", "sampled_tokens", "threshold_sum_fixed", "skipped_rows"])
def test_every_state_counter_is_a_whole_number(tmp_path: Path, key: str) -> None:
    data = _saved_summary(tmp_path)
    state = data["state"]
    assert isinstance(state, dict)
    state[key] = float(state[key])
    path = tmp_path / "edited.json"
    path.write_bytes(orjson.dumps(data))
    result = invoke("merge", str(path))
    assert result.exit_code == 2
    assert f"{key} holds {state[key]!r}, a decimal number where a whole number belongs" in result.stderr


def test_the_largest_count_is_out_of_range_not_fractional(tmp_path: Path) -> None:
    data = _saved_summary(tmp_path)
    state = data["state"]
    assert isinstance(state, dict)
    state["joint_counts"][0][2] = 2**63 - 1
    path = tmp_path / "edited.json"
    path.write_bytes(orjson.dumps(data))
    result = invoke("merge", str(path))
    assert result.exit_code == 2
    assert result.stderr == f"specaccept: {path}: counters out of range (negative, or too large for 64-bit sums)\n"


def test_summaries_written_by_audit_still_merge_byte_for_byte(tmp_path: Path) -> None:
    data = _saved_summary(tmp_path)
    path = tmp_path / "saved.json"
    path.write_bytes(orjson.dumps(data))
    result = invoke("merge", str(path))
    assert result.exit_code == 0
    assert orjson.loads(result.stdout_bytes)["state"] == data["state"]


# --- a summary that decompresses without end ------------------------------------------------------------------------


def _gzip_bomb(path: Path, spaces: int) -> Path:
    """A gzip of `spaces` spaces (about a thousandth of that compressed), then a summary's text."""
    with gzip.open(path, "wb", compresslevel=9) as out:
        block = b" " * (1 << 20)
        for _ in range(spaces >> 20):
            out.write(block)
        out.write(b'{"schema": "specaccept.summary/1"}\n')
    return path


@pytest.mark.parametrize("command", ["merge", "diff", "baseline"])
def test_a_gzip_summary_is_not_decompressed_past_its_bound(tmp_path: Path, command: str) -> None:
    bomb = _gzip_bomb(tmp_path / "bomb.json.gz", 300 << 20)  # 300 MiB of spaces in about 300 KB
    assert bomb.stat().st_size < 1 << 20
    log = write_jsonl(tmp_path / "log.jsonl", [FIRST_EXAMPLE])
    args = {
        "merge": ("merge", str(bomb)),
        "diff": ("diff", str(bomb), str(bomb)),
        "baseline": ("audit", str(log), "--baseline", str(bomb)),
    }[command]
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: {bomb}: decompresses to more than 268,435,456 bytes from {bomb.stat().st_size:,}:"
        " too large for a summary\n"
    )


def test_a_gzip_summary_within_its_bound_still_reads(tmp_path: Path) -> None:
    data = _saved_summary(tmp_path)
    path = tmp_path / "saved.json.gz"
    path.write_bytes(gzip.compress(b" " * (1 << 20) + orjson.dumps(data)))  # padding well within the bound
    result = invoke("merge", str(path))
    assert result.exit_code == 0
    assert orjson.loads(result.stdout_bytes)["state"] == data["state"]


# --- a byte order mark alone is an empty file -----------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\n", b"\xef\xbb\xbf  \n\n"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_file_holding_only_a_byte_order_mark_is_empty_input(tmp_path: Path, content: bytes, jobs: str) -> None:
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(content)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    said = invoke("audit", str(bom), "-j", jobs)
    expected = invoke("audit", str(empty), "-j", jobs)
    assert "invalid JSON" not in said.stderr
    assert (said.exit_code, said.stderr.replace(str(bom), "X")) == (
        expected.exit_code,
        expected.stderr.replace(str(empty), "X"),
    )


# --- running out of memory ------------------------------------------------------------------------------------------

# The command as a real process whose address space is capped at what it holds once loaded, plus argv[1] bytes:
# a MemoryError then happens for real, wherever the command next needs more (workers inherit the cap).
CAPPED = r"""
import re, resource, sys
import click, numpy, orjson, rich  # what an audit loads, before the cap
import specaccept_cli.cli.audit
from specaccept_cli.cli import main
size = int(re.search(r"VmSize:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) << 10
resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[1]), resource.RLIM_INFINITY))
sys.argv = ["specaccept", *sys.argv[2:]]
main()
"""


def _capped(extra_bytes: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-c", CAPPED, str(extra_bytes), *args]
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
    return subprocess.run(command, capture_output=True, env=env, timeout=300, check=False)


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/status").exists() or not hasattr(resource, "RLIMIT_AS"), reason="caps memory with RLIMIT_AS"
)


@needs_proc
def test_a_line_that_max_line_bytes_allows_past_memory_is_one_line(tmp_path: Path) -> None:
    values = b"[" + b"0.5," * (8 << 20) + b"0.5]"  # a row of 32 MB, under a cap of 24 MB more than the command
    path = tmp_path / "long.jsonl"
    path.write_bytes(orjson.dumps(FIRST_EXAMPLE) + b'\n{"p": ' + values + b', "q": [0.5], "r": [0.5]}\n')
    done = _capped(24 << 20, "audit", str(path), "--max-line-bytes", str(10**9), "-o", "json")
    assert done.returncode == 2
    said = done.stderr.decode()
    assert said.startswith(f"specaccept: {path}:2: line does not fit in memory (")
    assert said.endswith(" bytes of it read; --max-line-bytes 1,000,000,000 allows more than this machine holds)\n")
    assert len(said.splitlines()) == 1


@needs_proc
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_running_out_of_memory_anywhere_is_one_line_and_exit_2(tmp_path: Path, jobs: str) -> None:
    rng = np.random.default_rng(5)
    rows = (
        {"p": row.tolist(), "q": row.tolist(), "r": (row / 2).tolist(), "request": index}
        for index, row in enumerate(rng.random((400_000, 4)))
    )
    path = write_jsonl(tmp_path / "clusters.jsonl", rows)  # 400,000 clusters of one run each
    done = _capped(30 << 20, "audit", str(path), "--cluster-field", "request", "-o", "json", "-j", jobs)
    assert done.returncode == 2
    assert done.stdout == b""
    out_of_memory = (
        "specaccept: out of memory: this input needs more memory than the system allows (see docs/reliability.md)\n"
    )
    # A worker that runs out inside native code (numpy, OpenBLAS) dies before Python can say so: its parent
    # says that, in one line too.
    died = f"specaccept: {path}: a worker process died (out of memory?); try again with --jobs 1\n"
    assert done.stderr.decode() in ((out_of_memory,) if jobs == "1" else (out_of_memory, died))
