"""vLLM's per-request acceptance: `metrics.speculative_decoding`, and the earlier per-choice shape.

Source: vLLM PR vllm-project/vllm#48915 (merged) and its feature page
`docs/features/speculative_decoding/acceptance_metrics.md`. With `--per-request-spec-decode-metrics
summary|detailed` the response root carries `metrics.speculative_decoding`:
`mean_acceptance_length` (1 + A / S), `draft_acceptance_rate` (A / D), `acceptance_histogram` (dense,
length k + 1: [j] = steps that accepted exactly j drafts, bonus excluded),
`acceptance_histogram_by_draft_length` ({"k": dense list of k + 1}, the proposed length after grammar
validation; a "0" row is a step whose drafts were all invalidated), `num_spec_steps`,
`num_accepted_draft_tokens`, `num_draft_tokens` (after subtracting grammar-invalidated drafts),
`num_spec_tokens` (k); `detailed` adds `per_step_accepted` and `per_step_drafted`. It is null for n > 1
(and multi-prompt completions). In a stream it rides the final usage chunk (empty `choices`), sent only
with `stream_options.include_usage` or `--enable-force-include-usage`.

An earlier revision of the same feature (the page at vllm commit cd19998, flag
`--per-request-spec-decode-stats`) attached `speculative_decoding_stats` to every choice, with a sparse
string-keyed histogram ({"0": 39, "1": 1, "3": 3}) and the same counters; it is read too. The closed
PR vllm-project/vllm#47322 used other names (`num_drafted_tokens`, `num_draft_steps`, ...): those are
reported as drift, not read.
"""

from __future__ import annotations

from typing import Any

from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.read.payloads.fields import (
    VLLM_RATES,
    Drift,
    count,
    counts,
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
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "acceptance_histogram",
        "acceptance_histogram_by_draft_length",
        "num_spec_steps",
        "num_accepted_draft_tokens",
        "num_draft_tokens",
        "num_spec_tokens",
        "per_step_accepted",
        "per_step_drafted",
    }
)
# What makes an object vLLM's and not TensorRT-LLM's (which shares acceptance_histogram, num_spec_steps
# and num_spec_tokens): vLLM's counter names.
SIGNATURE = ("num_accepted_draft_tokens", "num_draft_tokens", "mean_acceptance_length")
MARKERS = (b'"speculative_decoding"', b'"speculative_decoding_stats"')


def records(obj: dict[str, Any], drift: Drift) -> list[RequestRecord | BadRecord | None]:
    """The vLLM records of one response (or final stream chunk); None for each null payload (n > 1, spec off)."""
    out: list[RequestRecord | BadRecord | None] = []
    metrics = obj.get("metrics")
    if isinstance(metrics, dict) and "speculative_decoding" in metrics:
        payload = metrics["speculative_decoding"]
        if payload is None:
            out.append(None)
        elif not isinstance(payload, dict):
            out.append(BadRecord("metrics.speculative_decoding is not an object"))
        else:
            out.append(_record(payload, obj, "vllm-metrics", obj.get("id"), drift))
    choices = obj.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict) or "speculative_decoding_stats" not in choice:
                continue
            payload = choice["speculative_decoding_stats"]
            if payload is None:
                out.append(None)
                continue
            if not isinstance(payload, dict):
                out.append(BadRecord("choices[].speculative_decoding_stats is not an object"))
                continue
            if "spec_verify_ct" in payload or "verify_lengths" in payload:
                continue  # SGLang's shape under the same name: read by the SGLang reader
            request = obj.get("id")
            if request is not None and len(choices) > 1:
                request = f"{request}#{choice.get('index', choices.index(choice))}"
            out.append(_record(payload, obj, "vllm-choice-stats", request, drift))
    return out


def is_vllm(payload: dict[str, Any]) -> bool:
    return any(name in payload for name in SIGNATURE)


def _record(
    payload: dict[str, Any], root: dict[str, Any], fmt: str, request: object, drift: Drift
) -> RequestRecord | BadRecord | None:
    drift.note(f"vLLM {fmt}", payload, KNOWN)
    if not is_vllm(payload):
        return None  # renamed counters (e.g. the closed vllm#47322's): drift, noted above, not guessed at
    try:
        by_length = None
        raw_rows = payload.get("acceptance_histogram_by_draft_length")
        if raw_rows is not None:
            if not isinstance(raw_rows, dict):
                raise BadRecord("acceptance_histogram_by_draft_length is not a map")
            by_length = {}
            for key, row in raw_rows.items():
                if not str(key).isdigit():
                    raise BadRecord(f"acceptance_histogram_by_draft_length has the key {key!r}, not a draft length")
                by_length[int(key)] = counts(row, f"acceptance_histogram_by_draft_length[{key}]")
        hist = payload.get("acceptance_histogram")
        per_acc, per_dra = payload.get("per_step_accepted"), payload.get("per_step_drafted")
        rates = printed_rates(payload, VLLM_RATES)
        record = RequestRecord(
            engine="vllm",
            fmt=fmt,
            request_id=None if request is None else str(request),
            k=count(payload, "num_spec_tokens"),
            steps=count(payload, "num_spec_steps"),
            accepted=count(payload, "num_accepted_draft_tokens"),
            drafted=count(payload, "num_draft_tokens"),
            histogram=None if hist is None else histogram(hist, "acceptance_histogram"),
            by_draft_length=by_length,
            per_step_accepted=None if per_acc is None else counts(per_acc, "per_step_accepted"),
            per_step_drafted=None if per_dra is None else counts(per_dra, "per_step_drafted"),
            completion_tokens=usage_tokens(root),
            timestamp=created(root),
            labels=labels_of(root, "vllm"),
            printed=rates,
        )
        return record.check()
    except BadRecord as exc:
        return exc


FORMATS = (
    InputFormat(
        "vllm-payload",
        Kind.REQUESTS,
        "vLLM",
        "docs/features/speculative_decoding/acceptance_metrics.md, `metrics.speculative_decoding` (vllm#48915)",
        "payloads",
        sniff=payload_sniff(records),
        markers=MARKERS,
        reader=records,
    ),
)
