"""One request's speculative-decoding counts, as a server wrote them: engine-neutral, checked, exact or bounded.

Every engine reader in this package turns its payload into a `RequestRecord` with the
figures as given; `check` then tests the identities they must satisfy and `runs` says what
they pin down:

- per-step arrays (vLLM `detailed`, SGLang's `accept_lengths`) are the runs themselves:
  step i drafted d_i tokens and accepted a_i of them, in order. Exact.
- a histogram by draft length (vLLM's `acceptance_histogram_by_draft_length`) is the joint
  (k, a) histogram of the request. Exact.
- a dense histogram with the draft budget k is the (k, a) histogram when every step drafted
  k tokens, which the totals prove when drafted = steps x k (each step drafts at most k).
  Exact; otherwise the drafted total is split among the steps in an unknown way and only
  bounds follow.
- totals alone (llama.cpp's `draft_n` / `draft_n_accepted`) bound the examined tokens, hence alpha.

Notation: k draft budget, S steps, A accepted drafts (bonus excluded), D drafted tokens.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field
from msgspec.structs import replace

from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH

# The most verify steps one request may claim in a histogram (whose runs are then laid out one by one): a
# request of 4,194,304 steps generated at least that many tokens, beyond what servers generate for one request
# today. A 400-byte payload claiming 3e8 steps took 2.4 GB; now it is a bad line, and a request's runs take at
# most about 100 MB however its payload is written. Per-step arrays hold their steps, so they are not bounded.
MAX_REQUEST_STEPS = 1 << 22

CountMatrix = npt.NDArray[np.int64]
IntArray = npt.NDArray[np.int64]

# Known engine counting bugs a broken identity can be recognised as (named in the message).
EOS_IN_PREFIX = "vllm#56101"  # tokens accepted after an EOS inside the accepted prefix are counted
INVALIDATED_DRAFTS = "vllm#56977"  # drafts that structured output invalidated are counted as drafted
SGLANG_OLD_RATE = "sglang#23530"  # acceptance rate computed as (accepted + bonus) / (steps x (k + 1))


class BadRecord(ValueError):
    """A record whose figures contradict each other (or are not counts): a bad line."""


class RequestRecord(Struct, frozen=True):
    """One request's counts as the engine wrote them (None: not written)."""

    engine: str  # "vllm", "tensorrt-llm", "sglang", "llama.cpp"; AIPerf records carry the engine they name
    fmt: str  # the exact shape, e.g. "vllm-metrics", "vllm-choice-stats", "sglang-meta-info", "aiperf-record"
    request_id: str | None = None
    k: int | None = None  # the draft budget (num_speculative_tokens) when written
    steps: int | None = None  # verification steps
    accepted: int | None = None  # accepted draft tokens, bonus excluded
    drafted: int | None = None  # drafted (proposed) tokens
    histogram: tuple[int, ...] | None = None  # [a] = steps that accepted exactly a drafts
    by_draft_length: dict[int, tuple[int, ...]] | None = None  # k -> histogram
    per_step_accepted: tuple[int, ...] | None = None
    per_step_drafted: tuple[int, ...] | None = None
    completion_tokens: int | None = None  # from the response's usage, when there
    timestamp: float | None = None  # Unix seconds (a response's `created`), when there
    labels: dict[str, str] = field(default_factory=dict)  # e.g. model, engine: for --group-by
    printed: dict[str, str] = field(default_factory=dict)  # rates as printed, to check
    drafted_nominal: bool = False  # drafted = steps x configured width, not counted (SGLang): exact only if fixed
    notes: tuple[str, ...] = ()

    # --- what the figures pin down ---------------------------------------------------------

    def runs(self) -> tuple[IntArray, IntArray] | None:
        """Every step as (drafted k, accepted a), when the record pins them down; None when only bounds follow.

        Steps that drafted nothing (vLLM's k = 0 row: every draft invalidated) test no token and are left out.
        """
        if self.per_step_accepted is not None and self.per_step_drafted is not None:
            k = np.array(self.per_step_drafted, dtype=np.int64)
            a = np.array(self.per_step_accepted, dtype=np.int64)
            keep = k > 0
            return k[keep], a[keep]
        if self.by_draft_length is not None:
            ks, accs = [], []
            for length, hist in sorted(self.by_draft_length.items()):
                if length == 0:
                    continue
                counts = np.array(hist, dtype=np.int64)
                ks.append(np.full(int(counts.sum()), length, dtype=np.int64))
                accs.append(np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts))
            if not ks:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            return np.concatenate(ks), np.concatenate(accs)
        if self.full_drafts:
            assert self.histogram is not None and self.k is not None
            counts = np.array(self.histogram, dtype=np.int64)
            accepted = np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts)
            return np.full(accepted.shape[0], self.k, dtype=np.int64), accepted
        return None

    @property
    def full_drafts(self) -> bool:
        """True when every step is known to have drafted k tokens: drafted = steps x k (or nominal so)."""
        if self.histogram is None or self.k is None or self.steps is None or self.drafted is None:
            return False
        return self.drafted == self.steps * self.k

    def counts(self) -> CountMatrix | None:
        """The request's joint (k, a) histogram, when exact."""
        found = self.runs()
        if found is None:
            return None
        k, a = found
        size = int(k.max()) + 1 if k.shape[0] else 1
        flat = np.bincount(k * size + a, minlength=size * size)
        return flat.astype(np.int64).reshape(size, size)

    def examined_bounds(self) -> tuple[int, int] | None:
        """Examined tokens (accepted + rejected steps) when the runs are not pinned down: closed bounds.

        A rejected step drafted more than it accepted, so it holds at least one of the E = D - A drafted
        tokens that were not accepted, and at most k - a of them; a step that accepted everything it drafted
        was not rejected. So the rejected steps R lie in [fewest steps whose gaps cover E, min(E, S)].
        """
        if self.accepted is None or self.drafted is None:
            return None
        extra = self.drafted - self.accepted
        if extra <= 0:
            return (self.accepted, self.accepted)
        if self.k is None and self.histogram is not None and self.drafted_nominal and self.steps:
            return self._nominal_width_bounds()
        high = extra if self.steps is None else min(extra, self.steps)
        low = 1
        if self.k is not None and self.histogram is not None:
            budget = self.k
            high = min(high, sum(n for a, n in enumerate(self.histogram) if a < budget))
            low, covered = 0, 0
            for a, n in enumerate(self.histogram):  # the largest gaps k - a first: fewest steps
                gap = budget - a
                if gap <= 0 or covered >= extra:
                    continue
                take = min(n, -(-(extra - covered) // gap))
                low += take
                covered += take * gap
        elif self.k:
            low = -(-extra // self.k)
        return (self.accepted + max(low, 1), self.accepted + max(high, 1))

    def _nominal_width_bounds(self) -> tuple[int, int]:
        """Examined tokens of a histogram whose draft length is unknown but fixed (SGLang's nominal width).

        Every pass drafted the same d tokens, d at least the longest accepted run and at most the nominal
        width (drafted / steps, which may count a tree's nodes): a pass that accepted a drafts examined
        min(a + 1, d) tokens. Bounded over that range of d, so a tree is never read as a chain.
        """
        assert self.histogram is not None and self.steps and self.drafted is not None
        top = max(1, max((a for a, n in enumerate(self.histogram) if n), default=0))
        width = max(top, self.drafted // self.steps)
        low = sum(min(a + 1, top) * n for a, n in enumerate(self.histogram))
        high = sum(min(a + 1, width) * n for a, n in enumerate(self.histogram))
        return (low, high)

    # --- identities ------------------------------------------------------------------------

    def check(self) -> RequestRecord:
        """The record when its figures agree; BadRecord naming the broken identity (and a known bug) if not."""
        for name in ("k", "steps", "accepted", "drafted", "completion_tokens"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise BadRecord(f"{name} = {value} is negative")
        self._check_sizes()
        steps, accepted, drafted, k = self.steps, self.accepted, self.drafted, self.k
        if self.per_step_accepted is not None or self.per_step_drafted is not None:
            self._check_steps()
            if steps is None:
                steps = len(self.per_step_accepted or self.per_step_drafted or ())
            if accepted is None:
                accepted = sum(self.per_step_accepted or ())
            if drafted is None and self.per_step_drafted is not None:
                drafted = sum(self.per_step_drafted)
        if self.histogram is not None:
            total = sum(self.histogram)
            if steps is not None and total != steps:
                raise BadRecord(f"the histogram counts {total} steps, not the {steps} steps reported")
            from_hist = sum(a * n for a, n in enumerate(self.histogram))
            if accepted is not None and from_hist != accepted:
                raise BadRecord(f"the histogram accepts {from_hist} tokens, not the {accepted} accepted reported")
            if k is not None and len(self.histogram) - 1 > k and any(self.histogram[k + 1 :]):
                raise BadRecord(f"the histogram has steps accepting more than the draft budget k = {k}")
            steps = total if steps is None else steps
            accepted = from_hist if accepted is None else accepted
        if self.by_draft_length is not None:
            self._check_by_length(steps, accepted, drafted, k)
        if accepted is not None and drafted is not None and accepted > drafted:
            raise BadRecord(f"{accepted} accepted of {drafted} drafted tokens: more accepted than drafted")
        if (
            k is not None
            and steps is not None
            and drafted is not None
            and drafted > steps * k
            and not self.drafted_nominal
        ):
            raise BadRecord(
                f"{drafted} drafted tokens in {steps} steps of at most k = {k}: more than steps x k "
                f"(drafts invalidated by structured output counted as drafted, {INVALIDATED_DRAFTS})"
            )
        if k is not None and steps is not None and accepted is not None and accepted > steps * k:
            raise BadRecord(f"{accepted} accepted tokens in {steps} steps of at most k = {k}")
        self._check_printed(steps, accepted, drafted, k)
        over = self.overcounted_output()
        if over is not None:
            note = (
                f"accepted + bonus tokens exceed the {self.completion_tokens} output tokens by {over}: tokens past "
                f"an EOS or stop inside the accepted prefix are counted ({EOS_IN_PREFIX}); acceptance stands, "
                "tokens per pass overstates the output"
            )
            return replace(self, notes=(*self.notes, note))
        return self

    def _check_sizes(self) -> None:
        """No draft longer than any drafter's, and no more steps claimed than a request makes: the runs of
        a histogram are laid out one by one, so memory would follow the numbers a payload claims."""
        lengths = [self.k or 0, len(self.histogram or ()) - 1, max(self.by_draft_length or (0,))]
        lengths.append(max(self.per_step_drafted or (0,)))
        if max(lengths) > MAX_DRAFT_LENGTH:
            raise BadRecord(f"a draft of {max(lengths):,} tokens: longer than any draft (at most {MAX_DRAFT_LENGTH})")
        if self.per_step_accepted is None:
            claimed = [self.steps or 0, sum(self.histogram or ())]
            claimed += [sum(hist) for hist in (self.by_draft_length or {}).values()]
            if max(claimed) > MAX_REQUEST_STEPS:
                raise BadRecord(
                    f"{max(claimed):,} verify steps in one request: more than any request makes"
                    f" (at most {MAX_REQUEST_STEPS:,})"
                )

    def _check_steps(self) -> None:
        acc, dra = self.per_step_accepted, self.per_step_drafted
        if acc is None or dra is None:
            raise BadRecord("per-step arrays come in pairs: accepted and drafted")
        if len(acc) != len(dra):
            raise BadRecord(f"per-step arrays of different lengths ({len(acc)} accepted, {len(dra)} drafted)")
        over = next((i for i, (a, d) in enumerate(zip(acc, dra)) if a > d), None)
        if over is not None:
            raise BadRecord(f"step {over + 1} accepts {acc[over]} of {dra[over]} drafted tokens")
        if self.steps is not None and len(acc) != self.steps:
            raise BadRecord(f"{len(acc)} per-step entries, not the {self.steps} steps reported")
        if self.accepted is not None and sum(acc) != self.accepted:
            raise BadRecord(f"per-step accepted sums to {sum(acc)}, not the {self.accepted} accepted reported")
        if self.drafted is not None and sum(dra) != self.drafted:
            bug = (
                f" (drafts invalidated by structured output counted, {INVALIDATED_DRAFTS})"
                if sum(dra) < self.drafted
                else ""
            )
            raise BadRecord(f"per-step drafted sums to {sum(dra)}, not the {self.drafted} drafted reported{bug}")
        if self.k is not None and any(d > self.k for d in dra):
            raise BadRecord(f"a step drafts more than the draft budget k = {self.k}")
        if self.histogram is not None:
            hist = [0] * len(self.histogram)
            for a in acc:
                if a >= len(hist):
                    raise BadRecord(f"a step accepts {a} tokens, beyond the histogram's {len(hist) - 1}")
                hist[a] += 1
            if tuple(hist) != tuple(self.histogram):
                raise BadRecord("the per-step accepted counts do not make the histogram")

    def _check_by_length(self, steps: int | None, accepted: int | None, drafted: int | None, k: int | None) -> None:
        assert self.by_draft_length is not None
        for length, hist in self.by_draft_length.items():
            if len(hist) != length + 1:
                raise BadRecord(f"the histogram for draft length {length} has {len(hist)} buckets, not {length + 1}")
            if k is not None and length > k:
                raise BadRecord(f"a histogram for draft length {length}, beyond the draft budget k = {k}")
        total = sum(sum(hist) for hist in self.by_draft_length.values())
        from_rows = sum(a * n for hist in self.by_draft_length.values() for a, n in enumerate(hist))
        drafted_rows = sum(length * sum(hist) for length, hist in self.by_draft_length.items())
        if steps is not None and total != steps:
            raise BadRecord(f"the histograms by draft length count {total} steps, not {steps}")
        if accepted is not None and from_rows != accepted:
            raise BadRecord(f"the histograms by draft length accept {from_rows} tokens, not {accepted}")
        if drafted is not None and drafted_rows != drafted:
            bug = (
                f" (drafts invalidated by structured output counted, {INVALIDATED_DRAFTS})"
                if drafted_rows < drafted
                else ""
            )
            raise BadRecord(f"the histograms by draft length draft {drafted_rows} tokens, not {drafted}{bug}")
        if self.histogram is not None:
            merged = [0] * max(len(self.histogram), max((len(h) for h in self.by_draft_length.values()), default=0))
            for hist in self.by_draft_length.values():
                for a, n in enumerate(hist):
                    merged[a] += n
            padded = list(self.histogram) + [0] * (len(merged) - len(self.histogram))
            if merged != padded:
                raise BadRecord("the histograms by draft length do not add up to the histogram")

    def _check_printed(self, steps: int | None, accepted: int | None, drafted: int | None, k: int | None) -> None:
        """Rates the engine printed beside its counts must follow from them (to the printed precision)."""
        for name, text in self.printed.items():
            value = _number(text)
            if value is None:
                raise BadRecord(f"{name} = {text!r} is not a number")
            if name == "acceptance_rate" and accepted is not None and drafted:
                if _close(value, accepted / drafted, text):
                    continue
                if steps and k and _close(value, (accepted + steps) / (steps * (k + 1)), text):
                    raise BadRecord(
                        f"acceptance rate {text} is (accepted + bonus) / (steps x (k + 1)), not accepted / drafted "
                        f"= {accepted / drafted:.6g} ({SGLANG_OLD_RATE})"
                    )
                if _close(value, (accepted + 1) / (drafted + 1), text):
                    raise BadRecord(
                        f"acceptance rate {text} is (accepted + 1) / (drafted + 1), not accepted / drafted "
                        f"= {accepted / drafted:.6g} ({SGLANG_OLD_RATE})"
                    )
                raise BadRecord(f"acceptance rate {text} is not accepted / drafted = {accepted}/{drafted}")
            if (
                name == "mean_acceptance_length"
                and accepted is not None
                and steps
                and not _close(value, 1 + accepted / steps, text)
            ):
                raise BadRecord(f"mean acceptance length {text} is not 1 + accepted / steps = 1 + {accepted}/{steps}")

    # --- facts for the view and the state ---------------------------------------------------

    def overcounted_output(self) -> int | None:
        """Accepted tokens plus bonus tokens beyond the output's length (EOS inside the accepted prefix), or None."""
        if self.completion_tokens is None or self.accepted is None or self.steps is None:
            return None
        emitted = self.accepted + self.steps
        return emitted - self.completion_tokens if emitted > self.completion_tokens else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "format": self.fmt,
            "request_id": self.request_id,
            "k": self.k,
            "steps": self.steps,
            "accepted": self.accepted,
            "drafted": self.drafted,
            "exact": self.runs() is not None,
            "notes": list(self.notes),
        }


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _close(value: float, exact: float, text: str) -> bool:
    """`value` (printed as `text`) is `exact` to the printed precision (to rounding when printed in full)."""
    digits = len(text.split(".")[1]) if "." in text and "e" not in text.lower() else None
    if digits is not None and digits < 12:
        return bool(abs(value - exact) <= 0.5 * 10**-digits + 1e-12)
    return math.isclose(value, exact, rel_tol=1e-9, abs_tol=1e-12)
