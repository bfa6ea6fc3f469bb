"""The `specaccept.interval/1` record: one JSON object per live period (no rich: `-o jsonl` stays light)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from specaccept_cli.pipeline.live import Judged
    from specaccept_cli.summary.estimates import Estimates

SCHEMA = "specaccept.interval/1"


def moment(seconds: float) -> str:
    """Unix seconds as ISO 8601 UTC, to the millisecond."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _numbers(numbers: Estimates) -> dict[str, Any]:
    return {
        "runs": numbers.runs,
        "accepted_tokens": numbers.accepted_tokens,
        "examined_tokens": numbers.examined_tokens,
        "alpha": numbers.alpha,
        "alpha_ci": None if numbers.alpha_ci is None else list(numbers.alpha_ci),
        "tokens_per_pass": numbers.tokens_per_pass,
        "tokens_per_pass_ci": None if numbers.tokens_per_pass_ci is None else list(numbers.tokens_per_pass_ci),
        "acceptance_rate": numbers.acceptance_rate,
        **numbers.identification_keys(),
        "over": "runs" if numbers.cluster_field is None else "clusters",
        "cluster_field": numbers.cluster_field,
        "clusters": numbers.clusters,
    }


def interval_record(judged: Judged) -> dict[str, Any]:
    """The period just ended and the running total, with the drift test and every gate's state."""
    tick = judged.tick
    drift = judged.drift
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "index": tick.interval.index,
        "start": moment(tick.interval.start),
        "end": moment(tick.interval.end),
        "kind": "final" if tick.final else "period",
        "final": tick.final,
        "interval": _numbers(judged.interval),
        "total": _numbers(judged.total),
        "drift": None
        if drift is None
        else {
            "p_value": drift.p_value,
            "statistic": drift.statistic,
            "windows": drift.windows,
            "drifting": judged.drifting,
        },
        "gates": [
            {
                "metric": gate.metric,
                "threshold": gate.threshold,
                "value": gate.value,
                "passed": gate.passed,
                "outcome": gate.outcome,
                "bounds_ci": None if gate.bounds is None else list(gate.bounds),
            }
            for gate in judged.gates
        ],
        "skipped_rows": judged.skipped_rows,
        "verdict": [
            {"check": entry.check, "status": entry.status, "text": entry.text} for entry in judged.findings.verdict
        ],
    }
    if judged.findings.groups:
        record["groups"] = [{"group": name, **_numbers(numbers)} for name, numbers in judged.findings.groups]
    if tick.endpoints:
        record["endpoints"] = [
            {
                "url": state.url,
                "up": state.failures == 0 and state.scrapes > 0,
                "scrapes": state.scrapes,
                "failed_scrapes": state.failed_total,
                "consecutive_failures": state.failures,
                "error": state.error,
                "counter_resets": state.resets,
            }
            for state in tick.endpoints
        ]
    if tick.notes:
        record["notes"] = list(tick.notes)
    return record


def interval_line(judged: Judged) -> bytes:
    """One record, one line (JSON Lines), ready to flush."""
    return orjson.dumps(interval_record(judged), option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
