"""A small but real speculative decoder, to make logs with known truth.

Two Markov language models over a small vocabulary (the target, and a draft that
mixes the target with noise: `quality` 1 is a perfect draft), a sampler that follows
the rule (draft k tokens, accept-prefix on r <= min(1, p/q), residual resampling at
the first rejection, a bonus token when all are kept), and faulty variants of it
that decide, and report, with the bugs real servers have had.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

FAULTS = ("strict-inequality", "no-prefix-break", "greedy-draft", "bonus-counted")


@dataclass(frozen=True)
class MarkovLM:
    """next-token distribution = transitions[previous token]."""

    transitions: np.ndarray

    @property
    def vocab(self) -> int:
        return int(self.transitions.shape[0])


def model_pair(vocab: int, quality: float, seed: int, top_k: int | None = None) -> tuple[MarkovLM, MarkovLM]:
    """A peaked target and a draft that agrees with it to degree `quality` in [0, 1].

    `top_k` truncates the target to its k likeliest tokens (as top-k sampling does), so
    the draft sometimes proposes tokens the target gives probability 0.
    """
    rng = np.random.default_rng(seed)
    target = rng.dirichlet(np.full(vocab, 0.3), size=vocab)
    if top_k is not None:
        cutoff = -np.sort(-target, axis=1)[:, top_k - 1 : top_k]
        target = np.where(target >= cutoff, target, 0.0)
        target /= target.sum(axis=1, keepdims=True)
    noise = rng.dirichlet(np.full(vocab, 1.0), size=vocab)
    draft = quality * target + (1 - quality) * noise
    return MarkovLM(target), MarkovLM(draft / draft.sum(axis=1, keepdims=True))


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    residual = np.maximum(p - q, 0.0)
    total = residual.sum()
    return residual / total if total > 0 else p


def speculative_runs(
    target: MarkovLM,
    draft: MarkovLM,
    runs: int,
    k: int,
    seed: int,
    fault: str | None = None,
    r_power: float = 1.0,
    r_levels: int | None = None,
) -> Iterator[dict[str, object]]:
    """Rows {"p", "q", "r", "reported"} of a decoding session.

    `fault` makes the server decide and report with a known bug; `r_power` != 1 makes its
    uniform draws biased (r = u ** r_power), a sampler bug the logs alone reveal;
    `r_levels` draws r from a coarse grid (a low-precision RNG), where ties r == p/q happen.
    """
    rng = np.random.default_rng(seed)
    vocab = target.vocab
    previous = 0
    for _ in range(runs):
        tokens, p_list, q_list, p_dists, q_dists = [], [], [], [], []
        context = previous
        for _ in range(k):
            q_dist = draft.transitions[context]
            token = int(rng.choice(vocab, p=q_dist))
            p_dist = target.transitions[context]
            tokens.append(token)
            p_list.append(float(p_dist[token]))
            q_list.append(float(q_dist[token]))
            p_dists.append(p_dist)
            q_dists.append(q_dist)
            context = token
        draws = rng.random(k)
        if r_levels is not None:
            draws = np.floor(draws * r_levels) / r_levels
        r = [float(u) ** r_power for u in draws]
        thresholds = [min(1.0, p / q) for p, q in zip(p_list, q_list)]
        passes = [r_i <= t for r_i, t in zip(r, thresholds)]
        if fault == "strict-inequality":
            passes = [r_i < t for r_i, t in zip(r, thresholds)]
        elif fault == "greedy-draft":  # r <= p (q taken as 1)
            passes = [r_i <= p for r_i, p in zip(r, p_list)]
        accepted = 0
        while accepted < k and passes[accepted]:
            accepted += 1
        reported = accepted
        if fault == "no-prefix-break":
            reported = sum(passes)
        elif fault == "bonus-counted":
            reported = accepted + 1
        if accepted < k:  # resample the rejected position from the residual max(0, p - q)
            previous = int(rng.choice(vocab, p=_residual(p_dists[accepted], q_dists[accepted])))
        else:  # every draft kept: the bonus token
            previous = int(rng.choice(vocab, p=target.transitions[tokens[-1]]))
        yield {"p": p_list, "q": q_list, "r": r, "reported": reported}


def greedy_runs(
    target: MarkovLM, draft: MarkovLM, runs: int, k: int, seed: int = 0, new_request: float = 0.3
) -> Iterator[dict[str, object]]:
    """Temperature-0 decoding: rows {"draft_tokens", "target_tokens", "accepted"}.

    The draft proposes its argmax chain; the target's argmax at each drafted position
    (and at the bonus position) is logged; the accepted length is the common prefix,
    and the pass emits the target's own argmax at the first mismatch (or the bonus).
    With probability `new_request` a pass starts a new request from a random token.
    """
    rng = np.random.default_rng(seed)
    previous = 0
    for _ in range(runs):
        if rng.random() < new_request:
            previous = int(rng.integers(target.vocab))
        drafted, context = [], previous
        for _ in range(k):
            context = int(np.argmax(draft.transitions[context]))
            drafted.append(context)
        target_tokens = [int(np.argmax(target.transitions[c])) for c in [previous, *drafted]]
        accepted = 0
        while accepted < k and drafted[accepted] == target_tokens[accepted]:
            accepted += 1
        previous = target_tokens[accepted]
        yield {"draft_tokens": drafted, "target_tokens": target_tokens, "accepted": accepted}


def main() -> None:
    """Write the shipped example of a server log with reported counts (and a counting bug)."""
    import gzip
    import sys

    import orjson

    target, draft = model_pair(vocab=40, quality=0.5, seed=21)
    runs = speculative_runs(target, draft, runs=2000, k=5, seed=21, fault="no-prefix-break")
    with open(sys.argv[1], "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for index, row in enumerate(runs):
            out.write(orjson.dumps({"request_id": f"req-{index:05d}", **row}) + b"\n")


if __name__ == "__main__":
    main()
