"""What each serving engine or benchmark would report on the same runs.

Every engine counts "acceptance" its own way; computed from one Summary, the numbers can be
put side by side and their differences explained. Each definition below was read in the
engine's own source (file named in the comment); where the engine assumes one fixed draft
length k, the sum over runs of that engine's per-run quantity is used, which is the same
number when k is fixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WHY_THEY_DIFFER = (
    "They divide different counts: accepted/drafted counts untested tokens after a rejection as failures; "
    "alpha divides by tokens actually tested; vLLM v0 also counts tokens that would pass after a rejection; "
    "SGLang and Spec-Bench add the bonus/resampled token; per-position rates divide by the runs that reached "
    "position i (EAGLE) or by every draft (vLLM)."
)

# (engine, metric) -> the definition in words, for the side-by-side view.
DEFINITIONS = {
    # vLLM v1 logs these as "Avg Draft acceptance rate", "Mean acceptance length" and "Per-position
    # acceptance rate" (vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log).
    ("vllm", "acceptance_rate"): 'accepted / drafted: its "Avg Draft acceptance rate"',
    ("vllm", "mean_acceptance_length"): '1 + accepted / drafts: its "Mean acceptance length"',
    ("vllm", "per_position"): 'accepted at i / every draft: its "Per-position acceptance rate"',
    ("vllm_v0", "acceptance_rate"): "every passing token, also after a rejection / drafted",
    ("vllm_v0", "system_efficiency"): "emitted / (runs x (k + 1))",
    ("sglang", "accept_rate"): "(accepted + runs) / (runs x (k + 1))",
    ("sglang", "accept_length"): "(accepted + runs) / runs",
    ("llama_cpp", "acceptance_rate"): "n_accept / n_drafted",
    ("spec_bench", "tau"): "mean of a + 1 per step",
    ("eagle", "per_position"): "accepted at i / reached i",
}


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def engine_conventions(
    runs: int,
    drafted: int,
    accepted: int,
    passing: int | None,
    accepted_at: Sequence[int],
    rates: Sequence[float | None],
) -> dict[str, dict[str, Any]]:
    """{engine: {metric: value}} for vllm, vllm_v0, sglang, llama_cpp, spec_bench and eagle.

    `passing` counts tokens that pass their own test, also after a rejection (vLLM v0's counter); None when
    r was not logged (engine output), so v0's rate is unknown, never 0;
    `accepted_at[i]` counts runs that kept draft position i + 1, `rates[i]` is its conditional rate.
    """
    emitted = accepted + runs  # a + 1 per run
    return {
        # vllm/v1/spec_decode/metrics.py (SpecDecodingLogging.log, compute_acceptance_rate/_len):
        # draft_acceptance_rate = num_accepted_tokens / num_draft_tokens;
        # mean_acceptance_length = 1 + num_accepted_tokens / num_drafts ("conventionally ... includes the bonus token");
        # per-position rate = accepted at position i / num_drafts (every draft, k fixed per server).
        "vllm": {
            "acceptance_rate": _ratio(accepted, drafted),
            "mean_acceptance_length": 1 + accepted / runs if runs else None,
            "per_position": [_ratio(count, runs) for count in accepted_at],
        },
        # vllm/model_executor/layers/spec_decode_base_sampler.py (_create_output):
        # num_accepted_tokens += accepted.sum() over the whole k x batch matrix, so a token that
        # passes its own test after an earlier rejection still counts; num_emitted_tokens counts
        # output tokens (accepted prefix + the resampled/bonus token).
        # vllm/spec_decode/metrics.py: draft_acceptance_rate = accepted / draft_tokens;
        # system_efficiency = emitted / (draft_tokens / k * (k + 1)). Bonus tokens counted as emitted.
        # Its sampler (vllm/model_executor/layers/rejection_sampler.py, _get_accepted) tests
        # uniform_rand < capped_ratio, strictly; passing_tokens uses the rule's inclusive <=, which
        # differs only where r equals min(1, p/q) exactly.
        "vllm_v0": {
            "acceptance_rate": None if passing is None else _ratio(passing, drafted),
            "system_efficiency": _ratio(emitted, drafted + runs),
        },
        # python/sglang/srt/managers/scheduler_metrics_mixin.py: update_spec_metrics adds
        # num_accepted_tokens + bs (one bonus per request) and bs forward passes;
        # accept_length = accepted_with_bonus / forward_ct;
        # accept_rate = accepted_with_bonus / (forward_ct * speculative_num_draft_tokens), where
        # speculative_num_draft_tokens defaults to num_steps + 1, i.e. k + 1 for a chain.
        "sglang": {
            "accept_rate": _ratio(emitted, drafted + runs),
            "accept_length": _ratio(emitted, runs),
        },
        # examples/speculative/speculative.cpp: n_accept counts accepted drafted tokens,
        # n_drafted counts drafted tokens; prints accept = 100 * n_accept / n_drafted.
        "llama_cpp": {
            "acceptance_rate": _ratio(accepted, drafted),
        },
        # Spec-Bench evaluation/inference_*.py appends input_ids growth per step (accepted + 1)
        # to accept_lengths; evaluation/speed.py reports "#Mean accepted tokens" = their mean.
        "spec_bench": {
            "tau": _ratio(emitted, runs),
        },
        # EAGLE eagle/model/utils_alpha.py (evaluate_posterior) + eagle/evaluation/alpha.py:
        # alpha[i] += 1 if i < accept_length; alpha_num[i] += 1 if i <= accept_length and i < draft
        # length; reports alpha / alpha_num per position: the conditional rate.
        "eagle": {
            "per_position": list(rates),
        },
    }
