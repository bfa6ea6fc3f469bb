"""A summary of every group (`--group-by ... --max-groups 0`) written and read back: bytes, seconds, peak RSS.

    python benchmarks/bench_groups.py [--groups 140000] [--runs-per-group 2] [--out FILE]

Writes a JSONL log whose `g` field takes GROUPS distinct values, and two halves of it, then runs each
step as its own process and reports its wall time, its peak resident memory (the child's own, from
wait4) and the bytes it wrote:

1. `audit --group-by g --max-groups 0 --summary-out whole.json`
2. `diff whole.json whole.json`
3. `audit --baseline whole.json --group-by g` (the log again, compared with its own summary)
4. `audit` of each half to its own summary, then `merge` of the two

Every step should exit 0 (a summary the tool writes, the tool reads back); a refusal is reported in the
table with its message, so a version that refuses can be measured too. Not a timed test: figures
depend on the machine (a shared one is noisy), so compare runs made side by side.
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
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as scratch:
        work = Path(scratch)
        log, half_a, half_b = work / "log.jsonl", work / "a.jsonl", work / "b.jsonl"
        write_log(log, options.groups, options.runs_per_group)
        write_log(half_a, options.groups, options.runs_per_group, first=0, stride=2)
        write_log(half_b, options.groups, options.runs_per_group, first=1, stride=2)
        whole = work / "whole.json"
        grouped = ["--group-by", "g", "--max-groups", "0"]
        quiet = ["-o", "markdown"]  # not a terminal table of every group: the summary file is what is measured
        rows = [
            run("audit --summary-out", ["audit", str(log), *grouped, "--summary-out", str(whole), *quiet], whole),
            run("diff", ["diff", str(whole), str(whole)]),
            run("audit --baseline", ["audit", str(log), *grouped, "--baseline", str(whole), *quiet]),
        ]
        for half in (half_a, half_b):
            saved = Path(f"{half}.json")
            rows.append(
                run(
                    f"audit {half.stem} --summary-out",
                    ["audit", str(half), *grouped, "--summary-out", str(saved), *quiet],
                    saved,
                )
            )
        merged = work / "merged.json"
        rows.append(run("merge", ["merge", f"{half_a}.json", f"{half_b}.json", "-o", str(merged)], merged))
    lines = [
        f"{options.groups:,} groups, {options.groups * options.runs_per_group:,} runs; one process per step",
        "",
        "| step | exit | seconds | peak RSS (MB) | bytes written |",
        "|---|---|---:|---:|---:|",
    ]
    for row in rows:
        written = "" if row["bytes"] is None else f"{row['bytes']:,}"
        lines.append(f"| {row['step']} | {row['exit']} | {row['seconds']} | {row['peak_rss_mb']:,} | {written} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if options.out is not None:
        options.out.write_text(text)


if __name__ == "__main__":
    main()
