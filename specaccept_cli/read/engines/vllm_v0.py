"""vLLM v0's "Speculative metrics" lines: running totals since the worker started (the layout is cited in
`vllm`, next to its regex), each line read as the difference from the same worker's previous one.
"""

from __future__ import annotations

from fractions import Fraction

from msgspec import Struct

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.intervals import (
    EngineInterval,
    count_too_large,
    line_error,
    make_interval,
)
from specaccept_cli.read.engines.recovery import (
    MAX_DRAFT_LENGTH,
    Inconsistent,
    fits,
    recover_counts,
)

# ---------------------------------------------------------------------------------------------
# Log lines
# vLLM v1, vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log() (checked at vllm-project/vllm
# commits 016a8587 and ee4ceaae): "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted
# throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d
# tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%" with rates
# ", ".join(f"{p:.3f}"), p = accepted_per_pos / num_drafts; mean length = 1 + accepted / num_drafts.
from specaccept_cli.read.engines.vllm import VLLM_V0, vllm_prefix


class V0Totals(Struct):
    """One v0 worker's running totals as last printed: (accepted, draft, emitted) and k."""

    accepted: int
    draft: int
    emitted: int
    k: int
    line: int


class VllmV0Lines:
    """vLLM v0 "Speculative metrics" lines: running totals since the worker started, so each interval is the
    difference from the same process's previous line (the first line: the counts since the worker started).

    What the totals give per interval, exactly: draft tokens D, k, the speculated sequences S = D / k and the
    emitted tokens E = sum (a + 1), hence the accepted prefix A = E - S and tokens per pass E / S. v0's
    "accepted" figure counts every passing token, also after a rejection: kept as printed (and checked to be
    at least A), never taken for the prefix. Which sequences accepted every draft is not logged, so examined
    tokens, alpha and the histogram are bounded.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.previous: dict[tuple[str, str], V0Totals] = {}

    def line(self, number: int, text: str) -> EngineInterval | InputError:
        labels, timestamp, plain = vllm_prefix(text)
        found = VLLM_V0.search(plain)
        if found is None:
            return line_error(
                self.source,
                number,
                text,
                "a vLLM v0 'Speculative metrics' line in no known layout (vllm/engine/metrics.py)",
            )
        rate, efficiency, k_text, acc, draft, emitted = found.groups()
        printed = {
            "Draft acceptance rate": rate,
            "System efficiency": efficiency,
            "Number of speculative tokens": k_text,
            "Number of accepted tokens": acc,
            "Number of draft tokens": draft,
            "Number of emitted tokens": emitted,
        }
        for name, figure in (("accepted", acc), ("draft", draft), ("emitted", emitted), ("speculative", k_text)):
            if (why := count_too_large(figure)) is not None:
                return line_error(self.source, number, text, f"bad vLLM v0 line: Number of {name} tokens: {why}")
        k, totals = int(k_text), V0Totals(int(acc), int(draft), int(emitted), int(k_text), number)
        why = _v0_inconsistent(totals, rate, efficiency)
        if why is not None:
            return line_error(self.source, number, text, f"inconsistent vLLM v0 line: {why}")
        key = (labels.get("process", ""), labels.get("pid", ""))
        before = self.previous.get(key)
        notes = [
            "vLLM v0 prints running totals since the worker started: this interval is the difference from "
            + (f"line {before.line}" if before is not None else "zero (the first line)"),
            "v0's 'accepted' counts every passing draft token, also after a rejection: the accepted prefix is "
            "emitted - sequences; which sequences accepted every draft is not logged, so alpha is bounded",
        ]
        if before is not None and (
            before.k != k
            or totals.draft < before.draft
            or totals.emitted < before.emitted
            or totals.accepted < before.accepted
        ):
            notes[0] = (
                f"the totals went down or k changed after line {before.line} (the worker restarted): counted "
                "from the restart, so what ran between that line and the restart is lost"
            )
            before = None
        self.previous[key] = totals
        base = before if before is not None else V0Totals(0, 0, 0, k, 0)
        draft_tokens, emitted_tokens = totals.draft - base.draft, totals.emitted - base.emitted
        passing = totals.accepted - base.accepted
        sequences = draft_tokens // k if k else 0
        prefix = emitted_tokens - sequences
        head = ("vllm", "vllm-log-v0", self.source, number, timestamp, labels, printed)
        if draft_tokens == 0:
            if emitted_tokens or passing:
                return line_error(self.source, number, text, "inconsistent vLLM v0 line: tokens emitted without drafts")
            return make_interval(head, k=k, drafts=0, draft_tokens=0, accepted=0, notes=tuple(notes))
        if not 0 <= prefix <= min(passing, draft_tokens):
            return line_error(
                self.source,
                number,
                text,
                f"inconsistent vLLM v0 interval: {emitted_tokens} emitted tokens over {sequences} sequences make "
                f"{prefix} accepted prefix tokens, outside 0..{min(passing, draft_tokens)} (the passing tokens)",
            )
        try:
            rec = recover_counts(prefix, draft_tokens, drafts=sequences, k=k, assume_full_drafts=True)
        except Inconsistent as exc:
            return line_error(self.source, number, text, f"inconsistent vLLM v0 interval: {exc}")
        rec.notes[:0] = notes
        return make_interval(head, draft_tokens=draft_tokens, accepted=prefix, **rec.fields())


def _v0_inconsistent(totals: V0Totals, rate: str, efficiency: str) -> str | None:
    """Why a v0 line's printed figures contradict each other (to the printed 3 decimals), or None."""
    if not 0 < totals.k <= MAX_DRAFT_LENGTH:
        return f"Number of speculative tokens {totals.k} is not a draft length (1 to {MAX_DRAFT_LENGTH})"
    if totals.draft % totals.k:
        return f"{totals.draft} draft tokens are not a whole number of sequences of k = {totals.k}"
    sequences = totals.draft // totals.k
    if totals.accepted > totals.draft:
        return f"{totals.accepted} accepted of {totals.draft} draft tokens"
    if not sequences <= totals.emitted <= sequences * (totals.k + 1):
        return f"{totals.emitted} emitted tokens from {sequences} sequences of k = {totals.k}"
    if totals.draft == 0:
        return None if rate == "nan" and efficiency == "nan" else "rates printed without draft tokens"
    if not fits(rate, Fraction(totals.accepted, totals.draft)):
        return f"draft acceptance rate {rate} is not {totals.accepted}/{totals.draft}"
    if not fits(efficiency, Fraction(totals.emitted, sequences * (totals.k + 1))):
        return f"system efficiency {efficiency} is not {totals.emitted}/({sequences} x {totals.k + 1})"
    return None


# ---------------------------------------------------------------------------------------------
