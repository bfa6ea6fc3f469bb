"""`make bench`: specaccept against DuckDB and a plain Python loop on the same logs, as whole processes.

The machine is shared and noisy, so every comparison is a ratio of medians measured side by side
(the commands of one comparison take turns, round after round), never an absolute time.

    python benchmarks/bench.py [--runs 1000000] [--sizes 250000,1000000,4000000] [--repeat 5] [--out FILE]

Also the two engines the benchmark compares against, each run as its own process:

    python benchmarks/bench.py --duckdb FILE    # prints the total accepted tokens
    python benchmarks/bench.py --plain FILE     # likewise, orjson per line + the reference routine

The floor: what the pieces of a JSONL reader cost alone, each its own process (timed beside the above):

    python benchmarks/bench.py --read FILE            # read() of the file, 4 MiB at a time
    python benchmarks/bench.py --duckdb-read FILE     # DuckDB reading the three lists, no rule
    python benchmarks/bench.py --duckdb-strict FILE   # DuckDB reading them behind a guard for its leniencies
    python benchmarks/bench.py --simdjson FILE        # reading specaccept's blocks and simdjson's parse of them

Where specaccept's own time goes, step by step, in this process:

    python benchmarks/bench.py --profile FILE

And the state `--cluster-field` keeps, alone (in this process):

    python benchmarks/bench.py --clusters 1000000   # memory of the per-cluster sums of 1M requests

And a whole audit of a log of 1M requests, clustered by default (peak RSS, summary size, exact merge):

    python benchmarks/bench.py --cluster-audit 1000000
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SPECACCEPT = str(BIN / "specaccept")
CHECK_ARGS = ["check", "--p", "0.9,0.2,0.8", "--q", "0.5,0.8,0.4", "--r", "0.1,0.5,0.2"]
MB = 1 << 20


# --- the cluster tally: memory per cluster ------------------------------------------------------


def cluster_memory(clusters: int, runs_per_cluster: int = 5, batch_runs: int = 65_536) -> dict[str, float]:
    """Build the tally of `clusters` requests (k uniform in 1..8) batch by batch, as an audit does.

    Runs arrive in shuffled order, so every batch touches clusters seen before (the worst case for
    adding by key). Returns the tally's bytes, bytes per cluster, the peak RSS growth and seconds.
    """
    import numpy as np

    from specaccept_cli.summary.clusters import ClusterTally

    rng = np.random.default_rng(1)
    keys = rng.permutation(np.repeat(rng.integers(0, 2**63, size=clusters, dtype=np.uint64), runs_per_cluster))
    k = rng.integers(1, 9, size=keys.shape[0])
    accepted = np.minimum(rng.geometric(0.25, size=keys.shape[0]) - 1, k)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    tally = ClusterTally("request_id")
    for begin in range(0, keys.shape[0], batch_runs):
        end = begin + batch_runs
        tally = tally + ClusterTally.of_runs("request_id", keys[begin:end], k[begin:end], accepted[begin:end])
    sums = tally.sums
    seconds = time.perf_counter() - start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert sums.keys.shape[0] == clusters and int(sums.runs.sum()) == keys.shape[0]
    return {
        "bytes": float(sums.nbytes),
        "per_cluster": sums.nbytes / clusters,
        "rss_growth": float(rss_after - rss_before),
        "seconds": seconds,
    }


def cluster_audit(requests: int, runs_per_request: int = 2, k: int = 4) -> dict[str, float]:
    """`specaccept audit LOG -o json` on a log of `requests` requests, clustered by default (no flag).

    The log (written to a temporary directory, removed after) holds `runs_per_request` runs of draft
    length `k` per request, requests interleaved as a server interleaves them. Returns the audit's peak
    RSS (all processes), the summary's bytes, seconds, and whether merging the summaries of the log's
    two halves gives exactly the summary of the whole (1.0) or not (0.0).
    """
    import tempfile

    import numpy as np
    import orjson

    rng = np.random.default_rng(7)
    runs = requests * runs_per_request
    order = rng.permutation(np.repeat(np.arange(requests), runs_per_request))
    request_alpha = rng.beta(7.0, 3.0, size=requests)
    with tempfile.TemporaryDirectory(prefix="specaccept-bench-") as directory:
        folder = Path(directory)
        halves = [folder / "first.jsonl", folder / "second.jsonl"]
        whole = folder / "whole.jsonl"
        q = [1.0] * k  # a token is kept when r <= p: p is the request's own acceptance
        with whole.open("wb") as out, halves[0].open("wb") as first, halves[1].open("wb") as second:
            for start in range(0, runs, 100_000):
                chunk = order[start : start + 100_000]
                r = rng.random((chunk.shape[0], k)).round(4)
                p = np.repeat(request_alpha[chunk, None].round(4), k, axis=1)
                lines = b"".join(
                    orjson.dumps({"request_id": f"req-{request}", "p": row_p, "q": q, "r": row_r}) + b"\n"
                    for request, row_p, row_r in zip(chunk.tolist(), p.tolist(), r.tolist())
                )
                out.write(lines)
                (first if start < runs // 2 else second).write(lines)
        summary = folder / "whole.json"
        measured = run(
            [SPECACCEPT, "audit", str(whole), "-o", "json", "-q", "--summary-out", str(summary)], sample_memory=True
        )
        parts = []
        for half in halves:
            parts.append(folder / f"{half.stem}.json")
            run([SPECACCEPT, "audit", str(half), "-q", "-o", "json", "--summary-out", str(parts[-1])])
        merged = output_of([SPECACCEPT, "merge", *map(str, parts)])
        written = orjson.loads(summary.read_bytes())
        combined = orjson.loads(merged)
        exact = all(written[key] == combined[key] for key in ("alpha", "alpha_ci", "clusters", "per_position"))
        exact = exact and written["state"]["clusters"] == combined["state"]["clusters"]
        return {
            "rss": measured["rss_sum"],
            "summary_bytes": float(summary.stat().st_size),
            "seconds": measured["seconds"],
            "clusters": float(written["clusters"]),
            "runs_per_request": float(runs_per_request),
            "exact_merge": 1.0 if exact else 0.0,
        }


# --- the two engines we compare against ---------------------------------------------------------


def duckdb_total(path: str) -> int:
    """Total accepted tokens with SQL: the 1-based position of the first failing token, minus one."""
    import duckdb

    escaped = path.replace("'", "''")
    source = f"read_parquet('{escaped}')" if path.endswith(".parquet") else _json_source(path)
    query = f"""
        SELECT sum(coalesce(
            list_position(list_transform(r, lambda x, i: x <= least(1.0, p[i] / q[i])), false) - 1,
            len(r)))
        FROM {source}
    """
    ((total,),) = duckdb.sql(query).fetchall()
    return int(total)


def plain_total(path: str) -> int:
    """orjson per line and the reference routine, verbatim: what a user would write first."""
    import orjson

    total = 0
    with open(path, "rb") as handle:
        for line in handle:
            row = orjson.loads(line)
            p, q, r = row["p"], row["q"], row["r"]
            accepted = 0
            for i in range(len(p)):
                threshold = min(1.0, p[i] / q[i])
                if r[i] <= threshold:
                    accepted += 1
                else:
                    break
            total += accepted
    return total


# --- the floor: the pieces of a JSONL reader, alone -----------------------------------------------


def read_bytes(path: str) -> int:
    """read() of the whole file, 4 MiB at a time: the cost of getting the bytes at all."""
    total = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(4 << 20):
            total += len(chunk)
    return total


def _json_source(path: str) -> str:
    escaped = path.replace("'", "''")
    columns = "{p: 'DOUBLE[]', q: 'DOUBLE[]', r: 'DOUBLE[]'}"
    return f"read_json('{escaped}', format = 'newline_delimited', columns = {columns})"


def duckdb_read(path: str) -> int:
    """DuckDB reading the three lists (every value, since their lengths are summed), without the rule."""
    import duckdb

    ((tokens,),) = duckdb.sql(f"SELECT sum(len(p) + len(q) + len(r)) FROM {_json_source(path)}").fetchall()
    return int(tokens)


# What DuckDB's JSON reader takes that a strict reader (orjson, the exact path) refuses or reads otherwise,
# as one RE2 pattern over each line: any backslash escape; NaN and Infinity; a trailing comma; a string,
# boolean or null in a list (read as a number: "0.5" -> 0.5, true -> 1.0); an exponent of 3 digits or a run
# of 300 digits (1e400 -> inf). It is a lower bound on the cost of an exact DuckDB reader, not one: that would
# also have to count rows against lines (DuckDB skips blank lines), find null or missing lists and lists of
# unequal lengths, and take the last of duplicate keys; and the pattern declines some ordinary lines (a
# model named "llama-info", an id like "4e812..."), which would go to an exact path.
STRICT_GUARD = r"\\|(?i:nan|inf)|,\s*[\]}]|[\[,]\s*(\"[^\"]*\"\s*[,\]]|true|false|null)|[eE]\+?[0-9]{3}|[0-9]{300}"


def duckdb_strict(path: str) -> int:
    """DuckDB reading each line as text, with the guard above and the lists parsed from it (see STRICT_GUARD)."""
    import duckdb

    escaped = path.replace("'", "''")
    lines = (
        f"read_csv('{escaped}', columns = {{line: 'VARCHAR'}}, delim = '\\x01', quote = '', escape = '', "
        "header = false, auto_detect = false)"
    )
    shape = """'{"p": "DOUBLE[]", "q": "DOUBLE[]", "r": "DOUBLE[]"}'"""
    query = f"""
        SELECT count(*), count_if(regexp_matches(line, '{STRICT_GUARD}')), sum(len(j.p) + len(j.q) + len(j.r))
        FROM (SELECT line, json_transform(line, {shape}) AS j FROM {lines})
    """
    ((rows, suspect, tokens),) = duckdb.sql(query).fetchall()
    if suspect:
        raise SystemExit(f"{suspect} of {rows} lines would need the exact path")
    return int(tokens)


def _block_document(text: bytes) -> bytes:
    """A block's lines as one JSON array, as the fast path builds it (`read.jsonl_fast.fast_batch`)."""
    return b"[" + text.replace(b"\n", b",") + b"]"


