"""Everything tests share: the reference routine, hand-made logs, real files, and the one way to run the CLI.

Test modules import from here and from no other test module. This is also the only test module
that imports `specaccept_cli.cli`: when the commands move, this file is the one place to follow.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from types import ModuleType

import click
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

from specaccept_cli.cli import cli
from specaccept_cli.errors import SkippedRow
from specaccept_cli.pipeline import summarise
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.simulate import simulate
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.files import json_bytes, summary_object
from specaccept_cli.summary.state import Summary
from specaccept_cli.views.markdown import markdown_cell as markdown_cell  # re-exported, like the CLI: one place

# Source lines for `python -c` scripts that call the CLI's entry point in a fresh interpreter.
IMPORT_MAIN = "from specaccept_cli.cli import main\n"

TESTS = Path(__file__).parent
CORPUS = TESTS / "corpus"  # bad inputs, one file per class of problem (see tests/corpus/make_corpus.py)
GOLDEN = TESTS / "golden"  # expected markdown; `SPECACCEPT_UPDATE_GOLDEN=1 pytest` rewrites it


def spec_accept(p: Sequence[float], q: Sequence[float], r: Sequence[float]) -> int:
    """The reference routine of the rule, verbatim: the oracle every path must agree with."""
    accepted = 0
    for i in range(len(p)):
        threshold = min(1.0, p[i] / q[i])  # accept probability for this token
        if r[i] <= threshold:
            accepted += 1  # keep it
        else:
            break  # first rejection stops the run
    return accepted


FIRST_EXAMPLE = {"p": [0.9, 0.2, 0.8], "q": [0.5, 0.8, 0.4], "r": [0.1, 0.5, 0.2]}

# Three runs worked by hand: alpha = 3/4, tokens per pass = 2, acceptance rate = 3/5.
#   seed example: k=3, a=1 (examined 2)
#   all kept:     k=2, a=2 (examined 2)
#   empty draft:  k=0, a=0 (examined 0)
HAND_ROWS = [
    FIRST_EXAMPLE,
    {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99]},
    {"p": [], "q": [], "r": []},
]

# Three runs worked by hand, in two groups (thresholds min(1, p/q) in brackets):
#   run 1: thresholds [1, 0.25, 1], r [0.1, 0.5, 0.2] -> pass, FAIL, pass: a = 1, 2 tokens pass their own test
#   run 2: thresholds [1, 1],       r [0.3, 0.9]      -> pass, pass:       a = 2, 2 pass
#   run 3: thresholds [0.2],        r [0.5]           -> FAIL:             a = 0, 0 pass
# runs 3, drafted 6, accepted 3, examined 2 + 2 + 1 = 5, emitted 6, passing 4, threshold sum 4.45.
MODEL_ROWS = [
    {"p": [0.9, 0.2, 0.8], "q": [0.5, 0.8, 0.4], "r": [0.1, 0.5, 0.2], "model": "a"},
    {"p": [0.5, 0.5], "q": [0.5, 0.5], "r": [0.3, 0.9], "model": "b"},
    {"p": [0.1], "q": [0.5], "r": [0.5], "model": "a"},
]

GOOD = orjson.dumps(FIRST_EXAMPLE)  # one valid line


def random_rows(n: int, seed: int = 0, k_max: int = 8) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        k = rng.randint(0, k_max)
        q = [rng.uniform(0.01, 1.0) for _ in range(k)]
        p = [rng.random() for _ in range(k)]
        r = [rng.random() for _ in range(k)]
        rows.append({"id": f"req-{i}", "p": p, "q": q, "r": r})
    return rows


ROWS = random_rows(300, seed=1)


def expected_accepted(rows: list[dict[str, object]]) -> list[int]:
    return [spec_accept(row["p"], row["q"], row["r"]) for row in rows]  # type: ignore[arg-type]


def per_run(stdout: bytes) -> list[dict[str, object]]:
    """The records of `audit -o jsonl`."""
    return [orjson.loads(line) for line in stdout.splitlines()]


def kept_errors(source: str, count: int) -> tuple[SkippedRow, ...]:
    return tuple(SkippedRow(source, line, f"bad {line}") for line in range(1, count + 1))


def outcome_summary(seed: int, runs: int) -> tuple[Summary, list[tuple[np.ndarray, ...]]]:
    """The summary of `runs` random runs, and their arrays (offsets, p, q, r)."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 12, size=runs)
    offsets = np.zeros(runs + 1, dtype=np.int64)
    np.cumsum(k, out=offsets[1:])
    n = int(offsets[-1])
    arrays = (offsets, rng.random(n), 1.0 - rng.random(n), rng.random(n))
    return Summary.of_outcome(accept_prefix_batch(*arrays)), [arrays]


