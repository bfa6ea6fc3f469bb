"""Count recovery, shared by every engine: from printed totals and rounded rates to exact (k, a)
counts, or to bounds.

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

import math
import re
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np
from msgspec import Struct, field

from specaccept_cli.rule.intervals import CountMatrix

MAX_DRAFT_CANDIDATES = 20_000  # drafts counts tried against printed rates; beyond, only the totals are used
MAX_DRAFT_LENGTH = 64  # more printed per-position rates than this is not a draft length

# ---------------------------------------------------------------------------------------------
# Rounding: a printed figure stands for an interval


def half_ulp(printed: str) -> Fraction:
    """Half a unit in the last printed place: "0.757" -> 0.0005, "92" -> 0.5."""
    text = printed.strip().rstrip("%")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return Fraction(1, 2 * 10**decimals)


FLOAT32_EPSILON = Fraction(1, 2**23)


def fits(printed: str, exact: Fraction, relative_error: Fraction = Fraction(0)) -> bool:
    """Whether `exact` prints as `printed` under round-to-nearest (either way at a tie), after the
    engine computed it with up to `relative_error` (llama.cpp divides in float32)."""
    text = printed.strip().rstrip("%")
    if text.lower() in ("nan", "-nan", "inf"):
        return False
    return abs(exact - Fraction(text)) <= half_ulp(printed) + abs(exact) * relative_error


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


class Recovery(Struct):
    """What could be recovered from an engine's printed counters: each figure with its bounds, where known."""

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
    # Exact only if every draft had k tokens (Drafted = k x drafts was taken to say so); the examined
    # tokens and alpha bounds that hold without that assumption.
    assumes_full_drafts: bool = False
    unassumed_examined_bounds: tuple[int, int] | None = None
    unassumed_alpha_bounds: tuple[float, float] | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "assumes_full_drafts": self.assumes_full_drafts,
            "unassumed_examined_bounds": self.unassumed_examined_bounds,
            "unassumed_alpha_bounds": self.unassumed_alpha_bounds,
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


class Inconsistent(Exception):
    """The printed figures do not fit any integer counts."""


def alpha_range(accepted: int, rejected: tuple[int, int]) -> tuple[float, float] | None:
    low_r, high_r = rejected
    if accepted + high_r == 0:
        return None
    high = 1.0 if accepted + low_r == 0 else accepted / (accepted + low_r)
    return accepted / (accepted + high_r), high


Options = list[tuple[int, list[tuple[int, int]] | None]]  # (drafts, per-position bounds or None)


def _finish(
    rec: Recovery,
    accepted: int,
    draft_tokens: int,
    drafts_options: Options,
    k: int | None,
    acc_first: int | None = None,
) -> Recovery:
    """Fill the recovery from the feasible (drafts, per-position bounds) options."""
    drafts_options, rejected, tpp = _valid_options(accepted, draft_tokens, drafts_options, k, acc_first)
    rec.k = k
    if len(drafts_options) == 1:
        drafts, positions = drafts_options[0]
        _one_option(rec, accepted, draft_tokens, drafts, positions, k)
    else:
        rec.drafts_bounds = (drafts_options[0][0], drafts_options[-1][0])
        rec.notes.append(
            f"the drafts count is not pinned down by the printed figures: {len(drafts_options)} values "
            f"from {rec.drafts_bounds[0]} to {rec.drafts_bounds[1]} fit"
        )
        merged = _merged_positions(drafts_options)
        if merged is not None:
            rec.per_position_bounds = tuple(merged)
    if tpp and rec.tokens_per_pass is None:
        rec.tokens_per_pass_bounds = (min(tpp), max(tpp))
    elif rec.tokens_per_pass is not None:
        rec.tokens_per_pass_bounds = (rec.tokens_per_pass, rec.tokens_per_pass)
    if rec.examined is None:
        rec.examined_bounds = (accepted + rejected[0], accepted + rejected[1])
        rec.alpha_bounds = alpha_range(accepted, rejected)
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


def _valid_options(
    accepted: int, draft_tokens: int, drafts_options: Options, k: int | None, acc_first: int | None
) -> tuple[Options, tuple[int, int], list[float]]:
    """The options whose drafts count and count of rejected drafts fit, the bounds on the rejected
    drafts over them, and their tokens per pass; raise `Inconsistent` when none fits."""
    rejected_lows: list[int] = []
    rejected_highs: list[int] = []
    tpp: list[float] = []
    valid: Options = []
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
        raise Inconsistent(
            f"no drafts count and count of rejected drafts fit {accepted} accepted of {draft_tokens} drafted tokens"
            + (f" (at most k = {k} a draft)" if k else "")
        )
    return valid, (min(rejected_lows), max(rejected_highs)), tpp


def _one_option(
    rec: Recovery,
    accepted: int,
    draft_tokens: int,
    drafts: int,
    positions: list[tuple[int, int]] | None,
    k: int | None,
) -> None:
    """The drafts count is pinned down: the per-position counts, and the histogram when they are exact."""
    rec.drafts = drafts
    rec.drafts_bounds = (drafts, drafts)
    if drafts > 0:
        rec.tokens_per_pass = 1 + accepted / drafts
    if positions is None:
        return
    rec.per_position_bounds = tuple(positions)
    if not all(low == high for low, high in positions):
        return
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