def simdjson_parse(path: str) -> int:
    """Reading the file into specaccept's 512 KiB blocks and simdjson's parse of each, as the fast path builds
    it; nothing taken out (`--profile` has the parse apart)."""
    import simdjson

    from specaccept_cli.read.jsonl import iter_text_blocks

    parser = simdjson.Parser()
    rows = 0
    with open(path, "rb") as handle:
        for _, _, text in iter_text_blocks(handle, path):
            assert isinstance(text, bytes)
            document = _block_document(text)
            rows += len(parser.parse(document))
    return rows


# --- where specaccept's time goes, step by step ----------------------------------------------------------


def profile_steps(path: str, repeat: int = 3) -> list[tuple[str, float]]:
    """CPU seconds of each step of specaccept's JSONL path in one process (`--jobs 1`), best of `repeat`.

    Each pass does one more step than the one before it, over the whole file; a step's cost is the
    difference. The byte guards and the parse are the fast path's own (`read.jsonl_fast`).
    """
    import numpy as np
    import simdjson

    from specaccept_cli.read import jsonl_fast
    from specaccept_cli.read.jsonl import iter_text_blocks
    from specaccept_cli.rule.batch import FieldSpec
    from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES
    from specaccept_cli.summary.evaluate import Plan, add_up, evaluate_batch

    fields, plan = FieldSpec(), Plan(check_sampler=True)  # what `audit` computes when r is logged
    keys = ("p", "q", "r")
    parser = simdjson.Parser()

    def blocks() -> Iterator[tuple[int, bytes]]:
        with open(path, "rb") as handle:
            for first_line, _, text in iter_text_blocks(handle, path):
                assert isinstance(text, bytes)
                yield first_line, text

    def guards(text: bytes) -> None:
        data = np.frombuffer(text, dtype=np.uint8)
        newlines = np.flatnonzero(data == ord("\n"))
        assert jsonl_fast._is_plain_block(data, newlines, DEFAULT_MAX_LINE_BYTES)
        jsonl_fast._key_strings(data, np.flatnonzero(data == ord('"')), keys)

    def parse(text: bytes) -> None:
        document = _block_document(text)
        len(parser.parse(document))

    def fast(first_line: int, text: bytes) -> Any:
        batch = jsonl_fast.fast_batch(text, first_line, path, fields, DEFAULT_MAX_LINE_BYTES)
        assert batch is not None, "the fast path declined a block of the benchmark's log"
        return batch

    def read_only() -> object:
        return [None for _ in blocks()]

    def guarded() -> object:
        return [guards(text) for _, text in blocks()]

    def parsed() -> object:
        return [(guards(text), parse(text)) for _, text in blocks()]

    def taken_out() -> object:
        return [fast(first_line, text) for first_line, text in blocks()]

    def evaluated() -> object:
        return add_up(evaluate_batch(fast(first_line, text), plan, False)[0] for first_line, text in blocks())

    compiled = jsonl_fast.compiled_reader()

    def compiled_parse() -> object:
        lists, extras = (b"p", b"q", b"r"), ()
        return [compiled.parse_block(text, lists, extras, DEFAULT_MAX_LINE_BYTES, None) for _, text in blocks()]

    passes: list[tuple[str, Callable[[], object]]] = [
        ("reading the file, cutting newline-aligned blocks, counting lines", read_only),
        ("byte guards (numpy: newlines, braces, brackets, quotes, key strings)", guarded),
        ("the block as one array document, and simdjson's parse of it", parsed),
        ("per row: three lookups and three buffers (pysimdjson), lengths, joins, value checks", taken_out),
        ("the rule, the sampler tally and the summary", evaluated),
    ]
    if compiled:  # the compiled reader replaces the guards and simdjson (`jsonl_fast.compiled_reader`)
        passes = [
            passes[0],
            (
                "the compiled reader's parse of each block (C: grammar, UTF-8, numbers into float64 buffers)",
                compiled_parse,
            ),
            ("around it: the arrays, offsets, line numbers and value checks (numpy)", taken_out),
            passes[-1],
        ]
    totals = []
    for _, work in passes:
        best = float("inf")
        for _ in range(repeat):
            gc.collect()
            start = time.process_time()
            work()
            best = min(best, time.process_time() - start)
        totals.append(best)
    steps = [(passes[0][0], totals[0])]
    # The full fast path replaces the guards and the parse of the pass before it: its step is what it adds.
    steps += [(name, max(0.0, total - before)) for (name, _), total, before in zip(passes[1:], totals[1:], totals)]
    return steps


