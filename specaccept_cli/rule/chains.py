"""Chain rules that stop at the first rejection: `standard`, `greedy-draft`, `sample-match`, `argmax`, `typical`.

Each rule is a per-position test; the accepted length is the number of positions from the start that pass
before the first one that does not. A scalar reference routine (plain Python, the semantics exactly) sits
beside a vectorized one over offsets (numpy, no Python loop per token); both compare in IEEE double with the
same operations in the same order, so they decide alike bit for bit (property-tested).

Engine sources, read in the public repositories:
- `standard`: vLLM `vllm/v1/sample/rejection_sampler.py` (`rejection_random_sample_kernel`: kept iff
  `draft_prob > 0 and target_prob / draft_prob >= uniform_prob`); TensorRT-LLM
  `tensorrt_llm/_torch/pyexecutor/sampling_utils.py` `get_rejected_indices` (rejected iff `rand > min(1, p / q)`);
  Hugging Face transformers `generation/utils.py` `_speculative_sampling` (`r_i <= p_i / q_i`).
- `greedy-draft`: the same vLLM kernel with `draft_probs=None` (EAGLE, MTP, n-gram drafting): q is taken
  as 1, so a token is kept iff `u <= p`; its residual is the target with the draft token zeroed.
- `sample-match`: llama.cpp `common/sampling.cpp` `common_sampler_sample_and_accept_n` (the target's whole
  sampler chain draws a token per position; the draft is kept while identical); TensorRT-LLM
  `_process_draft_tokens_greedy` without draft logits.
- `argmax`: every engine at temperature 0 (vLLM `rejection_greedy_sample_kernel`: kept while the draft token
  equals the target's argmax).
- `typical`: Medusa `medusa/model/utils.py` `evaluate_posterior`: `candidates_prob > min(posterior_threshold,
  exp(-posterior_entropy) * posterior_alpha)`, then `cumprod` (the first failure stops).
"""

from __future__ import annotations

import numpy as np

from specaccept_cli.rule import scalar as seed
from specaccept_cli.rule.batch import IntArray
from specaccept_cli.rule.steps import ChainSteps, StepFields, StepParams, step_param
from specaccept_cli.rule.vectorized import accept_thresholds, prefix_lengths


def _first_failure(passes: list[bool]) -> int:
    accepted = 0
    for passed in passes:
        if not passed:
            break
        accepted += 1
    return accepted


# --- standard: r <= min(1, p / q) ---------------------------------------------------------------------


def standard_scalar(fields: StepFields, params: StepParams) -> int:
    """The seed's rule: `rule/scalar.py` is its reference routine, unchanged."""
    return seed.accept_prefix(fields["p"], fields["q"], fields["r"])


def standard_batch(steps: ChainSteps) -> IntArray:
    """The seed's vectorized rule (`rule/vectorized.py`'s thresholds and prefix scan)."""
    columns = steps.columns
    passed = columns["r"] <= accept_thresholds(columns["p"], columns["q"])
    return prefix_lengths(steps.offsets, passed)


# --- greedy-draft: r <= p (q taken as 1) --------------------------------------------------------------


def greedy_draft_scalar(fields: StepFields, params: StepParams) -> int:
    """q is taken as 1 whatever the row says: min(1, p / 1) is p for p in [0, 1]."""
    p, r = fields["p"], fields["r"]
    return _first_failure([r[j] <= p[j] for j in range(len(p))])


def greedy_draft_batch(steps: ChainSteps) -> IntArray:
    return prefix_lengths(steps.offsets, steps.columns["r"] <= steps.columns["p"])


# --- sample-match and argmax: the draft token equals the target's token ---------------------------------


def token_match_scalar(fields: StepFields, params: StepParams) -> int:
    """Kept while the draft token is the target's token (its sampled one, or its argmax at temperature 0)."""
    draft, target = fields["draft_tokens"], fields["target_tokens"]
    return _first_failure([draft[j] == target[j] for j in range(len(draft))])


def token_match_batch(steps: ChainSteps) -> IntArray:
    return prefix_lengths(steps.offsets, steps.columns["draft_tokens"] == steps.columns["target_tokens"])


# --- typical: p > min(epsilon, delta * exp(-H)), strict ------------------------------------------------


def typical_threshold(entropy: float, epsilon: float, delta: float) -> float:
    """min(epsilon, delta * exp(-H)), with numpy's exp so the vectorized path computes the very same double."""
    return min(epsilon, delta * float(np.exp(np.float64(-entropy))))


def typical_scalar(fields: StepFields, params: StepParams) -> int:
    p, entropy = fields["p"], fields["entropy"]
    epsilon, delta = step_param(params, "epsilon", None), step_param(params, "delta", None)
    return _first_failure([p[j] > typical_threshold(entropy[j], epsilon, delta) for j in range(len(p))])


def typical_batch(steps: ChainSteps) -> IntArray:
    lengths = np.diff(steps.offsets)
    epsilon = np.repeat(np.asarray(steps.params["epsilon"], dtype=np.float64), lengths)
    delta = np.repeat(np.asarray(steps.params["delta"], dtype=np.float64), lengths)
    with np.errstate(over="ignore", invalid="ignore"):
        threshold = np.minimum(epsilon, delta * np.exp(-steps.columns["entropy"]))
    return prefix_lengths(steps.offsets, steps.columns["p"] > threshold)
