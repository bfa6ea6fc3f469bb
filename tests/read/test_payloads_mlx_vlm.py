"""mlx-vlm's response `timings` (Blaizzy/mlx-vlm#1788): fixtures built from mlx_vlm/server/schemas.py.

`GenerationTimings` rides a chat completion and the usage chunk of a stream (`choices: []`); the other
chunks carry `StreamingTimings` (a rate only). Its draft fields are null when no drafter ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from specaccept_cli.read.formats import by_name, sniff_order
from specaccept_cli.read.payloads import sniff_payload
from tests import payloads as sim
from tests.helpers import invoke
from tests.read.test_payloads import parse

MODEL = "mlx-community/Qwen3.5-4B-4bit"


def timings(rounds: int | None, drafted: int | None, accepted: int | None, kind: str | None = "mtp") -> dict[str, Any]:
    """`GenerationTimings.model_dump()`: every field, the draft ones null without a drafter."""
    return {
        "prompt_n": 20,
        "cache_n": 0,
        "predicted_n": 40,
        "prompt_ms": 81.5,
        "prompt_per_token_ms": 4.075,
        "prompt_per_second": 245.4,
        "predicted_ms": 1290.3,
        "predicted_per_token_ms": 32.26,
        "predicted_per_second": 31.0,
        "peak_memory": 3.12,
        "draft_kind": kind,
        "draft_rounds": rounds,
        "draft_n": drafted,
        "draft_n_accepted": accepted,
    }


def response(request_id: str, draft: dict[str, Any]) -> dict[str, Any]:
    """A `ChatResponse` of /v1/chat/completions."""
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": 1787366173,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "...", "reasoning": None, "tool_calls": None},
                "logprobs": None,
            }
        ],
        "usage": {"input_tokens": 20, "output_tokens": 40, "total_tokens": 60},
        "timings": draft,
    }


def of(request: sim.Request, kind: str = "mtp") -> dict[str, Any]:
    return response(request.request_id, timings(request.steps, sum(request.drafted), sum(request.accepted), kind))


def test_the_servers_own_test_figures_are_one_request_with_its_steps() -> None:
    # mlx_vlm/tests/test_server.py test_generation_timings_include_speculative_stats: mtp, 5 rounds, 12 of 20.
    (record,), errors, _ = parse(orjson.dumps(response("a", timings(5, 20, 12))))
    assert errors == []
    assert (record.engine, record.steps, record.accepted, record.drafted) == ("mlx-vlm", 5, 12, 20)
    assert record.request_id == "chatcmpl-a" and record.labels["draft_kind"] == "mtp"
    assert record.labels["model"] == MODEL and record.completion_tokens == 40
    low, high = record.examined_bounds()  # type: ignore[misc]
    assert 12 + 1 <= low <= high <= 12 + 5  # at least one rejected round (8 drafts not accepted), at most 5


def test_it_is_told_from_llamacpps_timings_which_share_draft_n() -> None:
    (request,) = sim.requests(1, count=1)
    assert sniff_payload([orjson.dumps(of(request))]) == "mlx-vlm-payload"
    assert sniff_payload([orjson.dumps(sim.llamacpp_completion(request))]) == "llamacpp-payload"
    names = [entry.name for entry in sniff_order(("payloads",))]
    assert names.index("mlx-vlm-payload") < names.index("llamacpp-payload")  # refines: tried first, by the table
    assert by_name("mlx-vlm-payload").refines == "llamacpp-payload"


def test_a_stream_gives_one_request_from_its_usage_chunk() -> None:
    (request,) = sim.requests(2, count=1)
    delta = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1787366173,
        "model": MODEL,
        "choices": [{"index": 0, "finish_reason": None, "delta": {"role": "assistant", "content": "a"}}],
        "usage": None,
        "timings": {"predicted_per_second": 30.5},  # StreamingTimings: no draft fields
    }
    last = {**of(request), "object": "chat.completion.chunk", "choices": []}  # _chat_usage_chunk
    records, errors, tally = parse(*sim.sse([delta, delta, last]).split(b"\n"))
    assert errors == [] and [r.steps for r in records] == [request.steps]
    assert tally.records == 1


def test_a_request_without_a_drafter_is_a_null_payload_not_an_error() -> None:
    records, errors, tally = parse(orjson.dumps(response("n", timings(None, None, None, None))))
    assert records == [] and errors == [] and tally.null_payloads == 1


@pytest.mark.parametrize(
    ("draft", "why"),
    [
        (timings(5, 10, 12), "12 accepted of 10 drafted tokens"),
        (timings(5, None, 3), "timings.draft_rounds without draft_n"),
        (timings(5, 10, 2.5), "draft_n_accepted = 2.5 is not a whole count"),  # type: ignore[arg-type]
        (timings(0, 4, 1), "in 0 draft rounds"),
    ],
)
def test_figures_that_do_not_add_up_are_a_bad_line(draft: dict[str, Any], why: str) -> None:
    records, (error,), _ = parse(orjson.dumps(response("b", draft)))
    assert records == [] and error.line == 1 and why in error.message


def test_audit_reads_a_log_of_responses_with_exact_tokens_per_pass_and_bounds_that_hold_the_truth(
    tmp_path: Path,
) -> None:
    batch = sim.requests(31, count=30, ragged=0.3)
    path = tmp_path / "responses.jsonl"
    path.write_bytes(sim.jsonl([of(r, kind="mtp" if i % 2 else "dflash") for i, r in enumerate(batch)]))
    result = invoke("audit", str(path), "-o", "json", "--group-by", "draft_kind")
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    steps, accepted = sum(r.steps for r in batch), sum(sum(r.accepted) for r in batch)
    truth = accepted / sum(r.examined for r in batch)
    low, high = data["alpha_bounds"]
    assert low <= truth <= high
    assert data["accepted_tokens"] == accepted and data["drafted_tokens"] == sum(sum(r.drafted) for r in batch)
    assert data["tokens_per_pass"] == pytest.approx((accepted + steps) / steps, abs=1e-12)
    assert data["clusters"] == 30
    assert sorted(data["groups"]) == ["dflash", "mtp"]  # the drafter, as --group-by splits it
    assert sum(group["clusters"] for group in data["groups"].values()) == 30