def profile_table(steps: list[tuple[str, float]], path: str) -> str:
    """The steps as a markdown table, in CPU seconds per 1M runs and as shares of their sum."""
    with open(path, "rb") as handle:
        runs = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(4 << 20), b""))
    scale = 1_000_000 / max(runs, 1)
    total = sum(seconds for _, seconds in steps)
    rows = [f"| {name} | {seconds * scale:.2f} | {seconds / total:.0%} |" for name, seconds in steps]
    return "\n".join(
        [
            "| step (one process, best of 3) | CPU s per 1M runs | share |",
            "|---|---|---|",
            *rows,
            f"| all of the above | {total * scale:.2f} | 100% |",
        ]
    )


# --- measuring whole processes --------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    queue += [int(child) for child in handle.read().split()]
        except OSError:
            continue
    return found


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes of one process; PSS shares each page among the processes that map it."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


def run(command: list[str], stdin: str | None = None, sample_memory: bool = False) -> dict[str, float]:
    """Run one command to completion (stdout discarded); wall time and, when asked, peak memory."""
    stdin_handle = open(stdin, "rb") if stdin else subprocess.DEVNULL  # noqa: SIM115
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=stdin_handle, stdout=subprocess.DEVNULL)
    peaks = {"rss_max": 0.0, "rss_sum": 0.0, "pss_sum": 0.0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            readings = [_memory(pid) for pid in _descendants(process.pid)]
            peaks["rss_max"] = max(peaks["rss_max"], max((r for r, _ in readings), default=0))
            peaks["rss_sum"] = max(peaks["rss_sum"], sum(r for r, _ in readings))
            peaks["pss_sum"] = max(peaks["pss_sum"], sum(p for _, p in readings))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample) if sample_memory else None
    if sampler is not None:
        sampler.start()
    status = process.wait()
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # includes the workers the child waited for
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    done.set()
    if sampler is not None:
        sampler.join()
    if stdin:
        stdin_handle.close()  # type: ignore[union-attr]
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(command)}")
    return {"seconds": elapsed, "cpu": cpu, **peaks}


