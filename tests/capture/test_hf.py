"""Capture from real transformers generation: tiny Llama models made here, no download, audited by the real CLI."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from specaccept_cli.capture import Recorder
from tests.helpers import run_process

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if os.environ.get("CI") == "true":  # CI installs the extra (make test): a missing one is a failure, not a skip
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

from specaccept_cli.capture.hf import SUPPORTED, CaptureError, capture_assisted_generation, check_version

PROMPTS = 4
NEW_TOKENS = 24


@pytest.fixture(scope="module")
def models() -> tuple[Any, Any]:
    """A target and a draft that is a noisy copy of it: vocabulary 256, 2 layers, peaked enough to accept."""
    torch.set_num_threads(1)  # two cores shared: more threads only slow tiny models down
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    target = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        target.lm_head.weight.mul_(12)
    draft = transformers.LlamaForCausalLM(config).eval()
    draft.load_state_dict(target.state_dict())
    with torch.no_grad():
        for weight in draft.parameters():
            weight.add_(torch.randn_like(weight) * 0.01)
    return target, draft


@contextmanager
def drafting(draft: Any, **settings: Any) -> Iterator[None]:
    """The draft's generation settings changed for a while (transformers reads them from the draft's config)."""
    config = draft.generation_config
    before = {name: getattr(config, name) for name in settings}
    for name, value in settings.items():
        setattr(config, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(config, name, value)


def prompts(n: int = PROMPTS) -> Iterator[Any]:
    generator = torch.Generator().manual_seed(1)
    for _ in range(n):
        yield torch.randint(3, 256, (1, 6), generator=generator)


def generate(target: Any, draft: Any, prompt: Any, seed: int, **options: Any) -> Any:
    torch.manual_seed(seed)
    settings = {"do_sample": True, "max_new_tokens": NEW_TOKENS, "assistant_model": draft, **options}
    return target.generate(prompt, **settings)


def captured_rows(directory: Path) -> list[dict[str, Any]]:
    return [row for part in sorted(directory.glob("part-*.parquet")) for row in pq.read_table(part).to_pylist()]


def audit(directory: Path, *options: str) -> dict[str, Any]:
    done = run_process("audit", str(directory), *options, "-o", "json")
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def ks_p_value(draws: np.ndarray) -> float:
    """Kolmogorov-Smirnov against U[0, 1): the asymptotic p-value of the largest gap."""
    values = np.sort(draws)
    n = values.shape[0]
    ranks = np.arange(1, n + 1)
    gap = max(float(np.max(ranks / n - values)), float(np.max(values - (ranks - 1) / n)))
    t = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * gap
    return min(1.0, max(0.0, 2 * sum((-1) ** (j - 1) * math.exp(-2 * j * j * t * t) for j in range(1, 101))))


@pytest.fixture(scope="module")
def capture(models: tuple[Any, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any], list[Any]]:
    """The same prompts and seeds generated without and with the capture (one request each)."""
    target, draft = models
    directory = tmp_path_factory.mktemp("capture")
    with drafting(draft, assistant_confidence_threshold=0.0, num_assistant_tokens=6):  # long drafts: many r
        plain = [generate(target, draft, prompt, seed) for seed, prompt in enumerate(prompts())]
        recorded = []
        with Recorder(directory, handle_sigterm=False) as recorder:
            for seed, prompt in enumerate(prompts()):
                with capture_assisted_generation(recorder, request_id=f"prompt-{seed}", model="tiny"):
                    recorded.append(generate(target, draft, prompt, seed))
    return directory, plain, recorded


def test_a_capture_of_real_generation_audits_with_zero_mismatches(capture: tuple[Path, list[Any], list[Any]]) -> None:
    directory, _, _ = capture
    rows = captured_rows(directory)
    assert len(rows) > 15
    numbers = audit(directory, "--reported-field", "accepted", "--cluster-field", "request_id")
    assert numbers["runs"] == len(rows) == numbers["reported_runs"]
    assert numbers["mismatches"] == 0
    assert numbers["clusters"] == PROMPTS
    assert 0.2 < numbers["alpha"] < 1.0


def test_the_generated_tokens_do_not_change_under_capture(capture: tuple[Path, list[Any], list[Any]]) -> None:
    _, plain, recorded = capture
    assert all(torch.equal(a, b) for a, b in zip(plain, recorded, strict=True))


def test_r_is_the_librarys_uniform_draw(capture: tuple[Path, list[Any], list[Any]]) -> None:
    rows = captured_rows(capture[0])
    draws = np.array([value for row in rows for value in row["r"]])
    assert draws.shape[0] > 120 and ks_p_value(draws) > 0.001


def test_rows_carry_the_request_the_step_and_the_committed_count(
    capture: tuple[Path, list[Any], list[Any]],
) -> None:
    directory, _, recorded = capture
    rows = captured_rows(directory)
    assert {row["request_id"] for row in rows} == {f"prompt-{seed}" for seed in range(PROMPTS)}
    assert {row["rule"] for row in rows} == {"standard"}  # the library accepts on r <= p/q: the table's rule
    assert {row["model"] for row in rows} == {"tiny"} and {row["generator"] for row in rows} == {
        "AssistedCandidateGenerator"
    }
    for seed, output in enumerate(recorded):
        own = [row for row in rows if row["request_id"] == f"prompt-{seed}"]
        steps = [row["step"] for row in own]
        assert steps == sorted(steps) and len(set(steps)) == len(steps)
        for row in own:
            # The committed count never exceeds the rule's, and the drafted tokens it kept are in the output.
            assert 0 <= row["committed"] <= row["accepted"] <= len(row["p"]) == len(row["draft_tokens"])
            start = row["position"]
            kept = output[0, start : start + row["committed"]].tolist()
            assert kept == row["draft_tokens"][: row["committed"]]
        # Every step accounts for its tokens, a + 1 each; only the last token before max_length is
        # generated without a draft (no room left to draft), and that step has no row.
        generated = output.shape[1] - own[0]["position"]
        assert generated - sum(row["committed"] + 1 for row in own) in (0, 1)


def test_k_varies_per_step_under_the_confidence_threshold_and_the_heuristic_schedule(
    models: tuple[Any, Any], tmp_path: Path
) -> None:
    target, draft = models
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        for seed, prompt in enumerate(prompts(2)):
            generate(target, draft, prompt, seed)
        with drafting(draft, num_assistant_tokens_schedule="heuristic", assistant_confidence_threshold=0.0):
            generate(target, draft, next(prompts(1)), 99)
    rows = captured_rows(tmp_path / "c")
    by_request: dict[str, set[int]] = {}
    for row in rows:
        by_request.setdefault(row["request_id"], set()).add(len(row["p"]))
    *constant, heuristic = by_request.values()
    assert len(set().union(*constant)) > 1 and len(heuristic) > 2, by_request
    assert audit(tmp_path / "c", "--reported-field", "accepted")["mismatches"] == 0


def test_q_is_the_drafts_distribution_as_sampled_at_temperature_squared(
    models: tuple[Any, Any], tmp_path: Path
) -> None:
    """With T != 1 transformers warps the draft's scores twice: q is softmax(logits / T²), not softmax(logits / T)."""
    target, draft = models
    temperature = 0.7
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        output = generate(target, draft, next(prompts(1)), 3, temperature=temperature, top_k=0)
    rows = captured_rows(tmp_path / "c")
    assert audit(tmp_path / "c", "--reported-field", "accepted")["mismatches"] == 0
    checked = 0
    for row in rows[:6]:
        context = output[0, : row["position"]].tolist()
        for position, token in enumerate(row["draft_tokens"]):
            with torch.no_grad():
                logits = draft(torch.tensor([context + row["draft_tokens"][:position]])).logits[0, -1]
            twice = torch.softmax(logits / temperature**2, dim=-1)[token].item()
            once = torch.softmax(logits / temperature, dim=-1)[token].item()
            assert row["q"][position] == pytest.approx(twice, rel=1e-4)
            assert abs(once - twice) > 1e-3 * twice  # the difference is real
            checked += 1
    assert checked >= 6


