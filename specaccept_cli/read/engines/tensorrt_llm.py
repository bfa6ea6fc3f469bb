"""TensorRT-LLM: the iteration statistics `trtllm-serve` returns on `GET /metrics`.

Source: tensorrt_llm/serve/openai_server.py (NVIDIA/TensorRT-LLM, read 2026-12): the `/metrics` route is
`get_iteration_stats`, a JSON array of what `generator.get_stats_async(2)` yields, one object per executor
iteration (older releases yield each one as a JSON string inside the array), drained from a queue, so two
captures never hold the same iteration. Each object may carry `specDecodingStats`, the executor's
`SpecDecodingStats` (cpp/include/tensorrt_llm/executor/types.h; the Python bindings' names are snake_case,
the JSON camelCase): `numDraftTokens` (proposed draft tokens of every request in the iteration),
`numAcceptedTokens` (accepted draft tokens, the bonus token excluded), `numRequestsWithDraftTokens` (requests
that drafted in the iteration: one verify step each), `acceptanceLength` (tokens per step,
(accepted + requests) / requests), `iterLatencyMS` and `draftOverhead`. No per-position counts and no draft
length are given, so each iteration's examined tokens (and alpha) are bounded, exact only for drafts that
accepted nothing or everything; `--draft-length` tightens the bounds.

A capture is read one JSON document per line (`curl -s host/metrics >> stats.jsonl`); the per-request
`GET /perf_metrics` is a payload (read.payloads.tensorrt_llm).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import orjson

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.lines import decode_line, make_interval
from specaccept_cli.read.engines.recovery import Inconsistent, recover_counts
from specaccept_cli.read.formats import InputFormat, Kind, json_line_without_runs
from specaccept_cli.rule.intervals import EngineInterval, count_too_large

TRTLLM_STATS_MARKER = "specDecodingStats"  # unquoted: older captures hold each iteration as an escaped string
_COUNTS = ("numDraftTokens", "numAcceptedTokens", "numRequestsWithDraftTokens")


def trtllm_stats_line(
    raw: str | bytes, source: str, number: int, *, k: int | None, assume_full_drafts: bool
) -> list[EngineInterval | InputError]:
    """The intervals (one per iteration that drafted) of one captured `/metrics` response; [] for other lines."""
    text = decode_line(raw)
    if TRTLLM_STATS_MARKER not in text:
        return []
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return [_bad(source, number, text, f"a TensorRT-LLM /metrics capture that is not JSON ({exc})")]
    stats = value if isinstance(value, list) else [value]
    out: list[EngineInterval | InputError] = []
    for position, stat in enumerate(stats):
        if isinstance(stat, str):  # older releases: each iteration a JSON string
            try:
                stat = orjson.loads(stat)
            except orjson.JSONDecodeError:
                out.append(_bad(source, number, text, f"iteration {position} of the capture is a string, not JSON"))
                continue
        if not isinstance(stat, dict) or stat.get("specDecodingStats") is None:
            continue
        out.extend(_iteration(stat, position, source, number, text, k, assume_full_drafts))
    return out


def _iteration(
    stat: dict[str, Any], position: int, source: str, number: int, text: str, k: int | None, assume_full: bool
) -> Iterator[EngineInterval | InputError]:
    spec = stat["specDecodingStats"]
    where = f"iteration {stat.get('iter', position)!s:.20}"
    if not isinstance(spec, dict):
        yield _bad(source, number, text, f"{where}: specDecodingStats is not an object")
        return
    counts: dict[str, int] = {}
    for name in _COUNTS:
        figure = spec.get(name)
        if type(figure) is float and figure.is_integer():
            figure = int(figure)
        if type(figure) is not int or figure < 0:
            yield _bad(source, number, text, f"{where}: specDecodingStats.{name} = {figure!r} is not a whole count")
            return
        if (why := count_too_large(figure)) is not None:
            yield _bad(source, number, text, f"{where}: specDecodingStats.{name} = {why}")
            return
        counts[name] = figure
    drafted, accepted, steps = (counts[name] for name in _COUNTS)
    if drafted == 0:
        if accepted or steps:
            yield _bad(source, number, text, f"{where}: {accepted} accepted in {steps} requests without draft tokens")
        return  # an iteration that drafted nothing (prefill only)
    length = spec.get("acceptanceLength")
    problem = None
    if steps == 0:
        problem = f"{drafted} draft tokens but no request with draft tokens"
    elif isinstance(length, int | float) and not (
        math.isfinite(length) and math.isclose(length, (accepted + steps) / steps, rel_tol=1e-6, abs_tol=1e-9)
    ):
        problem = (
            f"acceptanceLength {length!r} is not (accepted + requests) / requests = ({accepted} + {steps}) / {steps}"
        )
    if problem is not None:
        yield _bad(source, number, text, f"inconsistent TensorRT-LLM {where}: {problem}")
        return
    try:
        rec = recover_counts(accepted, drafted, drafts=steps, k=k, assume_full_drafts=assume_full)
    except Inconsistent as exc:
        yield _bad(source, number, text, f"inconsistent TensorRT-LLM {where}: {exc}")
        return
    printed = {f"specDecodingStats.{name}": str(spec[name]) for name in (*_COUNTS, "acceptanceLength") if name in spec}
    if isinstance(stat.get("iter"), int):
        printed["iter"] = str(stat["iter"])
    yield make_interval(
        ("tensorrt-llm", "trtllm-iteration-stats", source, number, None, {}, printed),
        draft_tokens=drafted,
        accepted=accepted,
        **rec.fields(),
    )


def _bad(source: str, number: int, text: str, message: str) -> InputError:
    return InputError(source, number, message, raw=text.encode("utf-8", errors="replace"))


FORMATS = (
    InputFormat(
        "trtllm-iteration-stats",
        Kind.INTERVALS,
        "TensorRT-LLM",
        "tensorrt_llm/serve/openai_server.py `get_iteration_stats` (GET /metrics, read 2026-12)",
        "json-lines",
        sniff=json_line_without_runs,  # trtllm-serve GET /metrics, captured; not logged (p, q, r) runs
        markers=(TRTLLM_STATS_MARKER.encode(),),
        reader=lambda raw, source, number, k, assume_full_drafts: trtllm_stats_line(
            raw, source, number, k=k, assume_full_drafts=assume_full_drafts
        ),
    ),
)
