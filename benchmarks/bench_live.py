"""Live audits: latency from a line written to the record that shows it, and memory over a long follow.

    python benchmarks/bench_live.py                  # 60 s of 100k runs/s, and 5 latency probes
    python benchmarks/bench_live.py --seconds 600    # the full ten minutes

Both run the real command (`python -m specaccept_cli audit --follow -o jsonl`) on a real pipe. The
resident set of the follow's process is read from /proc every few seconds; its growth is the last
reading minus the one taken once the first interval is out (start-up imports excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

COMMAND = [sys.executable, "-m", "specaccept_cli", "audit", "--follow", "-o", "jsonl"]


def _rows(count: int, seed: int) -> bytes:
    rng = random.Random(seed)
    lines = []
    for index in range(count):
        k = rng.randint(1, 8)
        p = [round(rng.random(), 4) for _ in range(k)]
        q = [round(rng.uniform(0.05, 1.0), 4) for _ in range(k)]
        r = [round(rng.random(), 4) for _ in range(k)]
        lines.append(json.dumps({"request_id": f"r{index % 997}", "p": p, "q": q, "r": r}))
    return ("\n".join(lines) + "\n").encode()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def latency(probes: int, every: int) -> list[float]:
    """Seconds from writing one line to reading the first record whose interval holds it."""
    process = subprocess.Popen(
        [*COMMAND, "--every", f"{every}s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    line = _rows(1, 1)
    seen: list[float] = []
    for _ in range(probes):
        written = time.monotonic()
        process.stdin.write(line)
        process.stdin.flush()
        while True:
            record = json.loads(process.stdout.readline())
            if record["interval"]["runs"]:
                seen.append(time.monotonic() - written)
                break
        time.sleep(random.uniform(0, every))  # probes land anywhere within a period
    process.stdin.close()
    process.stdout.read()
    process.wait(timeout=60)
    process.stdout.close()
    return seen


def memory(seconds: float, runs_per_second: int, every: int) -> dict[str, float]:
    """Feed `runs_per_second` for `seconds` and watch the follow's resident set."""
    block = _rows(10_000, 2)
    process = subprocess.Popen(
        [*COMMAND, "--every", f"{every}s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    records: list[dict[str, object]] = []

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            records.append(json.loads(raw))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started = time.monotonic()
    sent = 0
    samples: list[tuple[float, int]] = []
    next_sample = started
    while time.monotonic() - started < seconds:
        elapsed = time.monotonic() - started
        while sent < elapsed * runs_per_second:
            process.stdin.write(block)
            sent += 10_000
        process.stdin.flush()
        if time.monotonic() >= next_sample:
            samples.append((time.monotonic() - started, _rss_kib(process.pid)))
            next_sample += 5
        time.sleep(0.02)
    process.stdin.close()
    process.wait(timeout=120)
    reader.join(timeout=10)
    settled = next(rss for at, rss in samples if at >= 2 * every) if len(samples) > 2 else samples[0][1]
    final = records[-1] if records else {}
    total = final.get("total", {}) if isinstance(final, dict) else {}
    return {
        "seconds": seconds,
        "runs_sent": sent,
        "runs_counted": float(total.get("runs", 0)) if isinstance(total, dict) else 0.0,
        "rss_start_mib": settled / 1024,
        "rss_end_mib": samples[-1][1] / 1024,
        "rss_peak_mib": max(rss for _, rss in samples) / 1024,
        "growth_mib": (samples[-1][1] - settled) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=100_000, help="runs per second fed to the follow")
    parser.add_argument("--probes", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    seen = latency(args.probes, every=1)
    median = sorted(seen)[len(seen) // 2]
    print(f"latency with --every 1s: max {max(seen):.2f} s, median {median:.2f} s (target <= 2 s)")
    figures = memory(args.seconds, args.rate, every=10)
    print(
        f"memory over {figures['seconds']:.0f} s at {args.rate:,} runs/s: {figures['rss_start_mib']:.1f} MiB after the "
        f"first intervals -> {figures['rss_end_mib']:.1f} MiB (growth {figures['growth_mib']:+.1f} MiB, "
        f"peak {figures['rss_peak_mib']:.1f}); {figures['runs_counted']:,.0f} of {figures['runs_sent']:,} runs counted"
    )


if __name__ == "__main__":
    main()
