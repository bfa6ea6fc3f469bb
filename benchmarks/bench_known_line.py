"""`make bench`: a server log whose metrics stand after 100 MB of access lines, against the metrics lines alone.

Each audit is its own process; its peak RSS is the kernel's (`wait4`). The log is read as a file and through a
pipe; the runs must be the same as the metrics lines' alone, and the peak within 100 MB of theirs (the lines
before the first metrics line are counted, never kept).

    python benchmarks/bench_known_line.py [--before-mb 100] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "vllm-server.log"
DEFAULT_OUT = ROOT / "benchmarks" / "latest-known-line.md"
ACCESS = b'(APIServer pid=4242) INFO:     10.0.0.7:52344 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
LIMIT_MB = 100
FIGURES = ("runs", "accepted_tokens", "drafted_tokens", "accepted_histogram", "examined_tokens")


def audit(path: Path, through_pipe: bool) -> tuple[dict[str, object], float]:
    """The audit's figures and its peak RSS in MB, as its own process (stdin a pipe fed by `cat`, or the file)."""
    command = [sys.executable, "-m", "specaccept_cli", "audit", "-" if through_pipe else str(path), "-o", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    feeder = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) if through_pipe else None
    process = subprocess.Popen(
        command, stdin=feeder.stdout if feeder else subprocess.DEVNULL, stdout=subprocess.PIPE, env=env
    )
    if feeder is not None and feeder.stdout is not None:
        feeder.stdout.close()
    assert process.stdout is not None
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if feeder is not None:
        feeder.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"audit of {path} failed")
    summary = json.loads(out)
    return {name: summary[name] for name in FIGURES}, usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-mb", type=int, default=100, help="MB of access lines before the metrics")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        alone, busy = Path(directory) / "alone.log", Path(directory) / "busy.log"
        log = EXAMPLE.read_bytes()
        alone.write_bytes(log)
        with busy.open("wb") as out:
            block = ACCESS * ((1 << 20) // len(ACCESS))
            for _ in range(args.before_mb):
                out.write(block)
            out.write(log)
        size = busy.stat().st_size / 1e6
        rows = []
        base, base_rss = audit(alone, through_pipe=False)
        rows.append(("the metrics lines alone, a file", alone.stat().st_size / 1e6, base_rss))
        worst = 0.0
        for through_pipe in (False, True):
            figures, rss = audit(busy, through_pipe)
            if figures != base:
                raise SystemExit(f"different runs after {args.before_mb} MB of other lines: {figures} != {base}")
            worst = max(worst, rss - base_rss)
            rows.append(
                (f"after {args.before_mb} MB of access lines, {'a pipe' if through_pipe else 'a file'}", size, rss)
            )
    lines = [
        f"# A log whose metrics start after {args.before_mb} MB of other lines",
        "",
        f"{datetime.date.today().isoformat()}, `python benchmarks/bench_known_line.py` ({os.cpu_count()} CPUs). "
        "Each audit is its own process; peak RSS from the kernel. The runs are the same in every row.",
        "",
        "| input | MB | peak RSS (MB) |",
        "|---|---:|---:|",
        *(f"| {name} | {mb:,.1f} | {rss:,.1f} |" for name, mb, rss in rows),
        "",
        f"Largest peak over the metrics lines alone: {worst:,.1f} MB (the bound: {LIMIT_MB} MB).",
        "",
    ]
    text = "\n".join(lines)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    if worst > LIMIT_MB:
        raise SystemExit(f"peak RSS grew by {worst:.1f} MB, over {LIMIT_MB} MB")


if __name__ == "__main__":
    main()
