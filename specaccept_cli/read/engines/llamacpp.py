"""llama.cpp: the server's per-request draft acceptance lines (with their optional per-position
trace line) and the speculative decoder's running statistics. Each layout is cited next to its regex.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.intervals import NUM, EngineInterval, line_error, make_interval
from specaccept_cli.read.engines.recovery import FLOAT32_EPSILON, Inconsistent, fits, recover_counts

# llama.cpp server, tools/server/server-context.cpp (earlier examples/server/server.cpp)
# server_slot::print_timings(), after the "prompt eval time" / "eval time" lines:
#   "draft acceptance rate = %0.5f (%5d accepted / %5d generated)\n" (n_draft_accepted / n_draft_total),
#   later "draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f" with a trace line
#   "     acc per pos = (%s)", or one line "..., mean acceptance length = %5.2f, acceptance rate per
#   position = (%s)"; mean length = 1 + accepted / verification steps, rates "%.3f" of
#   n_accepted_per_pos / n_draft_verif_steps. Lines carry the slot prefix
#   "slot print_timing: id  0 | task 12 | " (SLT_INF) unless printed after a "\n".
LLAMA_REQUEST = re.compile(
    r"draft acceptance(?: rate)? = " + NUM + r" \(\s*(\d+) accepted /\s*(\d+) generated\)"
    r"(?:, mean (?:acceptance length|len) =\s*" + NUM + r")?"
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


class LlamaLines:
    """llama.cpp lines in input order: a request line that prints a mean length may be followed by the
    trace line "acc per pos = (...)" that completes it, so such a line waits for the next one."""

    def __init__(self, source: str, k: int | None) -> None:
        self.source = source
        self.k = k
        self.pending: tuple[int, str, re.Match[str]] | None = None

    def line(self, number: int, text: str) -> Iterator[EngineInterval | InputError]:
        """The intervals this line completes: the waiting request's, its own, or both."""
        perpos = LLAMA_PERPOS.search(text)
        if perpos is not None and self.pending is not None:
            yield self._request(*self.pending, perpos)
            self.pending = None
            return
        yield from self.flush()
        if perpos is not None:
            yield self._error(
                number, text, "a llama.cpp 'acc per pos' line without a 'draft acceptance' line before it"
            )
            return
        match = LLAMA_REQUEST.search(text)
        if match is not None and match.group(5) is None and match.group(4) is not None:
            self.pending = (number, text, match)  # a trace line "acc per pos" may follow
            return
        yield self._parse(number, text)

    def flush(self) -> Iterator[EngineInterval | InputError]:
        """The waiting request line, when the next line is not its trace line (or there is none)."""
        if self.pending is not None:
            yield self._request(*self.pending, None)
            self.pending = None

    def _error(self, number: int, text: str, message: str) -> InputError:
        return line_error(self.source, number, text, message)

    def _parse(self, number: int, text: str) -> EngineInterval | InputError:
        stats = LLAMA_STATS.search(text)
        if stats is not None:
            return self._stats(number, text, stats)
        match = LLAMA_REQUEST.search(text)
        if match is None:
            return self._error(
                number, text, "a llama.cpp draft acceptance line in no known layout (server-context.cpp)"
            )
        return self._request(number, text, match, None)

    def _request(
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
        if draft_tokens > 0 and not fits(ratio, Fraction(accepted, draft_tokens), FLOAT32_EPSILON):
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
        except Inconsistent as exc:
            return self._error(number, text, f"inconsistent llama.cpp line: {exc}")
        return make_interval(
            ("llama.cpp", fmt, self.source, number, None, labels, printed),
            draft_tokens=draft_tokens,
            accepted=accepted,
            **rec.fields(),
        )

    def _stats(self, number: int, text: str, stats: re.Match[str]) -> EngineInterval | InputError:
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
        except Inconsistent as exc:
            return self._error(number, text, f"inconsistent llama.cpp statistics: {exc}")
        rec.notes.append("a running total for this drafter since the server started, not an interval")
        return make_interval(
            ("llama.cpp", "llamacpp-stats", self.source, number, None, {"drafter": impl}, printed),
            draft_tokens=gen_tokens,
            accepted=acc_tokens,
            **rec.fields(),
        )
