"""`make bench-dask`: one process vs `--jobs 2` vs a Dask cluster of 2 workers, on 1M runs in 16 shards.

Every command is a whole `specaccept audit -o json` process, and all of them must print the same
bytes. The commands take turns, round after round (the machine is shared); medians are reported.

- `--scheduler local:2` starts its own cluster: what a user pays on a laptop, start-up included;
- `--scheduler tcp://...` attaches to a cluster already running (as on a real cluster), whose
  worker processes are measured from outside: their CPU time and peak RSS during the audit.

Also the fixed cost of one task on this cluster (a task that does nothing, 1,000 of them).

    python benchmarks/bench_dask.py [--runs 1000000] [--shards 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench import MB, ROOT, SPECACCEPT, _memory, machine, run, update_page

from specaccept_cli.pipeline.distributed import local_cluster

DEFAULT_OUT = ROOT / "benchmarks" / "latest-dask.md"
PAGE = ROOT / "docs" / "scale-out.md"
PAGE_START = "<!-- bench-dask:start (make bench-dask writes this part) -->"
PAGE_END = "<!-- bench-dask:end -->"


def ensure_shards(cache: Path, runs: int, shards: int) -> dict[str, list[Path]]:
    """`shards` JSONL files and as many Parquet files, `runs` runs in all for each format."""
    folder = cache / f"shards-{runs}-{shards}"
    folder.mkdir(parents=True, exist_ok=True)
    per_shard = runs // shards
    found: dict[str, list[Path]] = {"JSONL": [], "Parquet": []}
    for index in range(shards):
        for kind, suffix in (("JSONL", "jsonl"), ("Parquet", "parquet")):
            path = folder / f"shard-{index:02d}.{suffix}"
            if not path.exists():
                print(f"generating {path} ...", flush=True)
                args = ["--runs", str(per_shard), "--alpha", "0.8", "--k", "1-8", "--seed", str(index), "-o", str(path)]
                subprocess.run([SPECACCEPT, "simulate", *args], check=True)
            found[kind].append(path)
    return found


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of one running process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def run_on_workers(command: list[str], workers: list[int]) -> dict[str, float]:
    """`run` a command that uses a running cluster; add the workers' CPU and sample their peak RSS."""
    before = sum(_cpu_seconds(pid) for pid in workers)
    peak = {"worker_rss_max": 0.0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak["worker_rss_max"] = max(peak["worker_rss_max"], *(_memory(pid)[0] for pid in workers))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        measured = run(command)
    finally:
        done.set()
        sampler.join()
    measured["cpu"] += sum(_cpu_seconds(pid) for pid in workers) - before
    return {**measured, **peak}


def _nothing(index: int) -> int:
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    import distributed

    shards = ensure_shards(args.cache, args.runs, args.shards)
    load = os.getloadavg()[0]
    rows: list[str] = []
    identical = True
    with (
        local_cluster(2) as cluster,
        distributed.Client(cluster) as client,
    ):
        workers = list(client.run(os.getpid).values())
        client.gather(client.map(_nothing, range(50)))  # warm: the first tasks pay imports
        start = time.perf_counter()
        client.gather(client.map(_nothing, range(1_000), pure=False))
        per_task_ms = (time.perf_counter() - start) / 1_000 * 1_000
        # The fixed cost of an audit: one tiny shard (100 runs), alone and on the running cluster.
        tiny = shards["JSONL"][0].with_name("tiny.jsonl")
        tiny.write_bytes(b"".join(shards["JSONL"][0].read_bytes().splitlines(keepends=True)[:100]))
        fixed = {
            "one process": [SPECACCEPT, "audit", "-o", "json", "--jobs", "1", str(tiny)],
            "running cluster": [SPECACCEPT, "audit", "-o", "json", str(tiny), "--scheduler", cluster.scheduler_address],
        }
        fixed_times = {
            name: statistics.median(run(command)["seconds"] for _ in range(args.repeat))
            for name, command in fixed.items()
        }
        for kind, paths in shards.items():
            audit = [SPECACCEPT, "audit", "-o", "json", *map(str, paths)]
            commands = {
                "one process (`--jobs 1`)": [*audit, "--jobs", "1"],
                "`--jobs 2`": [*audit, "--jobs", "2"],
                "Dask, `--scheduler local:2` (starts its cluster)": [*audit, "--scheduler", "local:2"],
                "Dask, 2 workers already running": [*audit, "--scheduler", cluster.scheduler_address],
            }
            outputs = {
                name: subprocess.run(command, capture_output=True, check=True).stdout
                for name, command in commands.items()
            }
            identical = identical and len(set(outputs.values())) == 1
            print(f"{kind}: outputs {'identical' if identical else 'DIFFER'}; timing ...", flush=True)
            measured: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
            for _ in range(args.repeat):
                for name, command in commands.items():
                    running = "already running" in name
                    measured[name].append(run_on_workers(command, workers) if running else run(command))
            for name, runs in measured.items():
                wall = statistics.median(m["seconds"] for m in runs)
                cpu = statistics.median(m["cpu"] for m in runs)
                worker = max((m.get("worker_rss_max", 0.0) for m in runs), default=0.0)
                shown = f"{worker / MB:.0f} MB" if worker else "-"
                rows.append(f"| {kind} | {name} | {wall:.2f} | {cpu:.2f} | {shown} |")
    report = "\n".join(
        [
            f"Machine: {machine()}; Dask {distributed.__version__}; {datetime.date.today().isoformat()}; "
            f"load average {load:.1f} at the start (the machine is shared: CPU seconds are the steadier figure).",
            f"Logs: {args.runs:,} runs in {args.shards} shards per format (`specaccept simulate --alpha 0.8 --k 1-8`); "
            f"every command printed the same bytes: {'yes' if identical else 'NO'}.",
            f"Fixed cost of one task on the running cluster (1,000 tasks that do nothing): {per_task_ms:.1f} ms; "
            f"of a whole audit of 100 runs: {fixed_times['running cluster']:.2f} s on the running cluster, "
            f"{fixed_times['one process']:.2f} s in one process.",
            "",
            "| shards | command | wall s | CPU s, all processes | peak RSS per worker |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )
    print()
    print(report)
    args.out.write_text(report + "\n")
    print(f"written to {args.out}")
    if args.out == DEFAULT_OUT and update_page(report + "\n", PAGE, PAGE_START, PAGE_END):
        print(f"and into {PAGE.relative_to(ROOT)}")
    if not identical:
        raise SystemExit("the commands disagree")


if __name__ == "__main__":
    sys.exit(main())
