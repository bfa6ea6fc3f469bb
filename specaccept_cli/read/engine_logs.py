"""Read what serving engines already write: metrics log lines and Prometheus scrapes.

Pure: imports only numpy, the standard library and `specaccept_cli.errors`. Every format is
checked against the engine's own source (cited next to each regex). The output is a stream of
`EngineInterval`s (or `InputError`s for lines that look like metrics but do not parse or do not
add up); each interval carries the figures as the engine printed them and what they recover.

The key fact: with a fixed draft length k, a per-position accepted count at position i
(1-based) is the number of runs that accepted at least i tokens. So runs = drafts,
hist[a] = acc_a - acc_(a+1) (acc_0 = drafts, acc_(k+1) = 0), examined = drafts + sum_(i<k) acc_i
and alpha = accepted / examined exactly: the same joint (k, a) histogram the summary state holds.

What cannot be recovered is bounded, never guessed:
- Printed rates are rounded. Per-position counts are exact only when one integer vector fits
  every printed figure (in practice: at most ~1000 drafts per interval for 3-decimal rates);
  otherwise each count is an interval and alpha is bounded.
- When drafts vary in length (n-gram drafters, llama.cpp's p-min stop), which runs stopped at
  a rejection and which ran out of draft is not logged: the number of rejected runs R, hence
  examined = accepted + R, is bounded (see `_rejected_bounds`).
- Lines with only accepted and drafted token counts (old vLLM, llama.cpp per request) bound
  alpha between accepted/drafted and accepted/(accepted + 1) unless the draft length is known.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from specaccept_cli.errors import InputError

CountMatrix = npt.NDArray[np.int64]

FORMATS = ("vllm-log", "sglang-log", "sglang-requests", "llamacpp-log", "prometheus")

MAX_DRAFT_CANDIDATES = 20_000  # drafts counts tried against printed rates; beyond, only the totals are used
MAX_DRAFT_LENGTH = 64  # more printed per-position rates than this is not a draft length


# ---------------------------------------------------------------------------------------------
# The result


@dataclass(frozen=True)
class EngineInterval:
    """One interval of engine counters: what the engine printed, and what it recovers.

    `counts[k, a]` (shape [k+1, k+1], only row k non-zero) is the joint histogram the summary
    state holds; it is None unless every run is known to have drafted k tokens and every
    per-position count is pinned down. `accepted_hist[a]` is the accepted-length histogram when
    the per-position counts are exact but draft lengths varied. Bounds are closed intervals.
    """

    engine: str  # "vllm", "sglang", "llama.cpp"
    fmt: str  # the exact variant, e.g. "vllm-log-v1-full", "vllm-prometheus", "llamacpp-stats"
    source: str
    line: int | None
    timestamp: str | None
    labels: dict[str, str] = field(hash=False)
    printed: dict[str, str] = field(hash=False)  # name -> figure exactly as printed
    k: int | None = None  # draft length (number of positions) when known
    drafts: int | None = None
    draft_tokens: int | None = None
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
    counts: CountMatrix | None = field(default=None, hash=False, compare=False)
    notes: tuple[str, ...] = ()

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
            "description": self.describe(),
        }


@dataclass
class LineTally:
    """What a reader saw: metrics lines turned into intervals, other lines ignored, bad lines."""

    lines: int = 0
    metrics: int = 0
    ignored: int = 0
    bad: int = 0
    resets: int = 0  # Prometheus counter resets between scrapes


# ---------------------------------------------------------------------------------------------
# Rounding: a printed figure stands for an interval


def _half_ulp(printed: str) -> Fraction:
    """Half a unit in the last printed place: "0.757" -> 0.0005, "92" -> 0.5."""
    text = printed.strip().rstrip("%")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return Fraction(1, 2 * 10**decimals)


FLOAT32_EPSILON = Fraction(1, 2**23)


def _fits(printed: str, exact: Fraction, relative_error: Fraction = Fraction(0)) -> bool:
    """Whether `exact` prints as `printed` under round-to-nearest (either way at a tie), after the
    engine computed it with up to `relative_error` (llama.cpp divides in float32)."""
    text = printed.strip().rstrip("%")
    if text.lower() in ("nan", "-nan", "inf"):
        return False
    return abs(exact - Fraction(text)) <= _half_ulp(printed) + abs(exact) * relative_error


# ---------------------------------------------------------------------------------------------
# Recovery: from totals and rounded rates to counts, or to bounds


def _tighten(ranges: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """Per-position counts never increase with the position: clip the ranges to that."""
    highs: list[int] = []
    ceiling = math.inf
    for _, high in ranges:
        ceiling = min(ceiling, high)
        highs.append(int(ceiling))
    lows = [0] * len(ranges)
    floor_ = 0
    for i in range(len(ranges) - 1, -1, -1):
        floor_ = max(floor_, ranges[i][0])
        lows[i] = floor_
    out = list(zip(lows, highs, strict=True))
    if any(low > high for low, high in out):
        return None
    return out


def _feasible(ranges: list[tuple[int, int]], total: int) -> bool:
    tight = _tighten(ranges)
    if tight is None:
        return False
    return sum(low for low, _ in tight) <= total <= sum(high for _, high in tight)


def _solve_positions(ranges: list[tuple[int, int]], total: int) -> list[tuple[int, int]] | None:
    """Exact bounds of each count over non-increasing integer vectors in `ranges` summing to `total`.

    With extra bounds on one position, the tightened ranges admit the total iff it lies between
    their smallest and largest sums (every integer sum in between is reachable by raising one
    count at a time, first positions first, without breaking the order). "Some vector has
    acc_i <= t" is monotone in t, so the smallest feasible acc_i is found by bisection; likewise
    the largest with "acc_i >= t". The feasible values of acc_i form an interval.
    """
    if not _feasible(ranges, total):
        return None
    out: list[tuple[int, int]] = []
    for i, (low, high) in enumerate(ranges):

        def at_most(t: int, i: int = i) -> bool:
            return _feasible([(lo, min(hi, t)) if j == i else (lo, hi) for j, (lo, hi) in enumerate(ranges)], total)

        def at_least(t: int, i: int = i) -> bool:
            return _feasible([(max(lo, t), hi) if j == i else (lo, hi) for j, (lo, hi) in enumerate(ranges)], total)

        lo_t, hi_t = low, high  # smallest t with at_most(t): at_most(high) holds
        while lo_t < hi_t:
            mid = (lo_t + hi_t) // 2
            if at_most(mid):
                hi_t = mid
            else:
                lo_t = mid + 1
        smallest = lo_t
        lo_t, hi_t = low, high  # largest t with at_least(t): at_least(low) holds
        while lo_t < hi_t:
            mid = (lo_t + hi_t + 1) // 2
            if at_least(mid):
                lo_t = mid
            else:
                hi_t = mid - 1
        out.append((smallest, lo_t))
    return out


def _rejected_bounds(
    accepted: int,
    draft_tokens: int,
    drafts: int | None,
    k: int | None,
    acc_first: tuple[int, int] | None,
    acc_last: tuple[int, int] | None,
    fixed_k: bool,
) -> tuple[int, int]:
    """Bounds on R, the number of runs that ended at a rejection (examined = accepted + R).

    Fixed draft length k: R = drafts - acc_k exactly (a run is full iff it accepted k).
    Otherwise every rejected run leaves between 1 and k draft tokens unaccepted and a full run
    none, so ceil((D - A) / k) <= R <= D - A; runs that accepted nothing are rejected (a draft
    has at least one token), so R >= drafts - acc_1; runs that accepted k are full, R <= drafts - acc_k.
    """
    unaccepted = draft_tokens - accepted
    if fixed_k and drafts is not None and acc_last is not None:
        return drafts - acc_last[1], drafts - acc_last[0]
    low = 0 if unaccepted == 0 else 1
    high = unaccepted
    if k is not None and k > 0:
        low = max(low, -(-unaccepted // k))
    if drafts is not None:
        high = min(high, drafts)
        if acc_first is not None:
            low = max(low, drafts - acc_first[1])
        if acc_last is not None:
            high = min(high, drafts - acc_last[0])
    return low, high


@dataclass
class _Recovery:
    drafts: int | None = None
    drafts_bounds: tuple[int, int] | None = None
    per_position: tuple[int, ...] | None = None
    per_position_bounds: tuple[tuple[int, int], ...] | None = None
    examined: int | None = None
    examined_bounds: tuple[int, int] | None = None
    alpha: float | None = None
    alpha_bounds: tuple[float, float] | None = None
    tokens_per_pass: float | None = None
    tokens_per_pass_bounds: tuple[float, float] | None = None
    accepted_hist: tuple[int, ...] | None = None
    counts: CountMatrix | None = None
    k: int | None = None
    notes: list[str] = field(default_factory=list)

    def fields(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "drafts": self.drafts,
            "drafts_bounds": self.drafts_bounds,
            "per_position": self.per_position,
            "per_position_bounds": self.per_position_bounds,
            "examined": self.examined,
            "examined_bounds": self.examined_bounds,
            "alpha": self.alpha,
            "alpha_bounds": self.alpha_bounds,
            "tokens_per_pass": self.tokens_per_pass,
            "tokens_per_pass_bounds": self.tokens_per_pass_bounds,
            "accepted_hist": self.accepted_hist,
            "counts": self.counts,
            "notes": tuple(self.notes),
        }


class _Inconsistent(Exception):
    """The printed figures do not fit any integer counts."""


def _alpha_range(accepted: int, rejected: tuple[int, int]) -> tuple[float, float] | None:
    low_r, high_r = rejected
    if accepted + high_r == 0:
        return None
    high = 1.0 if accepted + low_r == 0 else accepted / (accepted + low_r)
    return accepted / (accepted + high_r), high


def _finish(
    rec: _Recovery,
    accepted: int,
    draft_tokens: int,
    drafts_options: list[tuple[int, list[tuple[int, int]] | None]],
    k: int | None,
    acc_first: int | None = None,
) -> _Recovery:
    """Fill the recovery from the feasible (drafts, per-position bounds) options."""
    rejected_lows: list[int] = []
    rejected_highs: list[int] = []
    tpp: list[float] = []
    valid: list[tuple[int, list[tuple[int, int]] | None]] = []
    for drafts, positions in drafts_options:
        if drafts > draft_tokens or drafts <= 0 or (k is not None and draft_tokens > drafts * k):
            continue  # every draft has between 1 and k tokens
        fixed = k is not None and positions is not None and len(positions) == k and draft_tokens == drafts * k
        first = positions[0] if positions else None if acc_first is None else (acc_first, acc_first)
        r_low, r_high = _rejected_bounds(
            accepted, draft_tokens, drafts, k, first, positions[-1] if positions else None, fixed
        )
        if r_low > r_high:
            continue
        valid.append((drafts, positions))
        rejected_lows.append(r_low)
        rejected_highs.append(r_high)
        tpp.append(1 + accepted / drafts)
    if not valid:
        raise _Inconsistent(
            f"no drafts count and count of rejected drafts fit {accepted} accepted of {draft_tokens} drafted tokens"
            + (f" (at most k = {k} a draft)" if k else "")
        )
    drafts_options = valid
    rejected = (min(rejected_lows), max(rejected_highs))
    rec.k = k
    if len(drafts_options) == 1:
        drafts, positions = drafts_options[0]
        rec.drafts = drafts
        rec.drafts_bounds = (drafts, drafts)
        if drafts > 0:
            rec.tokens_per_pass = 1 + accepted / drafts
        if positions is not None:
            rec.per_position_bounds = tuple(positions)
            if all(low == high for low, high in positions):
                acc = [low for low, _ in positions]
                rec.per_position = tuple(acc)
                chain = [drafts, *acc, 0]
                hist = tuple(chain[a] - chain[a + 1] for a in range(len(acc) + 1))
                rec.accepted_hist = hist
                if k is not None and len(acc) == k and draft_tokens == drafts * k:
                    counts = np.zeros((k + 1, k + 1), dtype=np.int64)
                    counts[k, :] = hist
                    rec.counts = counts
                    rec.examined = drafts + sum(acc[:-1]) if acc else drafts
                    rec.alpha = accepted / rec.examined if rec.examined else None
    else:
        rec.drafts_bounds = (drafts_options[0][0], drafts_options[-1][0])
        rec.notes.append(
            f"the drafts count is not pinned down by the printed figures: {len(drafts_options)} values "
            f"from {rec.drafts_bounds[0]} to {rec.drafts_bounds[1]} fit"
        )
        merged: list[tuple[int, int]] | None = None
        for _, positions in drafts_options:
            if positions is None:
                merged = None
                break
            merged = (
                list(positions)
                if merged is None
                else [(min(a, c), max(b, d)) for (a, b), (c, d) in zip(merged, positions, strict=True)]
            )
        if merged is not None:
            rec.per_position_bounds = tuple(merged)
    if tpp and rec.tokens_per_pass is None:
        rec.tokens_per_pass_bounds = (min(tpp), max(tpp))
    elif rec.tokens_per_pass is not None:
        rec.tokens_per_pass_bounds = (rec.tokens_per_pass, rec.tokens_per_pass)
    if rec.examined is None:
        rec.examined_bounds = (accepted + rejected[0], accepted + rejected[1])
        rec.alpha_bounds = _alpha_range(accepted, rejected)
        if rec.counts is None and rec.per_position is not None:
            rec.notes.append(
                "drafts varied in length (Drafted != k x drafts): which runs ended at a rejection is not "
                "logged, so examined tokens and alpha are bounded"
            )
        elif rec.per_position is None and rec.per_position_bounds is not None and len(drafts_options) == 1:
            rec.notes.append("the per-position counts are only bounded (rounded rates, or no rates)")
    else:
        rec.examined_bounds = (rec.examined, rec.examined)
        rec.alpha_bounds = None if rec.alpha is None else (rec.alpha, rec.alpha)
    return rec


def recover_counts(
    accepted: int,
    draft_tokens: int,
    *,
    rates: list[str] | None = None,
    mean_length: str | None = None,
    drafts: int | None = None,
    k: int | None = None,
    acc_first: int | None = None,
    assume_full_drafts: bool = True,
    rates_span_draft: bool = True,
) -> _Recovery:
    """Recover what the figures of one interval determine; raise `_Inconsistent` if nothing fits.

    `rates` are printed per-position rates acc_i / drafts; `mean_length` is the printed
    1 + accepted / drafts; `drafts` is an exact count when the engine gives one; `k` a draft
    length known otherwise (the number of printed rates wins); `acc_first` an exact count of drafts
    that accepted at least one token (llama.cpp "#acc drafts"). With `assume_full_drafts` and
    Drafted divisible by k, drafts = Drafted / k is tried first (every draft had k tokens, as for
    EAGLE, MTP and draft-model proposers); the note says so. `rates_span_draft` says the printed
    rates cover every draft position (vLLM: one per speculative token); when False (llama.cpp,
    whose vector sizing is not verified) the draft length is only `k` if given.
    """
    rec = _Recovery()
    if accepted < 0 or draft_tokens < 0:
        raise _Inconsistent("negative token counts")
    if accepted > draft_tokens:
        raise _Inconsistent(f"accepted {accepted} exceeds drafted {draft_tokens}")
    if rates is not None:
        if len(rates) > MAX_DRAFT_LENGTH:
            raise _Inconsistent(f"{len(rates)} per-position rates: more than {MAX_DRAFT_LENGTH}")
        if not rates_span_draft and k is not None and k < len(rates):
            raise _Inconsistent(f"{len(rates)} per-position rates for drafts of at most k = {k} tokens")
        positions_k: int | None = len(rates)
        if rates_span_draft:
            k = len(rates)
    else:
        positions_k = k
    if draft_tokens == 0:
        k = positions_k
        if accepted:
            raise _Inconsistent("accepted tokens without drafted tokens")
        rec.k = k
        rec.drafts = 0 if drafts in (None, 0) else drafts
        if rec.drafts:
            raise _Inconsistent("drafts without drafted tokens")
        rec.notes.append("no drafts in this interval")
        if k is not None:
            rec.counts = np.zeros((k + 1, k + 1), dtype=np.int64)
            rec.per_position = tuple([0] * k)
            rec.accepted_hist = tuple([0] * (k + 1))
        rec.examined = 0
        rec.examined_bounds = (0, 0)
        return rec

    # The drafts counts to try.
    if drafts is not None:
        if mean_length is not None and drafts > 0 and not _fits(mean_length, 1 + Fraction(accepted, drafts)):
            raise _Inconsistent(f"mean acceptance length {mean_length} is not 1 + {accepted}/{drafts}")
        candidates: range | list[int] = [drafts]
    else:
        low = 1
        high = draft_tokens
        if k is not None and k > 0:
            low = max(low, -(-draft_tokens // k))
        if acc_first is not None:
            low = max(low, acc_first)
        if mean_length is not None and accepted == 0:
            if not _fits(mean_length, Fraction(1)):
                raise _Inconsistent(f"mean acceptance length {mean_length} with nothing accepted")
        elif mean_length is not None:
            if not re.fullmatch(r"\s*\d+(?:\.\d+)?", mean_length):
                raise _Inconsistent(f"mean acceptance length {mean_length!r} with {accepted} accepted")
            centre = Fraction(mean_length.strip()) - 1
            half = _half_ulp(mean_length)
            if centre + half <= 0:
                raise _Inconsistent(f"mean acceptance length {mean_length} with {accepted} accepted")
            low = max(low, math.ceil(accepted / (centre + half)))
            if centre - half > 0:
                high = min(high, math.floor(accepted / (centre - half)))
        if high < low:
            raise _Inconsistent(f"no drafts count fits (between {low} and {high})")
        if rates is None:
            return _totals_only(rec, accepted, draft_tokens, (low, high), k, mean_length, assume_full_drafts)
        candidates = range(low, high + 1)
        if assume_full_drafts and k and draft_tokens % k == 0 and low <= draft_tokens // k <= high:
            full = draft_tokens // k
            options = _options_for(accepted, [full], rates, positions_k, acc_first)
            if options:
                rec.notes.append(f"every draft taken to have k = {k} tokens (Drafted = k x drafts)")
                return _finish(rec, accepted, draft_tokens, options, k, acc_first)
    if len(candidates) > MAX_DRAFT_CANDIDATES:
        rec.notes.append(f"{len(candidates)} possible drafts counts: the per-position rates were not used")
        return _totals_only(
            rec, accepted, draft_tokens, (candidates[0], candidates[-1]), k, mean_length, assume_full_drafts
        )
    options = _options_for(accepted, candidates, rates, positions_k, acc_first)
    if not options:
        raise _Inconsistent("no drafts count and per-position counts fit every printed figure")
    return _finish(rec, accepted, draft_tokens, options, k, acc_first)


def _totals_only(
    rec: _Recovery,
    accepted: int,
    draft_tokens: int,
    drafts_range: tuple[int, int],
    k: int | None,
    mean_length: str | None,
    assume_full_drafts: bool,
) -> _Recovery:
    """Only accepted and drafted totals (and perhaps a rounded mean length or a known k): bounds.

    With k known and every draft full, drafts = D / k and acc_k (the full runs) lies in
    [max(0, A - (k - 1) drafts), A // k], so R = drafts - acc_k is bounded; otherwise R is bounded
    by `_rejected_bounds` over the possible drafts counts.
    """
    rec.k = k
    low, high = drafts_range
    if k and assume_full_drafts and draft_tokens % k == 0 and low <= draft_tokens // k <= high:
        drafts = draft_tokens // k
        full_low, full_high = max(0, accepted - (k - 1) * drafts), accepted // k
        rejected = (drafts - full_high, drafts - full_low)
        rec.drafts = drafts
        rec.drafts_bounds = (drafts, drafts)
        rec.tokens_per_pass = 1 + accepted / drafts
        rec.tokens_per_pass_bounds = (rec.tokens_per_pass, rec.tokens_per_pass)
        rec.notes.append(
            f"every draft taken to have k = {k} tokens (Drafted = k x drafts); without per-position counts "
            "the number of fully accepted drafts, hence alpha, is only bounded"
        )
    else:
        r_low, _ = _rejected_bounds(accepted, draft_tokens, None, k, None, None, False)
        r_high = min(draft_tokens - accepted, high)
        rejected = (r_low, r_high)
        if r_low > r_high:
            raise _Inconsistent(f"no count of rejected drafts fits (between {r_low} and {r_high})")
        if mean_length is not None or k is not None:
            rec.drafts_bounds = (low, high)
            rec.tokens_per_pass_bounds = (1 + accepted / high, 1 + accepted / low)
            if low == high:
                rec.drafts = low
                rec.tokens_per_pass = 1 + accepted / low
        rec.notes.append(
            "only accepted and drafted token counts are logged: "
            + ("the number of drafts is bounded and " if mean_length is not None else "")
            + "which drafts ended at a rejection is unknown, so alpha is only bounded"
        )
    rec.examined_bounds = (accepted + rejected[0], accepted + rejected[1])
    rec.alpha_bounds = _alpha_range(accepted, rejected)
    return rec


def _options_for(
    accepted: int,
    candidates: Iterable[int],
    rates: list[str] | None,
    k: int | None,
    acc_first: int | None,
) -> list[tuple[int, list[tuple[int, int]] | None]]:
    options: list[tuple[int, list[tuple[int, int]] | None]] = []
    # Each printed rate r with d decimals stands for [r - h, r + h], h = 1 / (2 * 10^d): as integers
    # over 2 * 10^d, the count interval for n drafts is [ceil(lo * n / den), floor(hi * n / den)].
    scaled: list[tuple[int, int, int]] = []
    for rate in rates or ():
        centre, half = Fraction(rate.strip()), _half_ulp(rate)
        den = half.denominator
        scaled.append((int((centre - half) * den), int((centre + half) * den), den))
    for drafts in candidates:
        if rates is not None:
            ranges = [(max(0, -(-lo * drafts // den)), min(drafts, hi * drafts // den)) for lo, hi, den in scaled]
        elif k is not None and k > 0:
            ranges = [(0, drafts)] * k
        else:
            if acc_first is not None and acc_first > drafts:
                continue
            options.append((drafts, None))
            continue
        if acc_first is not None:
            low, high = ranges[0]
            if not low <= acc_first <= high:
                continue
            ranges[0] = (acc_first, acc_first)
        solved = _solve_positions(ranges, accepted)
        if solved is not None:
            options.append((drafts, solved))
    return options


# ---------------------------------------------------------------------------------------------
# Log lines

_NUM = r"(-?(?:\d+(?:\.\d*)?|nan|inf))"

# vLLM v1, vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log() (checked at vllm-project/vllm
# commits 016a8587 and ee4ceaae): "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted
# throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d
# tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%" with rates
# ", ".join(f"{p:.3f}"), p = accepted_per_pos / num_drafts; mean length = 1 + accepted / num_drafts.
VLLM_FULL = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: " + _NUM + r", "
    r"Accepted throughput: " + _NUM + r" tokens/s, "
    r"Drafted throughput: " + _NUM + r" tokens/s, "
    r"Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: ((?:\d+\.\d+|nan)(?:, (?:\d+\.\d+|nan))*), "
    r"Avg Draft acceptance rate: " + _NUM + r"%"
)
# vLLM v1 intermediate (same file, mid-2025 versions, found by exact-string search): "SpecDecoding
# metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d tokens,
# Drafted: %d tokens, Per-position acceptance rate: %s".
VLLM_PERPOS = re.compile(
    r"SpecDecoding metrics: Draft acceptance rate: " + _NUM + r"%, "
    r"Mean acceptance length: " + _NUM + r", "
    r"Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: ((?:\d+\.\d+|nan)(?:, (?:\d+\.\d+|nan))*)\s*$"
)
# vLLM v1 first version (same file, early 2025; SpecDecodingStats had only num_draft_tokens and
# num_accepted_tokens): "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens,
# Drafted: %d tokens".
VLLM_BASIC = re.compile(
    r"SpecDecoding metrics: Draft acceptance rate: " + _NUM + r"%, Accepted: (\d+) tokens, Drafted: (\d+) tokens\s*$"
)
VLLM_MARKER = "SpecDecoding metrics"
# vLLM's logger prefix: "(APIServer pid=12) INFO 11-30 13:00:01 [metrics.py:120] " (the process
# tag is added by the v1 multiprocess front end; older lines start at "INFO").
VLLM_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)\s]+) pid=(?P<pid>\d+)\)\s+)?"
    r"(?:(?P<level>[A-Z]+)\s+(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s+)?"
)

# SGLang, python/sglang/srt/managers/scheduler_metrics_mixin.py (and scheduler.py before the
# mixin) log_decode_stats(): msg = "Decode batch. #running-req: %d, #token: %d, token usage: %.2f, "
# then "accept len: {spec_accept_length:.2f}, " (older) or "accept len: {:.2f}, accept rate:
# {:.2f}, " (newer), then "cuda graph: ..., gen throughput (token/s): %.2f, #queue-req: %d".
# accept len = accepted tokens (drafts + the bonus token) / forward passes. The "accept rate"
# denominator changed between versions (forward_ct x (num_steps + 1), x num_draft_tokens, or pure
# drafts / (forward_ct x (num_draft_tokens - 1))), so it is kept as printed and not used.
SGLANG_DECODE = re.compile(r"Decode batch[.,].*?accept len: " + _NUM + r", (?:accept rate: " + _NUM + r", )?")
SGLANG_MARKER = "accept len"
SGLANG_PREFIX = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z]+\d+)*)\]")

# llama.cpp server, tools/server/server-context.cpp (earlier examples/server/server.cpp)
# server_slot::print_timings(), after the "prompt eval time" / "eval time" lines:
#   "draft acceptance rate = %0.5f (%5d accepted / %5d generated)\n" (n_draft_accepted / n_draft_total),
#   later "draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f" with a trace line
#   "     acc per pos = (%s)", or one line "..., mean acceptance length = %5.2f, acceptance rate per
#   position = (%s)"; mean length = 1 + accepted / verification steps, rates "%.3f" of
#   n_accepted_per_pos / n_draft_verif_steps. Lines carry the slot prefix
#   "slot print_timing: id  0 | task 12 | " (SLT_INF) unless printed after a "\n".
LLAMA_REQUEST = re.compile(
    r"draft acceptance(?: rate)? = " + _NUM + r" \(\s*(\d+) accepted /\s*(\d+) generated\)"
    r"(?:, mean (?:acceptance length|len) =\s*" + _NUM + r")?"
    r"(?:, acceptance rate per position = \(((?:\d+\.\d+)(?:, \d+\.\d+)*)?\))?\s*$"
)
LLAMA_PERPOS = re.compile(r"acc per pos = \(((?:\d+\.\d+)(?:, \d+\.\d+)*)?\)\s*$")
# llama.cpp common/speculative.cpp common_speculative_print_stats(): "statistics %s: #calls(b,g,a) =
# %zu %zu %zu, #gen drafts = %zu, #acc drafts = %zu, #gen tokens = %zu, #acc tokens = %zu%s" where
# #acc drafts counts drafts with at least one accepted token; a per-implementation running total.
LLAMA_STATS = re.compile(
    r"statistics\s+(?P<impl>\S+): #calls\(b,g,a\) = (\d+) (\d+) (\d+), #gen drafts = (\d+), "
    r"#acc drafts = (\d+), #gen tokens = (\d+), #acc tokens = (\d+)"
)
LLAMA_MARKERS = ("draft acceptance", "acc per pos", "#gen drafts")
LLAMA_SLOT = re.compile(r"slot\s+\w+: id\s+(?P<slot>\d+) \| task (?P<task>-?\d+) \|")


def _decode(raw: str | bytes) -> str:
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    return text.rstrip("\r\n")


_JSON_START = re.compile(r"\s*(?:\{|\[\s*[\[\]{\"])")


def looks_like_json(text: str | bytes) -> bool:
    """A JSON object or array, not a log line such as SGLang's `[2025-03-05 10:21:05 TP0] ...`."""
    head = text[:64].decode("utf-8", errors="replace") if isinstance(text, bytes) else text[:64]
    return _JSON_START.match(head) is not None


def sniff_engine_format(lines: Iterable[str | bytes], limit: int = 10_000) -> str | None:
    """The engine format of the first metrics line among the first `limit` lines, or None."""
    for n, raw in enumerate(lines):
        if n >= limit:
            break
        text = _decode(raw)
        if looks_like_json(text):
            if SGLANG_REQUEST_MARKER in text and '"p":' not in text:  # responses, not logged (p, q, r) runs
                return "sglang-requests"
            continue
        if VLLM_MARKER in text:
            return "vllm-log"
        if SGLANG_MARKER in text and "Decode batch" in text:
            return "sglang-log"
        if any(marker in text for marker in LLAMA_MARKERS):
            return "llamacpp-log"
        stripped = text.lstrip()
        if stripped.startswith(("vllm:spec_decode", "sglang:spec_")) or (
            stripped.startswith("# TYPE ") and (" vllm:" in stripped or " sglang:" in stripped)
        ):
            return "prometheus"
    return None


class EngineLogParse:
    """Iterate to get `EngineInterval | InputError` in input order; `tally` fills as you go."""

    def __init__(
        self,
        lines: Iterable[str | bytes],
        source: str,
        fmt: str = "auto",
        *,
        k: int | None = None,
        assume_full_drafts: bool = True,
    ) -> None:
        if fmt != "auto" and fmt not in FORMATS:
            raise ValueError(f"unknown engine format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
        self.lines = lines
        self.source = source
        self.fmt = fmt
        self.k = k
        self.assume_full_drafts = assume_full_drafts
        self.tally = LineTally()
        self.detected: str | None = None if fmt == "auto" else fmt

    def __iter__(self) -> Iterator[EngineInterval | InputError]:
        if self.fmt == "prometheus":
            yield from parse_prometheus_scrapes(self.lines, self.source, tally=self.tally)
            return
        if self.fmt == "sglang-requests":
            for number, raw in enumerate(self.lines, start=1):
                self.tally.lines += 1
                found = sglang_request_intervals(raw, self.source, number, k=self.k)
                if not found:
                    self.tally.ignored += 1
                for item in found:
                    yield self._count(item)
            return
        pending_llama: tuple[int, str, re.Match[str]] | None = None
        for number, raw in enumerate(self.lines, start=1):
            self.tally.lines += 1
            text = _decode(raw)
            kind = self._kind(text)
            if kind is None:
                if pending_llama is not None:
                    yield self._count(self._llama(*pending_llama, None))
                    pending_llama = None
                self.tally.ignored += 1
                continue
            if kind == "llamacpp-log":
                perpos = LLAMA_PERPOS.search(text)
                if perpos is not None and pending_llama is not None:
                    yield self._count(self._llama(*pending_llama, perpos))
                    pending_llama = None
                    continue
                if pending_llama is not None:
                    yield self._count(self._llama(*pending_llama, None))
                    pending_llama = None
                if perpos is not None:
                    yield self._count(
                        self._error(
                            number, text, "a llama.cpp 'acc per pos' line without a 'draft acceptance' line before it"
                        )
                    )
                    continue
                match = LLAMA_REQUEST.search(text)
                if match is not None and match.group(5) is None and match.group(4) is not None:
                    pending_llama = (number, text, match)  # a trace line "acc per pos" may follow
                    continue
                yield self._count(self._parse_llama(number, text))
                continue
            if pending_llama is not None:
                yield self._count(self._llama(*pending_llama, None))
                pending_llama = None
            if kind == "vllm-log":
                yield self._count(self._vllm(number, text))
            elif kind == "sglang-log":
                yield self._count(self._sglang(number, text))
        if pending_llama is not None:
            yield self._count(self._llama(*pending_llama, None))

    def _count(self, item: EngineInterval | InputError) -> EngineInterval | InputError:
        if isinstance(item, InputError):
            self.tally.bad += 1
        else:
            self.tally.metrics += 1
        return item

    def _kind(self, text: str) -> str | None:
        if VLLM_MARKER in text:
            kind = "vllm-log"
        elif SGLANG_MARKER in text and "Decode batch" in text:
            kind = "sglang-log"
        elif any(marker in text for marker in LLAMA_MARKERS):
            kind = "llamacpp-log"
        else:
            return None
        if self.detected is None:
            self.detected = kind
        return kind if kind == self.detected else None

    def _error(self, number: int, text: str, message: str) -> InputError:
        return InputError(self.source, number, message, raw=text.encode("utf-8", errors="replace"))

    # -- vLLM
    def _vllm(self, number: int, text: str) -> EngineInterval | InputError:
        prefix = VLLM_PREFIX.match(text)
        labels: dict[str, str] = {}
        timestamp = None
        if prefix is not None:
            if prefix.group("proc"):
                labels["process"] = prefix.group("proc")
                labels["pid"] = prefix.group("pid")
            timestamp = prefix.group("ts")
        printed: dict[str, str]
        full = VLLM_FULL.search(text)
        rates: list[str] | None = None
        mean: str | None = None
        if full is not None:
            fmt = "vllm-log-v1-full"
            mean, acc_tp, draft_tp, acc, drafted, rate_text, pct = full.groups()
            rates = rate_text.split(", ")
            printed = {
                "Mean acceptance length": mean,
                "Accepted throughput": acc_tp,
                "Drafted throughput": draft_tp,
                "Accepted": acc,
                "Drafted": drafted,
                "Per-position acceptance rate": rate_text,
                "Avg Draft acceptance rate": pct + "%",
            }
        elif (perpos := VLLM_PERPOS.search(text)) is not None:
            fmt = "vllm-log-v1-perpos"
            pct, mean, acc, drafted, rate_text = perpos.groups()
            rates = rate_text.split(", ")
            printed = {
                "Draft acceptance rate": pct + "%",
                "Mean acceptance length": mean,
                "Accepted": acc,
                "Drafted": drafted,
                "Per-position acceptance rate": rate_text,
            }
        elif (basic := VLLM_BASIC.search(text)) is not None:
            fmt = "vllm-log-v1-basic"
            pct, acc, drafted = basic.groups()
            printed = {"Draft acceptance rate": pct + "%", "Accepted": acc, "Drafted": drafted}
        else:
            return self._error(
                number, text, "a vLLM 'SpecDecoding metrics' line in no known layout (vllm/v1/spec_decode/metrics.py)"
            )
        accepted, draft_tokens = int(acc), int(drafted)
        problems = []
        if draft_tokens > 0 and not _fits(pct, Fraction(100 * accepted, draft_tokens)):
            problems.append(f"acceptance rate {pct}% is not {accepted}/{draft_tokens}")
        if rates is not None and draft_tokens > 0 and any(r == "nan" for r in rates):
            problems.append("nan per-position rate with drafted tokens")
        if problems:
            return self._error(number, text, "inconsistent vLLM line: " + "; ".join(problems))
        try:
            if draft_tokens == 0 and rates is not None:
                if any(r not in ("nan", "0.000") for r in rates):
                    raise _Inconsistent("per-position rates without drafted tokens")
                k_printed: int | None = len(rates)
                rates = None  # printed as nan when there were no drafts
            else:
                k_printed = None
            rec = recover_counts(
                accepted,
                draft_tokens,
                rates=rates,
                mean_length=mean if draft_tokens else None,
                k=k_printed if k_printed is not None else (self.k if rates is None else len(rates)),
                assume_full_drafts=self.assume_full_drafts,
            )
        except _Inconsistent as exc:
            return self._error(number, text, f"inconsistent vLLM line: {exc}")
        return _interval(
            ("vllm", fmt, self.source, number, timestamp, labels, printed),
            draft_tokens=draft_tokens,
            accepted=accepted,
            **rec.fields(),
        )

    # -- SGLang
    def _sglang(self, number: int, text: str) -> EngineInterval | InputError:
        match = SGLANG_DECODE.search(text)
        if match is None:
            return self._error(
                number, text, "an SGLang decode line with 'accept len' in no known layout (scheduler_metrics_mixin.py)"
            )
        length, rate = match.group(1), match.group(2)
        try:
            centre = Fraction(length)
        except (ValueError, ZeroDivisionError):
            return self._error(number, text, f"accept len {length!r} is not a number")
        half = _half_ulp(length)
        if centre + half < 1:
            return self._error(number, text, f"accept len {length} below 1 (it counts the bonus token)")
        labels: dict[str, str] = {}
        timestamp = None
        prefix = SGLANG_PREFIX.match(text)
        if prefix is not None:
            timestamp = prefix.group("ts")
            for rank in prefix.group("ranks").split():
                name = re.match(r"[A-Z]+", rank)
                if name is not None:
                    labels[name.group(0).lower()] = rank[name.end() :]
        printed = {"accept len": length}
        if rate is not None:
            printed["accept rate"] = rate
        tpp_low = float(max(Fraction(1), centre - half))
        tpp_high = float(centre + half)
        if self.k is not None:
            tpp_high = min(tpp_high, self.k + 1.0)
            if tpp_low > tpp_high:
                return self._error(number, text, f"accept len {length} exceeds k + 1 = {self.k + 1}")
        m_low, m_high = tpp_low - 1, tpp_high - 1
        notes = [
            "SGLang logs only the mean accepted length per pass (rounded to 2 decimals), not counts: "
            "no histogram; alpha is bounded"
        ]
        if rate is not None:
            notes.append("'accept rate' is kept as printed: its denominator differs between SGLang versions")
        return _interval(
            (
                "sglang",
                "sglang-log-rate" if rate is not None else "sglang-log",
                self.source,
                number,
                timestamp,
                labels,
                printed,
            ),
            k=self.k,
            tokens_per_pass_bounds=(tpp_low, tpp_high),
            alpha_bounds=_alpha_bounds_from_mean(m_low, m_high, self.k),
            notes=tuple(notes),
        )

    # -- llama.cpp
    def _parse_llama(self, number: int, text: str) -> EngineInterval | InputError:
        stats = LLAMA_STATS.search(text)
        if stats is not None:
            return self._llama_stats(number, text, stats)
        match = LLAMA_REQUEST.search(text)
        if match is None:
            return self._error(
                number, text, "a llama.cpp draft acceptance line in no known layout (server-context.cpp)"
            )
        return self._llama(number, text, match, None)

    def _llama(
        self, number: int, text: str, match: re.Match[str], perpos: re.Match[str] | None
    ) -> EngineInterval | InputError:
        ratio, acc, generated, mean, rate_text = match.groups()
        if perpos is not None:
            rate_text = perpos.group(1)
        accepted, draft_tokens = int(acc), int(generated)
        printed = {"draft acceptance": ratio, "accepted": acc, "generated": generated}
        if mean is not None:
            printed["mean acceptance length"] = mean
        if rate_text is not None:
            printed["acceptance rate per position"] = rate_text
        # server-context.cpp: (float) n_draft_accepted / n_draft_total, a float32 quotient printed with %0.5f.
        if draft_tokens > 0 and not _fits(ratio, Fraction(accepted, draft_tokens), FLOAT32_EPSILON):
            return self._error(number, text, f"inconsistent llama.cpp line: {ratio} is not {accepted}/{draft_tokens}")
        slot = LLAMA_SLOT.search(text)
        labels = {"slot": slot.group("slot"), "task": slot.group("task")} if slot is not None else {}
        rates = rate_text.split(", ") if rate_text else None
        if mean is not None and rates is None:
            fmt = "llamacpp-request-meanlen"
        elif rates is not None:
            fmt = "llamacpp-request-perpos"
        else:
            fmt = "llamacpp-request"
        try:
            rec = recover_counts(
                accepted,
                draft_tokens,
                rates=rates,
                mean_length=mean,
                k=self.k,
                # llama.cpp drafts stop early (p-min, n-gram misses): never assume full drafts; and
                # the printed positions are not known to span the longest draft.
                assume_full_drafts=False,
                rates_span_draft=False,
            )
        except _Inconsistent as exc:
            return self._error(number, text, f"inconsistent llama.cpp line: {exc}")
        return _interval(
            ("llama.cpp", fmt, self.source, number, None, labels, printed),
            draft_tokens=draft_tokens,
            accepted=accepted,
            **rec.fields(),
        )

    def _llama_stats(self, number: int, text: str, stats: re.Match[str]) -> EngineInterval | InputError:
        impl = stats.group("impl")
        _, _, _, gen_drafts, acc_drafts, gen_tokens, acc_tokens = (int(g) for g in stats.groups()[1:])
        printed = {
            "#gen drafts": str(gen_drafts),
            "#acc drafts": str(acc_drafts),
            "#gen tokens": str(gen_tokens),
            "#acc tokens": str(acc_tokens),
        }
        if acc_drafts > gen_drafts or acc_tokens > gen_tokens or acc_drafts > acc_tokens:
            return self._error(number, text, "inconsistent llama.cpp statistics: accepted exceeds generated")
        try:
            rec = recover_counts(
                acc_tokens,
                gen_tokens,
                drafts=gen_drafts,
                k=self.k,
                acc_first=acc_drafts,
                assume_full_drafts=False,
            )
        except _Inconsistent as exc:
            return self._error(number, text, f"inconsistent llama.cpp statistics: {exc}")
        rec.notes.append("a running total for this drafter since the server started, not an interval")
        return _interval(
            ("llama.cpp", "llamacpp-stats", self.source, number, None, {"drafter": impl}, printed),
            draft_tokens=gen_tokens,
            accepted=acc_tokens,
            **rec.fields(),
        )


def _interval(
    head: tuple[str, str, str, int, str | None, dict[str, str], dict[str, str]], **counts: Any
) -> EngineInterval:
    """An interval from (engine, fmt, source, line, timestamp, labels, printed) and what its line recovers."""
    engine, fmt, source, line, timestamp, labels, printed = head
    return EngineInterval(
        engine=engine, fmt=fmt, source=source, line=line, timestamp=timestamp, labels=labels, printed=printed, **counts
    )


# SGLang per request: the response's meta_info (python/sglang/srt/managers/tokenizer_manager.py fills
# it when a request finishes): "spec_verify_ct" (target verify passes), "spec_accept_token_num" /
# "spec_draft_token_num" (accepted and drafted tokens; "spec_num_correct_drafts" /
# "spec_num_proposed_drafts" in later versions), "spec_accept_rate" (accepted / drafted),
# "spec_accept_length" (completion tokens / verify passes) and "spec_accept_histogram" (H[n] = verify
# passes that accepted exactly n draft tokens; "spec_correct_drafts_histogram" later). Read from JSON
# lines holding a /generate response, an OpenAI-style response whose choices carry meta_info, a list
# of either (a batch), or the bare meta_info.
SGLANG_REQUEST_MARKER = '"spec_verify_ct"'
_SGLANG_ACCEPTED = ("spec_accept_token_num", "spec_num_correct_drafts", "spec_accepted_drafts")
_SGLANG_DRAFTED = ("spec_draft_token_num", "spec_num_proposed_drafts", "spec_proposed_drafts")
_SGLANG_HISTOGRAM = ("spec_accept_histogram", "spec_correct_drafts_histogram")


def _meta_infos(record: object) -> list[dict[str, Any]]:
    """The meta_info objects of a JSON record that carry speculative counts."""
    if isinstance(record, list):
        return [meta for item in record for meta in _meta_infos(item)]
    if not isinstance(record, dict):
        return []
    if isinstance(record.get("meta_info"), dict):
        return _meta_infos(record["meta_info"])
    if isinstance(record.get("choices"), list):
        return [meta for choice in record["choices"] for meta in _meta_infos(choice)]
    return [record] if "spec_verify_ct" in record else []


def _count_field(meta: dict[str, Any], names: tuple[str, ...]) -> tuple[str, int | None] | str:
    """The first of `names` present, as a whole non-negative count; an error message if it is not one."""
    for name in names:
        if name in meta:
            value = meta[name]
            if type(value) is not int or value < 0:
                if type(value) is float and value.is_integer() and value >= 0:
                    return name, int(value)
                return f"{name} = {value!r} is not a whole count"
            return name, value
    return "", None


def sglang_request_intervals(
    raw: str | bytes, source: str, number: int, *, k: int | None = None
) -> list[EngineInterval | InputError]:
    """The intervals (one per finished request) of one JSON line of SGLang responses; [] for other lines."""
    text = _decode(raw)
    if SGLANG_REQUEST_MARKER not in text:
        return []
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return [InputError(source, number, f"an SGLang response that is not JSON ({exc})", raw=text.encode())]
    out: list[EngineInterval | InputError] = []
    for meta in _meta_infos(record):
        item = _sglang_request(meta, source, number, k)
        out.append(InputError(source, number, item, raw=text.encode()) if isinstance(item, str) else item)
    return out


def _sglang_request(meta: dict[str, Any], source: str, number: int, k: int | None) -> EngineInterval | str:
    fields: dict[str, int | None] = {}
    printed: dict[str, str] = {}
    for role, names in (("verify", ("spec_verify_ct",)), ("accepted", _SGLANG_ACCEPTED), ("drafted", _SGLANG_DRAFTED)):
        found = _count_field(meta, names)
        if isinstance(found, str):
            return found
        name, value = found
        fields[role] = value
        if value is not None:
            printed[name] = str(value)
    verify, accepted, drafted = fields["verify"], fields["accepted"], fields["drafted"]
    assert verify is not None  # the marker field is always there
    hist_name = next((name for name in _SGLANG_HISTOGRAM if name in meta), None)
    hist: list[int] | None = None
    if hist_name is not None:
        values = meta[hist_name]
        if not isinstance(values, list) or any(type(n) is not int or n < 0 for n in values):
            return f"{hist_name} is not a list of whole counts"
        hist = values
        printed[hist_name] = str(values)
        if sum(hist) != verify:
            return f"{hist_name} sums to {sum(hist)} verify passes, not spec_verify_ct {verify}"
        from_hist = sum(a * n for a, n in enumerate(hist))
        if accepted is not None and accepted != from_hist:
            return f"{hist_name} accepts {from_hist} tokens, not the {accepted} counted"
        accepted = from_hist
    for name in ("spec_accept_rate", "spec_accept_length"):
        if name in meta:
            printed[name] = str(meta[name])
    labels = {"id": str(meta["id"])} if "id" in meta else {}
    head = ("sglang", "sglang-request", source, number, None, labels, printed)
    if accepted is None:
        return _interval(head, drafts=verify, k=k, notes=("no accepted-token count in this meta_info",))
    notes: tuple[str, ...] = ()
    if k is None and drafted is not None and verify and drafted % verify == 0:
        k = drafted // verify
        notes = (f"every verify pass taken to have drafted k = {k} tokens (drafted = k x passes)",)
    if drafted is None and k is not None:
        drafted = verify * k
    if hist is not None and k is not None:
        if len(hist) - 1 > k:
            return f"{hist_name} has {len(hist) - 1} accepted tokens in a pass of at most k = {k}"
        chain = [sum(hist[a:]) for a in range(1, k + 1)]  # passes that accepted at least i tokens
        assert drafted is not None
        try:
            rec = _from_exact_positions(accepted, drafted, verify, chain)
        except _Inconsistent as exc:
            return f"inconsistent SGLang counts: {exc}"
        rec.notes.extend(notes)
        return _interval(head, draft_tokens=drafted, accepted=accepted, **rec.fields())
    if hist is not None:  # k unknown: passes at the top bin may have run out of draft rather than been rejected
        top = len(hist) - 1
        low = sum(min(a + 1, top) * n for a, n in enumerate(hist))
        high = sum((a + 1) * n for a, n in enumerate(hist))
        return _interval(
            head,
            drafts=verify,
            accepted=accepted,
            per_position=tuple(sum(hist[a:]) for a in range(1, top + 1)),
            accepted_hist=tuple(hist),
            examined_bounds=(low, high),
            alpha_bounds=_alpha_range(accepted, (low - accepted, high - accepted)),
            tokens_per_pass=1 + accepted / verify if verify else None,
            notes=("the draft length is unknown: give --draft-length to make this request exact",),
        )
    if drafted is None:
        return _interval(
            head, drafts=verify, accepted=accepted, tokens_per_pass=1 + accepted / verify if verify else None
        )
    try:
        rec = recover_counts(accepted, drafted, drafts=verify, k=k, assume_full_drafts=False)
    except _Inconsistent as exc:
        return f"inconsistent SGLang counts: {exc}"
    return _interval(head, draft_tokens=drafted, accepted=accepted, **rec.fields())


def _alpha_bounds_from_mean(m_low: float, m_high: float, k: int | None) -> tuple[float, float] | None:
    """Alpha bounds from the mean accepted length m per run (no counts).

    examined per run = m + P(rejected). With draft length k, P(full) lies in
    [max(0, m - (k - 1)), m / k], so P(rejected) in [1 - m/k, min(1, k - m)]; without k only
    P(rejected) in (0, 1] is known, so alpha in [m / (m + 1), 1].
    """
    if m_high <= 0:
        return (0.0, 0.0)
    if k is None:
        return (m_low / (m_low + 1), 1.0)
    low = m_low / (m_low + min(1.0, k - m_low)) if m_low > 0 else 0.0
    rejected_min = 1 - m_high / k
    high = 1.0 if m_high + rejected_min <= 0 else m_high / (m_high + rejected_min)
    return (low, min(1.0, high))


def parse_engine_log(
    lines: Iterable[str | bytes],
    source: str,
    fmt: str = "auto",
    *,
    k: int | None = None,
    assume_full_drafts: bool = True,
) -> EngineLogParse:
    """Intervals (and bad metrics lines as `InputError`) from server output, in input order.

    Iterate the result; its `tally` counts metrics lines, ignored ordinary lines and bad lines.
    With fmt="auto" the first metrics line decides the engine; metrics lines of another engine
    are then ignored (and counted). `k` is the draft length from the server's configuration when
    the lines do not carry it (SGLang, old vLLM, llama.cpp); it tightens the bounds.
    """
    return EngineLogParse(lines, source, fmt, k=k, assume_full_drafts=assume_full_drafts)


# ---------------------------------------------------------------------------------------------
# Prometheus text exposition

# Text exposition format 0.0.4: `name{label="value",...} value [timestamp_ms]`; label values escape
# backslash, double quote and newline. vLLM's counters (vllm/v1/spec_decode/metrics.py,
# SpecDecodingProm) are prometheus_client Counters named "vllm:spec_decode_num_drafts",
# "..._num_draft_tokens", "..._num_accepted_tokens" and "..._num_accepted_tokens_per_pos" (label
# "position" = str(pos) for pos in range(num_spec_tokens), so 0-based) and are exposed with the
# "_total" suffix; the first v1 version had only the draft and accepted token counters.
PROM_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?[ \t]+(?P<value>\S+)(?:[ \t]+(?P<ts>-?\d+))?[ \t]*$"
)
PROM_TIMESTAMP_COMMENT = re.compile(r"^#\s*(?:timestamp|scrape(?:d)?(?: at)?)\s*[:=]?\s*(?P<ts>\S.*?)\s*$", re.I)
VLLM_COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total": "per_pos",
}
# SGLang, python/sglang/srt/metrics/collector.py SchedulerMetricsCollector: Gauges (multiprocess
# "mostrecent") "sglang:spec_accept_length" (accepted drafts + bonus per forward, of the last log
# interval), "sglang:spec_accept_rate", and in newer versions "sglang:spec_num_steps",
# "sglang:spec_num_draft_tokens". Gauges of the last interval, not counters: no differences.
SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:spec_num_steps")