def _merged_positions(drafts_options: Options) -> list[tuple[int, int]] | None:
    """The per-position bounds over every drafts count that fits; None when an option has none."""
    merged: list[tuple[int, int]] | None = None
    for _, positions in drafts_options:
        if positions is None:
            return None
        merged = (
            list(positions)
            if merged is None
            else [(min(a, c), max(b, d)) for (a, b), (c, d) in zip(merged, positions, strict=True)]
        )
    return merged


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
) -> Recovery:
    """Recover what the figures of one interval determine; raise `Inconsistent` if nothing fits.

    `rates` are printed per-position rates acc_i / drafts; `mean_length` is the printed
    1 + accepted / drafts; `drafts` is an exact count when the engine gives one; `k` a draft
    length known otherwise (the number of printed rates wins); `acc_first` an exact count of drafts
    that accepted at least one token (llama.cpp "#acc drafts"). With `assume_full_drafts` and
    Drafted divisible by k, drafts = Drafted / k is tried first (every draft had k tokens, as for
    EAGLE, MTP and draft-model proposers); the note says so. `rates_span_draft` says the printed
    rates cover every draft position (vLLM: one per speculative token); when False (llama.cpp,
    whose vector sizing is not verified) the draft length is only `k` if given.
    """
    rec = Recovery()
    if accepted < 0 or draft_tokens < 0:
        raise Inconsistent("negative token counts")
    if accepted > draft_tokens:
        raise Inconsistent(f"accepted {accepted} exceeds drafted {draft_tokens}")
    k, positions_k = _draft_length(rates, k, rates_span_draft)
    if draft_tokens == 0:
        return _no_drafts(rec, accepted, drafts, positions_k)

    # The drafts counts to try.
    if drafts is not None:
        if mean_length is not None and drafts > 0 and not fits(mean_length, 1 + Fraction(accepted, drafts)):
            raise Inconsistent(f"mean acceptance length {mean_length} is not 1 + {accepted}/{drafts}")
        candidates: range | list[int] = [drafts]
    else:
        low, high = _drafts_range(accepted, draft_tokens, k, acc_first, mean_length)
        if rates is None:
            return _totals_only(rec, accepted, draft_tokens, (low, high), k, mean_length, assume_full_drafts)
        candidates = range(low, high + 1)
        if assume_full_drafts and k and draft_tokens % k == 0 and low <= draft_tokens // k <= high:
            full = draft_tokens // k
            options = _options_for(accepted, [full], rates, positions_k, acc_first)
            if options:
                rec.notes.append(f"every draft taken to have k = {k} tokens (Drafted = k x drafts)")
                _finish(rec, accepted, draft_tokens, options, k, acc_first)
                # The same figures may fit shorter drafts too (2,664 drafts, 5 of k - 1): bounds without the assumption.
                loose = recover_counts(
                    accepted, draft_tokens, rates=rates, mean_length=mean_length, k=k, acc_first=acc_first,
                    assume_full_drafts=False, rates_span_draft=rates_span_draft,
                )  # fmt: skip
                return _assumed(rec, loose)
    if len(candidates) > MAX_DRAFT_CANDIDATES:
        rec.notes.append(f"{len(candidates)} possible drafts counts: the per-position rates were not used")
        return _totals_only(
            rec, accepted, draft_tokens, (candidates[0], candidates[-1]), k, mean_length, assume_full_drafts
        )
    options = _options_for(accepted, candidates, rates, positions_k, acc_first)
    if not options:
        raise Inconsistent("no drafts count and per-position counts fit every printed figure")
    return _finish(rec, accepted, draft_tokens, options, k, acc_first)


def _assumed(rec: Recovery, loose: Recovery) -> Recovery:
    """`rec`, exact under the full-drafts assumption, with the bounds of `loose`, which does not assume it.

    When the figures pin the same counts down without the assumption, nothing was assumed.
    """
    if rec.examined is not None and loose.examined_bounds == (rec.examined, rec.examined):
        rec.notes[:] = [note for note in rec.notes if not note.startswith("every draft taken")]
        return rec
    rec.assumes_full_drafts = True
    examined = loose.examined_bounds or rec.examined_bounds
    alpha = loose.alpha_bounds or rec.alpha_bounds
    if examined is not None and rec.examined_bounds is not None:  # the assumed value lies within: keep both in
        examined = (min(examined[0], rec.examined_bounds[0]), max(examined[1], rec.examined_bounds[1]))
    if alpha is not None and rec.alpha_bounds is not None:
        alpha = (min(alpha[0], rec.alpha_bounds[0]), max(alpha[1], rec.alpha_bounds[1]))
    rec.unassumed_examined_bounds, rec.unassumed_alpha_bounds = examined, alpha
    return rec


