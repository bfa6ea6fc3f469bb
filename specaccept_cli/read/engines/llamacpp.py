"""llama.cpp: the server's per-request draft acceptance lines (with their optional per-position
trace line), the per-step trace lines of LLAMA_TRACE=1, and the speculative decoder's running
statistics. Each layout is cited next to its regex (llama.cpp at commit 0c1e570, as vendored by
llama-cpp-python 0.3.36, unless said otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.lines import NUM, line_error, make_interval
from specaccept_cli.read.engines.recovery import (
    FLOAT32_EPSILON,
    Inconsistent,
    Recovery,
    alpha_range,
    fits,
    recover_counts,
)
from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.rule.intervals import ONE_SCRAPE, EngineInterval, LineTally, count_too_large

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
# common/speculative.cpp common_speculative_print_stats(), one line per drafter ("implementation"), at
# trace verbosity (SPC_TRC: -lv 4) after each request's print_timings(), with the prefix "spec
# common_specu: ":
#   "statistics %16s: #calls(b,g,a) = %4zu %6zu %6zu, #gen drafts = %6zu, #acc drafts = %5zu,
#   #gen tokens = %6zu, #acc tokens = %5zu%s%s", the calls to begin(), draft() and accept(); then, once
#   accept() was called, ", #mean acc len = %.2f, #acc rate/pos = (%.3f, ...)" (1 + #acc tokens / accept
#   calls, and per position the accept calls that accepted it / accept calls), and with perf timing
#   ", dur(b,g,a) = %.3f, %.3f, %.3f ms". An earlier layout (LOG_INF, early 2026): "statistics %s: #calls =
#   %zu, #gen drafts = %zu, #acc drafts = %zu, #gen tokens = %zu, #acc tokens = %zu%s" with ", dur = %.3f
#   ms". #acc drafts counts drafts with at least one accepted token. The counters belong to the server's
#   one common_speculative, shared by every slot: running totals over all slots since the server started.
LLAMA_STATS = re.compile(
    r"statistics\s+(?P<impl>\S+): #calls(?P<bga>\(b,g,a\))? =\s*(?P<calls>\d+)(?:\s+(?P<g>\d+)\s+(?P<a>\d+))?, "
    r"#gen drafts =\s*(?P<gen_drafts>\d+), #acc drafts =\s*(?P<acc_drafts>\d+), "
    r"#gen tokens =\s*(?P<gen_tokens>\d+), #acc tokens =\s*(?P<acc_tokens>\d+)"
    r"(?:, #mean acc len =\s*(?P<mean>\d+\.\d+), #acc rate/pos = \((?P<rates>\d+\.\d+(?:, \d+\.\d+)*)?\))?"
    r"(?:, dur(?:\(b,g,a\))? = \d+\.\d+(?:, \d+\.\d+, \d+\.\d+)? ms)?\s*$"
)
# tools/server/server-context.cpp, the verify step of update_slots(): with the environment variable
# LLAMA_TRACE set (to a number > 0), SLT_INF(slot, "accepted %2zu/%2zu draft tokens\n") once per verify
# step: the tokens the target accepted of the draft it verified, exact per step. When the context cannot
# drop part of its cache (recurrent models) a partial acceptance prints "... draft tokens (restore
# checkpoint)" and the accepted prefix is verified again (a replay, its own trace line), which counts no
# new draft. At debug verbosity (-lv 5) SLT_DBG(slot, "accepted %d/%d draft tokens, new n_tokens = %d")
# follows each step, the replay's accepted count less its repeated token.
LLAMA_STEP = re.compile(
    r"slot\s+\S+: id\s+(?P<slot>\d+) \| task (?P<task>-?\d+) \| accepted\s+(?P<a>\d+)/\s*(?P<d>\d+) draft tokens"
    r"(?P<restore> \(restore checkpoint\))?(?P<debug>, new n_tokens = -?\d+)?\s*$"
)
LLAMA_MARKERS = ("draft acceptance", "acc per pos", "#gen drafts")
LLAMA_SLOT = re.compile(r"slot\s+\S+: id\s+(?P<slot>\d+) \| task (?P<task>-?\d+) \|")
MAX_OPEN_SLOTS = 4096  # slots with trace lines waiting for their request line; beyond, the oldest is closed


def is_llama_line(text: str) -> bool:
    """A llama.cpp metrics line: a request's acceptance, its per-position line, statistics or a verify step."""
    return any(marker in text for marker in LLAMA_MARKERS) or ("| accepted " in text and " draft tokens" in text)


