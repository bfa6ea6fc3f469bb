"""Simulated per-request payloads with known truth: requests whose draft quality varies, written the way each
engine writes them (field names and shapes from the engines' sources, cited in specaccept_cli/read/payloads/).
Used by the tests and by `python -m tests.payloads examples/vllm-payloads.jsonl`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson


@dataclass(frozen=True)
class Request:
    """One request's steps, the truth: step i drafted drafted[i] tokens and accepted accepted[i]."""

    request_id: str
    k: int
    drafted: tuple[int, ...]
    accepted: tuple[int, ...]

    @property
    def steps(self) -> int:
        return len(self.accepted)

    def histogram(self) -> list[int]:
        return np.bincount(np.array(self.accepted, dtype=np.int64), minlength=self.k + 1).tolist()

    @property
    def examined(self) -> int:
        return sum(min(a + 1, d) for a, d in zip(self.accepted, self.drafted))


def requests(
    seed: int, count: int = 40, k: int = 4, steps: tuple[int, int] = (5, 60), spread: float = 2.0, ragged: float = 0.0
) -> list[Request]:
    """`count` requests whose per-token acceptance alpha ~ Beta around 0.7 (`spread` smaller: more between-request
    variation); with `ragged` > 0 that share of the steps drafts fewer than k tokens (an n-gram drafter)."""
    rng = np.random.default_rng(seed)
    out = []
    for index in range(count):
        alpha = float(rng.beta(7 * spread, 3 * spread))
        n = int(rng.integers(steps[0], steps[1] + 1))
        drafted = np.full(n, k, dtype=np.int64)
        if ragged:
            short = rng.random(n) < ragged
            drafted[short] = rng.integers(1, k, size=int(short.sum())) if k > 1 else 1
        tests = rng.random((n, k)) <= alpha
        kept = np.cumprod(tests, axis=1).sum(axis=1)
        accepted = np.minimum(kept, drafted)
        out.append(Request(f"req-{seed}-{index}", k, tuple(drafted.tolist()), tuple(accepted.tolist())))
    return out


def vllm_response(request: Request, detailed: bool = False, stream: bool = False) -> dict[str, Any]:
    """A vLLM response (or the final usage chunk of a stream) with `metrics.speculative_decoding`."""
    accepted, drafted = sum(request.accepted), sum(request.drafted)
    by_length: dict[str, list[int]] = {}
    for a, d in zip(request.accepted, request.drafted):
        row = by_length.setdefault(str(d), [0] * (d + 1))
        row[a] += 1
    payload: dict[str, Any] = {
        "mean_acceptance_length": 1 + accepted / request.steps,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": request.histogram(),
        "acceptance_histogram_by_draft_length": by_length,
        "num_spec_steps": request.steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": request.k,
    }
    if detailed:
        payload["per_step_accepted"] = list(request.accepted)
        payload["per_step_drafted"] = list(request.drafted)
    usage = {"prompt_tokens": 20, "completion_tokens": 1 + accepted + request.steps}
    if stream:
        return {
            "id": request.request_id,
            "object": "chat.completion.chunk",
            "created": 1787366173,
            "model": "test-model",
            "choices": [],
            "usage": usage,
            "metrics": {"speculative_decoding": payload},
        }
    return {
        "id": request.request_id,
        "object": "chat.completion",
        "created": 1787366173,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "..."}, "finish_reason": "stop"}],
        "usage": usage,
        "metrics": {"speculative_decoding": payload},
    }


def vllm_summary_only(request: Request) -> dict[str, Any]:
    """The summary shape of vLLM #48915 before the histogram by draft length was added."""
    response = vllm_response(request)
    del response["metrics"]["speculative_decoding"]["acceptance_histogram_by_draft_length"]
    return response


def trtllm_response(request: Request) -> dict[str, Any]:
    accepted, drafted = sum(request.accepted), sum(request.drafted)
    return {
        "id": request.request_id,
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "..."},
                "finish_reason": "stop",
                "avg_decoded_tokens_per_iter": (1 + accepted + request.steps) / (request.steps + 1),
                "speculative_decoding": {
                    "acceptance_rate": accepted / drafted,
                    "total_accepted_draft_tokens": accepted,
                    "total_draft_tokens": drafted,
                    "num_spec_steps": request.steps,
                    "acceptance_histogram": request.histogram(),
                    "num_spec_tokens": request.k,
                },
            }
        ],
    }


def sglang_generate(request: Request) -> dict[str, Any]:
    """A /generate response of SGLang >= 0.5.12: meta_info with the current names."""
    accepted = sum(request.accepted)
    proposed = request.steps * request.k  # SGLang's nominal count: passes x width
    return {
        "text": "...",
        "meta_info": {
            "id": request.request_id,
            "finish_reason": {"type": "stop"},
            "completion_tokens": 1 + accepted + request.steps,
            "spec_verify_ct": request.steps,
            "spec_accept_rate": accepted / proposed,
            "spec_accept_length": (1 + accepted + request.steps) / request.steps,
            "spec_num_correct_drafts": accepted,
            "spec_num_proposed_drafts": proposed,
            "spec_correct_drafts_histogram": request.histogram(),
        },
    }


def llamacpp_completion(request: Request) -> dict[str, Any]:
    return {
        "content": "...",
        "stop": True,
        "timings": {
            "prompt_n": 20,
            "predicted_n": 1 + sum(request.accepted) + request.steps,
            "draft_n": sum(request.drafted),
            "draft_n_accepted": sum(request.accepted),
        },
    }


def aiperf_record(request: Request, per_step: bool = True) -> dict[str, Any]:
    """An AIPerf records line; `per_step=False`: the engine reported no per-step arrays (totals and histogram)."""
    accepted, drafted = sum(request.accepted), sum(request.drafted)
    if not per_step:
        record = aiperf_record(request)
        del record["spec_decode_acceptance"]["per_step_accepted"], record["spec_decode_acceptance"]["per_step_drafted"]
        return record
    return {
        "metadata": {"x_request_id": request.request_id, "request_start_ns": 1787366173000000000},
        "metrics": {},
        "spec_decode_acceptance": {
            "engine": "vllm",
            "mean_acceptance_length": 1 + accepted / request.steps,
            "draft_acceptance_rate": accepted / drafted,
            "acceptance_histogram": {str(a): n for a, n in enumerate(request.histogram()) if n},
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": drafted,
            "num_spec_steps": request.steps,
            "num_spec_tokens": request.k,
            "per_step_accepted": list(request.accepted),
            "per_step_drafted": list(request.drafted),
        },
    }


def jsonl(objects: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in objects)


def sse(objects: list[dict[str, Any]]) -> bytes:
    """A stream as an SSE capture: each object a `data:` event, the stream ended by `data: [DONE]`."""
    return b"".join(b"data: " + orjson.dumps(item) + b"\n\n" for item in objects) + b"data: [DONE]\n\n"


def truth_counts(batch: list[Request]) -> np.ndarray:
    size = max(r.k for r in batch) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    for request in batch:
        for a, d in zip(request.accepted, request.drafted):
            counts[d, a] += 1
    return counts


if __name__ == "__main__":  # the small example shipped in examples/
    target = Path(sys.argv[1])
    target.write_bytes(jsonl([vllm_response(r, detailed=i % 2 == 0) for i, r in enumerate(requests(7, count=24))]))
