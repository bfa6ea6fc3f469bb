"""Honest synthetic logs: every drafted token passes independently with probability alpha.

Each token gets an acceptance probability t = min(1, p/q) drawn so that E[t] = alpha
(half the mass, alpha/2, at t = 1 with p >= q; the rest from a Beta with the matching
mean), a draft probability q, p = t * q, and a uniform r in [0, 1). Since r is
uniform and independent of t, P(r <= t) = E[t] = alpha exactly.

With `alpha_by_position`, token i of every run (0-based) uses alpha_by_position[i]
(the last value for positions beyond the list): acceptance that falls along the draft,
as real drafters show, where the conditional and unconditional per-position rates differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import IO, TYPE_CHECKING

import numpy as np
import orjson

from specaccept_cli.rule.batch import FloatArray, IntArray

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

CHUNK_RUNS = 65_536


@dataclass(frozen=True)
class SimulatedChunk:
    offsets: IntArray
    p: FloatArray
    q: FloatArray
    r: FloatArray


def _thresholds(rng: np.random.Generator, alpha: float, size: int) -> FloatArray:
    if alpha <= 0.0:
        return np.zeros(size)
    if alpha >= 1.0:
        return np.ones(size)
    certain = alpha / 2  # probability of t = 1
    mean_rest = (alpha - certain) / (1 - certain)
    concentration = 2.0
    rest = rng.beta(concentration * mean_rest, concentration * (1 - mean_rest), size)
    return np.where(rng.random(size) < certain, 1.0, rest)


def _thresholds_by_position(rng: np.random.Generator, alphas: FloatArray) -> FloatArray:
    """Like `_thresholds`, one target mean per token: E[t_i] = alphas[i]."""
    inner = (alphas > 0.0) & (alphas < 1.0)
    safe = np.where(inner, alphas, 0.5)
    certain = safe / 2
    mean_rest = (safe - certain) / (1 - certain)
    concentration = 2.0
    rest = rng.beta(concentration * mean_rest, concentration * (1 - mean_rest))
    t = np.where(rng.random(alphas.shape[0]) < certain, 1.0, rest)
    return np.where(inner, t, np.where(alphas >= 1.0, 1.0, 0.0))


def parse_alpha_list(text: str) -> list[float]:
    """`0.9,0.7,0.5` -> [0.9, 0.7, 0.5]; each in [0, 1]. Raises ValueError on anything else."""
    values = [float(item) for item in text.split(",")]
    if not values or any(not 0.0 <= value <= 1.0 for value in values):
        raise ValueError(f"not a list of probabilities: {text!r}")
    return values


def simulate(
    runs: int,
    alpha: float,
    k_low: int,
    k_high: int,
    seed: int | None,
    alpha_by_position: list[float] | None = None,
) -> Iterator[SimulatedChunk]:
    """Chunks of simulated runs (k uniform in k_low..k_high), `runs` in all, reproducible with `seed`.

    `alpha_by_position`, when given, replaces `alpha` position by position (see the module doc).
    """
    rng = np.random.default_rng(seed)
    by_position = None if alpha_by_position is None else np.asarray(alpha_by_position, dtype=np.float64)
    remaining = runs
    while remaining > 0:
        n = min(CHUNK_RUNS, remaining)
        remaining -= n
        k = rng.integers(k_low, k_high + 1, size=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(k, out=offsets[1:])
        tokens = int(offsets[-1])
        if by_position is None:
            t = _thresholds(rng, alpha, tokens)
        else:
            position = np.arange(tokens, dtype=np.int64) - np.repeat(offsets[:-1], k)
            t = _thresholds_by_position(rng, by_position[np.minimum(position, by_position.shape[0] - 1)])
        q = 1.0 - rng.random(tokens) * 0.95  # (0.05, 1]
        p = np.where(t >= 1.0, q + rng.random(tokens) * (1.0 - q), t * q)  # t = 1: p >= q
        r = rng.random(tokens)
        yield SimulatedChunk(offsets=offsets, p=p, q=q, r=r)


def write_jsonl(chunks: Iterator[SimulatedChunk], out: SupportsWrite[bytes]) -> int:
    """Write runs as JSONL rows {"id", "p", "q", "r"}; returns the number of runs written."""
    written = 0
    for chunk in chunks:
        bounds = chunk.offsets.tolist()
        p, q, r = chunk.p.tolist(), chunk.q.tolist(), chunk.r.tolist()
        lines = []
        for start, end in pairwise(bounds):
            row = {"id": written, "p": p[start:end], "q": q[start:end], "r": r[start:end]}
            lines.append(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
            written += 1
        out.write(b"".join(lines))
    return written


def write_parquet(chunks: Iterator[SimulatedChunk], path: str | IO[bytes]) -> int:
    """Write runs as a Parquet file (a path or a binary file) with columns id, p, q, r (list<double>)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("p", pa.list_(pa.float64())),
            ("q", pa.list_(pa.float64())),
            ("r", pa.list_(pa.float64())),
        ]
    )
    written = 0
    with pq.ParquetWriter(path, schema) as writer:
        for chunk in chunks:
            n = chunk.offsets.shape[0] - 1
            offsets = pa.array(chunk.offsets, type=pa.int32())
            columns = [pa.array(np.arange(written, written + n, dtype=np.int64))]
            columns += [pa.ListArray.from_arrays(offsets, pa.array(values)) for values in (chunk.p, chunk.q, chunk.r)]
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))
            written += n
    return written
