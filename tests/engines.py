"""Simulated serving engines: runs with known truth, the counters an engine keeps, and the lines it prints
with the engine's own format strings and rounding. Used by the tests and by `make examples`
(`python -m tests.engines examples/vllm-server.log`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

# The engines' own printf-style format strings, verbatim (vllm/v1/spec_decode/metrics.py, two versions;
# llama.cpp tools/server/server-context.cpp), so the printed lines round exactly as the engines round.
VLLM_FULL_FORMAT = (
    "SpecDecoding metrics: "
    "Mean acceptance length: %.2f, "
    "Accepted throughput: %.2f tokens/s, "
    "Drafted throughput: %.2f tokens/s, "
    "Accepted: %d tokens, "
    "Drafted: %d tokens, "
    "Per-position acceptance rate: %s, "
    "Avg Draft acceptance rate: %.1f%%"
)
VLLM_PERPOS_FORMAT = (
    "SpecDecoding metrics: "
    "Draft acceptance rate: %.1f%%, "
    "Mean acceptance length: %.2f, "
    "Accepted: %d tokens, "
    "Drafted: %d tokens, "
    "Per-position acceptance rate: %s"
)
LLAMA_PERPOS_FORMAT = (
    "slot print_timing: id  0 | task 17 | draft acceptance = %0.5f (%5d accepted / %5d generated), "
    "mean acceptance length = %5.2f, acceptance rate per position = (%s)"
)


# ---------------------------------------------------------------------------------------------
# Simulated engines: runs, the engine's counters, and the line printed with the engine's rounding


def simulate(seed: int, runs: int, k: int, alpha: float, variable: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Draft lengths and accepted lengths: accept each position with prob alpha, stop at first rejection."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, k + 1, size=runs) if variable else np.full(runs, k)
    accepts = rng.random((runs, k)) < alpha
    first_reject = np.where(~accepts, np.arange(k), k).min(axis=1)
    return lengths, np.minimum(first_reject, lengths)


def counters(lengths: np.ndarray, accepted: np.ndarray, k: int) -> tuple[int, int, int, list[int]]:
    """vLLM's SpecDecodingStats.observe_draft summed: drafts, draft tokens, accepted, per position."""
    per_pos = [int((accepted >= i).sum()) for i in range(1, k + 1)]
    return len(lengths), int(lengths.sum()), int(accepted.sum()), per_pos


def truth_hist(accepted: np.ndarray, k: int) -> list[int]:
    return [int((accepted == a).sum()) for a in range(k + 1)]


def vllm_full_line(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int], elapsed: float = 10.0) -> str:
    """Exactly SpecDecodingLogging.log() of vllm/v1/spec_decode/metrics.py, with a v1 front-end prefix."""
    rates = np.array(per_pos) / drafts
    rates_str = ", ".join(f"{p:.3f}" for p in rates)
    msg = VLLM_FULL_FORMAT % (
        1 + accepted / drafts,
        accepted / elapsed,
        draft_tokens / elapsed,
        accepted,
        draft_tokens,
        rates_str,
        accepted / draft_tokens * 100,
    )
    return f"(APIServer pid=4242) INFO 11-30 13:00:01 [metrics.py:120] {msg}"


def vllm_perpos_line(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]) -> str:
    rates_str = ", ".join(f"{p:.3f}" for p in np.array(per_pos) / drafts)
    msg = VLLM_PERPOS_FORMAT % (accepted / draft_tokens * 100, 1 + accepted / drafts, accepted, draft_tokens, rates_str)
    return f"INFO 06-02 09:15:42 [metrics.py:85] {msg}"


def llama_perpos_line(draft_tokens: int, accepted: int, steps: int, per_pos: list[int]) -> str:
    ratio = float(np.float32(accepted) / np.float32(draft_tokens))
    rates = ", ".join(f"{c / steps:.3f}" for c in per_pos)
    return LLAMA_PERPOS_FORMAT % (ratio, accepted, draft_tokens, 1 + accepted / steps, rates)


def prom_text(values: tuple[int, int, int, list[int]], labels: str = 'engine="0",model_name="m"') -> list[str]:
    drafts, draft_tokens, acc, per_pos = values
    lines = [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{labels}}} {float(drafts)}",
        f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.7e+09",
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {float(draft_tokens)}",
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {float(acc)}",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(c)}'
        for i, c in enumerate(per_pos)
    ]
    return lines


def sglang_meta(seed: int, runs: int, k: int, alpha: float, request_id: str) -> tuple[dict, np.ndarray]:
    """A finished request's meta_info as SGLang's tokenizer manager fills it, from simulated passes."""
    lengths, accepted = simulate(seed, runs, k, alpha)
    hist = truth_hist(accepted, k)
    meta = {
        "id": request_id,
        "completion_tokens": int(accepted.sum()) + runs,
        "spec_verify_ct": runs,
        "spec_accept_token_num": int(accepted.sum()),
        "spec_draft_token_num": int(lengths.sum()),
        "spec_accept_rate": round(float(accepted.sum() / lengths.sum()), 4),
        "spec_accept_length": round(float((accepted.sum() + runs) / runs), 2),
        "spec_accept_histogram": hist,
    }
    return meta, accepted


def server_log(seed: int, intervals: int, k: int, alpha: float, runs: int = 400) -> list[str]:
    """A vLLM v1 server's output over `intervals` stats intervals of 10 s: request lines, engine stats, and one
    'SpecDecoding metrics' line per interval (acceptance drifting down a little over the log, as traffic changes)."""
    lines = []
    for i in range(intervals):
        rate = alpha - 0.08 * i / max(intervals - 1, 1)
        lengths, accepted = simulate(seed + i, runs + 37 * (i % 5), k, rate)
        clock = f"11-30 13:{i // 6:02d}:{i % 6 * 10:02d}"
        lines += [
            f'(APIServer pid=4242) INFO:     127.0.0.1:{51000 + i} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            f"(APIServer pid=4242) INFO {clock} [loggers.py:123] Engine 000: Avg prompt throughput: 52.3 tokens/s, "
            "Avg generation throughput: 131.9 tokens/s, Running: 4 reqs, Waiting: 0 reqs",
            vllm_full_line(*counters(lengths, accepted, k)).replace("11-30 13:00:01", clock),
        ]
    return lines


def main() -> None:
    path = Path(sys.argv[1])
    path.write_text("\n".join(server_log(seed=2026, intervals=30, k=4, alpha=0.78)) + "\n")


if __name__ == "__main__":
    main()
