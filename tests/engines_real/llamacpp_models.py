"""Two tiny GGUF models for a real llama.cpp server, written with the gguf-py that ships with it.

A target of 4 llama layers and a draft made of its first 2 (the same embeddings, output and vocabulary),
random weights from fixed seeds. Each layer's output projections are scaled down (x0.1), so the
embeddings dominate the residual stream and the draft agrees with the target on most of its tokens (0.73):
acceptance lands between 0.3 and 0.9, enough of both accepted and rejected drafts to audit.
No weights are downloaded; the files take a second to write and ~4 MB each.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

VOCAB = 3000
HIDDEN = 128
LAYERS = 4
DRAFT_LAYERS = 2
HEADS = 4
FFN = 256
CONTEXT = 1024
SCALE = 0.1  # the layers' output projections: 153 of 209 draft tokens accepted in the suite's draft runs
LETTERS = "etaoinshrdlucmfwypvbgkjqxz"


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then word pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte (gguf TokenType)
    pieces: list[str] = []
    for a in LETTERS:
        pieces.append("\u2581" + a)
        pieces.append(a)
    for a in LETTERS:
        for b in LETTERS:
            pieces.append("\u2581" + a + b)
            pieces.append(a + b)
    for a in LETTERS[:12]:
        for b in LETTERS[:12]:
            for c in LETTERS[:12]:
                pieces.append(a + b + c)
    pieces = list(dict.fromkeys(pieces))[: VOCAB - len(tokens)]
    assert len(tokens) + len(pieces) == VOCAB
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) / 100 for i in range(len(pieces))]
    return tokens, scores, types


def weights(seed: int = 20261202) -> dict[str, np.ndarray[Any, Any]]:
    """The target's tensors (numpy shape (rows, columns) = gguf (ne1, ne0)), from one seeded generator."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 1.0) -> np.ndarray[Any, Any]:
        return (rng.standard_normal(shape) * scale / np.sqrt(shape[-1])).astype(np.float32)

    out = {
        "token_embd.weight": normal(VOCAB, HIDDEN, scale=np.sqrt(HIDDEN)),
        "output_norm.weight": np.ones(HIDDEN, dtype=np.float32),
        "output.weight": normal(VOCAB, HIDDEN),
    }
    for i in range(LAYERS):
        out |= {
            f"blk.{i}.attn_norm.weight": np.ones(HIDDEN, dtype=np.float32),
            f"blk.{i}.attn_q.weight": normal(HIDDEN, HIDDEN),
            f"blk.{i}.attn_k.weight": normal(HIDDEN, HIDDEN),
            f"blk.{i}.attn_v.weight": normal(HIDDEN, HIDDEN),
            f"blk.{i}.attn_output.weight": normal(HIDDEN, HIDDEN, scale=SCALE),
            f"blk.{i}.ffn_norm.weight": np.ones(HIDDEN, dtype=np.float32),
            f"blk.{i}.ffn_gate.weight": normal(FFN, HIDDEN),
            f"blk.{i}.ffn_up.weight": normal(FFN, HIDDEN),
            f"blk.{i}.ffn_down.weight": normal(HIDDEN, FFN, scale=SCALE),
        }
    return out


def write_model(path: Path, gguf_py: Path, layers: int, tensors: dict[str, np.ndarray[Any, Any]]) -> Path:
    """A llama-architecture GGUF file of the first `layers` layers of `tensors`."""
    if str(gguf_py) not in sys.path:
        sys.path.insert(0, str(gguf_py))
    import gguf  # the gguf-py of the llama.cpp build, found at run time

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"specaccept-tiny-{layers}")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(0)  # all F32
    tokens, scores, types = vocabulary()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    for name, array in tensors.items():
        if name.startswith("blk.") and int(name.split(".")[1]) >= layers:
            continue
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_models(directory: Path, gguf_py: Path) -> tuple[Path, Path]:
    """(target, draft): the draft is the target's first DRAFT_LAYERS layers."""
    tensors = weights()
    target = write_model(directory / "target.gguf", gguf_py, LAYERS, tensors)
    draft = write_model(directory / "draft.gguf", gguf_py, DRAFT_LAYERS, tensors)
    return target, draft