def output_of(command: list[str]) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def side_by_side(commands: dict[str, list[str]], repeat: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU time of each command, the commands taking turns round after round."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            runs[name].append(run(command))
    return {
        name: {measure: statistics.median(m[measure] for m in measured) for measure in ("seconds", "cpu")}
        for name, measured in runs.items()
    }


# --- the benchmark ---------------------------------------------------------------------------------


def ensure_logs(cache: Path, runs: int) -> tuple[Path, Path]:
    cache.mkdir(exist_ok=True)
    paths = cache / f"runs-{runs}.jsonl", cache / f"runs-{runs}.parquet"
    for path in paths:
        if not path.exists():
            print(f"generating {path} ...", flush=True)
            args = ["simulate", "--runs", str(runs), "--alpha", "0.8", "--k", "1-8", "--seed", "1", "-o", str(path)]
            subprocess.run([SPECACCEPT, *args], check=True)
    return paths


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as handle:
            model = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0))
    return f"{cores} cores ({model}), {platform.system()} {platform.release()}, Python {platform.python_version()}"


DEFAULT_OUT = ROOT / "benchmarks" / "latest.md"
PAGE = ROOT / "docs" / "performance.md"
PAGE_START = "<!-- bench:start (make bench writes this part) -->"
PAGE_END = "<!-- bench:end -->"