LabelKey = tuple[tuple[str, str], ...]


@dataclass
class PrometheusScrape:
    """One scrape: its first line, its time stamp if any, and its samples by (name, labels)."""

    line: int
    timestamp: str | None = None
    samples: dict[tuple[str, LabelKey], str] = field(default_factory=dict)


def _parse_labels(text: str) -> LabelKey | None:
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t,":
            i += 1
        if i >= n:
            break
        name = re.match(r"[a-zA-Z_][a-zA-Z0-9_]*", text[i:])
        if name is None:
            return None
        i += name.end()
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != "=":
            return None
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != '"':
            return None
        i += 1
        value: list[str] = []
        while True:
            if i >= n:
                return None
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                nxt = text[i + 1]
                value.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value.append(ch)
            i += 1
        out.append((name.group(0), "".join(value)))
    return tuple(out)


def _interesting(name: str) -> bool:
    return name.startswith(("vllm:spec_decode", "sglang:spec_"))


def read_prometheus_scrapes(
    lines: Iterable[str | bytes], source: str, tally: LineTally | None = None
) -> Iterator[PrometheusScrape | InputError]:
    """Split a file into scrapes and yield them (and bad spec-decoding sample lines).

    A new scrape starts at a `# timestamp ...` comment, at a blank line after samples, when a
    series already seen in the current scrape appears again, or when the sample time stamp changes.
    """
    tally = tally if tally is not None else LineTally()
    current: PrometheusScrape | None = None
    sample_ts: str | None = None
    for number, raw in enumerate(lines, start=1):
        tally.lines += 1
        text = _decode(raw)
        stripped = text.strip()
        if not stripped:
            if current is not None and current.samples:
                yield current
                current = None
            tally.ignored += 1
            continue
        if stripped.startswith("#"):
            stamp = PROM_TIMESTAMP_COMMENT.match(stripped)
            if stamp is not None:
                if current is not None and current.samples:
                    yield current
                current = PrometheusScrape(line=number, timestamp=stamp.group("ts"))
                sample_ts = None
            tally.ignored += 1
            continue
        match = PROM_SAMPLE.match(stripped)
        labels = None if match is None or match.group("labels") is None else _parse_labels(match.group("labels"))
        if match is None or (match.group("labels") is not None and labels is None):
            name = stripped.split("{", 1)[0].split(None, 1)[0]
            if _interesting(name):
                tally.bad += 1
                yield InputError(source, number, "a Prometheus sample line that does not parse", raw=text.encode())
            else:
                tally.ignored += 1
            continue
        name = match.group("name")
        if not _interesting(name):
            tally.ignored += 1
            continue
        key = (name, tuple(sorted(labels or ())))
        ts = match.group("ts")
        if current is not None and (key in current.samples or (ts is not None and sample_ts not in (None, ts))):
            yield current
            current = None
        if current is None:
            current = PrometheusScrape(line=number)
            sample_ts = None
        if ts is not None:
            sample_ts = ts
            if current.timestamp is None:
                current.timestamp = ts
        current.samples[key] = match.group("value")
        tally.metrics += 1
    if current is not None and current.samples:
        yield current


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


