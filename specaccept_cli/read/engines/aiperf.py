"""AIPerf's aggregate export, `profile_export_aiperf.json`: the run's pooled acceptance histogram and totals.

Source: ai-dynamo/aiperf (read 2026-12): `docs/tutorials/spec-decode-metrics.md` ("Aggregate JSON and CSV"),
the `pooled_spec_decode_acceptance_histogram` field of the export model (`{accepted drafts j: verify steps}`,
"summed elementwise across every request", its counts summing to `total_spec_decode_steps`; JSON keys are
strings), and the derived sums `total_spec_decode_steps`, `total_accepted_draft_tokens`, `total_draft_tokens`
(`DerivedSumMetric`s of the per-request `num_spec_steps`, `num_accepted_draft_tokens`, `num_draft_tokens`),
each exported as a `JsonMetricResult` `{"unit": ..., "avg": value}`. aiperf/exporters/json_exporter.py writes
the file with `model_dump_json(indent=2)`: one JSON document over many lines, read whole (it is small; a
file over `MAX_DOCUMENT_BYTES` is refused).

What it gives: one interval over the whole run, its per-position counts exact (steps that accepted at least
i drafts, from the histogram) but no request boundaries (the run is pooled: no request clusters) and no
draft length. With `--draft-length K` and drafted = steps x K the (k, a) histogram is exact; otherwise
examined tokens are bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.lines import make_interval
from specaccept_cli.read.engines.recovery import MAX_DRAFT_LENGTH, Inconsistent, from_exact_positions, recover_counts
from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.rule.intervals import EngineInterval, LineTally, count_too_large

AIPERF_AGGREGATE_MARKERS = ('"pooled_spec_decode_acceptance_histogram"', '"total_spec_decode_steps"')
AIPERF_AGGREGATE_NAME = "profile_export_aiperf.json"
MAX_DOCUMENT_BYTES = 64 << 20
_TOTALS = ("total_spec_decode_steps", "total_accepted_draft_tokens", "total_draft_tokens")


class AiperfAggregate:
    """Collects the document's lines (bounded), then reads it whole at the end."""

    def __init__(self, source: str, k: int | None) -> None:
        self.source, self.k = source, k
        self.parts: list[bytes] = []
        self.size = 0
        self.too_large = False

    def add(self, raw: str | bytes) -> None:
        if self.too_large:
            return
        data = raw.encode("utf-8", errors="replace") if isinstance(raw, str) else raw
        self.size += len(data) + 1
        if self.size > MAX_DOCUMENT_BYTES:
            self.too_large, self.parts = True, []
            return
        self.parts.append(data)

    def finish(self) -> list[EngineInterval | InputError]:
        if self.too_large:
            return [self._error(f"an AIPerf aggregate export over {MAX_DOCUMENT_BYTES >> 20} MiB is not read")]
        try:
            value = orjson.loads(b"\n".join(self.parts))
        except orjson.JSONDecodeError as exc:
            return [self._error(f"an AIPerf aggregate export that is not JSON ({exc})")]
        if not isinstance(value, dict):
            return [self._error("an AIPerf aggregate export that is not a JSON object")]
        return [_interval(value, self.source, self.k)]

    def _error(self, message: str) -> InputError:
        return InputError(self.source, 1, message)


def _interval(doc: dict[str, Any], source: str, k: int | None) -> EngineInterval | InputError:
    def bad(message: str) -> InputError:
        return InputError(source, 1, f"AIPerf aggregate ({AIPERF_AGGREGATE_NAME}): {message}")

    pooled = doc.get("pooled_spec_decode_acceptance_histogram")
    if pooled is None:
        return bad(
            "no pooled_spec_decode_acceptance_histogram: the server reported no per-request acceptance, so the run "
            "holds no acceptance counts"
        )
    if not isinstance(pooled, dict):
        return bad("pooled_spec_decode_acceptance_histogram is not an object")
    hist: dict[int, int] = {}
    for key, steps in pooled.items():
        if not (isinstance(key, str) and key.isdigit() and len(key) < 6) or type(steps) is not int or steps < 0:
            return bad(f"pooled_spec_decode_acceptance_histogram[{key!r:.20}] = {steps!r:.20} is not a count of steps")
        if (why := count_too_large(steps)) is not None:
            return bad(f"pooled_spec_decode_acceptance_histogram[{key}] = {why}")
        hist[int(key)] = steps
    totals: dict[str, int] = {}
    for name in _TOTALS:
        result = doc.get(name)
        figure = result.get("avg") if isinstance(result, dict) else None
        if isinstance(figure, float) and figure.is_integer():
            figure = int(figure)
        if type(figure) is not int or figure < 0 or count_too_large(figure) is not None:
            return bad(f"{name} = {result!r:.60} holds no whole count")
        totals[name] = figure
    steps, accepted, drafted = (totals[name] for name in _TOTALS)
    top = max((a for a, n in hist.items() if n), default=0)
    if top > MAX_DRAFT_LENGTH:
        return bad(f"a step accepted {top} drafts: more than any draft length ({MAX_DRAFT_LENGTH})")
    dense = [hist.get(a, 0) for a in range(top + 1)]
    if sum(dense) != steps:
        return bad(f"the pooled histogram counts {sum(dense)} steps, not total_spec_decode_steps {steps}")
    if sum(a * n for a, n in enumerate(dense)) != accepted:
        return bad(
            f"the pooled histogram accepts {sum(a * n for a, n in enumerate(dense))} drafts, not "
            f"total_accepted_draft_tokens {accepted}"
        )
    if k is not None and top > k:
        return bad(f"a step accepted {top} drafts, more than the draft length {k}")
    positions = [sum(dense[i:]) for i in range(1, (k if k is not None else top) + 1)]
    notes = [
        "AIPerf pools every request's histogram into one: no request boundaries, so intervals are conditional on "
        "these prompts"
    ]
    try:
        if k is not None:
            rec = from_exact_positions(accepted, drafted, steps, positions)
        else:
            rec = recover_counts(accepted, drafted, drafts=steps, assume_full_drafts=False)
            rec.per_position, rec.accepted_hist = tuple(positions), tuple(dense)
            notes.append("the draft length is not in the export: give --draft-length to make the histogram exact")
    except Inconsistent as exc:
        return bad(f"inconsistent totals: {exc}")
    rec.notes[:0] = notes
    printed = {name: str(totals[name]) for name in _TOTALS}
    printed["pooled_spec_decode_acceptance_histogram"] = str(dense)
    return make_interval(
        ("aiperf", "aiperf-aggregate", source, 1, None, {}, printed),
        draft_tokens=drafted,
        accepted=accepted,
        **rec.fields(),
    )


def read_document(
    lines: Iterable[str | bytes], source: str, k: int | None, tally: LineTally
) -> list[EngineInterval | InputError]:
    """The whole export, collected line by line (bounded), read at its end."""
    document = AiperfAggregate(source, k)
    for raw in lines:
        tally.lines += 1
        document.add(raw)
    return document.finish()


FORMATS = (
    InputFormat(
        "aiperf-aggregate",
        Kind.INTERVALS,
        "AIPerf",
        "aiperf/exporters/json_exporter.py, `profile_export_aiperf.json` (read 2026-12)",
        "document",
        sniff=lambda head: True,  # the markers are the export's own keys
        markers=tuple(marker.encode() for marker in AIPERF_AGGREGATE_MARKERS),
        file_names=(AIPERF_AGGREGATE_NAME,),
        reader=read_document,
    ),
)
