"""Honest synthetic logs: every drafted token passes independently with probability alpha.

Each token gets an acceptance probability t = min(1, p/q) drawn so that E[t] = alpha
(half the mass, alpha/2, at t = 1 with p >= q; the rest from a Beta with the matching
mean), a draft probability q, p = t * q (at t = 1, p = q times a small excess that keeps
E[p/q] <= 1, as it is for any real pair of models), and a uniform r in [0, 1). Since r is
uniform and independent of t, P(r <= t) = E[t] = alpha exactly.

With `alpha_by_position`, token i of every run (0-based) uses alpha_by_position[i]
(the last value for positions beyond the list): acceptance that falls along the draft,
as real drafters show, where the conditional and unconditional per-position rates differ.

With `requests`, runs come in requests of a random number of runs, each with its own
alpha drawn from a Beta distribution (a prompt is easy or hard for the draft model as a
whole), and optionally a draft length that grows with that alpha (an adaptive drafter):
the clustered logs real serving produces. Rows then carry a `request_id`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from itertools import pairwise
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import orjson
from msgspec import Struct

from specaccept_cli.rule.batch import FloatArray, IntArray

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

CHUNK_RUNS = 65_536


class SimulatedChunk(Struct, frozen=True):
    """Simulated runs in the rule's layout: run offsets, the three token arrays, and each run's request."""

    offsets: IntArray
    p: FloatArray
    q: FloatArray
    r: FloatArray
    request: IntArray | None = None  # each run's request number, with `Requests`


class Requests(Struct, frozen=True):
    """Runs grouped in requests: `runs` per request drawn uniformly in [low, high]; a request's alpha
    from Beta(`alpha_beta`) (None: every request at the log's alpha); with `k_follows_alpha`, a run's
    draft length is k_low + floor(alpha (k_high - k_low + 1)) of its request (capped at k_high)."""

    runs: tuple[int, int]
    alpha_beta: tuple[float, float] | None = None
    k_follows_alpha: bool = False

    def mean_alpha(self, alpha: float) -> float:
        """The expected per-request alpha (the Beta's mean, or `alpha` itself)."""
        if self.alpha_beta is None:
            return alpha
        a, b = self.alpha_beta
        return a / (a + b)


class _RequestStream:
    """Deals runs out to requests chunk by chunk: a request may span two chunks."""

    def __init__(self, rng: np.random.Generator, requests: Requests, alpha: float) -> None:
        self.rng, self.requests, self.alpha = rng, requests, alpha
        self.number, self.left, self.request_alpha = -1, 0, alpha

    def _draw_alpha(self, size: int) -> FloatArray:
        if self.requests.alpha_beta is None:
            return np.full(size, self.alpha)
        a, b = self.requests.alpha_beta
        return self.rng.beta(a, b, size)

    def next(self, n: int) -> tuple[IntArray, FloatArray]:
        """Request numbers and request alphas of the next `n` runs."""
        first = min(self.left, n)
        numbers = [np.full(first, self.number, dtype=np.int64)]
        alphas = [np.full(first, self.request_alpha)]
        self.left -= first
        needed = n - first
        low, high = self.requests.runs
        while needed > 0:
            count = needed // low + 1
            sizes = self.rng.integers(low, high + 1, size=count)
            drawn = self._draw_alpha(count)
            for size, request_alpha in zip(sizes.tolist(), drawn.tolist()):
                self.number += 1
                take = min(size, needed)
                numbers.append(np.full(take, self.number, dtype=np.int64))
                alphas.append(np.full(take, request_alpha))
                needed -= take
                if needed == 0:
                    self.left, self.request_alpha = size - take, request_alpha
                    break
        return np.concatenate(numbers), np.concatenate(alphas)


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


def _excess(alpha: FloatArray, u: FloatArray) -> FloatArray:
    """p/q - 1 for the tokens drawn at t = 1: 1.8 u (1 - alpha) / alpha, so that E[p/q] stays below 1.

    A drafted token x is drawn from q, so E[p(x)/q(x)] = sum of p over q's support <= 1 for any real pair
    of models (the mean-p/q check, verdict.conclude). With half the mass, alpha/2, at t = 1 and the
    rest at mean t, E[p/q] = alpha + (alpha/2) E[excess] = alpha + 0.45 (1 - alpha) < 1 (less with p <= 1).
    """
    safe: FloatArray = np.clip(alpha, 1e-12, 1.0)
    return 1.8 * u * (1.0 - safe) / safe


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
    requests: Requests | None = None,
) -> Iterator[SimulatedChunk]:
    """Chunks of simulated runs (k uniform in k_low..k_high), `runs` in all, reproducible with `seed`.

    `alpha_by_position`, when given, replaces `alpha` position by position; `requests` groups runs
    into requests with their own alpha (see the module doc). Both together scale the position
    profile by request alpha / the log's mean alpha, capped at 1.
    """
    rng = np.random.default_rng(seed)
    by_position = None if alpha_by_position is None else np.asarray(alpha_by_position, dtype=np.float64)
    stream = None if requests is None else _RequestStream(rng, requests, alpha)
    remaining = runs
    while remaining > 0:
        n = min(CHUNK_RUNS, remaining)
        remaining -= n
        request = run_alpha = None
        if stream is not None and requests is not None:
            request, run_alpha = stream.next(n)
        if run_alpha is not None and requests is not None and requests.k_follows_alpha:
            k = np.minimum(k_low + np.floor(run_alpha * (k_high - k_low + 1)).astype(np.int64), k_high)
        else:
            k = rng.integers(k_low, k_high + 1, size=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(k, out=offsets[1:])
        tokens = int(offsets[-1])
        token_alpha: FloatArray = np.full(tokens, alpha) if run_alpha is None else np.repeat(run_alpha, k)
        if by_position is None and run_alpha is None:
            t = _thresholds(rng, alpha, tokens)
        else:
            if by_position is not None:
                position = np.arange(tokens, dtype=np.int64) - np.repeat(offsets[:-1], k)
                profile = by_position[np.minimum(position, by_position.shape[0] - 1)]
                if run_alpha is None or requests is None:
                    token_alpha = profile
                else:
                    token_alpha = np.minimum(1.0, profile * token_alpha / max(requests.mean_alpha(alpha), 1e-12))
            t = _thresholds_by_position(rng, token_alpha)
        q = 1.0 - rng.random(tokens) * 0.95  # (0.05, 1]
        p = np.where(t >= 1.0, np.minimum(1.0, q * (1.0 + _excess(token_alpha, rng.random(tokens)))), t * q)
        r = rng.random(tokens)
        yield SimulatedChunk(offsets=offsets, p=p, q=q, r=r, request=request)


def write_jsonl(chunks: Iterator[SimulatedChunk], out: SupportsWrite[bytes]) -> int:
    """Write runs as JSONL rows {"id", "p", "q", "r"}; returns the number of runs written."""
    written = 0
    for chunk in chunks:
        bounds = chunk.offsets.tolist()
        p, q, r = chunk.p.tolist(), chunk.q.tolist(), chunk.r.tolist()
        lines = []
        requests = None if chunk.request is None else chunk.request.tolist()
        for index, (start, end) in enumerate(pairwise(bounds)):
            row: dict[str, object] = {"id": written}
            if requests is not None:
                row["request_id"] = f"req-{requests[index]}"
            row |= {"p": p[start:end], "q": q[start:end], "r": r[start:end]}
            lines.append(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
            written += 1
        out.write(b"".join(lines))
    return written


def write_parquet(chunks: Iterator[SimulatedChunk], path: str | IO[bytes]) -> int:
    """Write runs as a Parquet file (a path or a binary file) with columns id, p, q, r (list<double>)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = next(chunks, None)
    with_requests = first is not None and first.request is not None
    fields = [("id", pa.int64()), *((("request_id", pa.string()),) if with_requests else ())]
    schema = pa.schema([*fields, *((name, pa.list_(pa.float64())) for name in ("p", "q", "r"))])
    written = 0
    with pq.ParquetWriter(path, schema) as writer:
        for chunk in () if first is None else itertools.chain([first], chunks):
            n = chunk.offsets.shape[0] - 1
            offsets = pa.array(chunk.offsets, type=pa.int32())
            columns = [pa.array(np.arange(written, written + n, dtype=np.int64))]
            if with_requests and chunk.request is not None:
                columns.append(pa.array([f"req-{number}" for number in chunk.request.tolist()], type=pa.string()))
            columns += [pa.ListArray.from_arrays(offsets, pa.array(values)) for values in (chunk.p, chunk.q, chunk.r)]
            writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))
            written += n
    return written


# --- logs under a rule of the table: real small-vocabulary models, decoded as the engine does -------------

RULE_STREAMS = 64  # streams decoded side by side: each row is one verify step of one of them (its request_id)
RULE_VOCAB = 8
RULE_QUALITY = 0.5  # how far the draft agrees with the target (1: the target itself)
MAX_TREE_NODES = 1024  # a whole tree's drafted nodes (width + width^2 + ... + width^depth)
RULE_CHUNK_ROWS = 4096


def parse_tree_shape(text: str) -> tuple[int, int]:
    """`2x3` -> (2, 3): children per node (the top-k) and depth; ValueError when it is no such shape."""
    width_text, times, depth_text = text.strip().lower().partition("x")
    if not times or not width_text.isdigit() or not depth_text.isdigit():
        raise ValueError(f"{text!r} is not a tree shape like 2x3 (children per node x depth)")
    width, depth = int(width_text), int(depth_text)
    if width < 1 or depth < 1:
        raise ValueError(f"{text!r}: a tree has at least one child per node and one level")
    return width, depth


def _plain(values: list[float], name: str) -> list[float | None]:
    """A column's values for a row: block's last residual (no next position) is null, as the contract says."""
    if name == "residual" and values:
        return [*values[:-1], None]
    return list(values)


def simulate_rule(
    rule: str,
    runs: int,
    seed: int | None,
    *,
    k_low: int = 4,
    k_high: int = 4,
    tree: tuple[int, int] | None = None,
) -> Iterator[list[dict[str, object]]]:
    """Rows under a rule of the table, `runs` in all, in chunks: {"id", "request_id", "rule", the rule's fields
    (`nodes` for a tree), its per-step parameters, "accepted"}, where `accepted` is the decoder's own decision
    (`rule.decoders`): a recompute of the row with the table must give it."""
    from specaccept_cli.rule.decoders import chain_passes, small_models, tree_passes
    from specaccept_cli.rule.registry import rule_named
    from specaccept_cli.rule.steps import TreeSteps

    name = rule_named(rule).name
    rng = np.random.default_rng(seed)
    target, draft = small_models(rng, RULE_VOCAB, RULE_QUALITY)
    streams = max(1, min(RULE_STREAMS, runs))
    if tree is not None:
        passes = tree_passes(name, target, draft, rng, streams=streams, width=tree[0], depth=tree[1])
    else:
        passes = chain_passes(name, target, draft, rng, streams=streams, k_low=k_low, k_high=k_high)
    written = 0
    rows: list[dict[str, object]] = []
    while written < runs:
        step = next(passes)
        steps = step.steps
        bounds = steps.offsets.tolist()
        columns = {column: values.tolist() for column, values in steps.columns.items()}
        params = {param: values.tolist() for param, values in steps.params.items()}
        parents = steps.parent.tolist() if isinstance(steps, TreeSteps) else None
        accepted = step.accepted.tolist()
        for stream in range(min(streams, runs - written)):
            start, end = bounds[stream], bounds[stream + 1]
            row: dict[str, object] = {"id": written, "request_id": f"stream-{stream}", "rule": name}
            if parents is None:
                row |= {column: _plain(values[start:end], column) for column, values in columns.items()}
            else:
                row["nodes"] = [
                    {"parent": parents[node], **{column: values[node] for column, values in columns.items()}}
                    for node in range(start, end)
                ]
            row |= {param: values[stream] for param, values in params.items()}
            row["accepted"] = accepted[stream]
            rows.append(row)
            written += 1
        if len(rows) >= RULE_CHUNK_ROWS or written >= runs:  # a Parquet row group's worth at a time
            yield rows
            rows = []


def write_rule_jsonl(chunks: Iterator[list[dict[str, object]]], out: SupportsWrite[bytes]) -> int:
    """Write `simulate_rule`'s rows as JSONL; returns the number of rows written."""
    written = 0
    for rows in chunks:
        out.write(b"".join(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE) for row in rows))
        written += len(rows)
    return written


def write_rule_parquet(chunks: Iterator[list[dict[str, object]]], path: str | IO[bytes]) -> int:
    """Write `simulate_rule`'s rows as Parquet: lists for a chain's fields, a list of structs for `nodes`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = next(chunks, None)
    if not first:
        pq.write_table(pa.table({"id": pa.array([], pa.int64())}), path)
        return 0

    def kind(name: str) -> Any:
        return pa.int64() if name in ("parent", "id", "accepted") or "token" in name else pa.float64()

    fields = []
    for name, value in first[0].items():  # every row of a log has the same keys, in the same order
        if name in ("request_id", "rule"):
            fields.append((name, pa.string()))
        elif name == "nodes":
            assert isinstance(value, list)
            keys = value[0].keys() if value else ("parent",)
            fields.append((name, pa.list_(pa.struct([(key, kind(key)) for key in keys]))))
        elif isinstance(value, list):
            fields.append((name, pa.list_(kind(name))))
        else:
            fields.append((name, kind(name)))
    schema = pa.schema(fields)
    written = 0
    with pq.ParquetWriter(path, schema) as writer:
        for rows in itertools.chain([first], chunks):
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
            written += len(rows)
    return written
