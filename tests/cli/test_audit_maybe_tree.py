"""SGLang counts that read like an EAGLE tree's, without `--tree`: the first screen says so with its evidence and
names `--tree`, since the counts cannot prove a tree. The payloads are written as SGLang writes them
(python/sglang/srt/managers/tokenizer_manager.py; the histogram grown on demand to the deepest accepted length by
`Req.update_spec_correct_drafts_histogram` in managers/schedule_batch.py, and left out when empty)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tests.helpers import invoke


def sglang_request(request_id: str, rates: list[float], width: int, passes: int, rng: np.random.Generator) -> bytes:
    """A /generate response of SGLang >= 0.5.12: each pass keeps depth d with `rates[d - 1]` (a tree of
    len(rates) levels, or a chain of `width` with one rate per position); proposed = passes x width."""
    depths = np.zeros(passes, dtype=np.int64)
    alive = np.ones(passes, dtype=bool)
    for rate in rates:
        alive &= rng.random(passes) < rate
        depths += alive
    histogram = np.bincount(depths).tolist()  # grown on demand: as long as the deepest accepted length + 1
    accepted = int(depths.sum())
    meta: dict[str, Any] = {
        "id": request_id,
        "completion_tokens": 1 + accepted + passes,
        "spec_verify_ct": passes,
        "spec_accept_rate": accepted / (passes * width),
        "spec_accept_length": (1 + accepted + passes) / passes,
        "spec_num_correct_drafts": accepted,
        "spec_num_proposed_drafts": passes * width,
        "spec_accepted_drafts": accepted,  # the backward-compatible aliases SGLang writes beside them
        "spec_proposed_drafts": passes * width,
    }
    if histogram:
        meta["spec_correct_drafts_histogram"] = histogram
    return orjson.dumps({"text": "...", "meta_info": meta}) + b"\n"


def write(path: Path, rates: list[float], width: int, requests: int = 20, passes: int = 50, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    path.write_bytes(b"".join(sglang_request(f"r{i}", rates, width, passes, rng) for i in range(requests)))
    return path


def tree_entries(*args: str) -> list[dict[str, Any]]:
    result = invoke("audit", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    return [entry for entry in orjson.loads(result.stdout)["verdict"] if entry["check"] == "tree"]


def test_a_tree_served_without_its_shape_is_named_with_its_evidence(tmp_path: Path) -> None:
    # topk 4, 3 steps, 8 draft tokens: 7 nodes per pass, never deeper than 3.
    path = write(tmp_path / "tree.jsonl", [0.9, 0.8, 0.7], width=7)
    (entry,) = tree_entries(str(path))
    assert entry["status"] == "warn"
    assert "SGLang proposed 7 drafts per verify pass, but no pass of 1,000 kept more than 3" in entry["text"]
    assert "cannot prove" in entry["text"]
    screen = " ".join(invoke("audit", str(path)).stdout.split())
    assert "the server's tree shape gives exact per-depth rates (--tree)" in screen
    assert tree_entries(str(path), "--tree", "4,3,8") == []  # named: read as that tree, nothing to guess


def test_a_chain_that_accepted_all_its_drafts_is_proven_and_nothing_is_said(tmp_path: Path) -> None:
    path = write(tmp_path / "chain.jsonl", [0.8] * 3, width=3)
    assert tree_entries(str(path)) == []


def test_a_chain_whose_acceptance_fades_is_no_tree(tmp_path: Path) -> None:
    # k = 7 at a low rate: no pass accepted all 7, but the last depths reached are reached rarely, no sharp stop.
    path = write(tmp_path / "fading.jsonl", [0.35] * 7, width=7)
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    deepest = max(int(depth) for depth in data["accepted_histogram"])
    assert deepest < 7  # what makes this case: a chain that never kept every draft
    assert [entry for entry in data["verdict"] if entry["check"] == "tree"] == []


def test_counts_of_several_widths_prove_no_width_and_say_nothing(tmp_path: Path) -> None:
    first = write(tmp_path / "a.jsonl", [0.9, 0.8, 0.7], width=7, requests=3)
    second = write(tmp_path / "b.jsonl", [0.9, 0.8, 0.7], width=5, requests=4, seed=2)
    assert tree_entries(str(first), str(second)) == []  # 3 x 50 x 7 + 4 x 50 x 5 over 350 passes: not whole
