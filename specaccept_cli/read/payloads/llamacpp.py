"""llama.cpp server's per-request draft counts: `timings.draft_n` / `timings.draft_n_accepted`.

Source: tools/server/server-task.cpp, `result_timings::to_json()`: the keys are written only when
`draft_n > 0` (`base["draft_n"] = draft_n; base["draft_n_accepted"] = draft_n_accepted;`). The `timings`
object rides the final response of /completion (`"stop": true`) and of the OpenAI endpoints (the choice
with a `finish_reason`); with `timings_per_token` every chunk carries running timings, so only the final
one is read. Totals only: alpha is bounded, not exact (the steps and their draft lengths are not written;
`draft_n_verif_steps`, proposed in the unmerged ggml-org/llama.cpp#27676, is read when present and
tightens nothing but tokens per pass). The per-request log lines and `statistics` lines are read by the
engine-log reader.
"""

from __future__ import annotations

from typing import Any

from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.read.payloads.fields import Drift, count, payload_sniff
from specaccept_cli.rule.requests import BadRecord, RequestRecord

MARKERS = (b'"draft_n"',)


def records(obj: dict[str, Any], drift: Drift) -> list[RequestRecord | BadRecord | None]:
    del drift  # `timings` holds many timing fields: only the two draft counters are ours
    timings = obj.get("timings")
    if not isinstance(timings, dict) or "draft_n" not in timings or not _final(obj):
        return []
    try:
        record = RequestRecord(
            engine="llama.cpp",
            fmt="llamacpp-timings",
            request_id=None if obj.get("id") is None else str(obj["id"]),
            steps=count(timings, "draft_n_verif_steps"),
            accepted=count(timings, "draft_n_accepted"),
            drafted=count(timings, "draft_n"),
            completion_tokens=count(timings, "predicted_n"),
            timestamp=float(obj["created"]) if type(obj.get("created")) in (int, float) else None,
            labels={"engine": "llama.cpp", **({"model": obj["model"]} if isinstance(obj.get("model"), str) else {})},
        )
        if record.accepted is None:
            raise BadRecord("timings.draft_n without draft_n_accepted")
        return [record.check()]
    except BadRecord as exc:
        return [exc]


def _final(obj: dict[str, Any]) -> bool:
    """The last response of a request: /completion's `stop`, or an OpenAI choice with its finish reason."""
    if obj.get("stop") is True:
        return True
    choices = obj.get("choices")
    if isinstance(choices, list):
        return any(isinstance(choice, dict) and choice.get("finish_reason") is not None for choice in choices)
    return "stop" not in obj  # a bare object with timings: a response, not a stream chunk


FORMATS = (
    InputFormat(
        "llamacpp-payload",
        Kind.REQUESTS,
        "llama.cpp",
        "tools/server/server-task.cpp `result_timings::to_json()`",
        "payloads",
        sniff=payload_sniff(records),
        markers=MARKERS,
        reader=records,
    ),
)