class _Steps:
    """One slot's verify steps from trace lines, while its request runs: exact (drafted, accepted) pairs."""

    def __init__(self, task: str, line: int) -> None:
        self.task = task
        self.line = line
        self.pairs: dict[tuple[int, int], int] = {}
        self.steps = self.accepted = self.drafted = 0
        self.replay = False  # the next step line replays a checkpoint restore

    def add(self, drafted: int, accepted: int) -> None:
        self.pairs[(drafted, accepted)] = self.pairs.get((drafted, accepted), 0) + 1
        self.steps += 1
        self.accepted += accepted
        self.drafted += drafted

    def recovery(self) -> Recovery:
        """Everything exact: the joint (drafted, accepted) histogram of the steps."""
        width = max(d for d, _ in self.pairs) + 1
        counts = np.zeros((width, width), dtype=np.int64)
        for (d, a), n in self.pairs.items():
            counts[d, a] += n
        by_accepted = counts.sum(axis=0)
        per_position = tuple(int(by_accepted[i:].sum()) for i in range(1, width))
        examined = sum(n * (a + (1 if a < d else 0)) for (d, a), n in self.pairs.items())
        rec = Recovery(
            drafts=self.steps,
            drafts_bounds=(self.steps, self.steps),
            per_position=per_position,
            per_position_bounds=tuple((c, c) for c in per_position),
            examined=examined,
            examined_bounds=(examined, examined),
            alpha=self.accepted / examined if examined else None,
            tokens_per_pass=1 + self.accepted / self.steps,
            accepted_hist=tuple(int(c) for c in by_accepted),
            counts=counts,
            k=width - 1 if len({d for d, _ in self.pairs}) == 1 else None,
        )
        rec.alpha_bounds = None if rec.alpha is None else (rec.alpha, rec.alpha)
        rec.tokens_per_pass_bounds = (rec.tokens_per_pass, rec.tokens_per_pass)  # type: ignore[assignment]
        return rec


