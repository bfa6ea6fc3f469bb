"""vLLM's log lines apart from v1's metrics: the prefix every line carries (process, level, time stamp,
colour), and v0's "Speculative metrics" lines, running totals since the worker started, each read as the
difference from the same worker's previous line. v1's lines and the counters are read in `vllm`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from msgspec import Struct

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.lines import NUM, line_error, make_interval
from specaccept_cli.read.engines.recovery import (
    MAX_DRAFT_LENGTH,
    Inconsistent,
    fits,
    recover_counts,
)
from specaccept_cli.rule.intervals import EngineInterval, count_too_large

# ---------------------------------------------------------------------------------------------
# Log lines
# vLLM v1, vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log() (checked at vllm-project/vllm
# commits 016a8587 and ee4ceaae): "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted
# throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d
# tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%" with rates
# ", ".join(f"{p:.3f}"), p = accepted_per_pos / num_drafts; mean length = 1 + accepted / num_drafts.


# vLLM v0 (v0.4 to v0.10, removed with the v0 engine): vllm/engine/metrics.py,
# LoggingStatLogger._format_spec_decode_metrics_str() (read at vllm-project/vllm commits 00c33e81, whose
# f-string says "Number of draft tokens tokens: ..., Number of emitted tokens tokens: ...", and f0afa0c2,
# which drops the doubled word): "Speculative metrics: Draft acceptance rate: {:.3f}, System efficiency:
# {:.3f}, Number of speculative tokens: {k}, Number of accepted tokens: {}, Number of draft tokens: {},
# Number of emitted tokens: {}." The figures come from vllm/spec_decode/metrics.py AsyncMetricsCollector:
# the sampler's (spec_decode_base_sampler.py) running totals since the worker started, not the interval's;
# "accepted" counts every draft token that passes the test, also after a rejection (its NOTE says so), so
# it is not the accepted prefix; "emitted" counts the tokens each sequence emitted (prefix + 1); draft
# tokens = k per speculated sequence (`assert draft_tokens % k == 0`); draft acceptance rate = accepted /
# draft, system efficiency = emitted / (draft / k x (k + 1)).
VLLM_V0 = re.compile(
    r"Speculative metrics: Draft acceptance rate: " + NUM + r", System efficiency: " + NUM + r", "
    r"Number of speculative tokens: (\d+), Number of accepted tokens: (\d+), "
    r"Number of draft tokens(?: tokens)?: (\d+), Number of emitted tokens(?: tokens)?: (\d+)\."
)
VLLM_V0_MARKER = "Speculative metrics:"
# With colour on (a TTY or VLLM_LOGGING_COLOR=1), vllm/utils (`_add_prefix`) writes the process tag as
# "\033[1;36m(APIServer pid=12)\033[0;0m " and vllm/logging_utils/formatter.py ColoredFormatter wraps the
# level ("\033[32mINFO\033[0m"), the time stamp and "[file:line]" ("\033[90m...\033[0m"): SGR sequences,
# taken out before the prefix is read.
ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")
# vLLM's logger prefix: "(APIServer pid=12) INFO 11-30 13:00:01 [metrics.py:120] " (the process
# tag is added by the v1 multiprocess front end; older lines start at "INFO").
VLLM_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)\s]+) pid=(?P<pid>\d+)\)\s+)?"
    r"(?:(?P<level>[A-Z]+)\s+(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s+)?"
)


def vllm_prefix(text: str) -> tuple[dict[str, str], str | None, str]:
    """The process labels and time stamp of vLLM's logger prefix, and the line without colour codes."""
    plain = ANSI_SGR.sub("", text) if "\x1b" in text else text
    prefix = VLLM_PREFIX.match(plain)
    labels: dict[str, str] = {}
    timestamp = None
    if prefix is not None:
        if prefix.group("proc"):
            labels["process"] = prefix.group("proc")
            labels["pid"] = prefix.group("pid")
        timestamp = prefix.group("ts")
    return labels, timestamp, plain


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