def jsonl_bytes(rows: Iterable[object]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def write_jsonl(path: Path, rows: Iterable[object]) -> Path:
    path.write_bytes(jsonl_bytes(rows))
    return path


def nonblank_lines(data: bytes) -> int:
    """The reader's definition: pieces between b"\\n" that are neither empty nor all ASCII whitespace
    (bytes.isspace: space, \\t, \\n, \\r, \\x0b, \\x0c). A line over --max-line-bytes always counts.
    The first line's byte order mark is not part of it: a BOM alone is a blank line."""
    lines = data.split(b"\n")
    if lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    return sum(1 for line in lines if line and not line.isspace())


BAD_LINES = [
    b'{"p": [0.5], "q": [0.0], "r": [0.1]}',  # q = 0
    b'{"p": [0.5, 0.2], "q": [0.5], "r": [0.1]}',  # lengths differ
    b'{"p": [0.5], "q": [0.5], "r": ["0.1"]}',  # a string
    b"not json",
    b"[1, 2]",
    b'{"q": [0.5], "r": [0.1]}',  # missing p
]


def mixed_lines(n: int, seed: int, bad_every: int = 5) -> list[bytes]:
    """Valid rows with bad rows, blank lines and whitespace-only lines mixed in."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        if i % bad_every == bad_every - 1:
            lines.append(rng.choice(BAD_LINES))
        elif i % 23 == 11:
            lines.append(rng.choice([b"", b"   ", b"\t"]))
        else:
            k = rng.randint(0, 8)
            row = {
                "id": f"r{i}",
                "p": [rng.random() for _ in range(k)],
                "q": [rng.uniform(0.01, 1.0) for _ in range(k)],
                "r": [rng.random() for _ in range(k)],
            }
            lines.append(orjson.dumps(row))
    return lines


def simulated(runs: int, alpha: float, seed: int, k: tuple[int, int] = (1, 8)) -> Summary:
    """The summary of a simulated log, in-process (no JSON round trip)."""
    total = Summary()
    for chunk in simulate(runs, alpha, k[0], k[1], seed):
        total = total + Summary.of_outcome(accept_prefix_batch(chunk.offsets, chunk.p, chunk.q, chunk.r))
    return total


def save(summary: Summary, path: Path) -> Path:
    path.write_bytes(orjson.dumps(summary_object(summary)))
    return path


# --- the CLI: in-process, as a real process, and through a shell -------------------------------


def all_commands() -> dict[str, click.Command]:
    """Every command of the group, the lazily loaded ones included."""
    context = click.Context(cli)
    return {name: command for name in cli.list_commands(context) if (command := cli.get_command(context, name))}


def table_column(text: str, column: int) -> str:
    """A Rich table's column as one string: each line's cell stripped and joined to the next, so a file name
    that a narrow terminal (or a long clone path) folds over several lines reads whole again."""
    cells = []
    for line in text.splitlines():
        line = line.strip()
        if line[:1] in ("│", "┃"):
            parts = line.strip("│┃").replace("┃", "│").split("│")
            if column < len(parts):
                cells.append(parts[column].strip())
    return "".join(cells)


def invoke(*args: str, input: bytes | str | None = None) -> Result:
    """Run the CLI in-process (stdout and stderr kept apart); an escaping exception fails the test."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def invoke_env(env: dict[str, str], *args: str, input: bytes | str | None = None) -> Result:
    """`invoke` with extra environment variables (GITHUB_STEP_SUMMARY, ...)."""
    return CliRunner(env=env).invoke(cli, list(args), input=input, catch_exceptions=False)


def summarised(rows: Iterable[object], directory: Path, name: str = "log", group_by: str | None = None) -> Summary:
    """The library's summary of `rows` (written to DIRECTORY/NAME.jsonl): what `audit` computes, without the CLI."""
    path = write_jsonl(directory / f"{name}.jsonl", rows)
    fields = FieldSpec(extras=(group_by,)) if group_by else FieldSpec()
    return summarise([str(path)], fields, Plan(group_by=group_by))


def summary_json(rows: Iterable[object], directory: Path, name: str = "log", cost_ratio: float | None = None) -> dict:
    """`summarised(rows)` in the machine format, as it reads back from a file (what `audit -o json` prints)."""
    data: dict[str, object] = orjson.loads(json_bytes(summary_object(summarised(rows, directory, name), cost_ratio)))
    return data


def audit_bytes(directory: Path, data: bytes, *options: str) -> Result:
    """`audit` of DATA written to a file (an exception escaping the command fails the test)."""
    path = directory / "input.jsonl"
    path.write_bytes(data)
    return invoke("audit", str(path), *options)


def audit_json(rows: list[dict[str, object]], directory: Path, name: str) -> dict[str, object]:
    """`audit -o json` of `rows`, written to DIRECTORY/NAME.jsonl."""
    path = write_jsonl(directory / f"{name}.jsonl", rows)
    result: dict[str, object] = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    return result


def without_provenance(summary_bytes: bytes) -> bytes:
    """A summary file's bytes without `provenance` (and `-o json`'s `verdict`, which depends on the checks
    asked for): what two summaries of the same runs share, however made."""
    data = orjson.loads(summary_bytes)
    del data["provenance"]
    data.pop("verdict", None)
    return json_bytes(data)


def load_script(name: str) -> ModuleType:
    """A script of scripts/ (the generated docs' writers) as a module, importing its neighbours as it does when run."""
    folder = Path(__file__).resolve().parent.parent / "scripts"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_process(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """Run `python -m specaccept_cli` as a real subprocess, no terminal."""
    full_env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "specaccept_cli", *args],
        input=input,
        capture_output=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def shell(command: str) -> subprocess.CompletedProcess[bytes]:
    """Run a `sh -c` line in which "$SPECACCEPT" is this Python (for pipes, `| head`, `>&-`, /dev/full)."""
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1", "SPECACCEPT": sys.executable}
    return subprocess.run(["sh", "-c", command], capture_output=True, env=env, timeout=120, check=False)


# --- object storage and clusters (tests/distributed) -------------------------------------------

BUCKET = "serving-logs"
PREFIX = "logs/2026-11-30"
HOSTS = ("host-a", "host-b", "host-c", "host-d", "host-e")


@dataclass(frozen=True)
class Shards:
    directory: Path
    files: list[Path]  # in the order of the S3 listing (sorted keys)
    url: str  # the prefix holding the same files in the bucket
    runs: int


@dataclass(frozen=True)
class S3:
    endpoint: str
    client: object  # a boto3 S3 client


def simulated_rows(runs: int, seed: int) -> list[dict[str, object]]:
    """Simulated runs as rows, each with a host (for --group-by); acceptance varies by host."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for chunk in simulate(runs, 0.72, 1, 8, seed):
        offsets = chunk.offsets.tolist()
        p, q, r = chunk.p.tolist(), chunk.q.tolist(), chunk.r.tolist()
        hosts = rng.integers(0, len(HOSTS), size=len(offsets) - 1).tolist()
        for index, (start, end) in enumerate(pairwise(offsets)):
            rows.append({"p": p[start:end], "q": q[start:end], "r": r[start:end], "host": HOSTS[hosts[index]]})
    return rows


def write_parquet(path: Path, rows: list[dict[str, object]], row_group_size: int) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


# --- runs in requests, for the drift studies ------------------------------------------------


def geometric_runs(alpha: np.ndarray, k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Accepted lengths of runs whose tokens pass independently, run j with probability alpha[j]."""
    failures_before_first = rng.geometric(1.0 - alpha) - 1
    return np.minimum(failures_before_first, k).astype(np.int64)


def interleaved(
    n: int, rng: np.random.Generator, concurrent: int, step: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`concurrent` requests at a time, their runs interleaved in the log: (k, accepted, request of each run).

    Each of `concurrent` slots serves requests of 5-60 runs one after another (each request with its own
    alpha, Beta of mean 0.8), its runs at the times of a Poisson process; the log is every run in time
    order. With `step` below 1, every run in the second half of the log has its alpha times `step`.
    """
    per_slot = n // concurrent + 61
    lengths = rng.integers(5, 61, (concurrent, per_slot // 5 + 1))
    request = np.concatenate(
        [np.repeat(np.arange(row.shape[0]) + slot * row.shape[0], row)[:per_slot] for slot, row in enumerate(lengths)]
    )
    times = np.cumsum(rng.exponential(size=(concurrent, per_slot)), axis=1).ravel()
    request = request[np.argsort(times, kind="stable")][:n]
    request_alpha = rng.beta(8.0, 2.0, lengths.size)
    alpha = request_alpha[request] * np.where(np.arange(n) < n // 2, 1.0, step)
    k = rng.integers(1, 9, n).astype(np.int64)
    return k, geometric_runs(alpha, k, rng), request


@contextlib.contextmanager
def fed_fifo(path: Path, data: bytes) -> Iterator[Path]:
    """A named pipe at `path` that a thread writes `data` into while the block runs (`audit <(cat x)`)."""
    os.mkfifo(path)

    def feed() -> None:
        with open(path, "wb") as pipe:
            pipe.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        yield path
    finally:
        writer.join(timeout=60)
