"""What every engine reader in `read/engines/` yields: `EngineInterval` (the figures an engine printed for one
interval and what they recover), `LineTally`, and the one-line description of an interval.

It stands in `rule/`, beside `RunBatch`, as the record types do: readers make them, `summary/` turns them into
summary parts, and neither imports the other.

The description is written here, next to the type, rather than in `views/`: it is stored in the
summary's state (`EngineTally.examples`, saved in `-o json` and merged across summaries), and the
core that builds the state never imports a view.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct

CountMatrix = npt.NDArray[np.int64]

# The largest token or draft count an engine's figure may hold: 2**53, past which a Prometheus sample
# (a double) is no longer an exact count and far beyond any server's lifetime. Larger figures (10^29 in a
# log line, 1.7e308 in a scrape) are bad lines, not counts that would overflow the int64 state.
MAX_COUNT = 2**53


def count_too_large(figure: str | int | float) -> str | None:
    """Why a printed count is beyond MAX_COUNT (None when it is not), for the bad line's message.

    A figure of digits is measured by its length first: a run of a million digits is never made an int.
    """
    if isinstance(figure, str):
        digits = figure.strip().lstrip("0")
        if digits.isdigit() and len(digits) <= len(str(MAX_COUNT)) and int(digits) <= MAX_COUNT:
            return None
        if not digits.isdigit():  # a sample such as 1.7e308
            try:
                if not float(figure) > MAX_COUNT:
                    return None
            except ValueError:
                return None
        shown = figure if len(figure) <= 32 else f"{figure[:12]}... ({len(figure):,} digits)"
    else:
        if not figure > MAX_COUNT:
            return None
        shown = f"{figure:.6g}" if isinstance(figure, float) else str(figure)
        shown = shown if len(shown) <= 32 else f"{shown[:12]}... ({len(shown):,} digits)"
    return f"{shown} is beyond 2**53, more than any server counts"


# The note of an interval made of one scrape alone: its counters count since the server started (or last reset).
ONE_SCRAPE = "one scrape: counts since the counters started"


class EngineInterval(Struct, frozen=True):
    """One interval of engine counters: what the engine printed, and what it recovers.

    `counts[k, a]` (shape [k+1, k+1], only row k non-zero) is the joint histogram the summary
    state holds; it is None unless every run is known to have drafted k tokens and every
    per-position count is pinned down. `accepted_hist[a]` is the accepted-length histogram when
    the per-position counts are exact but draft lengths varied. Bounds are closed intervals.
    """

    engine: str  # "vllm", "sglang", "llama.cpp", "lmdeploy", "tensorrt-llm"
    fmt: str  # the exact variant, e.g. "vllm-log-v1-full", "vllm-prometheus", "llamacpp-stats"
    source: str
    line: int | None
    timestamp: str | None
    labels: dict[str, str]
    printed: dict[str, str]  # name -> figure exactly as printed
    k: int | None = None  # draft length (number of positions) when known
    drafts: int | None = None
    draft_tokens: int | None = None  # the low bound when only `draft_tokens_bounds` are known
    draft_tokens_bounds: tuple[int, int] | None = None  # set only when the drafted tokens are not exact
    accepted: int | None = None
    per_position: tuple[int, ...] | None = None  # acc_1..acc_k when exact
    per_position_bounds: tuple[tuple[int, int], ...] | None = None
    drafts_bounds: tuple[int, int] | None = None
    examined: int | None = None
    examined_bounds: tuple[int, int] | None = None
    alpha: float | None = None  # exact accepted / examined
    alpha_bounds: tuple[float, float] | None = None
    tokens_per_pass: float | None = None  # exact 1 + accepted / drafts
    tokens_per_pass_bounds: tuple[float, float] | None = None
    accepted_hist: tuple[int, ...] | None = None
    counts: CountMatrix | None = None
    notes: tuple[str, ...] = ()
    # The counts (or the drafts count) are exact only if every draft had k tokens; these bounds hold without.
    assumes_full_drafts: bool = False
    unassumed_examined_bounds: tuple[int, int] | None = None
    unassumed_alpha_bounds: tuple[float, float] | None = None

    @property
    def recovered(self) -> bool:
        """True when the full (k, a) histogram is known exactly."""
        return self.counts is not None

    def describe(self) -> str:
        """One line: what the engine printed and what it means."""
        return describe_interval(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "format": self.fmt,
            "source": self.source,
            "line": self.line,
            "timestamp": self.timestamp,
            "labels": dict(self.labels),
            "printed": dict(self.printed),
            "k": self.k,
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "draft_tokens_bounds": None if self.draft_tokens_bounds is None else list(self.draft_tokens_bounds),
            "accepted": self.accepted,
            "per_position": None if self.per_position is None else list(self.per_position),
            "per_position_bounds": None
            if self.per_position_bounds is None
            else [list(b) for b in self.per_position_bounds],
            "drafts_bounds": None if self.drafts_bounds is None else list(self.drafts_bounds),
            "examined": self.examined,
            "examined_bounds": None if self.examined_bounds is None else list(self.examined_bounds),
            "alpha": self.alpha,
            "alpha_bounds": None if self.alpha_bounds is None else list(self.alpha_bounds),
            "tokens_per_pass": self.tokens_per_pass,
            "tokens_per_pass_bounds": None
            if self.tokens_per_pass_bounds is None
            else list(self.tokens_per_pass_bounds),
            "accepted_hist": None if self.accepted_hist is None else list(self.accepted_hist),
            "counts": None if self.counts is None else self.counts.tolist(),
            "notes": list(self.notes),
            "assumes_full_drafts": self.assumes_full_drafts,
            "unassumed_alpha_bounds": None
            if self.unassumed_alpha_bounds is None
            else list(self.unassumed_alpha_bounds),
            "description": self.describe(),
        }


class LineTally(Struct):
    """What a reader saw: metrics lines turned into intervals, other lines ignored, bad lines."""

    lines: int = 0
    metrics: int = 0
    ignored: int = 0
    bad: int = 0
    resets: int = 0  # Prometheus counter resets between scrapes
    duplicates: int = 0  # metrics lines that repeat an earlier one exactly (a log shipper's duplicate): not counted


# ---------------------------------------------------------------------------------------------
# What the engine printed, and what it means


def _fmt_bounds(bounds: tuple[float, float] | None, digits: int = 2) -> str:
    if bounds is None:
        return "unknown"
    low, high = bounds
    if round(low, digits) == round(high, digits):
        return f"{low:.{digits}f}"
    return f"{low:.{digits}f}..{high:.{digits}f}"


def describe_interval(interval: EngineInterval) -> str:
    """One line: the engine's own figure, what it measures, and the per-token alpha it implies."""
    p = interval.printed
    alpha = (
        f"per-token alpha = {interval.alpha:.2f}"
        if interval.alpha is not None
        else f"per-token alpha in {_fmt_bounds(interval.alpha_bounds)}"
    )
    tpp = (
        f"tokens per pass {interval.tokens_per_pass:.2f}"
        if interval.tokens_per_pass is not None
        else f"tokens per pass {_fmt_bounds(interval.tokens_per_pass_bounds)}"
    )
    if interval.fmt == "vllm-log-v0":
        return (
            f"vLLM v0 running totals 'Draft acceptance rate' {p['Draft acceptance rate']} (every passing token / "
            f"drafted, since the start); this interval: {interval.accepted} accepted prefix tokens of "
            f"{interval.draft_tokens} drafted; {alpha}; {tpp}"
        )
    if interval.engine in ("vllm", "lmdeploy"):
        if interval.fmt in ("vllm-prometheus", "lmdeploy-prometheus"):
            who = "vLLM" if interval.engine == "vllm" else "LMDeploy"
            head = f"{who} counters: accepted/drafted = {interval.accepted}/{interval.draft_tokens}" + (
                f" over {interval.drafts} drafts" if interval.drafts is not None else ""
            )
        else:
            name = "Avg Draft acceptance rate" if "Avg Draft acceptance rate" in p else "Draft acceptance rate"
            head = f"vLLM '{name}' {p[name]} = accepted/drafted"
        return f"{head}; {alpha}; {tpp}"
    if interval.engine == "tensorrt-llm":  # its one interval format, the iteration stats
        return (
            f"TensorRT-LLM iteration {p.get('iter', '?')}: specDecodingStats {interval.accepted} accepted of "
            f"{interval.draft_tokens} drafted in {interval.drafts} requests' steps; {alpha}; {tpp}"
        )
    if interval.fmt == "sglang-request":
        passes = f"{interval.drafts} verify passes" if interval.drafts is not None else "verify passes unknown"
        rate = f", spec_accept_rate {p['spec_accept_rate']} = accepted/drafted" if "spec_accept_rate" in p else ""
        return f"SGLang request: {interval.accepted} accepted in {passes}{rate}; {alpha}; {tpp}"
    if interval.engine == "sglang":
        if "accept len" in p:
            head = f"SGLang 'accept len' {p['accept len']} = tokens per pass (accepted drafts + bonus) / forward passes"
        else:
            head = (
                f"SGLang gauge spec_accept_length {p.get('spec_accept_length')} = tokens per pass of the last interval"
            )
        return f"{head}; {alpha}"
    if interval.fmt == "llamacpp-stats":
        return (
            f"llama.cpp {interval.labels.get('drafter', '')} statistics #acc tokens/#gen tokens = "
            f"{interval.accepted}/{interval.draft_tokens} (running total); {alpha}; {tpp}"
        )
    if interval.fmt == "llamacpp-trace":
        return (
            f"llama.cpp trace lines (LLAMA_TRACE): {interval.accepted} accepted of {interval.draft_tokens} draft "
            f"tokens over {interval.drafts} verify steps; {alpha}; {tpp}"
        )
    if interval.fmt == "llamacpp-prometheus":
        return (
            f"llama.cpp counters: accepted/drafted = {interval.accepted}/{interval.draft_tokens}"
            + (f" over {interval.drafts} verify steps" if interval.drafts is not None else "")
            + f"; {alpha}; {tpp}"
        )
    if "draft acceptance" in p:
        head = f"llama.cpp 'draft acceptance' {p['draft acceptance']} = accepted/generated draft tokens"
    else:
        head = f"llama.cpp: {interval.accepted} accepted of {interval.draft_tokens} generated draft tokens"
    return f"{head}; {alpha}; {tpp}"