@dataclass
class _VllmCounters:
    labels: dict[str, str]
    values: dict[str, str] = field(default_factory=dict)  # counter -> printed value
    per_pos: dict[int, str] = field(default_factory=dict)  # 0-based position -> printed value


def _vllm_series(scrape: PrometheusScrape) -> dict[LabelKey, _VllmCounters]:
    out: dict[LabelKey, _VllmCounters] = {}
    for (name, labels), value in scrape.samples.items():
        role = VLLM_COUNTERS.get(name)
        if role is None:
            continue
        label_map = dict(labels)
        position = label_map.pop("position", None)
        key = tuple(sorted(label_map.items()))
        series = out.setdefault(key, _VllmCounters(labels=label_map))
        if role == "per_pos":
            if position is None or not position.isdigit():
                continue
            series.per_pos[int(position)] = value
        else:
            series.values[role] = value
    return out


def _integer(value: str) -> int | None:
    number = _number(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def prometheus_intervals(
    before: PrometheusScrape | None, after: PrometheusScrape, source: str
) -> list[EngineInterval | InputError]:
    """vLLM intervals between two scrapes (or since the counters started, with `before` None).

    A counter that went down between the scrapes is a reset (the server restarted): as Prometheus's
    `increase()` does, the interval counts from the restart, and its notes say so (the counts between
    the first scrape and the restart are lost).
    """
    out: list[EngineInterval | InputError] = []
    old = _vllm_series(before) if before is not None else {}
    for key, series in _vllm_series(after).items():
        prev = old.get(key)
        if before is not None and prev is None:
            out.append(
                InputError(source, after.line, f"vLLM series {_label_text(series.labels)} is not in the earlier scrape")
            )
            continue
        ints, positions, resets = _differences(series, prev)
        if ints is None or positions is None:
            problem = "are not positions 0..k-1" if ints is not None else "is not a whole number"
            out.append(InputError(source, after.line, f"vLLM counter {_label_text(series.labels)} {problem}"))
            continue
        notes = []
        if resets:  # like Prometheus's increase(): after a restart the counters count from zero again
            ints, positions, _ = _differences(series, None)
            assert ints is not None and positions is not None
            notes.append(
                f"counter reset between the scrapes (lines {before.line if before else '?'} and {after.line}): "
                + ", ".join(resets)
                + "; counted since the restart, so what ran between the earlier scrape and the restart is lost"
            )
        if "accepted" not in ints or "draft_tokens" not in ints:
            out.append(InputError(source, after.line, "vLLM scrape without accepted and draft token counters"))
            continue
        accepted, draft_tokens = ints["accepted"], ints["draft_tokens"]
        drafts = ints.get("drafts")
        printed = {name: series.values[role] for name, role in VLLM_COUNTERS.items() if role in series.values}
        for pos in sorted(series.per_pos):
            printed[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{pos}"}}'] = series.per_pos[pos]
        problems = []
        if positions and sum(positions) != accepted:
            problems.append(f"per-position counts sum to {sum(positions)}, not accepted {accepted}")
        if positions and any(a < b for a, b in itertools.pairwise(positions)):
            problems.append("per-position counts increase with the position")
        if positions and drafts is not None and positions[0] > drafts:
            problems.append(f"{positions[0]} drafts accepted position 1 out of {drafts} drafts")
        if problems:
            out.append(InputError(source, after.line, "inconsistent vLLM counters: " + "; ".join(problems)))
            continue
        try:
            if drafts is not None and positions:
                rec = _from_exact_positions(accepted, draft_tokens, drafts, positions)
            else:
                rec = recover_counts(accepted, draft_tokens, drafts=drafts, assume_full_drafts=False)
        except _Inconsistent as exc:
            out.append(InputError(source, after.line, f"inconsistent vLLM counters: {exc}"))
            continue
        if before is None:
            rec.notes.append("one scrape: counts since the counters started")
        rec.notes.extend(notes)
        out.append(
            _interval(
                ("vllm", "vllm-prometheus", source, after.line, after.timestamp, dict(series.labels), printed),
                draft_tokens=draft_tokens,
                accepted=accepted,
                **rec.fields(),
            )
        )
    return out


def _differences(
    series: _VllmCounters, prev: _VllmCounters | None
) -> tuple[dict[str, int] | None, list[int] | None, list[str]]:
    """Counter differences (totals, per position) and the counters that went down; None where a
    value is not a whole number (totals) or the positions are not 0..k-1 (per position)."""
    ints: dict[str, int] = {}
    resets: list[str] = []
    for role in ("drafts", "draft_tokens", "accepted"):
        if role not in series.values:
            continue
        change = _increase(series.values[role], "0" if prev is None else prev.values.get(role, "0"), role, resets)
        if change is None:
            return None, [], resets
        ints[role] = change
    if series.per_pos and sorted(series.per_pos) != list(range(len(series.per_pos))):
        return ints, None, resets
    positions: list[int] = []
    for pos in range(len(series.per_pos)):
        then = "0" if prev is None else prev.per_pos.get(pos, "0")
        change = _increase(series.per_pos[pos], then, f'accepted_per_pos{{position="{pos}"}}', resets)
        if change is None:
            return None, [], resets
        positions.append(change)
    return ints, positions, resets


def _increase(now_text: str, then_text: str, name: str, resets: list[str]) -> int | None:
    """now - then of one counter, with `name` noted in `resets` when it went down; None when either value is
    not a whole number."""
    now, then = _integer(now_text), _integer(then_text)
    if now is None or then is None:
        return None
    if now < then:
        resets.append(f"{name} {then} -> {now}")
    return now - then


def _from_exact_positions(accepted: int, draft_tokens: int, drafts: int, positions: list[int]) -> _Recovery:
    k = len(positions)
    rec = _Recovery()
    if draft_tokens == 0 and drafts == 0:
        return recover_counts(0, 0, k=k)
    return _finish(rec, accepted, draft_tokens, [(drafts, [(c, c) for c in positions])], k)


def _sglang_gauges(scrape: PrometheusScrape, source: str) -> list[EngineInterval | InputError]:
    groups: dict[LabelKey, dict[str, str]] = {}
    for (name, labels), value in scrape.samples.items():
        if name in SGLANG_GAUGES or name == "sglang:spec_num_draft_tokens":
            groups.setdefault(labels, {})[name] = value
    out: list[EngineInterval | InputError] = []
    for labels, values in groups.items():
        length = values.get("sglang:spec_accept_length")
        if length is None:
            continue
        tpp = _number(length)
        if tpp is None or not math.isfinite(tpp):
            out.append(InputError(source, scrape.line, f"sglang:spec_accept_length {length!r} is not a number"))
            continue
        steps = values.get("sglang:spec_num_steps")
        k = _integer(steps) if steps is not None else None
        printed = {name.split(":", 1)[1]: value for name, value in values.items()}
        notes = ["SGLang exposes gauges of its last log interval, not counters: no counts, no histogram; alpha bounded"]
        if tpp < 1:
            # 0 before any decode batch was logged
            out.append(
                _interval(
                    ("sglang", "sglang-prometheus", source, scrape.line, scrape.timestamp, dict(labels), printed),
                    k=k,
                    notes=("no speculative decode logged yet (accept length below 1)",),
                )
            )
            continue
        m = tpp - 1
        out.append(
            _interval(
                ("sglang", "sglang-prometheus", source, scrape.line, scrape.timestamp, dict(labels), printed),
                k=k,
                tokens_per_pass=tpp,
                tokens_per_pass_bounds=(tpp, tpp),
                alpha_bounds=_alpha_bounds_from_mean(m, m, k),
                notes=tuple(notes),
            )
        )
    return out


class ScrapeSeries:
    """Scrapes from one or several files, in order, as one series: each consecutive pair of vLLM
    scrapes gives the interval between them; a series of one scrape gives the counts since the
    counters started (the server's start, or its last restart). SGLang gauges: one bound-only
    interval per scrape. `audit before.prom after.prom` is a series of two."""

    def __init__(self) -> None:
        self.previous: PrometheusScrape | None = None
        self.previous_source = ""
        self.previous_tally = LineTally()
        self.vllm_scrapes = 0

    def add(self, lines: Iterable[str | bytes], source: str, tally: LineTally) -> Iterator[EngineInterval | InputError]:
        """The intervals that the scrapes of `lines` close, in order."""
        for item in read_prometheus_scrapes(lines, source, tally):
            if isinstance(item, InputError):
                yield item
                continue
            yield from _sglang_gauges(item, source)
            if not any(name in VLLM_COUNTERS for name, _ in item.samples):
                continue
            self.vllm_scrapes += 1
            if self.previous is not None:
                yield from _tallied(prometheus_intervals(self.previous, item, source), tally)
            self.previous, self.previous_source, self.previous_tally = item, source, tally

    def finish(self) -> Iterator[EngineInterval | InputError]:
        """A lone vLLM scrape: the counts since the counters started."""
        if self.vllm_scrapes == 1 and self.previous is not None:
            yield from _tallied(prometheus_intervals(None, self.previous, self.previous_source), self.previous_tally)


def parse_prometheus_scrapes(
    lines: Iterable[str | bytes], source: str, *, tally: LineTally | None = None
) -> Iterator[EngineInterval | InputError]:
    """Intervals from a file of one or several scrapes (see `ScrapeSeries`)."""
    series = ScrapeSeries()
    yield from series.add(lines, source, tally if tally is not None else LineTally())
    yield from series.finish()


def _tallied(items: list[EngineInterval | InputError], tally: LineTally) -> Iterator[EngineInterval | InputError]:
    for out in items:
        if isinstance(out, InputError):
            tally.bad += 1
        elif any(note.startswith("counter reset") for note in out.notes):
            tally.resets += 1
        yield out


def _label_text(labels: Mapping[str, str]) -> str:
    if not labels:
        return "{}"
    return "{" + ",".join(f"{k}={v!r}" for k, v in sorted(labels.items())) + "}"


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
    if interval.engine == "vllm":
        if interval.fmt == "vllm-prometheus":
            head = f"vLLM counters: accepted/drafted = {interval.accepted}/{interval.draft_tokens}" + (
                f" over {interval.drafts} drafts" if interval.drafts is not None else ""
            )
        else:
            name = "Avg Draft acceptance rate" if "Avg Draft acceptance rate" in p else "Draft acceptance rate"
            head = f"vLLM '{name}' {p[name]} = accepted/drafted"
        return f"{head}; {alpha}; {tpp}"
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
    return f"llama.cpp 'draft acceptance' {p.get('draft acceptance')} = accepted/generated draft tokens; {alpha}; {tpp}"
