"""`make bench`: rows of each verification rule against `standard` rows, as whole processes, side by side.

Each log holds the same number of rows, k uniform in 1..8 (trees: 2 children per node, 3 levels, 14 nodes),
written here from a seeded generator in each rule's row contract (docs/rules.md). An audit of each log is its
own process; the commands take turns round after round and the figure is the ratio of medians to `standard`.

    python benchmarks/bench_rules.py [--rows 200000] [--repeat 5] [--out FILE]
    python benchmarks/bench_rules.py --rows N --write RULE FILE    # only write a log (.jsonl or .parquet)
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "latest-rules.md"
RULES = ("standard", "greedy-draft", "sample-match", "block", "typical", "tree-target-cdf", "tree-residual")
TARGET = 2.0  # a chain rule's rows within this of `standard` rows (wall)


def _chain_row(rule: str, rng: np.random.Generator) -> dict[str, object]:
    k = int(rng.integers(1, 9))
    p, q, r = rng.random(k), rng.uniform(0.05, 1.0, k), rng.random(k)
    row: dict[str, object] = {"p": p.tolist(), "q": q.tolist(), "r": r.tolist()}
    if rule == "standard":
        return row
    row["rule"] = rule
    if rule == "sample-match":
        draft = rng.integers(0, 32_000, k)
        target = np.where(rng.random(k) < 0.8, draft, rng.integers(0, 32_000, k))
        return {"rule": rule, "draft_tokens": draft.tolist(), "target_tokens": target.tolist(), "p": p.tolist()}
    if rule == "block":
        row["residual"] = [*rng.random(k - 1).tolist(), None]
    if rule == "typical":
        return {"rule": rule, "p": p.tolist(), "entropy": rng.uniform(0, 3, k).tolist(), "epsilon": 0.3, "delta": 0.09}
    return row


def _tree_row(rule: str, rng: np.random.Generator, width: int = 2, depth: int = 3) -> dict[str, object]:
    nodes: list[dict[str, object]] = []
    level = [-1]
    for _ in range(depth):
        below = []
        for parent in level:
            coin = float(rng.random())
            for _ in range(width):
                node: dict[str, object] = {"parent": parent, "p": float(rng.random()) / width}
                if rule == "tree-target-cdf":
                    node["coin"] = coin
                else:
                    node["q"], node["r"] = float(rng.uniform(0.05, 1.0)), float(rng.random())
                below.append(len(nodes))
                nodes.append(node)
        level = below
    return {"rule": rule, "nodes": nodes}


def write_log(rule: str, rows: int, path: Path, seed: int = 1) -> None:
    """`rows` rows of `rule` as JSONL, or as Parquet (lists, and `nodes` a list of structs) for a .parquet path."""
    rng = np.random.default_rng(seed)
    make = _tree_row if rule.startswith("tree-") else _chain_row
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([make(rule, rng) for _ in range(rows)]), path)
        return
    with path.open("wb") as out:
        for _ in range(rows):
            out.write(orjson.dumps(make(rule, rng)) + b"\n")


def _run(command: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return {"seconds": time.perf_counter() - started, "cpu": usage.ru_utime + usage.ru_stime}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--write", nargs=2, metavar=("RULE", "FILE"))
    args = parser.parse_args()
    if args.write:
        write_log(args.write[0], args.rows, Path(args.write[1]))
        return
    with tempfile.TemporaryDirectory() as directory:
        commands: dict[tuple[str, str], list[str]] = {}
        for suffix in ("jsonl", "parquet"):
            for rule in RULES:
                path = Path(directory) / f"{rule}.{suffix}"
                write_log(rule, args.rows, path)
                commands[rule, suffix] = [sys.executable, "-m", "specaccept_cli", "audit", str(path), "-o", "json"]
        runs: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in commands}
        for _ in range(args.repeat):
            for key, command in commands.items():
                runs[key].append(_run(command))
    median = {key: {m: statistics.median(run[m] for run in runs[key]) for m in ("seconds", "cpu")} for key in runs}
    lines = [
        "# Rows of each verification rule against `standard` rows",
        "",
        f"{datetime.date.today().isoformat()}, `python benchmarks/bench_rules.py --rows {args.rows}` "
        f"({os.cpu_count()} CPUs; median of {args.repeat}, every audit a process of its own, all taking turns "
        "round after round). Chains: k uniform in 1..8; trees: 2 children per node, 3 levels (14 nodes). "
        "Each figure is that log's audit (`-o json`) over the `standard` log's of the same format.",
        "",
        "| rows | JSONL wall / `standard` | JSONL CPU / `standard` | Parquet wall / `standard` "
        "| Parquet CPU / `standard` | target (chains, wall) |",
        "|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        cells = []
        for suffix in ("jsonl", "parquet"):
            mine, base = median[rule, suffix], median["standard", suffix]
            cells += [f"{mine['seconds'] / base['seconds']:.2f}x", f"{mine['cpu'] / base['cpu']:.2f}x"]
        target = "-" if rule == "standard" or rule.startswith("tree-") else f"<= {TARGET:.0f}x"
        lines.append(f"| `{rule}` | {' | '.join(cells)} | {target} |")
    seconds = ", ".join(f"{suffix} {median['standard', suffix]['seconds']:.2f} s" for suffix in ("jsonl", "parquet"))
    lines += ["", f"`standard` rows alone (wall, median): {seconds}."]
    report = "\n".join(lines) + "\n"
    args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
