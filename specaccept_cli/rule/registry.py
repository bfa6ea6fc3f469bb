"""The table of verification rules: every `--rule` choice, dispatch and docs table derives from `RULES`.

A rule names the fields a logged step must carry to recompute its decision exactly, its recompute (a scalar
reference routine and a vectorized twin over offsets, equal bit for bit), whether it is lossless and when,
and its expected-tokens model. Adding a rule is its module (`chains`, `block`, `trees`) and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from msgspec import Struct

from specaccept_cli.rule import block, chains, trees
from specaccept_cli.rule.batch import IntArray
from specaccept_cli.rule.steps import ChainSteps, StepFields, StepParams, TreeSteps

Kind = Literal["chain", "tree"]
# Whether the rule keeps the target's distribution: "always", "when" (only under `lossless_when`), "never".
Lossless = Literal["always", "when", "never"]
# The expected-tokens model: the chain's closed form at alpha, that as a lower bound (block), or per depth (tree).
Model = Literal["chain", "at-least-chain", "tree"]

ChainScalar = Callable[[StepFields, StepParams], int]
TreeScalar = Callable[[Sequence[int], StepFields, StepParams], int]


class Param(Struct, frozen=True):
    """A per-step parameter of a rule (a row field, or the rule's default)."""

    name: str
    default: float | None  # None: the row must carry it
    meaning: str
    minimum: float | None = None  # the least value a row may give (None: any finite number)


class Engine(Struct, frozen=True):
    """Who runs a rule, and the source file that shows it."""

    name: str
    source: str


class Rule(Struct, frozen=True):
    name: str
    kind: Kind
    fields: tuple[str, ...]  # per position (chains) or per node (trees, beside `parent`), all required
    test: str  # the decision, as the docs print it
    lossless: Lossless
    lossless_when: str  # the condition (or why not), in words
    model: Model
    engines: tuple[Engine, ...]
    aliases: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()  # read when present, never needed to recompute the decision
    ignored: tuple[str, ...] = ()  # present in engines' rows but not used by the rule (greedy-draft's q)
    params: tuple[Param, ...] = ()
    chain_scalar: ChainScalar | None = None
    chain_batch: Callable[[ChainSteps], IntArray] | None = None
    tree_scalar: TreeScalar | None = None
    tree_batch: Callable[[TreeSteps], IntArray] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def accepted(self, steps: ChainSteps | TreeSteps) -> IntArray:
        """Accepted length (chains) or depth (trees) of every step, vectorized."""
        if isinstance(steps, TreeSteps):
            assert self.tree_batch is not None, self.name
            return self.tree_batch(steps)
        assert self.chain_batch is not None, self.name
        return self.chain_batch(steps)


VLLM_SAMPLER = "vllm/v1/sample/rejection_sampler.py"
VLLM_BLOCK = "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py"
SGLANG_KERNEL = "sgl-kernel/csrc/speculative/speculative_sampling.cuh"

RULES: tuple[Rule, ...] = (
    Rule(
        name="standard",
        aliases=("seed", "rejection"),
        kind="chain",
        fields=("p", "q", "r"),
        test="r <= min(1, p / q); the first rejection stops",
        lossless="always",
        lossless_when="with the residual max(p - q, 0) resampled on a rejection (Leviathan et al. 2023)",
        model="chain",
        engines=(
            Engine("vLLM (draft probabilities)", VLLM_SAMPLER),
            Engine("TensorRT-LLM (`get_rejected_indices`)", "tensorrt_llm/_torch/pyexecutor/sampling_utils.py"),
            Engine("Hugging Face transformers (`_speculative_sampling`)", "src/transformers/generation/utils.py"),
        ),
        chain_scalar=chains.standard_scalar,
        chain_batch=chains.standard_batch,
    ),
    Rule(
        name="greedy-draft",
        aliases=("one-hot", "r-le-p"),
        kind="chain",
        fields=("p", "r"),
        ignored=("q",),
        test="r <= p (q taken as 1); the first rejection stops",
        lossless="when",
        lossless_when="a rejection resamples from the target without the rejected token (vLLM's residual "
        "without draft probabilities), whatever the draft: a sampled draft then only accepts less than `standard` "
        "would (vllm#40149); paired with the residual max(p - q, 0) it is a loss",
        model="chain",
        engines=(Engine("vLLM EAGLE / MTP / n-gram (`draft_probs=None`)", VLLM_SAMPLER),),
        chain_scalar=chains.greedy_draft_scalar,
        chain_batch=chains.greedy_draft_batch,
    ),
    Rule(
        name="sample-match",
        aliases=("match",),
        kind="chain",
        fields=("draft_tokens", "target_tokens"),
        optional=("p",),
        test="draft token == the target's drawn token; the first mismatch stops",
        lossless="always",
        lossless_when="every kept token is the target's own draw (keep chance p(x) after its sampler chain)",
        model="chain",
        engines=(
            Engine("llama.cpp server (`common_sampler_sample_and_accept_n`)", "common/sampling.cpp"),
            Engine("TensorRT-LLM (`_process_draft_tokens_greedy`)", "tensorrt_llm/_torch/pyexecutor/sampler.py"),
        ),
        chain_scalar=chains.token_match_scalar,
        chain_batch=chains.token_match_batch,
    ),
    Rule(
        name="block",
        aliases=("block-verification",),
        kind="chain",
        fields=("p", "q", "r", "residual"),
        test="the largest j + 1 with r[j] <= h_j (h from the running ratio and the residual mass); 0 if none",
        lossless="always",
        lossless_when="with the block residual max(w P - Q, 0) resampled (Sun et al. 2025, Theorem 1)",
        model="at-least-chain",
        engines=(Engine("vLLM `rejection_sample_method: block` (PR #46781)", VLLM_BLOCK),),
        chain_scalar=block.block_scalar,
        chain_batch=block.block_batch,
    ),
    Rule(
        name="typical",
        aliases=("typical-acceptance", "medusa-typical"),
        kind="chain",
        fields=("p", "entropy"),
        params=(
            Param("epsilon", None, "the hard threshold (Medusa `posterior_threshold`)", minimum=0.0),
            Param("delta", None, "the entropy-scaled threshold's factor (Medusa `posterior_alpha`)", minimum=0.0),
        ),
        test="p > min(epsilon, delta * exp(-entropy)), strict; the first rejection stops",
        lossless="never",
        lossless_when="deterministic given p, lossy by design",
        model="chain",
        engines=(Engine("Medusa typical acceptance (`evaluate_posterior`)", "medusa/model/utils.py"),),
        chain_scalar=chains.typical_scalar,
        chain_batch=chains.typical_batch,
    ),
    Rule(
        name="argmax",
        aliases=("greedy",),
        kind="chain",
        fields=("draft_tokens", "target_tokens"),
        test="draft token == the target's argmax; the first mismatch stops",
        lossless="when",
        lossless_when="greedy decoding (temperature 0): the output is plain greedy decoding's",
        model="chain",
        engines=(Engine("every engine at temperature 0 (vLLM `rejection_greedy_sample_kernel`)", VLLM_SAMPLER),),
        chain_scalar=chains.token_match_scalar,
        chain_batch=chains.token_match_batch,
    ),
    Rule(
        name="tree-residual",
        aliases=("specinfer",),
        kind="tree",
        fields=("p", "q", "r"),
        test="siblings in tried order, each r <= min(1, p / q) with p the residual left by the rejected ones",
        lossless="always",
        lossless_when="with the running residual resampled after the last rejected sibling (SpecInfer)",
        model="tree",
        engines=(
            Engine("SpecInfer / the EAGLE repository (`evaluate_posterior`)", "eagle/model/utils.py"),
            Engine("llama.cpp `examples/speculative`", "examples/speculative/speculative.cpp"),
        ),
        tree_scalar=trees.residual_scalar,
        tree_batch=trees.residual_batch,
    ),
    Rule(
        name="tree-target-cdf",
        aliases=("sglang-tree",),
        kind="tree",
        fields=("p", "coin"),
        params=(
            Param("threshold_single", 1.0, "a child with p >= this is kept outright"),
            Param("threshold_acc", 1.0, "the siblings' summed p is divided by this (floored at 1e-9)"),
        ),
        test="child k of the tried siblings kept iff coin <= (p_1 + ... + p_k) / threshold_acc "
        "or p_k >= threshold_single",
        lossless="when",
        lossless_when="both thresholds at 1 (then P(keep child k | 1..k-1 rejected) = p_k / (1 - p_1 - ... - p_(k-1)))",
        model="tree",
        engines=(Engine("SGLang EAGLE trees (`TreeSpeculativeSamplingTargetOnly`)", SGLANG_KERNEL),),
        tree_scalar=trees.target_cdf_scalar,
        tree_batch=trees.target_cdf_batch,
    ),
    Rule(
        name="tree-argmax",
        aliases=("tree-greedy",),
        kind="tree",
        fields=("token", "target_token"),
        test="the first child equal to the target's argmax",
        lossless="when",
        lossless_when="greedy decoding (temperature 0)",
        model="tree",
        engines=(Engine("SGLang greedy batches (`VerifyTreeGreedy`)", "sgl-kernel/csrc/speculative/eagle_utils.cu"),),
        tree_scalar=trees.token_match_scalar,
        tree_batch=trees.token_match_batch,
    ),
    Rule(
        name="tree-match",
        kind="tree",
        fields=("token", "target_token"),
        test="the longest root-to-leaf prefix whose tokens equal the target's sampled tokens",
        lossless="always",
        lossless_when="every kept token is the target's own draw",
        model="tree",
        engines=(
            Engine("TensorRT-LLM trees (`_process_draft_tokens_tree`)", "tensorrt_llm/_torch/pyexecutor/sampler.py"),
        ),
        tree_scalar=trees.longest_match_scalar,
        tree_batch=trees.longest_match_batch,
    ),
)

DEFAULT_RULE = "standard"

BY_NAME: dict[str, Rule] = {name: rule for rule in RULES for name in rule.names}


def rule_named(name: str) -> Rule:
    """The rule a name or alias stands for (case and `_` vs `-` do not matter); KeyError naming the known ones."""
    found = BY_NAME.get(name.strip().lower().replace("_", "-"))
    if found is None:
        known = ", ".join(rule.name for rule in RULES)
        raise KeyError(f"unknown rule {name!r} (known: {known})")
    return found