def update_page(report: str, page: Path = PAGE, start_marker: str = PAGE_START, end_marker: str = PAGE_END) -> bool:
    """Put the latest report between the page's markers, so the docs always show the latest run."""
    text = page.read_text()
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        return False
    page.write_text(text[: start + len(start_marker)] + "\n" + report + text[end:])
    return True


def _ratio(a: dict[str, float], b: dict[str, float], measure: str = "seconds") -> str:
    return f"{a[measure] / b[measure]:.2f}x"


def _sizes(text: str) -> list[int]:
    return sorted(int(size) for size in text.split(","))


def cluster_audit_line(figures: dict[str, float]) -> str:
    return (
        f"| audit of {figures['clusters']:,.0f} requests of {figures['runs_per_request']:.0f} run"
        f"{'s' if figures['runs_per_request'] != 1 else ''}, clustered by default, `-o json` | peak RSS "
        f"{figures['rss'] / MB:.0f} MB, summary {figures['summary_bytes'] / MB:.1f} MB, merge of halves "
        f"{'exact' if figures['exact_merge'] else 'NOT exact'} | {figures['seconds']:.1f} s | <= 400 MB, <= 80 MB |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000, help="the size the targets are measured at")
    parser.add_argument("--sizes", type=_sizes, default=[250_000, 1_000_000, 4_000_000], help="sizes for growth")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--check-repeat", type=int, default=21)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--duckdb", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--plain", metavar="FILE", help=argparse.SUPPRESS)
    for flag in ("--read", "--duckdb-read", "--duckdb-strict", "--simdjson"):
        parser.add_argument(flag, metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--profile", metavar="FILE", help="only take specaccept's JSONL path apart, step by step")
    parser.add_argument("--clusters", type=int, default=None, help="only measure the tally of N clusters")
    parser.add_argument("--cluster-audit", type=int, default=None, help="only audit a log of N requests")
    parser.add_argument("--runs-per-request", type=int, default=2, help="with --cluster-audit: each request's runs")
    args = parser.parse_args()
    if args.cluster_audit:
        print(cluster_audit_line(cluster_audit(args.cluster_audit, runs_per_request=args.runs_per_request)))
        return
    if args.clusters:
        tally = cluster_memory(args.clusters)
        print(
            f"{args.clusters:,} clusters: tally {tally['bytes'] / MB:.0f} MB ({tally['per_cluster']:.0f} B each), "
            f"peak RSS growth {tally['rss_growth'] / MB:.0f} MB, built in {tally['seconds']:.1f} s"
        )
        return
    if args.duckdb:
        print(duckdb_total(args.duckdb))
        return
    if args.plain:
        print(plain_total(args.plain))
        return
    for value, engine in (
        (args.read, read_bytes),
        (args.duckdb_read, duckdb_read),
        (args.duckdb_strict, duckdb_strict),
        (args.simdjson, simdjson_parse),
    ):
        if value:
            print(engine(value))
            return
    if args.profile:
        print(profile_table(profile_steps(args.profile), args.profile))
        return

    import compileall

    import duckdb
    import orjson

    # Bytecode written once, as `pip install` writes it: an editable checkout would otherwise compile
    # every edited module again in each timed process (PYTHONDONTWRITEBYTECODE is often set).
    compileall.compile_dir(str(ROOT / "specaccept_cli"), quiet=1)
    sizes = sorted({*args.sizes, args.runs})
    logs = {size: ensure_logs(args.cache, size) for size in sizes}
    jsonl, parquet = logs[args.runs]
    me = [sys.executable, __file__]
    audit = [SPECACCEPT, "audit", "-o", "json"]

    def engines(size: int) -> dict[str, list[str]]:
        jsonl, parquet = logs[size]
        return {
            "specaccept JSONL": [*audit, str(jsonl)],
            "DuckDB JSONL": [*me, "--duckdb", str(jsonl)],
            "specaccept Parquet": [*audit, str(parquet)],
            "DuckDB Parquet": [*me, "--duckdb", str(parquet)],
        }

    main_engines = {
        **engines(args.runs),
        "plain Python JSONL": [*me, "--plain", str(jsonl)],
        "specaccept JSONL --jobs 1": [*audit, "--jobs", "1", str(jsonl)],
        # the same audit on the pure-Python readers (simdjson per block, orjson per line)
        "specaccept JSONL, compiled reader off": ["env", "SPECACCEPT_NO_EXTENSIONS=1", *audit, str(jsonl)],
    }

    print("checking that every engine agrees ...", flush=True)
    totals = {
        "specaccept JSONL": orjson.loads(output_of(main_engines["specaccept JSONL"]))["accepted_tokens"],
        "specaccept Parquet": orjson.loads(output_of(main_engines["specaccept Parquet"]))["accepted_tokens"],
        "DuckDB JSONL": int(output_of(main_engines["DuckDB JSONL"])),
        "DuckDB Parquet": int(output_of(main_engines["DuckDB Parquet"])),
        "plain Python JSONL": int(output_of(main_engines["plain Python JSONL"])),
    }
    agree = len(set(totals.values())) == 1
    print(f"  accepted tokens: {totals}  ->  {'agree' if agree else 'DISAGREE'}", flush=True)

    print(f"timing (median of {args.repeat}, side by side) ...", flush=True)
    times = side_by_side(main_engines, args.repeat)
    output_times = side_by_side(
        {"summary": [*audit, str(jsonl)], "per-run": [SPECACCEPT, "audit", "-o", "jsonl", str(jsonl)]}, args.repeat
    )
    # Every run its own group: simulate writes a distinct "id" per run.
    grouped_command = [*audit, "--group-by", "id", str(jsonl)]
    grouping = side_by_side({"grouped": grouped_command, "ungrouped": [*audit, str(jsonl)]}, args.repeat)
    one_line = args.cache / "one-run.jsonl"
    one_line.write_bytes(b'{"p": [0.5], "q": [0.5], "r": [0.25]}\n')
    print("the floor: the pieces of a reader alone, beside DuckDB's query ...", flush=True)
    floor_engines = {
        "DuckDB JSONL (the query)": main_engines["DuckDB JSONL"],
        "specaccept JSONL": main_engines["specaccept JSONL"],
        "read() of the file": [*me, "--read", str(jsonl)],
        "DuckDB reading the lists alone": [*me, "--duckdb-read", str(jsonl)],
        "DuckDB reading them behind a guard for its leniencies (a lower bound on an exact reader)": [
            *me,
            "--duckdb-strict",
            str(jsonl),
        ],
        "reading the blocks and simdjson's parse of them (one process, nothing taken out)": [
            *me,
            "--simdjson",
            str(jsonl),
        ],
        "specaccept start-up (`audit -o json` of a one-run file)": [*audit, str(one_line)],
        "Python start-up + `import duckdb`": [sys.executable, "-c", "import duckdb"],
    }
    floor = side_by_side(floor_engines, args.repeat)
    print("where specaccept's time goes (one process) ...", flush=True)
    steps = profile_table(profile_steps(str(jsonl)), str(jsonl))
    startup = side_by_side(
        {"check": [SPECACCEPT, *CHECK_ARGS], "import": [sys.executable, "-c", "import click, rich"]},
        args.check_repeat,
    )
    growth_times = {size: times if size == args.runs else side_by_side(engines(size), args.repeat) for size in sizes}
    print("peak memory (one run each, sampled every 10 ms) ...", flush=True)
    memory = {name: run(command, sample_memory=True) for name, command in main_engines.items() if "--jobs" not in name}
    grouped_name = f"specaccept JSONL `--group-by id` ({args.runs:,} groups)"
    memory[grouped_name] = run(grouped_command, sample_memory=True)
    growth_memory = {
        size: {
            kind: memory[f"specaccept {kind}"]
            if size == args.runs
            else run(engines(size)[f"specaccept {kind}"], sample_memory=True)
            for kind in ("JSONL", "Parquet")
        }
        for size in sizes
    }
    print("cluster tally of 1,000,000 requests ...", flush=True)
    tally = cluster_memory(1_000_000)
    print("audit of 1,000,000 requests, clustered by default ...", flush=True)
    clustered = cluster_audit(1_000_000)
    print("audit of 1,000,000 one-run requests (a cluster per run: the most clusters a log can hold) ...", flush=True)
    one_run = cluster_audit(1_000_000, runs_per_request=1)

    def rss_growth(kind: str) -> float:
        return (growth_memory[sizes[-1]][kind]["rss_sum"] - growth_memory[sizes[0]][kind]["rss_sum"]) / MB

    pairs = [
        ("specaccept / DuckDB, JSONL", times["specaccept JSONL"], times["DuckDB JSONL"], "<= 1.0x"),
        ("specaccept / DuckDB, Parquet", times["specaccept Parquet"], times["DuckDB Parquet"], "<= 1.0x"),
        ("plain Python loop / specaccept, JSONL", times["plain Python JSONL"], times["specaccept JSONL"], ">= 3x"),
        (
            "specaccept / the same with `SPECACCEPT_NO_EXTENSIONS=1`, JSONL",
            times["specaccept JSONL"],
            times["specaccept JSONL, compiled reader off"],
            "-",
        ),
        (
            "specaccept `--jobs 1` / default jobs, JSONL",
            times["specaccept JSONL --jobs 1"],
            times["specaccept JSONL"],
            "-",
        ),
        ("`check` / `import click, rich`", startup["check"], startup["import"], "<= 1.3x"),
        ("`-o jsonl` / `-o json`, JSONL", output_times["per-run"], output_times["summary"], "<= 1.3x"),
        (
            f"`--group-by id` ({args.runs:,} groups) / no groups, JSONL",
            grouping["grouped"],
            grouping["ungrouped"],
            "<= 10x",
        ),
    ]
    first, last = f"{sizes[0]:,}", f"{sizes[-1]:,}"
    lines = [
        f"Machine: {machine()}; DuckDB {duckdb.__version__}; {datetime.date.today().isoformat()}; "
        f"{'; '.join(output_of([SPECACCEPT, '--version']).splitlines()[1:])}.",
        f"Logs: {args.runs:,} runs, k uniform in 1..8 (`specaccept simulate --alpha 0.8 --k 1-8 --seed 1`): "
        f"JSONL {jsonl.stat().st_size / MB:.0f} MB, Parquet {parquet.stat().st_size / MB:.0f} MB.",
        f"Every engine agrees on the total accepted tokens: {'yes' if agree else 'NO'} ({totals['DuckDB JSONL']:,}).",
        "",
        f"| comparison (median of {args.repeat}; `check`: of {args.check_repeat}) | wall time | CPU time | target |",
        "|---|---|---|---|",
        *(
            f"| {name} | {_ratio(a, b)} | {_ratio(a, b, 'cpu')} | {target}{' (wall)' if target != '-' else ''} |"
            for name, a, b, target in pairs
        ),
        *(
            f"| specaccept peak RSS, {args.runs:,} runs {kind} (all processes) | "
            f"{memory[f'specaccept {kind}']['rss_sum'] / MB:.0f} MB | | <= 300 MB |"
            for kind in ("JSONL", "Parquet")
        ),
        *(
            f"| RSS growth {first} -> {last} runs, {kind} | {rss_growth(kind):+.0f} MB | | <= 50 MB |"
            for kind in ("JSONL", "Parquet")
        ),
        f"| specaccept peak RSS, `--group-by id`, {args.runs:,} groups (all processes) | "
        f"{memory[grouped_name]['rss_sum'] / MB:.0f} MB | | <= 500 MB |",
        f"| `--cluster-field` state, 1,000,000 requests of 5 runs (k 1..8) | {tally['bytes'] / MB:.0f} MB "
        f"({tally['per_cluster']:.0f} B per cluster; peak RSS growth {tally['rss_growth'] / MB:.0f} MB) | "
        f"{tally['seconds']:.1f} s | <= 300 MB |",
        cluster_audit_line(clustered),
        cluster_audit_line(one_run),
        "",
        f"How cost grows with the input (each size timed on its own, median of {args.repeat}, side by side):",
        "",
        "| runs | JSONL / DuckDB (wall) | JSONL / DuckDB (CPU) | specaccept JSONL s (wall, CPU) "
        "| Parquet / DuckDB (wall) | Parquet / DuckDB (CPU) | peak RSS JSONL, Parquet |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {size:,} | {_ratio(t['specaccept JSONL'], t['DuckDB JSONL'])} "
            f"| {_ratio(t['specaccept JSONL'], t['DuckDB JSONL'], 'cpu')} "
            f"| {t['specaccept JSONL']['seconds']:.2f}, {t['specaccept JSONL']['cpu']:.2f} "
            f"| {_ratio(t['specaccept Parquet'], t['DuckDB Parquet'])} "
            f"| {_ratio(t['specaccept Parquet'], t['DuckDB Parquet'], 'cpu')} "
            f"| {growth_memory[size]['JSONL']['rss_sum'] / MB:.0f} MB, "
            f"{growth_memory[size]['Parquet']['rss_sum'] / MB:.0f} MB |"
            for size, t in growth_times.items()
        ),
        "",
        "Peak memory of each process tree (RSS summed over the parent and its workers; PSS counts the pages",
        "forked workers share once):",
        "",
        "| command | peak RSS, sum | peak PSS, sum | largest process |",
        "|---|---|---|---|",
        *(
            f"| {name} | {m['rss_sum'] / MB:.0f} MB | {m['pss_sum'] / MB:.0f} MB | {m['rss_max'] / MB:.0f} MB |"
            for name, m in memory.items()
        ),
        "",
        f"The floor: what the pieces of a JSONL reader cost alone, each its own process, side by side with DuckDB's"
        f" query (median of {args.repeat}):",
        "",
        "| command | wall s | CPU s | / DuckDB's query (wall) |",
        "|---|---|---|---|",
        *(
            f"| {name} | {t['seconds']:.2f} | {t['cpu']:.2f} | {_ratio(t, floor['DuckDB JSONL (the query)'])} |"
            for name, t in floor.items()
        ),
        "",
        f"Where specaccept's time goes: its JSONL path taken apart on the {args.runs:,}-run file in one process,",
        "each pass doing one more step than the one before:",
        "",
        steps,
        "",
        "Times behind the ratios (medians; absolute seconds vary with the machine's load):",
        "",
        "| command | wall s | CPU s |",
        "|---|---|---|",
        *(f"| {name} | {t['seconds']:.2f} | {t['cpu']:.2f} |" for name, t in times.items()),
        *(
            f"| {name} | {t['seconds']:.3f} | {t['cpu']:.3f} |"
            for name, t in (
                ("specaccept JSONL `-o jsonl`", output_times["per-run"]),
                ("specaccept JSONL `-o json` (beside it)", output_times["summary"]),
                (f"specaccept JSONL `--group-by id` ({args.runs:,} groups)", grouping["grouped"]),
                ("specaccept `check`", startup["check"]),
                ("`python -c 'import click, rich'`", startup["import"]),
            )
        ),
    ]
    report = "\n".join(lines) + "\n"
    print()
    print(report)
    args.out.write_text(report)
    print(f"written to {args.out}")
    if args.out == DEFAULT_OUT and update_page(report):
        print(f"and into {PAGE.relative_to(ROOT)}")
    if not agree:
        raise SystemExit("engines disagree on the total accepted tokens")


if __name__ == "__main__":
    main()
