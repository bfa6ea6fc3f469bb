"""Captures of a real llama.cpp server (0c1e570, tests/fixtures/llamacpp-0c1e570/, see its README), read with
the counts the server itself reported: its /metrics counters and its responses' timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from specaccept_cli.read.engines import EngineInterval, parse_engine_log
from tests.helpers import invoke

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp-0c1e570"


def sample(name: str, scrape: str) -> int:
    """A llamacpp: counter as the server printed it (a whole number below 10^6 in these runs)."""
    [value] = [
        line.split()[1] for line in (FIXTURES / scrape).read_text().splitlines() if line.startswith(f"llamacpp:{name} ")
    ]
    assert value.isdigit(), value
    return int(value)


def server_counts() -> tuple[int, int, int]:
    """(accepted, drafted, verify steps) of the trace run between its two scrapes."""
    return tuple(  # type: ignore[return-value]
        sample(name, "after.prom") - sample(name, "before.prom")
        for name in (
            "spec_decode_num_accepted_tokens_total",
            "spec_decode_num_draft_tokens_total",
            "spec_decode_num_drafts_total",
        )
    )


def audit(*names: str) -> dict[str, Any]:
    result = invoke("audit", *(str(FIXTURES / name) for name in names), "-o", "json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = orjson.loads(result.stdout)
    assert data["skipped_rows"] == 0
    return data


def totals(data: dict[str, Any]) -> tuple[int, int]:
    """(accepted, drafted) over the whole input: the exact intervals and the bounded ones."""
    return data["accepted_tokens"], data["drafted_tokens"]


def trace_pairs() -> list[tuple[int, int]]:
    """(accepted, drafted) of every verify step, read off the trace lines by hand."""
    out = []
    for line in (FIXTURES / "trace.log").read_text().splitlines():
        if "| accepted " in line and line.endswith("draft tokens"):
            a, d = line.rsplit("accepted", 1)[1].removesuffix("draft tokens").split("/")
            out.append((int(a), int(d)))
    return out


def test_the_responses_timings_are_the_servers_counters() -> None:
    bodies = [orjson.loads(line) for line in (FIXTURES / "responses.jsonl").read_bytes().splitlines()]
    accepted = sum(body["timings"].get("draft_n_accepted", 0) for body in bodies)
    drafted = sum(body["timings"].get("draft_n", 0) for body in bodies)
    assert (accepted, drafted) == server_counts()[:2]
    assert audit("responses.jsonl")["engine"]["requests"] == len(bodies)
    assert totals(audit("responses.jsonl")) == (accepted, drafted)
    one = orjson.loads((FIXTURES / "completion.json").read_bytes())
    assert one["timings"]["draft_n"] > one["timings"]["draft_n_accepted"] > 0


def test_the_trace_log_gives_alpha_exactly() -> None:
    pairs = trace_pairs()
    accepted, drafted, steps = server_counts()
    assert len(pairs) == steps and sum(a for a, _ in pairs) == accepted and sum(d for _, d in pairs) == drafted
    examined = sum(a + (1 if a < d else 0) for a, d in pairs)
    data = audit("trace.log")
    assert (data["runs"], data["accepted_tokens"], data["drafted_tokens"]) == (steps, accepted, drafted)
    assert data["examined_tokens"] == examined and data["alpha"] == pytest.approx(accepted / examined, rel=1e-12)
    assert data["engine"]["bounded_intervals"] == 0 and data["engine"]["running_totals"] > 0
    assert data["engine"]["lines"] == data["engine"]["metrics_lines"] + data["engine"]["ignored_lines"]


def test_every_other_surface_counts_the_same_tokens_and_bounds_that_alpha() -> None:
    pairs = trace_pairs()
    alpha = sum(a for a, _ in pairs) / sum(a + (1 if a < d else 0) for a, d in pairs)
    for data in (audit("before.prom", "after.prom"), audit("responses.jsonl")):
        assert totals(data) == server_counts()[:2]
        low, high = data["engine"]["alpha_bounds_all_intervals"]
        assert low <= alpha <= high
    lines = (FIXTURES / "trace.log").read_text().splitlines()
    stats = [
        item
        for item in parse_engine_log(lines, "trace.log")
        if isinstance(item, EngineInterval) and item.fmt == "llamacpp-stats"
    ]
    last = stats[-1]  # the drafter's running total after the last request: every request of the run
    assert (last.accepted, last.draft_tokens) == server_counts()[:2]
    assert last.alpha_bounds is not None and last.alpha_bounds[0] <= alpha <= last.alpha_bounds[1]


@pytest.mark.parametrize("name", ["default.log", "lv4.log"])
def test_the_request_lines_of_each_verbosity_read_whole(name: str) -> None:
    data = audit(name)
    engine = data["engine"]
    assert engine["bad_lines"] == 0 and engine["bounded_intervals"] > 0 and data["alpha"] is None
    assert data["runs"] == server_counts()[2]  # the mean lengths pin the verify steps down
    # the three runs made the same greedy requests: each log's own request lines count the trace run's tokens
    assert totals(data) == server_counts()[:2]
    assert engine["lines"] == engine["metrics_lines"] + engine["ignored_lines"]
    low, high = engine["alpha_bounds_all_intervals"]
    assert 0 < low < high < 1
