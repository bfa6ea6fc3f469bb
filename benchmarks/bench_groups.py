"""A summary of every group (`--group-by ... --max-groups 0`) written and read back: bytes, seconds, peak RSS.

    python benchmarks/bench_groups.py [--groups 140000] [--runs-per-group 2] [--out FILE]

Writes a JSONL log whose `g` field takes GROUPS distinct values (and a small shard of 1,000 more runs of
the same groups), then runs each step as its own process and reports its exit status, wall time, peak
resident memory (the child's own, from wait4) and the bytes it wrote:

1. `audit --group-by g --max-groups 0 --summary-out whole.json` (`-o markdown`: no terminal table of
   every group, the summary file is what is measured)
2. `diff whole.json whole.json`
3. `audit --baseline whole.json` (the log again, compared with its own summary)
4. `audit` of the small shard to `shard.json`, then `merge whole.json shard.json`

Every step should exit 0 (a summary the tool writes, the tool reads back); a refusal is reported in the
table with its message, so a version that refuses can be measured too. Rows are printed as each step
ends. Not a timed test: figures depend on the machine (a shared one is noisy), so compare runs made
side by side.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson


def write_log(path: Path, groups: int, runs_per_group: int, first: int = 0, stride: int = 1) -> None:
    """Rows of k = 1..4 whose `g` is a request-like string; group i has `runs_per_group` runs."""
    with path.open("wb") as out:
        for index in range(first, groups * runs_per_group, stride):
            k = 1 + index % 4
            row = {
                "p": [0.5 + 0.01 * (index % 7)] * k,
                "q": [0.6] * k,
                "r": [((index * 7919 + position * 104729) % 1000) / 1000 for position in range(k)],
                "g": f"req-{index % groups:07d}",
            }
            out.write(orjson.dumps(row) + b"\n")


def run(step: str, args: list[str], out: Path | None = None) -> dict[str, object]:
    """One command as its own process: wall seconds, peak RSS of that process, bytes of `out`."""
    command = [sys.executable, "-m", "specaccept_cli", *args]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    refused = stderr.decode(errors="replace").strip().splitlines()[-1:] if process.returncode else []
    return {
        "step": step,
        "exit": process.returncode if not refused else f"{process.returncode}: {refused[0][:100]}",
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "bytes": None if out is None or not out.exists() else out.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=140_000)
    parser.add_argument("--runs-per-group", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the table (markdown) here")
    options = parser.parse_args()
    lines = [
        f"{options.groups:,} groups, {options.groups * options.runs_per_group:,} runs; one process per step",
        "",
        "| step | exit | seconds | peak RSS (MB) | bytes written |",
        "|---|---|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)

    def report(row: dict[str, object]) -> None:
        written = "" if row["bytes"] is None else f"{row['bytes']:,}"
        lines.append(f"| {row['step']} | {row['exit']} | {row['seconds']} | {row['peak_rss_mb']:,} | {written} |")
        print(lines[-1], flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-groups-") as scratch:
        work = Path(scratch)
        log, shard = work / "log.jsonl", work / "shard.jsonl"
        write_log(log, options.groups, options.runs_per_group)
        write_log(shard, options.groups, 1, first=options.groups - 1_000)  # 1,000 runs of the last groups
        whole, saved_shard, merged = work / "whole.json", work / "shard.json", work / "merged.json"
        grouped = ["--group-by", "g", "--max-groups", "0"]
        quiet = ["-o", "markdown"]
        report(run("audit --summary-out", ["audit", str(log), *grouped, "--summary-out", str(whole), *quiet], whole))
        report(run("diff", ["diff", str(whole), str(whole)]))
        report(run("audit --baseline", ["audit", str(log), *grouped, "--baseline", str(whole), *quiet]))
        report(run("audit (shard)", ["audit", str(shard), *grouped, "--summary-out", str(saved_shard), *quiet]))
        report(run("merge", ["merge", str(whole), str(saved_shard), "-o", str(merged)], merged))
    if options.out is not None:
        options.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