class LlamaLines:
    """llama.cpp lines in input order: a request line that prints a mean length may be followed by the
    trace line "acc per pos = (...)" that completes it, so such a line waits for the next one. Trace
    lines of verify steps wait, per slot, for their request's line, which closes them into one exact
    interval (its own figures then checked against theirs, not counted again)."""

    def __init__(self, source: str, k: int | None, tally: LineTally | None = None) -> None:
        self.source = source
        self.k = k
        self.tally = tally if tally is not None else LineTally()
        self.pending: tuple[int, str, re.Match[str]] | None = None
        self.open: dict[str, _Steps] = {}  # slot -> its request's steps so far
        self.step_kind: str | None = None  # "trace" (LLAMA_TRACE) or "debug" (-lv 5), the first seen

    def line(self, number: int, text: str) -> Iterator[EngineInterval | InputError]:
        """The intervals this line completes: the waiting request's, its own, or both."""
        perpos = LLAMA_PERPOS.search(text)
        if perpos is not None and self.pending is not None:
            self.tally.metrics += 1  # the two lines make one interval, counted as one line when yielded
            yield from self._request(*self.pending, perpos)
            self.pending = None
            return
        yield from self.flush()
        if perpos is not None:
            yield self._error(
                number, text, "a llama.cpp 'acc per pos' line without a 'draft acceptance' line before it"
            )
            return
        step = LLAMA_STEP.search(text)
        if step is not None:
            yield from self._step(number, text, step)
            return
        match = LLAMA_REQUEST.search(text)
        if match is not None and match.group(5) is None and match.group(4) is not None:
            self.pending = (number, text, match)  # a trace line "acc per pos" may follow
            return
        yield from self._parse(number, text)

    def flush(self) -> Iterator[EngineInterval | InputError]:
        """The waiting request line, when the next line is not its trace line (or there is none)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            yield from self._request(*pending, None)

    def finish(self) -> Iterator[EngineInterval | InputError]:
        """At the end of the input: the waiting request line, then the steps no request line closed."""
        yield from self.flush()
        for slot in list(self.open):
            yield self._unclosed(slot, self.open.pop(slot))

    def _error(self, number: int, text: str, message: str) -> InputError:
        return line_error(self.source, number, text, message)

    def _step(self, number: int, text: str, step: re.Match[str]) -> Iterator[EngineInterval | InputError]:
        kind = "debug" if step.group("debug") else "trace"
        if self.step_kind is None:
            self.step_kind = kind
        if kind != self.step_kind:  # -lv 5 with LLAMA_TRACE: the same step again, at debug verbosity
            self.tally.ignored += 1
            return
        for figure in (step.group("a"), step.group("d")):
            if (why := count_too_large(figure)) is not None:
                yield self._error(number, text, f"bad llama.cpp trace line: {why}")
                return
        slot, task, accepted, drafted = (
            step.group("slot"),
            step.group("task"),
            int(step.group("a")),
            int(step.group("d")),
        )
        if drafted == 0 or accepted > drafted:
            yield self._error(number, text, f"inconsistent llama.cpp trace line: {accepted} accepted of {drafted}")
            return
        steps = self.open.get(slot)
        if steps is not None and steps.task != task:
            yield self._unclosed(slot, self.open.pop(slot))
            steps = None
        if steps is None:
            if len(self.open) >= MAX_OPEN_SLOTS:
                oldest = next(iter(self.open))
                yield self._unclosed(oldest, self.open.pop(oldest))
            steps = self.open[slot] = _Steps(task, number)
        self.tally.metrics += 1
        if steps.replay:  # the accepted prefix verified again after a checkpoint restore: no new draft
            steps.replay = False
            return
        steps.add(drafted, accepted)
        steps.replay = step.group("restore") is not None and kind == "trace"

    def _unclosed(self, slot: str, steps: _Steps) -> EngineInterval:
        """Steps no request line closed (the log ends first, or the request was cut off)."""
        self.tally.metrics -= 1  # the interval is counted as a metrics line when yielded: its lines already are
        return self._steps_interval(
            steps,
            {"slot": slot, "task": steps.task},
            {"trace lines": str(steps.steps)},
            steps.line,
            ["trace lines of a request whose 'draft acceptance' line is not in the input"],
        )

    def _steps_interval(
        self, steps: _Steps, labels: dict[str, str], printed: dict[str, str], line: int, notes: list[str]
    ) -> EngineInterval:
        rec = steps.recovery()
        rec.notes.extend(notes)
        return make_interval(
            ("llama.cpp", "llamacpp-trace", self.source, line, None, labels, printed),
            draft_tokens=steps.drafted,
            accepted=steps.accepted,
            **rec.fields(),
        )

    def _parse(self, number: int, text: str) -> Iterator[EngineInterval | InputError]:
        stats = LLAMA_STATS.search(text)
        if stats is not None:
            yield self._stats(number, text, stats)
            return
        match = LLAMA_REQUEST.search(text)
        if match is None:
            yield self._error(number, text, "a llama.cpp draft acceptance line in no known layout (server-context.cpp)")
            return
        yield from self._request(number, text, match, None)

    def _request(
        self, number: int, text: str, match: re.Match[str], perpos: re.Match[str] | None
    ) -> Iterator[EngineInterval | InputError]:
        ratio, acc, generated, mean, rate_text = match.groups()
        for name, figure in (("accepted", acc), ("generated", generated)):
            if (why := count_too_large(figure)) is not None:
                yield self._error(number, text, f"bad llama.cpp line: {name} {why}")
                return
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
            yield self._error(number, text, f"inconsistent llama.cpp line: {ratio} is not {accepted}/{draft_tokens}")
            return
        slot = LLAMA_SLOT.search(text)
        labels = {"slot": slot.group("slot"), "task": slot.group("task")} if slot is not None else {}
        rates = rate_text.split(", ") if rate_text else None
        steps = self.open.pop(labels["slot"], None) if labels else None
        if steps is not None and steps.task != labels["task"]:
            yield self._unclosed(labels["slot"], steps)
            steps = None
        if steps is not None:
            yield from self._traced(number, text, steps, labels, printed, (accepted, draft_tokens, mean, rates))
            return
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
            yield self._error(number, text, f"inconsistent llama.cpp line: {exc}")
            return
        yield make_interval(
            ("llama.cpp", fmt, self.source, number, None, labels, printed),
            draft_tokens=draft_tokens,
            accepted=accepted,
            **rec.fields(),
        )

    def _traced(
        self,
        number: int,
        text: str,
        steps: _Steps,
        labels: dict[str, str],
        printed: dict[str, str],
        figures: tuple[int, int, str | None, list[str] | None],
    ) -> Iterator[EngineInterval | InputError]:
        """A request line closing its slot's trace lines: one exact interval when they account for all of it
        (its figures checked against the steps'); when the input begins in the middle of the request, the
        steps exact and the rest bounded from the request's totals less theirs."""
        accepted, draft_tokens, mean, rates = figures
        printed = {**printed, "trace lines": str(steps.steps)}
        rest_accepted, rest_drafted = accepted - steps.accepted, draft_tokens - steps.drafted
        if rest_accepted < 0 or rest_drafted < 0 or rest_accepted > rest_drafted:
            yield self._error(
                number,
                text,
                f"inconsistent llama.cpp lines: the task's {steps.steps} trace lines from line {steps.line} "
                f"accepted {steps.accepted} of {steps.drafted} draft tokens, not within this line's "
                f"{accepted} of {draft_tokens}",
            )
            return
        if rest_drafted == 0:
            problems = []
            if mean is not None and not fits(mean, 1 + Fraction(accepted, steps.steps)):
                problems.append(f"mean length {mean} is not 1 + {accepted}/{steps.steps} steps")
            rec = steps.recovery()
            positions = rec.per_position or ()
            for i, rate in enumerate(rates or ()):
                count = positions[i] if i < len(positions) else 0
                if not fits(rate, Fraction(count, steps.steps)):
                    problems.append(f"position {i + 1} rate {rate} is not {count}/{steps.steps}")
            if problems:
                yield self._error(number, text, "inconsistent llama.cpp lines: " + "; ".join(problems))
                return
            yield self._steps_interval(
                steps, labels, printed, number, [f"exact from {steps.steps} trace lines (from line {steps.line})"]
            )
            return
        self.tally.metrics -= 1  # two intervals from one request line
        yield self._steps_interval(
            steps, labels, printed, number, [f"exact from {steps.steps} trace lines (from line {steps.line})"]
        )
        try:
            rest = recover_counts(rest_accepted, rest_drafted, k=self.k, assume_full_drafts=False)
        except Inconsistent as exc:
            yield self._error(number, text, f"inconsistent llama.cpp line: {exc}")
            return
        rest.notes.append("the part of this request before its first trace line in the input: bounded from the totals")
        yield make_interval(
            ("llama.cpp", "llamacpp-request", self.source, number, None, labels, printed),
            draft_tokens=rest_drafted,
            accepted=rest_accepted,
            **rest.fields(),
        )

    def _stats(self, number: int, text: str, stats: re.Match[str]) -> EngineInterval | InputError:
        impl = stats.group("impl")
        names = ("calls", "g", "a", "gen_drafts", "acc_drafts", "gen_tokens", "acc_tokens")
        for name in names:
            figure = stats.group(name)
            if figure is not None and (why := count_too_large(figure)) is not None:
                return self._error(number, text, f"bad llama.cpp statistics: {why}")
        if (stats.group("bga") is None) != (stats.group("g") is None):
            return self._error(number, text, "a llama.cpp statistics line in no known layout (common/speculative.cpp)")
        gen_drafts, acc_drafts, gen_tokens, acc_tokens = (
            int(stats.group(name)) for name in ("gen_drafts", "acc_drafts", "gen_tokens", "acc_tokens")
        )
        accept_calls = None if stats.group("a") is None else int(stats.group("a"))
        printed = {
            "#gen drafts": str(gen_drafts),
            "#acc drafts": str(acc_drafts),
            "#gen tokens": str(gen_tokens),
            "#acc tokens": str(acc_tokens),
        }
        if accept_calls is not None:
            printed["#calls(b,g,a)"] = f"{stats.group('calls')} {stats.group('g')} {accept_calls}"
        mean, rate_text = stats.group("mean"), stats.group("rates")
        if mean is not None:
            printed["#mean acc len"] = mean
            printed["#acc rate/pos"] = rate_text or ""
        if acc_drafts > gen_drafts or acc_tokens > gen_tokens or acc_drafts > acc_tokens:
            return self._error(number, text, "inconsistent llama.cpp statistics: accepted exceeds generated")
        if accept_calls is not None and acc_drafts > accept_calls:
            return self._error(number, text, "inconsistent llama.cpp statistics: #acc drafts exceeds accept calls")
        rates = rate_text.split(", ") if rate_text else None
        if rates is not None and (self.k is None or len(rates) < self.k):
            # The vector grows to the longest accepted run so far, not to the draft length: no run accepted
            # one position more, and its last position says nothing of full drafts.
            rates.append("0.000")
        try:
            # The mean and rates are over accept() calls (the verify steps), which the (b,g,a) layout prints.
            rec = recover_counts(
                acc_tokens,
                gen_tokens,
                drafts=accept_calls if accept_calls is not None else gen_drafts,
                rates=rates,
                mean_length=mean,
                k=self.k,
                acc_first=acc_drafts,
                assume_full_drafts=False,
                rates_span_draft=False,
            )
        except Inconsistent as exc:
            return self._error(number, text, f"inconsistent llama.cpp statistics: {exc}")
        rec.notes.append("a running total over every slot since the server started, not an interval")
        return make_interval(
            ("llama.cpp", "llamacpp-stats", self.source, number, None, {"drafter": impl}, printed),
            draft_tokens=gen_tokens,
            accepted=acc_tokens,
            **rec.fields(),
        )


# tools/server/server-task.cpp server_task_result_metrics::to_metrics(): each counter is a double written with
# `prometheus << item.value`, a std::stringstream at its default precision of 6 significant digits (%g):
# whole numbers below 10^6 print exactly, larger ones in exponent form, "1.00003e+06" for 1000030 and
# for 1000025..1000034 alike. The per-position counters are uint64_t and print exactly.
_STRINGSTREAM_ROUNDED = re.compile(r"^(?P<lead>\d)(?:\.(?P<frac>\d{1,5}))?e\+(?P<exp>\d+)$")


def stringstream_bounds(printed: str) -> tuple[int, int] | None:
    """The whole numbers a stringstream double printed as `printed` may be, when it may be rounded (6
    significant digits in exponent form, exponent 6 or more); None when the figure is exact as printed."""
    match = _STRINGSTREAM_ROUNDED.match(printed.strip())
    if match is None:
        return None
    exponent = int(match.group("exp"))
    if exponent < 6 or exponent > 40:  # below 10^6 stringstream prints every digit; 10^40 is no count
        return None
    frac = match.group("frac") or ""
    value = int(match.group("lead") + frac) * 10 ** (exponent - len(frac))
    half = 5 * 10 ** (exponent - 6)  # half a unit in the sixth significant digit
    return value - half, value + half


def rounded_counter_bounds(values: dict[str, str], earlier: dict[str, str] | None) -> dict[str, tuple[int, int]]:
    """Counter role -> bounds on its increase between the scrapes, for the counters printed rounded in either."""
    out: dict[str, tuple[int, int]] = {}
    for role, now_text in values.items():
        then_text = "0" if earlier is None else earlier.get(role, "0")
        now, then = stringstream_bounds(now_text), stringstream_bounds(then_text)
        if now is None and then is None:
            continue
        now = now or (int(float(now_text)),) * 2
        then = then or (int(float(then_text)),) * 2
        out[role] = (max(0, now[0] - then[1]), now[1] - then[0])
    return out


def rounded_recovery(
    bounds: dict[str, tuple[int, int]], ints: dict[str, int], positions: list[int]
) -> tuple[int, tuple[int, int], Recovery]:
    """(accepted, drafted-token bounds, recovery) from counters some of which are only bounded: the accepted
    count is the sum of the exact per-position counters; the drafts and drafted tokens stay bounds, and so do
    the examined tokens and alpha. Raise `Inconsistent` when nothing fits."""
    if not positions:
        raise Inconsistent(
            "a counter printed with 6 significant digits and no per-position counters to pin the accepted tokens down"
        )
    accepted = sum(positions)
    low_a, high_a = bounds.get("accepted", (accepted, accepted))
    if not low_a <= accepted <= high_a:
        raise Inconsistent(f"per-position counts sum to {accepted}, outside the accepted counter's {low_a}..{high_a}")
    low_d, high_d = bounds.get("draft_tokens", (ints["draft_tokens"], ints["draft_tokens"]))
    low_d = max(low_d, accepted)
    drafts = ints.get("drafts")
    low_s, high_s = bounds.get("drafts", (drafts, drafts) if drafts is not None else (positions[0], high_d))
    low_s, high_s = max(low_s, positions[0], 1), min(high_s, high_d)
    # A rejected draft leaves 1 or more tokens unaccepted, a draft that accepted nothing is rejected, one that
    # accepted the last position is full (recovery._rejected_bounds).
    low_r = max(1 if low_d > accepted else 0, low_s - positions[0])
    high_r = min(high_d - accepted, high_s - positions[-1])
    if low_d > high_d or low_s > high_s or low_r > high_r:
        raise Inconsistent(f"no drafts count and drafted tokens fit {accepted} accepted within the printed bounds")
    rec = Recovery(
        drafts=low_s if low_s == high_s else None,
        drafts_bounds=(low_s, high_s),
        per_position=tuple(positions),
        per_position_bounds=tuple((c, c) for c in positions),
        examined_bounds=(accepted + low_r, accepted + high_r),
        alpha_bounds=alpha_range(accepted, (low_r, high_r)),
        tokens_per_pass_bounds=(1 + accepted / high_s, 1 + accepted / low_s),
        k=len(positions),
    )
    rounded = ", ".join(sorted(bounds))
    rec.notes.append(
        f"llama.cpp printed the {rounded} counter with 6 significant digits (a double through std::stringstream): "
        "known only to half a unit in its last place, so carried as bounds"
    )
    return accepted, (low_d, high_d), rec


def rounded_counters(
    values: dict[str, str], earlier: dict[str, str] | None, ints: dict[str, int], positions: list[int]
) -> dict[str, tuple[int, int]]:
    """Bounds of the counters printed rounded; a rounded accepted count alone is pinned down by the exact
    per-position counts (then `ints` holds it and nothing is left to bound)."""
    rounded = rounded_counter_bounds(values, earlier)
    if (
        rounded.keys() == {"accepted"}
        and positions
        and rounded["accepted"][0] <= sum(positions) <= rounded["accepted"][1]
    ):
        ints["accepted"] = sum(positions)
        return {}
    return rounded


def rounded_scrape_interval(
    where: tuple[str, str, str, int, str | None, dict[str, str], dict[str, str]],
    rounded: dict[str, tuple[int, int]],
    ints: dict[str, int],
    positions: list[int],
    lone: bool,
) -> EngineInterval | InputError:
    """The interval between two scrapes whose counters are only bounded: accepted exact from the per-position
    counts, the drafted tokens as `draft_tokens_bounds` (`draft_tokens` their low bound)."""
    try:
        accepted, drafted, rec = rounded_recovery(rounded, ints, positions)
    except Inconsistent as exc:
        return InputError(where[2], where[3], f"inconsistent llama.cpp counters: {exc}")
    if lone:
        rec.notes.append(ONE_SCRAPE)
    return make_interval(
        where,
        draft_tokens=drafted[0],
        draft_tokens_bounds=drafted if drafted[0] != drafted[1] else None,
        accepted=accepted,
        **rec.fields(),
    )


def _llama_lines(
    source: str, k: int | None, assume_full_drafts: bool, tally: LineTally, keep_duplicates: bool = False
) -> LlamaLines:
    del assume_full_drafts, keep_duplicates
    return LlamaLines(source, k, tally)


FORMATS = (
    InputFormat(
        "llamacpp-log",
        Kind.INTERVALS,
        "llama.cpp",
        "tools/server/server-context.cpp and common/speculative.cpp (commit 0c1e570)",
        "log-lines",
        sniff=lambda line: is_llama_line(line.decode("utf-8", errors="replace")),
        markers=(*(marker.encode() for marker in LLAMA_MARKERS), b"| accepted "),
        reader=_llama_lines,
    ),
)