def test_p_can_be_zero_under_top_k_and_the_audit_still_agrees(models: tuple[Any, Any], tmp_path: Path) -> None:
    target, draft = models
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        for seed, prompt in enumerate(prompts(2)):
            generate(target, draft, prompt, seed, top_k=3)
    rows = captured_rows(tmp_path / "c")
    zeros = [row for row in rows if 0.0 in row["p"]]
    assert zeros and all(min(row["q"]) > 0 for row in rows)
    assert audit(tmp_path / "c", "--reported-field", "accepted")["mismatches"] == 0


def test_prompt_lookup_never_reaches_the_rule_so_there_are_no_rows(models: tuple[Any, Any], tmp_path: Path) -> None:
    target, _ = models
    repeated = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7]])
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        torch.manual_seed(0)
        target.generate(repeated, do_sample=True, max_new_tokens=20, prompt_lookup_num_tokens=3)
    assert recorder.stats.recorded == 0


def test_a_library_that_draws_r_another_way_stops_with_a_clear_error(
    models: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, draft = models
    utils = transformers.generation.utils
    original = utils._speculative_sampling

    def drawing_twice(
        candidate_input_ids: Any,
        candidate_logits: Any,
        candidate_length: int,
        new_logits: Any,
        assistant_ensemble_weight: float | None = None,
    ) -> Any:
        torch.rand_like(torch.zeros(3))  # a library that draws something else with the same function
        return original(candidate_input_ids, candidate_logits, candidate_length, new_logits, assistant_ensemble_weight)

    monkeypatch.setattr(utils, "_speculative_sampling", drawing_twice)
    error = pytest.raises(CaptureError, match=r"drew r with torch.rand_like 2 time")
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, error, capture_assisted_generation(recorder):
        generate(target, draft, next(prompts(1)), 0)
    assert recorder.stats.recorded == 0
    assert utils._speculative_sampling is drawing_twice  # put back as it was


def test_a_label_named_like_a_field_of_the_row_is_refused_before_generation(tmp_path: Path) -> None:
    refused = pytest.raises(ValueError, match="'committed' is a field")
    with (
        Recorder(tmp_path / "c", handle_sigterm=False) as recorder,
        refused,
        capture_assisted_generation(recorder, committed=1),
    ):
        pass


def test_versions_outside_the_tested_range_are_refused_by_name() -> None:
    low, high = SUPPORTED
    check_version(f"{low[0]}.{low[1]}.0")
    check_version(f"{high[0]}.{high[1]}.3")
    check_version(transformers.__version__)
    for version in ("4.57.6", "5.17.0", f"{high[0]}.{high[1] + 1}.0", "nightly"):
        with pytest.raises(CaptureError, match=rf"transformers {re.escape(version)} is not supported"):
            check_version(version)


def test_an_ensemble_weight_is_recorded_as_the_verification_distribution(
    models: tuple[Any, Any], tmp_path: Path
) -> None:
    """With assistant_ensemble_weight w the library accepts on r <= 1 - w + w·p/q: the row's p is w·p + (1 - w)·q."""
    target, draft = models
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        generate(target, draft, next(prompts(1)), 4, assistant_ensemble_weight=0.5)
    rows = captured_rows(tmp_path / "c")
    assert rows and {row["ensemble_weight"] for row in rows} == {0.5}
    for row in rows:
        for mixed, target_p, q in zip(row["p"], row["target_p"], row["q"], strict=True):
            assert mixed == pytest.approx(0.5 * target_p + 0.5 * q, rel=1e-6)
    assert audit(tmp_path / "c", "--reported-field", "accepted")["mismatches"] == 0


def word_tokenizer(words: list[str]) -> Any:
    """A whitespace word tokenizer made here (no download): its vocabulary is the list, in order."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    engine = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(words)}, unk_token="<unk>"))
    engine.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    engine.decoder = decoders.WordPiece(prefix="##")
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=engine, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )


def test_universal_assisted_generation_rows_are_labelled_and_hold_what_the_library_compared(
    models: tuple[Any, Any], tmp_path: Path
) -> None:
    """A draft with another tokenizer: transformers maps the draft's logits into the target's vocabulary.

    The rows are labelled by the candidate generator; their q is the mapped one the library tested
    (which can be 0 for the drafted token: the library then accepts on p/0 = inf and rejects 0/0),
    and the library's count is the prefix rule applied to exactly these numbers.
    """
    target, _ = models
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    words = [f"w{i}" for i in range(252)]
    order = torch.randperm(252, generator=torch.Generator().manual_seed(0)).tolist()
    target_tokenizer = word_tokenizer(special + words)
    draft_tokenizer = word_tokenizer(special + [words[i] for i in order[:186]] + [f"x{i}" for i in range(10)])
    torch.manual_seed(2)
    draft_config = transformers.LlamaConfig(**{**target.config.to_dict(), "vocab_size": 200})
    draft = transformers.LlamaForCausalLM(draft_config).eval()
    prompt = target_tokenizer("w1 w2 w3 w4 w5", return_tensors="pt").input_ids
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        generate(target, draft, prompt, 0, tokenizer=target_tokenizer, assistant_tokenizer=draft_tokenizer)
    rows = captured_rows(tmp_path / "c")
    assert rows and {row["generator"] for row in rows} == {"UniversalSpeculativeDecodingGenerator"}
    with np.errstate(divide="ignore", invalid="ignore"):
        for row in rows:
            ratio = np.float32(row["p"]) / np.float32(row["q"])
            passed = np.float32(row["r"]) <= ratio
            assert row["accepted"] == int(np.cumprod(passed).sum())


def per_run_accepted(directory: Path, *options: str) -> list[int]:
    done = run_process("audit", str(directory), *options, "-o", "jsonl")
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line)["accepted"] for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def greedy_capture(
    models: tuple[Any, Any], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Any], list[Any]]:
    """Greedy assisted generation (do_sample=False) of the same prompts, without and with the capture."""
    target, draft = models
    directory = tmp_path_factory.mktemp("greedy")
    with drafting(draft, assistant_confidence_threshold=0.0, num_assistant_tokens=6):
        plain = [generate(target, draft, prompt, 0, do_sample=False) for prompt in prompts()]
        recorded = []
        with Recorder(directory, handle_sigterm=False) as recorder:
            for seed, prompt in enumerate(prompts()):
                with capture_assisted_generation(recorder, request_id=f"greedy-{seed}"):
                    recorded.append(generate(target, draft, prompt, 0, do_sample=False))
    return directory, plain, recorded


def test_greedy_generation_is_captured_as_argmax_rows_that_audit_to_the_librarys_counts(
    greedy_capture: tuple[Path, list[Any], list[Any]],
) -> None:
    directory, plain, recorded = greedy_capture
    assert all(torch.equal(a, b) for a, b in zip(plain, recorded, strict=True))  # the capture changes nothing
    rows = captured_rows(directory)
    assert len(rows) > 10 and {row["rule"] for row in rows} == {"argmax"}  # greedy verifies by argmax, not r <= p/q
    assert all(row.get("p") is None and row.get("r") is None for row in rows)
    numbers = audit(directory, "--reported-field", "accepted", "--cluster-field", "request_id")
    assert numbers["runs"] == len(rows) == numbers["reported_runs"] and numbers["mismatches"] == 0
    assert numbers["rules"] == {"argmax": len(rows)}
    # Re-read by the audit, every row's accepted length is the loop's own count of leading matches.
    assert per_run_accepted(directory) == [row["accepted"] for row in rows]
    assert any(0 < row["accepted"] < len(row["draft_tokens"]) for row in rows)  # rejections as well as full drafts


def test_greedy_rows_hold_the_targets_argmax_at_every_drafted_position(
    greedy_capture: tuple[Path, list[Any], list[Any]], models: tuple[Any, Any]
) -> None:
    directory, _, recorded = greedy_capture
    target, _ = models
    rows = captured_rows(directory)
    for seed, output in enumerate(recorded):
        for row in (row for row in rows if row["request_id"] == f"greedy-{seed}"):
            k, start = len(row["draft_tokens"]), row["position"]
            assert len(row["target_tokens"]) == k and 0 <= row["committed"] <= row["accepted"] <= k
            # What the target saw in the verify pass: the output so far and the draft; its argmax at each drafted
            # position, found again by a forward pass of its own.
            seen = torch.cat([output[:, :start], torch.tensor([row["draft_tokens"]])], dim=1)
            with torch.no_grad():
                argmax = target(seen).logits[0, start - 1 : start + k - 1].argmax(dim=-1).tolist()
            assert row["target_tokens"] == argmax
            kept = output[0, start : start + row["committed"]].tolist()
            assert kept == row["draft_tokens"][: row["committed"]] == row["target_tokens"][: row["committed"]]


def test_greedy_prompt_lookup_is_captured_as_argmax_rows_too(models: tuple[Any, Any], tmp_path: Path) -> None:
    """Prompt lookup drafts without a model (no draft logits); greedy, the loop still keeps drafts equal to the
    target's argmax, so its steps are argmax rows that audit exactly."""
    target, _ = models
    repeated = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7]])
    plain = target.generate(repeated, do_sample=False, max_new_tokens=20, prompt_lookup_num_tokens=3)
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder, capture_assisted_generation(recorder):
        recorded = target.generate(repeated, do_sample=False, max_new_tokens=20, prompt_lookup_num_tokens=3)
    assert torch.equal(plain, recorded)
    rows = captured_rows(tmp_path / "c")
    assert rows and {row["rule"] for row in rows} == {"argmax"}
    assert {row["generator"] for row in rows} == {"PromptLookupCandidateGenerator"}
    assert audit(tmp_path / "c", "--reported-field", "accepted")["mismatches"] == 0