def _draft_length(rates: list[str] | None, k: int | None, rates_span_draft: bool) -> tuple[int | None, int | None]:
    """(the draft length, the number of positions counted): the printed rates decide both when they span the draft."""
    if rates is None:
        return k, k
    if len(rates) > MAX_DRAFT_LENGTH:
        raise Inconsistent(f"{len(rates)} per-position rates: more than {MAX_DRAFT_LENGTH}")
    if not rates_span_draft and k is not None and k < len(rates):
        raise Inconsistent(f"{len(rates)} per-position rates for drafts of at most k = {k} tokens")
    return (len(rates) if rates_span_draft else k), len(rates)


def _no_drafts(rec: Recovery, accepted: int, drafts: int | None, k: int | None) -> Recovery:
    """An interval without drafted tokens: nothing accepted, no drafts, an empty histogram when k is known."""
    if accepted:
        raise Inconsistent("accepted tokens without drafted tokens")
    rec.k = k
    rec.drafts = 0 if drafts in (None, 0) else drafts
    if rec.drafts:
        raise Inconsistent("drafts without drafted tokens")
    rec.notes.append("no drafts in this interval")
    if k is not None:
        rec.counts = np.zeros((k + 1, k + 1), dtype=np.int64)
        rec.per_position = tuple([0] * k)
        rec.accepted_hist = tuple([0] * (k + 1))
    rec.examined = 0
    rec.examined_bounds = (0, 0)
    return rec


def _drafts_range(
    accepted: int, draft_tokens: int, k: int | None, acc_first: int | None, mean_length: str | None
) -> tuple[int, int]:
    """The drafts counts that the totals, k, "#acc drafts" and a rounded mean length allow."""
    low = 1
    high = draft_tokens
    if k is not None and k > 0:
        low = max(low, -(-draft_tokens // k))
    if acc_first is not None:
        low = max(low, acc_first)
    if mean_length is not None and accepted == 0:
        if not fits(mean_length, Fraction(1)):
            raise Inconsistent(f"mean acceptance length {mean_length} with nothing accepted")
    elif mean_length is not None:
        if not re.fullmatch(r"\s*\d+(?:\.\d+)?", mean_length):
            raise Inconsistent(f"mean acceptance length {mean_length!r} with {accepted} accepted")
        centre = Fraction(mean_length.strip()) - 1
        half = half_ulp(mean_length)
        if centre + half <= 0:
            raise Inconsistent(f"mean acceptance length {mean_length} with {accepted} accepted")
        low = max(low, math.ceil(accepted / (centre + half)))
        if centre - half > 0:
            high = min(high, math.floor(accepted / (centre - half)))
    if high < low:
        raise Inconsistent(f"no drafts count fits (between {low} and {high})")
    return low, high


def _totals_only(
    rec: Recovery,
    accepted: int,
    draft_tokens: int,
    drafts_range: tuple[int, int],
    k: int | None,
    mean_length: str | None,
    assume_full_drafts: bool,
) -> Recovery:
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
            raise Inconsistent(f"no count of rejected drafts fits (between {r_low} and {r_high})")
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
    if rec.drafts is not None and assume_full_drafts and "every draft taken" in rec.notes[-1]:
        # The bounds must hold without the assumption: a rejected run leaves 1 to k tokens unaccepted.
        r_low, _ = _rejected_bounds(accepted, draft_tokens, None, k, None, None, False)
        loose = (min(rejected[0], r_low), max(rejected[1], min(draft_tokens - accepted, high)))
        rec.assumes_full_drafts = True
        rec.unassumed_examined_bounds = (accepted + loose[0], accepted + loose[1])
        rec.unassumed_alpha_bounds = alpha_range(accepted, loose)
    rec.examined_bounds = (accepted + rejected[0], accepted + rejected[1])
    rec.alpha_bounds = alpha_range(accepted, rejected)
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
        centre, half = Fraction(rate.strip()), half_ulp(rate)
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


def from_exact_positions(accepted: int, draft_tokens: int, drafts: int, positions: list[int]) -> Recovery:
    k = len(positions)
    rec = Recovery()
    if draft_tokens == 0 and drafts == 0:
        return recover_counts(0, 0, k=k)
    return _finish(rec, accepted, draft_tokens, [(drafts, [(c, c) for c in positions])], k)


def alpha_bounds_from_mean(m_low: float, m_high: float, k: int | None) -> tuple[float, float] | None:
    """Alpha bounds from the mean accepted length m per run (no counts).

    examined per run = m + P(rejected). With draft length k, P(full) lies in
    [max(0, m - (k - 1)), m / k], so P(rejected) in [1 - m/k, min(1, k - m)]; without k only
    P(rejected) in (0, 1] is known, so alpha in [m / (m + 1), 1].
    """
    if m_high <= 0:
        return (0.0, 0.0)
    if k is None:
        return (m_low / (m_low + 1), 1.0)
    if m_low > k:  # more accepted per run than drafted: no alpha (and 1e23 - k would round to a zero divisor)
        return None
    low = m_low / (m_low + min(1.0, k - m_low)) if m_low > 0 else 0.0
    rejected_min = 1 - m_high / k
    high = 1.0 if m_high + rejected_min <= 0 else m_high / (m_high + rejected_min)
    return (low, min(1.0, high))
