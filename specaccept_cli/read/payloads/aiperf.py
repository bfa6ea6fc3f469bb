"""AIPerf's records trace: `profile_export.jsonl`, one line per request, with the neutral acceptance record.

Source: ai-dynamo/aiperf `docs/tutorials/spec-decode-metrics.md` ("Per-request trace": at
`--export-level records` each line carries `spec_decode_acceptance`) and
`docs/reference/spec-decode-acceptance.md` (the record, `SpecDecodeAcceptanceRecord` in
src/aiperf/common/models/spec_decode_models.py): `engine`, `mean_acceptance_length` (1 + A / S),
`draft_acceptance_rate` (A / D), `acceptance_histogram` (sparse {accepted: steps}, zero buckets omitted,
JSON keys are strings), `num_accepted_draft_tokens`, `num_draft_tokens`, `num_spec_steps`,
`num_spec_tokens` (k, or null without a fixed bound), `completion_tokens`, and `per_step_accepted` /
`per_step_drafted` when the engine reported them. The record is the engine's payload normalised, so the
engine's own caveats hold (SGLang's proposed count stays nominal). The request is named by the line's
`metadata.x_request_id` when there (AIPerf's request header), else the line itself is the request.
The `metrics.spec_decode_*` tags beside the record are AIPerf's derived values and are not read.
"""

from __future__ import annotations

from typing import Any

from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.read.payloads.fields import (
    VLLM_RATES,
    Drift,
    count,
    counts,
    histogram,
    payload_sniff,
    printed_rates,
)
from specaccept_cli.rule.requests import BadRecord, RequestRecord

KNOWN = frozenset(
    {
        "engine",
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "acceptance_histogram",
        "num_accepted_draft_tokens",
        "num_draft_tokens",
        "num_spec_steps",
        "num_spec_tokens",
        "completion_tokens",
        "per_step_accepted",
        "per_step_drafted",
    }
)
MARKERS = (b'"spec_decode_acceptance"',)


def records(obj: dict[str, Any], drift: Drift) -> list[RequestRecord | BadRecord | None]:
    if "spec_decode_acceptance" not in obj:
        return []
    payload = obj["spec_decode_acceptance"]
    if payload is None:
        return [None]
    if not isinstance(payload, dict):
        return [BadRecord("spec_decode_acceptance is not an object")]
    drift.note("AIPerf spec_decode_acceptance", payload, KNOWN)
    found = obj.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    request = metadata.get("x_request_id")
    started = metadata.get("request_start_ns")
    engine = str(payload.get("engine") or "unknown")
    try:
        per_acc, per_dra = payload.get("per_step_accepted"), payload.get("per_step_drafted")
        rates = printed_rates(payload, VLLM_RATES)
        hist = payload.get("acceptance_histogram")
        record = RequestRecord(
            engine=engine,
            fmt="aiperf-record",
            request_id=None if request is None else str(request),
            k=count(payload, "num_spec_tokens"),
            steps=count(payload, "num_spec_steps"),
            accepted=count(payload, "num_accepted_draft_tokens"),
            drafted=count(payload, "num_draft_tokens"),
            histogram=None if hist is None else histogram(hist, "acceptance_histogram"),
            per_step_accepted=None if per_acc is None else counts(per_acc, "per_step_accepted"),
            per_step_drafted=None if per_dra is None else counts(per_dra, "per_step_drafted"),
            completion_tokens=count(payload, "completion_tokens"),
            timestamp=float(started) / 1e9 if isinstance(started, (int, float)) else None,
            labels={"engine": engine},
            printed=rates,
            drafted_nominal=engine == "sglang",
        )
        return [record.check()]
    except BadRecord as exc:
        return [exc]


FORMATS = (
    InputFormat(
        "aiperf-records",
        Kind.REQUESTS,
        "AIPerf",
        "ai-dynamo/aiperf src/aiperf/common/models/spec_decode_models.py, the per-request trace (read 2026-12)",
        "payloads",
        sniff=payload_sniff(records),
        markers=MARKERS,
        reader=records,
    ),
)
