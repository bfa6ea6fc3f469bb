"""mlx-vlm server's per-request draft counts: `timings.draft_rounds` / `draft_n` / `draft_n_accepted` / `draft_kind`.

Source: Blaizzy/mlx-vlm PR #1788 (commit c2fe301b), mlx_vlm/server/schemas.py `GenerationTimings` (named after
llama.cpp's `timings`): `draft_kind` (the drafter: "mtp", "dflash", "eagle3", ...), `draft_rounds` (verify
rounds), `draft_n` (drafted tokens), `draft_n_accepted` (accepted drafts, the bonus token excluded), all null
unless the request ran with a drafter (pydantic writes the nulls). The figures are
mlx_vlm/speculative/common.py `speculative_stats_since()`: the drafter's lifetime counters
(`_record_speculative_round`) differenced over the request's life, `accepted` summed as floats and rounded.
`GenerationTimings` rides a chat completion's response and, streamed, its last chunk (the usage chunk,
`choices: []`); the other chunks carry `StreamingTimings` (a rate only), so a `timings` holding
`draft_rounds` is always the request's last word.

What it pins down: steps S = draft_rounds, accepted A and drafted D, hence tokens per pass exactly; the
draft lengths of the rounds are not written, so alpha is bounded (the same bounds as llama.cpp's totals,
tighter for the known steps). Rounds are batch-wide in mlx-vlm: the counts are exact for one request at a
time, and with concurrent requests they are the rounds that ran while this one did (its docstring says so).
"""

from __future__ import annotations

from typing import Any

from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.read.payloads.fields import Drift, count, created, labels_of, payload_sniff
from specaccept_cli.rule.requests import BadRecord, RequestRecord

MARKERS = (b'"draft_rounds"',)
_KNOWN = frozenset({"draft_kind", "draft_rounds", "draft_n", "draft_n_accepted"})


def records(obj: dict[str, Any], drift: Drift) -> list[RequestRecord | BadRecord | None]:
    del drift  # `timings` holds many timing fields: only the draft fields are ours
    timings = obj.get("timings")
    if not isinstance(timings, dict) or "draft_rounds" not in timings:
        return []
    if all(timings.get(name) is None for name in _KNOWN):
        return [None]  # the request ran without a drafter: a null payload
    try:
        labels = labels_of(obj, "mlx-vlm")
        if isinstance(timings.get("draft_kind"), str):
            labels["draft_kind"] = timings["draft_kind"]
        record = RequestRecord(
            engine="mlx-vlm",
            fmt="mlx-vlm-timings",
            request_id=None if obj.get("id") in (None, "") else str(obj["id"]),
            steps=count(timings, "draft_rounds"),
            accepted=count(timings, "draft_n_accepted"),
            drafted=count(timings, "draft_n"),
            completion_tokens=count(timings, "predicted_n"),
            timestamp=created(obj),
            labels=labels,
        )
        for name in ("steps", "accepted", "drafted"):
            if getattr(record, name) is None:
                raise BadRecord(f"timings.draft_rounds without {_FIELD[name]}")
        assert record.accepted is not None and record.steps is not None
        if record.steps == 0 and (record.drafted or record.accepted):
            raise BadRecord("drafted or accepted tokens in 0 draft rounds")
        return [record.check()]
    except BadRecord as exc:
        return [exc]


_FIELD = {"steps": "draft_rounds", "accepted": "draft_n_accepted", "drafted": "draft_n"}

FORMATS = (
    InputFormat(
        "mlx-vlm-payload",
        Kind.REQUESTS,
        "mlx-vlm",
        "mlx_vlm/server/schemas.py `GenerationTimings` (Blaizzy/mlx-vlm#1788)",
        "payloads",
        sniff=payload_sniff(records),
        markers=MARKERS,
        reader=records,
        refines="llamacpp-payload",  # its timings hold llama.cpp's `draft_n` too
    ),
)
