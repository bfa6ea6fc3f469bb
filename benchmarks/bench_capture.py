"""`make bench-capture`: what `Recorder.record()` costs a serving loop per verify step, and on disk.

One verify step is k = 8 drafted tokens: p, q and r as lists of floats or as numpy arrays, with a
request id, a step number and the engine's count. Three figures per (input, format):

- the calls alone: wall time of the `record()` calls / steps, and the CPU time of the calling thread
  over them (what the serving loop's own thread pays, whatever else runs on the machine);
- amortised: wall time of the calls and of `close()` (the writer thread finishing every block) / steps;
- CPU: process CPU time over the same span / steps (the writer thread's encoding and compression included).

Disk bytes per 1B steps are extrapolated (linearly) from the parts written for the measured steps.
Values are float32 numbers held as doubles, as a model computing in float32 gives them.

    python benchmarks/bench_capture.py [--steps 200000] [--repeat 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specaccept_cli.capture import Recorder  # noqa: E402

K = 8
DEFAULT_OUT = ROOT / "benchmarks" / "latest-capture.md"


def inputs(steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.random((steps, K), dtype=np.float32).astype(np.float64)
    q = rng.uniform(0.05, 1.0, (steps, K)).astype(np.float32).astype(np.float64)
    r = rng.random((steps, K), dtype=np.float32).astype(np.float64)
    passed = r <= np.minimum(1.0, p / q)
    accepted = np.where(passed.all(axis=1), K, np.argmin(passed, axis=1))
    return p, q, r, accepted


def measure(form: str, source: str, data: tuple[np.ndarray, ...]) -> dict[str, float]:
    p, q, r, accepted = data
    steps = p.shape[0]
    if source == "lists":
        rows = [(p[i].tolist(), q[i].tolist(), r[i].tolist()) for i in range(steps)]
    else:
        rows = [(p[i], q[i], r[i]) for i in range(steps)]
    counts = accepted.tolist()
    request_ids = [f"req-{i // 32}" for i in range(steps)]
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as directory:
        recorder = Recorder(directory, form, handle_sigterm=False)  # type: ignore[arg-type]
        cpu0, wall0, own0 = time.process_time(), time.perf_counter(), time.thread_time()
        record = recorder.record
        for i, (row_p, row_q, row_r) in enumerate(rows):
            record(row_p, row_q, row_r, request_id=request_ids[i], step=i % 32, accepted=counts[i])
        wall1, own1 = time.perf_counter(), time.thread_time()
        recorder.close()
        wall2, cpu2 = time.perf_counter(), time.process_time()
        stats = recorder.stats
        size = sum(os.path.getsize(part) for part in stats.parts)
    return {
        "calls_us": (wall1 - wall0) / steps * 1e6,
        "calls_cpu_us": (own1 - own0) / steps * 1e6,
        "amortised_us": (wall2 - wall0) / steps * 1e6,
        "cpu_us": (cpu2 - cpu0) / steps * 1e6,
        "bytes_per_step": size / max(stats.written, 1),
        "dropped": stats.dropped,
    }


def dumps_baseline(source: str, data: tuple[np.ndarray, ...]) -> float:
    """The yardstick: the calling thread's CPU per step for `orjson.dumps` of the same row (a dict of the three
    lists, or arrays, with the request id, step and count), what the least a serving loop could pay to log it."""
    import orjson

    p, q, r, accepted = data
    steps = p.shape[0]
    if source == "lists":
        rows = [(p[i].tolist(), q[i].tolist(), r[i].tolist()) for i in range(steps)]
    else:
        rows = [(p[i], q[i], r[i]) for i in range(steps)]
    counts = accepted.tolist()
    request_ids = [f"req-{i // 32}" for i in range(steps)]
    dumps, option = orjson.dumps, orjson.OPT_SERIALIZE_NUMPY
    own0 = time.thread_time()
    for i, (row_p, row_q, row_r) in enumerate(rows):
        dumps(
            {"p": row_p, "q": row_q, "r": row_r, "request_id": request_ids[i], "step": i % 32, "accepted": counts[i]},
            option=option,
        )
    return (time.thread_time() - own0) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    data = inputs(args.steps)
    load = os.getloadavg()[0]
    lines = [
        f"Machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}; {datetime.date.today()}; "
        f"load average {load:.1f} at the start (the machine is shared: CPU time is the steadier figure).",
        f"{args.steps:,} verify steps of k = {K} per measurement, median of {args.repeat}; "
        "disk per 1B steps extrapolated linearly from the bytes those steps took.",
        "",
        "| input | format | record() calls: wall, µs/step | calling thread's CPU, µs/step "
        "| `orjson.dumps` of the row, CPU µs/step | record() / dumps (CPU) "
        "| amortised with close(): wall, µs/step | all threads' CPU, µs/step | dropped rows | disk per 1B steps |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for source in ("lists", "numpy"):
        for form in ("parquet", "jsonl"):
            runs = []
            for _ in range(args.repeat):  # side by side: the yardstick and the recorder take turns
                runs.append({**measure(form, source, data), "dumps_us": dumps_baseline(source, data)})
            median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            ratio = statistics.median(run["calls_cpu_us"] / run["dumps_us"] for run in runs)
            per_billion = median["bytes_per_step"]  # bytes per step x 1e9 steps / 1e9 bytes per GB
            lines.append(
                f"| {source} | {form} | {median['calls_us']:.2f} | {median['calls_cpu_us']:.2f} | "
                f"{median['dumps_us']:.2f} | {ratio:.2f}x | {median['amortised_us']:.2f} | "
                f"{median['cpu_us']:.2f} | {int(max(run['dropped'] for run in runs))} | {per_billion:.0f} GB |"
            )
            print(lines[-1], flush=True)
    report = "\n".join(lines) + "\n"
    args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
