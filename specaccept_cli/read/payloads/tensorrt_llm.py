"""TensorRT-LLM's per-request acceptance: `choices[i].speculative_decoding`.

Source: the open PR NVIDIA/TensorRT-LLM#19311 ("Report per-request speculative-decoding acceptance on the
response") and AIPerf's adapter page for it (ai-dynamo/aiperf `docs/reference/spec-decode-acceptance.md`,
"The TensorRT-LLM adapter"); the PR is not merged, so the shape may still change. With
`per_request_spec_decode_stats: true` in the YAML given to `--extra_llm_api_options` (PyTorch backend
only), each choice carries `speculative_decoding{acceptance_rate, total_accepted_draft_tokens,
total_draft_tokens, num_spec_steps, acceptance_histogram, num_spec_tokens}`: the histogram dense, length
k + 1, like vLLM's; `num_spec_tokens` is null under `draft_len_schedule`; the object is absent when the
request never drafted. In a stream it rides the terminal chunk's choice. There is no per-step data, and
no mean length inside the object (`avg_decoded_tokens_per_iter` beside it counts the context step, so
it is not checked against the counts). Under tree drafting `total_draft_tokens` counts paths.

Shipped today, `GET /perf_metrics` (tensorrt_llm/serve/openai_server.py get_perf_metrics, read 2026-12; with
`return_perf_metrics` and `perf_metrics_max_requests` set): a JSON array, drained on every call, of
`{"request_id", "perf_metrics": {"first_iter", "last_iter", "timing_metrics", "kv_cache_metrics",
"speculative_decoding"}}`, each a finished request (`_extract_metrics`); `speculative_decoding` is present
only when the request drafted (`total_draft_tokens > 0`) and holds `acceptance_rate`,
`total_accepted_draft_tokens` and `total_draft_tokens`: totals without steps, so each request bounds alpha.
"""

from __future__ import annotations

from typing import Any

from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.read.payloads.fields import (
    Drift,
    count,
    created,
    histogram,
    labels_of,
    payload_sniff,
    printed_rates,
    usage_tokens,
)
from specaccept_cli.rule.requests import BadRecord, RequestRecord

KNOWN = frozenset(
    {
        "acceptance_rate",
        "total_accepted_draft_tokens",
        "total_draft_tokens",
        "num_spec_steps",
        "acceptance_histogram",
        "num_spec_tokens",
    }
)
SIGNATURE = ("total_accepted_draft_tokens", "total_draft_tokens")
MARKERS = (b'"total_accepted_draft_tokens"',)


PERF_KNOWN = frozenset({"acceptance_rate", "total_accepted_draft_tokens", "total_draft_tokens"})


def records(obj: dict[str, Any], drift: Drift) -> list[RequestRecord | BadRecord | None]:
    out: list[RequestRecord | BadRecord | None] = []
    if isinstance(obj.get("perf_metrics"), dict) and "choices" not in obj:
        return [_perf_metrics(obj, drift)]
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return out
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict) or "speculative_decoding" not in choice:
            continue
        payload = choice["speculative_decoding"]
        if payload is None:
            out.append(None)
            continue
        if not isinstance(payload, dict) or not all(name in payload for name in SIGNATURE):
            out.append(
                BadRecord("choices[].speculative_decoding without total_accepted_draft_tokens / total_draft_tokens")
            )
            continue
        drift.note("TensorRT-LLM choices[].speculative_decoding", payload, KNOWN)
        request = obj.get("id")
        if request is not None and len(choices) > 1:
            request = f"{request}#{choice.get('index', position)}"
        try:
            hist = payload.get("acceptance_histogram")
            rates = printed_rates(payload, {"acceptance_rate": "acceptance_rate"})
            record = RequestRecord(
                engine="tensorrt-llm",
                fmt="trtllm-choice",
                request_id=None if request is None else str(request),
                k=count(payload, "num_spec_tokens"),
                steps=count(payload, "num_spec_steps"),
                accepted=count(payload, "total_accepted_draft_tokens"),
                drafted=count(payload, "total_draft_tokens"),
                histogram=None if hist is None else histogram(hist, "acceptance_histogram"),
                completion_tokens=usage_tokens(obj) if len(choices) == 1 else None,
                timestamp=created(obj),
                labels=labels_of(obj, "tensorrt-llm"),
                printed=rates,
            )
            out.append(record.check())
        except BadRecord as exc:
            out.append(exc)
    return out


def _perf_metrics(obj: dict[str, Any], drift: Drift) -> RequestRecord | BadRecord | None:
    """One request of a `GET /perf_metrics` capture; None when it did not draft (no `speculative_decoding`)."""
    payload = obj["perf_metrics"].get("speculative_decoding")
    if payload is None:
        return None
    if not isinstance(payload, dict) or not all(name in payload for name in SIGNATURE):
        return BadRecord("perf_metrics.speculative_decoding without total_accepted_draft_tokens / total_draft_tokens")
    drift.note("TensorRT-LLM /perf_metrics speculative_decoding", payload, PERF_KNOWN)
    request = obj.get("request_id")
    try:
        return RequestRecord(
            engine="tensorrt-llm",
            fmt="trtllm-perf-metrics",
            request_id=None if request is None else str(request),
            accepted=count(payload, "total_accepted_draft_tokens"),
            drafted=count(payload, "total_draft_tokens"),
            labels={"engine": "tensorrt-llm"},
            printed=printed_rates(payload, {"acceptance_rate": "acceptance_rate"}),
            notes=("TensorRT-LLM /perf_metrics gives totals without verify steps: alpha is bounded",),
        ).check()
    except BadRecord as exc:
        return exc


FORMATS = (
    InputFormat(
        "trtllm-payload",
        Kind.REQUESTS,
        "TensorRT-LLM",
        "tensorrt_llm/serve/openai_server.py `get_perf_metrics`; `speculative_decoding` of the open PR #19311",
        "payloads",
        sniff=payload_sniff(records),
        markers=MARKERS,
        reader=records,
    ),
)
