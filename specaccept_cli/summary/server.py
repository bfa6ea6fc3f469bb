"""Auditing the server: the counts it reported, and the health of its sampler.

Given the (p, q, r) a server logged and the accepted count it reported, recompute
each run's count, flag disagreements, and test which other rule reproduces the reported
count exactly: a rule of the table of rules (`rule/registry.py`) where one fits the
row's fields (`greedy-draft`, r <= p with q taken as 1), or a known counting or
comparison bug. The rule that explains the most runs on its own is named with that
evidence and the verdict that follows from it (`VERDICTS`). Separately, test the sampler itself: acceptances at the
examined tokens against their expected number (calibration), and the uniformity of
the logged draws r (Kolmogorov-Smirnov). Every tally here is additive, like `Summary`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field

from specaccept_cli.errors import InputError
from specaccept_cli.rule.batch import IntArray, RunBatch
from specaccept_cli.rule.faulty import FaultyCounts
from specaccept_cli.rule.registry import rule_named
from specaccept_cli.rule.validate import MAX_COUNT, MAX_DRAFT_LENGTH, count_problem
from specaccept_cli.rule.vectorized import R_HISTOGRAM_BINS, THRESHOLD_BINS, THRESHOLD_SCALE, BatchOutcome
from specaccept_cli.summary.probability import ks_p_value, normal_two_sided

BoolArray = npt.NDArray[np.bool_]

# Rules a server may have run instead of the seed's, each reproducible from (p, q, r): the table's `greedy-draft`
# (vLLM's rule without draft probabilities), and the bugs vLLM v0 had (a strict `<`, its accepted counter).
RULES: dict[str, str] = {
    "strict-inequality": "accepts on r < p/q instead of r <= p/q",
    "no-prefix-break": "counts passes after the first rejection",
    "greedy-draft": "accepts on r <= p (q taken as 1)",
    "bonus-counted": "reports a + 1 (counts the bonus token)",
}
# The rule of the table a server's counts may follow with a threshold below 1, and its two thresholds (SGLang's
# speculative_accept_threshold_acc / _single, both 1 by default): with one child per level its test is
# `coin <= p / threshold_acc or p >= threshold_single`.
LOWERED = "tree-target-cdf"
THRESHOLDS = ("threshold_acc", "threshold_single")
# Names of earlier versions, read from saved summaries: `greedy-draft` was `target-probability-only`.
FORMER_NAMES = {"greedy-draft": "target-probability-only"}


class Verdict(Struct, frozen=True):
    """What it means that a server's counts follow a rule: `design` (the engine's own rule, exact under its
    condition), `lossy` (the output no longer follows the target), `miscounted` (right decisions, wrong count)."""

    kind: str
    meaning: str


VERDICTS: dict[str, Verdict] = {
    "greedy-draft": Verdict(
        "design",
        "the engine's design, not a bug: vLLM verifies EAGLE, MTP and n-gram drafts (draft_probs=None) with r <= p, "
        "lossless when a rejection resamples from the target without the rejected token, whatever the draft "
        "(docs/rules.md), though a sampled draft then keeps fewer tokens than r <= p/q would (vllm#40149, fixed "
        "by #40269); a loss only when paired with the residual max(p - q, 0). Recompute these rows under the "
        "rule greedy-draft",
    ),
    "strict-inequality": Verdict(
        "lossy",
        "a strict < keeps a token with chance below min(1, p/q) wherever r can equal it (coarse draws, p = 0): "
        "a loss of exactness (vLLM v0's sampler)",
    ),
    "no-prefix-break": Verdict(
        "miscounted",
        "the decisions follow the rule; the count adds passes after the first rejection, so the reported rate "
        "overstates what was kept (vLLM v0's accepted counter); the output is unaffected",
    ),
    "bonus-counted": Verdict(
        "miscounted",
        "the decisions follow the rule; the count adds the token every pass emits anyway, an off-by-one in the "
        "reported length; the output is unaffected",
    ),
}
# The verdicts in a few words, for one-line messages.
VERDICT_WORDS = {
    "design": "the engine's design, not a bug",
    "lossy": "a loss of exactness",
    "miscounted": "right decisions, a wrong count",
    "exact": "the target's distribution, kept",
    "measures-nothing": "configured acceptance, nothing measured",
}
SYNTHETIC = "synthetic"  # vLLM's `rejection_sample_method: synthetic`: not a rule of the table, nothing decides


def rule_verdict(name: str, params: dict[str, float] | None = None) -> Verdict:
    """The verdict on a server that runs a rule of the table (by name or alias, with its step's parameters),
    from the table itself: `exact` for a rule lossless always, `design` for one lossless under a condition
    the engine meets by design (`greedy-draft`, `argmax`, `tree-argmax`, `tree-target-cdf` at thresholds 1),
    `lossy` for `typical` and for `tree-target-cdf` with a threshold below 1; `synthetic` acceptance (vLLM's
    `rejection_sample_method: synthetic`) measures nothing. KeyError for a name the table does not know."""
    if name.strip().lower() == SYNTHETIC:
        return Verdict(
            "measures-nothing",
            "acceptance at configured rates: the models decide nothing, so the log "
            "measures neither the draft nor the target (a benchmark mode)",
        )
    rule = rule_named(name)
    if rule.name == "greedy-draft":
        return VERDICTS["greedy-draft"]
    lowered = [
        param.name
        for param in rule.params
        if param.default == 1.0 and float((params or {}).get(param.name, param.default)) < 1.0
    ]
    if lowered:
        return Verdict(
            "lossy",
            f"{rule.name} with {lowered[0]} below 1 keeps tokens the exact test rejects: "
            f"a loss of exactness (lossless only when {rule.lossless_when})",
        )
    if rule.lossless == "never":
        return Verdict("lossy", f"{rule.name}: {rule.lossless_when}")
    if rule.lossless == "when":
        return Verdict("design", f"{rule.name} is exact when {rule.lossless_when}")
    return Verdict("exact", f"{rule.name} is exact: {rule.lossless_when}")


MAX_EVIDENCE = 5  # lines of runs only the named rule explains, shown as its evidence
MAX_EXAMPLES = 20
# A deciding token whose r is within this relative distance of min(1, p/q) is a near tie: p and q
# logged in bf16 (8 significant bits) move the ratio by up to about 2^-8, enough to flip it.
NEAR_TIE = 2.0**-7
# Reported counts above this share the last column of the reported x recomputed matrix (a bogus
# count must not make the tally large).
MAX_MATRIX_COUNT = 64


def parse_reported(batch: RunBatch, name: str) -> tuple[IntArray, BoolArray, list[InputError]]:
    """The reported counts of a batch as integers, which of them are valid, and an error for each that is not."""
    values = batch.extras[name]
    counts = np.zeros(len(values), dtype=np.int64)
    valid = np.ones(len(values), dtype=bool)
    errors: list[InputError] = []
    lines = batch.lines.tolist()
    for index, value in enumerate(values):
        problem = count_problem(name, value)
        if problem is None:
            counts[index] = int(value)  # type: ignore[call-overload]
        else:  # the readers check counts (FieldSpec.counts); this guards batches built by hand
            errors.append(InputError(batch.source, lines[index], problem))
            valid[index] = False
    return counts, valid, errors


class Mismatch(Struct, frozen=True):
    """One run whose reported count disagrees with the rule, and the faulty rules that explain it."""

    source: str
    line: int
    k: int
    reported: int
    recomputed: int
    rules: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "line": self.line,
            "k": self.k,
            "reported": self.reported,
            "recomputed": self.recomputed,
            "rules": list(self.rules),
        }


class ReportedCheck(Struct):
    """Per-run result of comparing reported with recomputed counts (for per-run records)."""

    reported: IntArray
    mismatch: BoolArray


class ReportedTally(Struct):
    """Additive: runs compared, mismatches, how many mismatches each faulty rule explains."""

    runs: int = 0
    mismatches: int = 0
    explains: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    unexplained: int = 0
    examples: list[Mismatch] = field(default_factory=list)  # the first MAX_EXAMPLES, in input order
    # Not double counted: mismatches each rule alone explains, those several rules explain, and those
    # decided at a near tie (None: a summary saved before these were counted).
    alone: dict[str, int] | None = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    several: int | None = 0
    near_ties: int | None = 0
    # (recomputed, reported) -> runs, reported counts clipped at MAX_MATRIX_COUNT: the report's heatmap.
    pairs: dict[tuple[int, int], int] = field(default_factory=dict)
    # Per threshold of tree-target-cdf (the other at 1): the open-closed interval (low, high] of values that
    # reproduce every reported count compared so far; None where some batch could not say (rows of other rules,
    # token ids) or a summary was saved before it was kept.
    # Mismatches only a lowered threshold reproduces (no rule of RULES does), and the first of their lines.
    lowered_only: int | None = 0
    lowered_lines: list[tuple[str, int]] = field(default_factory=list)
    # Per rule, the first MAX_EVIDENCE lines of the mismatches it alone explains: its evidence when named
    # (absent from summaries saved before they were kept: the kept examples stand in).
    alone_lines: dict[str, list[tuple[str, int]]] | None = field(default_factory=dict)
    thresholds: dict[str, tuple[float, float]] | None = field(
        default_factory=lambda: dict.fromkeys(THRESHOLDS, (0.0, 1.0))
    )

    @classmethod
    def of_batch(
        cls, batch: RunBatch, outcome: BatchOutcome, reported: IntArray, faulty: FaultyCounts | None
    ) -> tuple[ReportedTally, ReportedCheck]:
        """The batch's comparison; `faulty` (`rule.faulty.faulty_counts`) explains its mismatches (None: none)."""
        mismatch = reported != outcome.accepted
        tally = cls(runs=len(batch), mismatches=int(mismatch.sum()), pairs=_pair_counts(outcome.accepted, reported))
        lowered = None if batch.greedy or batch.rules is not None else threshold_bounds(batch, reported)
        tally.thresholds = None if lowered is None else {name: bounds.overall for name, bounds in lowered.items()}
        if tally.mismatches:
            assert faulty is not None, "mismatches to explain: the faulty rules' counts were not taken"
            where = np.flatnonzero(mismatch)
            alternatives = {rule: counts[where] == reported[where] for rule, counts in faulty.counts.items()}
            rules_per_run = np.sum(list(alternatives.values()), axis=0)
            assert tally.alone is not None and tally.alone_lines is not None
            for rule, hits in alternatives.items():
                tally.explains[rule] = int(hits.sum())
                lone = where[hits & (rules_per_run == 1)]
                tally.alone[rule] = int(lone.shape[0])
                if lone.shape[0]:
                    tally.alone_lines[rule] = [(batch.source, int(batch.lines[run])) for run in lone[:MAX_EVIDENCE]]
            tally.unexplained = int((rules_per_run == 0).sum())
            tally.several = int((rules_per_run >= 2).sum())
            below = np.zeros(where.shape[0], dtype=bool)
            for bounds in (lowered or {}).values():
                below |= bounds.needs_lowering[where]
            only_lowered = where[below & (rules_per_run == 0)]
            tally.lowered_only = int(only_lowered.shape[0]) if lowered is not None else None
            tally.lowered_lines = [
                (batch.source, int(batch.lines[run])) for run in only_lowered[:MAX_EVIDENCE].tolist()
            ]
            tally.near_ties = _near_ties(batch, faulty.thresholds, outcome.accepted[where], reported[where], where)
            for position, run in enumerate(where[:MAX_EXAMPLES].tolist()):
                tally.examples.append(
                    Mismatch(
                        source=batch.source,
                        line=int(batch.lines[run]),
                        k=int(outcome.k[run]),
                        reported=int(reported[run]),
                        recomputed=int(outcome.accepted[run]),
                        rules=tuple(rule for rule, hits in alternatives.items() if hits[position]),
                    )
                )
        return tally, ReportedCheck(reported=reported, mismatch=mismatch)

    def __add__(self, other: ReportedTally) -> ReportedTally:
        return ReportedTally(
            runs=self.runs + other.runs,
            mismatches=self.mismatches + other.mismatches,
            explains={rule: self.explains.get(rule, 0) + other.explains.get(rule, 0) for rule in RULES},
            unexplained=self.unexplained + other.unexplained,
            examples=(self.examples + other.examples)[:MAX_EXAMPLES],
            alone=None
            if self.alone is None or other.alone is None
            else {rule: self.alone.get(rule, 0) + other.alone.get(rule, 0) for rule in RULES},
            several=None if self.several is None or other.several is None else self.several + other.several,
            near_ties=None if self.near_ties is None or other.near_ties is None else self.near_ties + other.near_ties,
            pairs={
                pair: self.pairs.get(pair, 0) + other.pairs.get(pair, 0) for pair in sorted({*self.pairs, *other.pairs})
            },
            lowered_only=None
            if self.lowered_only is None or other.lowered_only is None
            else self.lowered_only + other.lowered_only,
            lowered_lines=(self.lowered_lines + other.lowered_lines)[:MAX_EVIDENCE],
            alone_lines=None
            if self.alone_lines is None or other.alone_lines is None
            else {
                rule: (self.alone_lines.get(rule, []) + other.alone_lines.get(rule, []))[:MAX_EVIDENCE]
                for rule in RULES
                if rule in self.alone_lines or rule in other.alone_lines
            },
            thresholds=None
            if self.thresholds is None or other.thresholds is None
            else {
                name: (
                    max(self.thresholds[name][0], other.thresholds[name][0]),
                    min(self.thresholds[name][1], other.thresholds[name][1]),
                )
                for name in THRESHOLDS
            },
        )

    def lowered_thresholds(self) -> dict[str, list[float]]:
        """Each threshold whose values below 1 reproduce every reported count compared, as [low, high] (low
        excluded): none where the counts need no lowering (the interval reaches 1) or no value fits them all."""
        if self.thresholds is None:
            return {}
        return {name: [low, high] for name, (low, high) in self.thresholds.items() if low < high < 1.0}

    def diagnosis(self) -> list[dict[str, Any]]:
        """Faulty rules sorted by how many mismatching runs they explain (a run may have several).

        `alone` counts the runs no other rule explains: the headline names the rule with the most of
        those, so a rule that only shares runs with the real bug is not named as it.
        """
        ranked = sorted(RULES, key=lambda rule: (-self.explains.get(rule, 0), list(RULES).index(rule)))
        return [
            {"rule": rule, "explains": self.explains.get(rule, 0)}
            | ({} if self.alone is None else {"alone": self.alone.get(rule, 0)})
            for rule in ranked
        ]

    def headline(self) -> str:
        """The main faulty rule in words, without double counting; "" when no rule explains a mismatch."""
        ranked = self.diagnosis()
        if not ranked[0]["explains"]:
            return ""
        top = max(ranked, key=lambda item: (item.get("alone", 0), item["explains"]))
        text = f"most explained by {top['rule']} ({top['explains']} runs"
        if "alone" in top:
            text += f", {top['alone']} by it alone"
        if self.several:
            text += f"; {self.several} runs fit several rules"
        return text + ")"

    def named(self) -> dict[str, Any] | None:
        """The rule that explains the reported counts, its evidence and its verdict; None when none explains any.

        It is the headline's rule (the most runs it alone explains); its evidence is those runs (`alone`,
        and the lines of the first of them, `alone_lines`), since a run several rules reproduce
        tells them apart no more than a run none does.
        """
        ranked = self.diagnosis()
        if not ranked[0]["explains"]:
            return None
        top = max(ranked, key=lambda item: (item.get("alone", 0), item["explains"]))
        lowered = self.lowered_named()
        if lowered is not None:
            return lowered
        rule = str(top["rule"])
        if self.alone_lines is not None:
            lines = self.alone_lines.get(rule, [])
        else:  # a summary saved before the lines were kept: the first of them among the kept examples
            lines = [(example.source, example.line) for example in self.examples if example.rules == (rule,)]
        verdict = VERDICTS[rule]
        named = {
            "rule": rule,
            "test": RULES[rule],
            "explains": top["explains"],
            "alone": top.get("alone"),
            "evidence": [{"source": source, "line": line} for source, line in lines[:MAX_EVIDENCE]],
            "verdict": verdict.kind,
            "in_short": VERDICT_WORDS[verdict.kind],
            "meaning": verdict.meaning,
        }
        return named

    def lowered_named(self) -> dict[str, Any] | None:
        """tree-target-cdf with a threshold below 1, named when one value of a threshold (the other at 1)
        reproduces every count compared and some mismatches only it explains (its evidence): greedy-draft is
        its value 1, which those runs rule out. None otherwise."""
        lowered = self.lowered_thresholds()
        if not lowered or not self.lowered_only:
            return None
        # Either threshold alone may fit (both are listed); the verdict is the same for each: lossy.
        name, (_, high) = next(iter(lowered.items()))
        verdict = rule_verdict(LOWERED, {name: high})
        return {
            "rule": LOWERED,
            "test": f"accepts on r <= p / threshold_acc or p >= threshold_single, with {' or '.join(lowered)} "
            "below 1 (r the coin, one child per level, q not used)",
            "explains": self.mismatches,
            "alone": self.lowered_only,
            "evidence": [{"source": source, "line": line} for source, line in self.lowered_lines],
            "verdict": verdict.kind,
            "in_short": VERDICT_WORDS[verdict.kind],
            "meaning": verdict.meaning,
            "thresholds": lowered,
        }

    def all_near_ties(self) -> bool:
        """Every mismatch was decided at a near tie (r within NEAR_TIE of min(1, p/q), relatively)."""
        return bool(self.mismatches) and self.near_ties == self.mismatches

    def summary_keys(self) -> dict[str, Any]:
        """The keys this audit adds to the summary object."""
        return {
            "reported_runs": self.runs,
            "mismatches": self.mismatches,
            "diagnosis": self.diagnosis(),
            "unexplained": self.unexplained,
            "mismatch_examples": [example.to_dict() for example in self.examples],
            "explained_by_several": self.several,
            "near_tie_mismatches": self.near_ties,
            "server_rule": self.named(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "mismatches": self.mismatches,
            "explains": dict(self.explains),
            "unexplained": self.unexplained,
            "examples": [example.to_dict() for example in self.examples],
            **({} if self.alone is None else {"alone": dict(self.alone)}),
            **({} if self.several is None else {"several": self.several}),
            **({} if self.near_ties is None else {"near_ties": self.near_ties}),
            "pairs": [[recomputed, reported, runs] for (recomputed, reported), runs in sorted(self.pairs.items())],
            **({} if self.lowered_only is None else {"lowered_only": self.lowered_only}),
            "lowered_lines": [[source, line] for source, line in self.lowered_lines],
            **(
                {}
                if self.alone_lines is None
                else {"alone_lines": {rule: [[s, n] for s, n in lines] for rule, lines in self.alone_lines.items()}}
            ),
            **(
                {}
                if self.thresholds is None
                else {"thresholds": {name: list(self.thresholds[name]) for name in THRESHOLDS}}
            ),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReportedTally:
        pairs: dict[tuple[int, int], int] = {}
        for recomputed, reported, runs in data.get("pairs", []):  # absent from files of earlier versions
            if min(int(recomputed), int(reported), int(runs)) < 0 or int(reported) > MAX_MATRIX_COUNT:
                raise ValueError("reported pairs hold a negative or out-of-range count")
            key = (int(recomputed), int(reported))
            pairs[key] = pairs.get(key, 0) + int(runs)
        return cls(
            pairs=pairs,
            runs=int(data["runs"]),
            mismatches=int(data["mismatches"]),
            explains={rule: _saved(data["explains"], rule) for rule in RULES},
            unexplained=int(data["unexplained"]),
            examples=[_example_from_dict(item) for item in data["examples"]],
            alone={rule: _saved(data["alone"], rule) for rule in RULES} if "alone" in data else None,
            several=int(data["several"]) if "several" in data else None,
            near_ties=int(data["near_ties"]) if "near_ties" in data else None,
            lowered_only=_saved_count(data["lowered_only"], "lowered_only") if "lowered_only" in data else None,
            lowered_lines=[_saved_line(item) for item in data.get("lowered_lines", [])][:MAX_EVIDENCE],
            alone_lines=_saved_alone_lines(data["alone_lines"]) if "alone_lines" in data else None,
            thresholds=_saved_thresholds(data.get("thresholds")),  # absent from files of earlier versions: unknown
        )


def _saved_count(value: object, key: str) -> int:
    if type(value) is not int or not 0 <= value <= 2**63 - 1:
        raise ValueError(f"reported {key} must be a whole number from 0")
    return value


def _saved_alone_lines(data: object) -> dict[str, list[tuple[str, int]]]:
    """Per rule of RULES, up to MAX_EVIDENCE [source, line] pairs."""
    if not isinstance(data, dict) or any(
        rule not in RULES or not isinstance(lines, list) for rule, lines in data.items()
    ):
        raise ValueError("reported alone_lines must map rules to lists of [source, line] pairs")
    return {rule: [_saved_line(item) for item in lines][:MAX_EVIDENCE] for rule, lines in data.items()}


def _saved_line(item: object) -> tuple[str, int]:
    if not isinstance(item, list) or len(item) != 2 or type(item[1]) is not int or item[1] < 1:
        raise ValueError("reported lowered_lines must be [source, line] pairs")
    return str(item[0]), item[1]


def _saved_thresholds(data: object) -> dict[str, tuple[float, float]] | None:
    """The threshold intervals of a saved summary: two numbers from 0 to 1 per threshold, or absent (None)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != set(THRESHOLDS):
        raise ValueError(f"reported thresholds must name {' and '.join(THRESHOLDS)}")
    found = {}
    for name in THRESHOLDS:
        bounds = data[name]
        if (
            not isinstance(bounds, list)
            or len(bounds) != 2
            or any(isinstance(value, bool) or not isinstance(value, (int, float)) for value in bounds)
            or not all(0.0 <= float(value) <= 1.0 for value in bounds)
        ):
            raise ValueError(f"reported thresholds: {name} must be two numbers from 0 to 1")
        found[name] = (float(bounds[0]), float(bounds[1]))
    return found


class ThresholdBounds(Struct, frozen=True):
    """One threshold of tree-target-cdf (the other at 1) against a batch's reported counts: per run the interval
    (low, high] of values reproducing its count, and over the batch their intersection."""

    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]

    @property
    def overall(self) -> tuple[float, float]:
        return (float(self.low.max(initial=0.0)), float(self.high.min(initial=1.0)))

    @property
    def needs_lowering(self) -> BoolArray:
        """Runs some value below 1 reproduces and 1 does not: decisions only a lowered threshold explains."""
        return (self.low < self.high) & (self.high < 1.0)


def threshold_bounds(batch: RunBatch, reported: IntArray) -> dict[str, ThresholdBounds]:
    """Which values of each tree-target-cdf threshold reproduce each run's reported count, from its p and r.

    SGLang's `TreeSpeculativeSamplingTargetOnly` (sgl-kernel/csrc/speculative/speculative_sampling.cuh) keeps a
    node iff `coin <= cdf / threshold_acc` or `p >= threshold_single`; with one child per level the cdf is p and
    the coin is the row's r. A run that reported a kept its first a tokens and, when a < k, rejected token a:
    - threshold_acc = t (single at 1): a kept token with r > 0 needs t <= p / r, the rejected one needs
      t > p / r (and r > 0, p < 1);
    - threshold_single = t (acc at 1): a kept token with r > p needs t <= p, the rejected one needs r > p and
      t > p.
    A count above k fits no value (low 1, high 0).
    """
    k = np.diff(batch.offsets)
    starts = batch.offsets[:-1]
    p, r = batch.p, batch.r
    # Only kept tokens with r > p bind either threshold below 1 (p / r >= 1 otherwise), and one rejected token a
    # run: those are gathered, and the full-length work is the kept mask alone.
    position = np.arange(p.shape[0]) - np.repeat(starts, k)
    lifted = np.flatnonzero((position < np.repeat(reported, k)) & (r > p))
    lifted_runs = np.searchsorted(batch.offsets, lifted, side="right") - 1
    lifted_p, lifted_r = p[lifted], r[lifted]
    ends = reported < k
    rejected = starts[ends] + reported[ends]
    rejected_p, rejected_r = p[rejected], r[rejected]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rejected_ratio = np.where(rejected_r > 0.0, rejected_p / np.where(rejected_r > 0.0, rejected_r, 1.0), 2.0)
    bounds = {}
    for name in THRESHOLDS:
        high = np.ones(k.shape[0], dtype=np.float64)
        low = np.zeros(k.shape[0], dtype=np.float64)
        if name == "threshold_acc":
            np.minimum.at(high, lifted_runs, lifted_p / lifted_r)  # r > p >= 0 there
            low[ends] = np.where(rejected_p >= 1.0, 2.0, rejected_ratio)
        else:
            np.minimum.at(high, lifted_runs, lifted_p)
            low[ends] = np.where(rejected_r <= rejected_p, 2.0, rejected_p)
        over = reported > k
        low[over], high[over] = 1.0, 0.0
        bounds[name] = ThresholdBounds(np.minimum(low, 1.0), high)
    return bounds


def _saved(counts: dict[str, Any], rule: str) -> int:
    """A rule's count in a saved summary, under its name or the one an earlier version wrote."""
    former = FORMER_NAMES.get(rule)
    return int(counts.get(rule, counts.get(former, 0) if former else 0))


def _current_name(rule: str) -> str:
    return next((name for name, former in FORMER_NAMES.items() if former == rule), rule)


def _example_from_dict(item: dict[str, Any]) -> Mismatch:
    """A kept mismatch of a saved summary, each number whole and in its range (a line from 1, k up to the
    longest draft, counts up to what a row may report, the recomputed count within the draft)."""
    line, k, reported, recomputed = (item[key] for key in ("line", "k", "reported", "recomputed"))
    for key, value, low, high in (
        ("line", line, 1, 2**63 - 1),
        ("k", k, 0, MAX_DRAFT_LENGTH),
        ("reported", reported, 0, MAX_COUNT),
        ("recomputed", recomputed, 0, k),
    ):
        if type(value) is not int or not low <= value <= high:
            shown = repr(value) if len(repr(value)) <= 30 else repr(value)[:27] + "..."
            raise ValueError(f"a reported example's {key} holds {shown}, not a whole number from {low} to {high}")
    return Mismatch(
        source=str(item["source"]),
        line=line,
        k=k,
        reported=reported,
        recomputed=recomputed,
        rules=tuple(_current_name(str(rule)) for rule in item["rules"]),
    )


def _near_ties(
    batch: RunBatch, thresholds: npt.NDArray[np.float64], recomputed: IntArray, reported: IntArray, runs: IntArray
) -> int:
    """Mismatching runs whose deciding token (the first where the two counts part) had r at a near tie.

    That token is the one at index min(reported, recomputed): the rule rejected it and the server
    kept it, or the reverse. A reported count beyond the draft has no deciding token.
    """
    deciding = np.minimum(reported, recomputed)
    k = batch.offsets[runs + 1] - batch.offsets[runs]
    inside = deciding < k
    tokens = batch.offsets[runs[inside]] + deciding[inside]
    threshold = thresholds[tokens]
    r = batch.r[tokens]
    with np.errstate(invalid="ignore"):
        near = np.abs(r - threshold) <= NEAR_TIE * np.maximum(threshold, r)
    return int(near.sum())


def _pair_counts(recomputed: IntArray, reported: IntArray) -> dict[tuple[int, int], int]:
    """Runs by (recomputed, reported) count, reported clipped at MAX_MATRIX_COUNT."""
    clipped = np.minimum(reported, MAX_MATRIX_COUNT)
    cells, runs = np.unique(recomputed * (MAX_MATRIX_COUNT + 1) + clipped, return_counts=True)
    rows, columns = np.divmod(cells, MAX_MATRIX_COUNT + 1)
    return {(int(a), int(b)): int(n) for a, b, n in zip(rows, columns, runs)}


class TestResult(Struct, frozen=True):
    """A test's statistic, p-value and verdict (None: not enough data to test)."""

    statistic: float | None
    p_value: float | None
    ok: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "p_value": self.p_value, "ok": self.ok}


def _empty_histogram() -> IntArray:
    return np.zeros(R_HISTOGRAM_BINS, dtype=np.int64)


def _empty_threshold_bins() -> IntArray:
    return np.zeros((2, THRESHOLD_BINS), dtype=np.int64)


class SamplerTally(Struct):
    """Additive evidence about the sampler.

    Calibration: at every examined token a lawful sampler accepts with probability
    t = min(1, p/q) given everything before it, so (accepted - sum t) / sqrt(sum t(1-t))
    is asymptotically standard normal whatever the draft model's quality (a martingale
    CLT: which tokens get examined depends only on earlier outcomes). Uniformity: the
    logged r are binned finely (R_HISTOGRAM_BINS) and the KS distance is taken at the
    bin edges, so the state stays small and additive.
    """

    significance: float = 0.001  # a test is ok when its p-value is at least this (a setting, not a count)
    examined_tokens: int = 0
    accepted_tokens: int = 0
    expected_fixed: int = 0  # sum of t over examined tokens, x THRESHOLD_SCALE
    variance_fixed: int = 0  # sum of t (1 - t) over examined tokens, x THRESHOLD_SCALE
    r_histogram: IntArray = field(default_factory=_empty_histogram)
    # [examined, accepted] examined tokens per bin of min(1, p/q) (THRESHOLD_BINS): the reliability plot.
    threshold_bins: IntArray = field(default_factory=_empty_threshold_bins)

    @classmethod
    def of_batch(cls, outcome: BatchOutcome, significance: float = 0.001) -> SamplerTally:
        """The batch's evidence, from the tallies the rule made in its pass over the tokens (it makes them when
        asked: `accept_prefix_batch(..., tallies=True)`)."""
        tallies = outcome.tallies
        assert tallies is not None, "the rule was not asked for the sampler's tallies"
        return cls(
            significance=significance,
            examined_tokens=tallies.examined_tokens,
            accepted_tokens=int(outcome.accepted.sum()),
            expected_fixed=tallies.expected_fixed,
            variance_fixed=tallies.variance_fixed,
            r_histogram=tallies.r_histogram,
            threshold_bins=tallies.threshold_bins,
        )

    def __add__(self, other: SamplerTally) -> SamplerTally:
        return SamplerTally(
            significance=self.significance,
            examined_tokens=self.examined_tokens + other.examined_tokens,
            accepted_tokens=self.accepted_tokens + other.accepted_tokens,
            expected_fixed=self.expected_fixed + other.expected_fixed,
            variance_fixed=self.variance_fixed + other.variance_fixed,
            r_histogram=self.r_histogram + other.r_histogram,
            threshold_bins=self.threshold_bins + other.threshold_bins,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SamplerTally):
            return NotImplemented
        return (
            self.examined_tokens == other.examined_tokens
            and self.accepted_tokens == other.accepted_tokens
            and self.expected_fixed == other.expected_fixed
            and self.variance_fixed == other.variance_fixed
            and bool(np.array_equal(self.r_histogram, other.r_histogram))
            and bool(np.array_equal(self.threshold_bins, other.threshold_bins))
        )

    @property
    def expected_acceptances(self) -> float:
        return self.expected_fixed / THRESHOLD_SCALE

    def calibration(self, significance: float | None = None) -> TestResult:
        variance = self.variance_fixed / THRESHOLD_SCALE
        if variance <= 0.0:
            return TestResult(None, None, None)
        z = (self.accepted_tokens - self.expected_acceptances) / math.sqrt(variance)
        p_value = normal_two_sided(z)
        return TestResult(z, p_value, p_value >= (self.significance if significance is None else significance))

    def r_uniformity(self, significance: float | None = None) -> TestResult:
        n = int(self.r_histogram.sum())
        if n == 0:
            return TestResult(None, None, None)
        empirical = np.cumsum(self.r_histogram) / n
        edges = np.arange(1, R_HISTOGRAM_BINS + 1) / R_HISTOGRAM_BINS
        statistic = float(np.max(np.abs(empirical - edges)))
        p_value = ks_p_value(statistic, n)
        return TestResult(statistic, p_value, p_value >= (self.significance if significance is None else significance))

    @property
    def ok(self) -> bool:
        """False when either test rejects a lawful sampler; None-valued tests (no data) pass."""
        return self.calibration().ok is not False and self.r_uniformity().ok is not False

    def summary_keys(self) -> dict[str, Any]:
        return {
            "calibration": {
                **self.calibration().to_dict(),
                "observed": self.accepted_tokens,
                "expected": self.expected_acceptances,
                "examined_tokens": self.examined_tokens,
            },
            "r_uniformity": {**self.r_uniformity().to_dict(), "draws": int(self.r_histogram.sum())},
            "sampler_significance": self.significance,
        }

    def to_dict(self) -> dict[str, Any]:
        nonzero = np.flatnonzero(self.r_histogram)
        return {
            "significance": self.significance,
            "examined_tokens": self.examined_tokens,
            "accepted_tokens": self.accepted_tokens,
            "expected_fixed": self.expected_fixed,
            "variance_fixed": self.variance_fixed,
            "r_histogram_bins": R_HISTOGRAM_BINS,
            "r_histogram": [[int(i), int(self.r_histogram[i])] for i in nonzero],
            "threshold_bins": self.threshold_bins.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplerTally:
        if int(data["r_histogram_bins"]) != R_HISTOGRAM_BINS:
            raise ValueError("r_histogram_bins differs from this version's")
        histogram = _empty_histogram()
        for index, count in data["r_histogram"]:
            if not (0 <= int(index) < R_HISTOGRAM_BINS and int(count) >= 0):
                raise ValueError(f"r_histogram holds an impossible bin ({index}, {count})")
            histogram[int(index)] += int(count)
        tally = cls(
            significance=float(data["significance"]),
            examined_tokens=int(data["examined_tokens"]),
            accepted_tokens=int(data["accepted_tokens"]),
            expected_fixed=int(data["expected_fixed"]),
            variance_fixed=int(data["variance_fixed"]),
            r_histogram=histogram,
            threshold_bins=_threshold_bins_from(data.get("threshold_bins")),
        )
        counters = (tally.examined_tokens, tally.accepted_tokens, tally.expected_fixed, tally.variance_fixed)
        if not 0.0 < tally.significance < 1.0 or min(counters) < 0:
            raise ValueError("sampler tally holds a significance outside (0, 1) or a negative counter")
        return tally


def _threshold_bins_from(rows: object) -> IntArray:
    """The reliability tally of a saved summary (zeros when an earlier version wrote none)."""
    if rows is None:
        return _empty_threshold_bins()
    bins = np.array(rows, dtype=np.int64)
    if bins.shape != (2, THRESHOLD_BINS) or bool((bins < 0).any()) or bool((bins[1] > bins[0]).any()):
        raise ValueError("threshold_bins hold the wrong shape, a negative count or more accepted than examined")
    return bins
