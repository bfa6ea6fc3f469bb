"""What the first screen says on engine input, on real llama.cpp captures (tests/fixtures/llamacpp-0c1e570, the
server counted 153 accepted of 209 drafted tokens over 55 steps; the trace lines give alpha = 153/177) and on
simulated vLLM scrapes and SGLang payloads (issue 43):

- llama.cpp's per-request print_timing lines are one request each, not intervals of many requests;
- one scrape (llama.cpp's or vLLM's) gets an interval for its bounds, and says its counts are since the
  server started;
- a bound too wide to act on says so in a plain word, and why;
- SGLang payloads whose extra fields restate the totals get no unknown-field warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.engines import counters, prom_text
from tests.helpers import invoke
from tests.payloads import requests, sglang_generate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp-0c1e570"
TRUE_ALPHA = 153 / 177
MANY_REQUESTS = "count intervals of many requests"
SINCE_START = "since the server started"


def audit(*args: str) -> tuple[dict, str, str]:
    """-o json, the first screen (its words joined: the panel folds lines) and stderr of one input."""
    as_json = invoke("audit", *args, "-o", "json")
    assert as_json.exit_code == 0, as_json.stderr
    screen = invoke("audit", *args)
    assert screen.exit_code == 0, screen.stderr
    return orjson.loads(as_json.stdout), " ".join(screen.stdout.replace("│", " ").split()), screen.stderr


def entries(data: dict, check: str = "intervals") -> list[str]:
    return [entry["text"] for entry in data["verdict"] if entry["check"] == check]


@pytest.mark.parametrize("log", ["default.log", "lv4.log"])
def test_per_request_print_timing_lines_are_requests_not_intervals_of_many(log: str) -> None:
    data, screen, _ = audit(str(FIXTURES / log))
    assert MANY_REQUESTS not in screen and all(MANY_REQUESTS not in text for text in entries(data))
    assert data["clustering"] == {"over": "requests", "field": "request_id", "requests": 6}
    assert "intervals clustered by request_id: 6 requests" in screen
    low, high = data["alpha_bounds_ci"]
    assert low <= TRUE_ALPHA <= high  # the bounds' interval, now over the requests, still holds the truth


def test_trace_lines_of_many_steps_keep_their_words() -> None:
    data, _, _ = audit(str(FIXTURES / "trace.log"))
    assert any(MANY_REQUESTS in text for text in entries(data))  # trace lines name no request: over runs


def test_one_llamacpp_scrape_gets_an_interval_holding_the_truth_and_says_since_the_server_started() -> None:
    data, screen, _ = audit(str(FIXTURES / "after.prom"))
    low, high = data["alpha_bounds"]
    assert (low, high) == (0.85, 153 / 167)
    ci_low, ci_high = data["alpha_bounds_ci"]
    assert ci_low < low and high < ci_high < 1 and ci_low <= TRUE_ALPHA <= ci_high
    assert f"alpha between 0.8500 and 0.9162 (95%: {ci_low:.4f}-{ci_high:.4f})" in screen
    (since,) = [text for text in entries(data) if SINCE_START in text]
    assert since.startswith("one scrape: its counts are since the server started") and since in screen
    assert data["engine"]["lone_scrapes"] == 1
    # Two scrapes give the interval between them: nothing is said of the server's start.
    two, screen_two, _ = audit(str(FIXTURES / "before.prom"), str(FIXTURES / "after.prom"))
    assert SINCE_START not in screen_two and two["engine"]["lone_scrapes"] == 0


def test_one_vllm_scrape_says_since_the_server_started_too(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lengths = np.full(400, 4)
    accepted = rng.integers(0, 5, lengths.shape[0])
    page = tmp_path / "vllm.prom"
    page.write_text("\n".join(prom_text(counters(lengths, accepted, 4))) + "\n")
    data, screen, _ = audit(str(page))
    assert data["alpha_ci"] is not None and data["runs"] == 400
    assert SINCE_START in screen and any(SINCE_START in text for text in entries(data))


def test_bounds_too_wide_to_act_on_say_so_and_why() -> None:
    data, screen, _ = audit(str(FIXTURES / "responses.jsonl"))
    low, high = data["tokens_per_pass_bounds"]
    assert high > 1.25 * low
    texts = entries(data)
    (tokens,) = [text for text in texts if text.startswith("tokens per pass is only known")]
    assert f"between {low:.4f} and {high:.4f}, too wide to act on: the input gives no count of verify steps" in tokens
    (alpha,) = [text for text in texts if text.startswith("alpha is only known")]
    assert "too wide to act on: 6 of 6 requests give totals only, so their examined tokens are not logged" in alpha
    assert "too wide to act on" in screen
    # The master-format log's alpha bounds (0.7574-0.9623) too; a lone scrape's 0.85-0.9162 is narrow enough.
    wide, _, _ = audit(str(FIXTURES / "default.log"))
    assert any("too wide to act on" in text for text in entries(wide))
    narrow, _, _ = audit(str(FIXTURES / "after.prom"))
    assert not any("too wide" in text for text in entries(narrow))


def _sglang_with_stats(extra: dict[str, object]) -> list[dict[str, object]]:
    """SGLang /generate responses whose speculative_decoding_stats restate the five totals of meta_info."""
    out = []
    for request in requests(seed=5, count=8):
        response = sglang_generate(request)
        meta = response["meta_info"]
        accepted, proposed, steps = meta["spec_num_correct_drafts"], meta["spec_num_proposed_drafts"], request.steps
        meta["speculative_decoding_stats"] = {
            "num_verify_steps": steps,
            "num_accepted_drafts": accepted,
            "num_proposed_drafts": proposed,
            "acceptance_rate": accepted / proposed,
            "mean_accept_length": 1 + accepted / steps,
            "accepted_drafts_histogram": request.histogram(),
            **extra,
        }
        out.append(response)
    return out


def test_sglang_totals_that_are_there_get_no_unknown_field_warning(tmp_path: Path) -> None:
    path = tmp_path / "sglang.jsonl"
    path.write_text("".join(json.dumps(response) + "\n" for response in _sglang_with_stats({})))
    data, _, stderr = audit(str(path))
    assert "does not know" not in stderr and data["engine"]["schema_drift"] == []
    # A field that restates nothing is still reported, alone.
    path.write_text("".join(json.dumps(response) + "\n" for response in _sglang_with_stats({"draft_entropy": 0.123})))
    data, _, stderr = audit(str(path))
    (drift,) = data["engine"]["schema_drift"]
    assert drift.endswith("carries fields this reader does not know, not read: draft_entropy"), drift
