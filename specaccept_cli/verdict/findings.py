"""What `conclude` finds: the thresholds asked for (`GateSpec`), one verdict entry per check, and `Findings`.

Plain frozen data. Texts are our own words, never an option's name: the command line adds those
(`cli/hints.py`), a notebook shows the text as it is.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

# At run time, not under TYPE_CHECKING: help() and inspect.signature() resolve the records' field types.
from specaccept_cli.summary.advice import RuleAdvice, advice_of
from specaccept_cli.summary.estimates import Estimates
from specaccept_cli.summary.first_runs import FirstRuns
from specaccept_cli.summary.rule_figures import RuleFigures, TreeShape
from specaccept_cli.summary.server import ReportedTally, SamplerTally, TestResult
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.windows import Drift, WindowEstimate, WindowTally
from specaccept_cli.verdict.checks import DEFAULT_MAX_DROP, DEFAULT_SIGNIFICANCE, Comparison, GateResult, Issue

Status = Literal["ok", "warn", "fail"]


class GateSpec(Struct, frozen=True):
    """Every threshold and level the checks use. A gate left at None is not checked; a check that is
    not `strict` (drift, sampler) warns instead of failing."""

    min_alpha: float | None = None
    min_tokens_per_pass: float | None = None
    min_acceptance_rate: float | None = None
    max_drop: float = DEFAULT_MAX_DROP
    significance: float = DEFAULT_SIGNIFICANCE  # the comparison's and the drift test's level
    max_mismatches: int | None = None  # more mismatching reported counts than this fail
    strict_sampler: bool = False  # a failing sampler test fails (else it warns)
    strict_drift: bool = False  # drift, or a log too short to test it, fails (else it warns)
    max_errors: int | None = None  # more skipped rows or sources than this fail
    allow_empty: bool = False  # no valid run at all (every row skipped) passes
    strict_bounds: bool = False  # a gate or comparison that bounds leave undecided fails (else it warns)
    tree: TreeShape | None = None  # the engine's counts come from this tree: per-depth rates, never a chain's alpha

    @property
    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """(metric, threshold) of the gates that were set."""
        given = (
            ("alpha", self.min_alpha),
            ("tokens_per_pass", self.min_tokens_per_pass),
            ("acceptance_rate", self.min_acceptance_rate),
        )
        return tuple((metric, value) for metric, value in given if value is not None)


class VerdictEntry(Struct, frozen=True):
    """One line of the verdict: which check, how it came out, in words; `issue` is the record behind a
    warning or a failure (None when it passed)."""

    check: str
    status: Status
    text: str
    issue: Issue | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "text": self.text}


class SamplerTest(Struct, frozen=True):
    """One test of the sampler (calibration, or r uniformity) and its result."""

    name: str  # "calibration", "r uniformity"
    result: TestResult


class Findings(Struct, frozen=True, eq=False):
    """Everything any view shows, computed once: a view draws this and computes nothing.

    `summary` is what the views draw from (with the sampler tally whenever r was logged); the
    estimates, the group and window estimates, the drift test, the gates, the baseline comparison
    and the sampler tests are here already, and `verdict` says each check in words.
    """

    summary: Summary
    numbers: Estimates
    spec: GateSpec
    groups: tuple[tuple[str, Estimates], ...]  # the largest groups, largest first
    other_groups: tuple[int, Estimates] | None  # the rest (how many, their estimates), beyond max_groups
    windows: tuple[WindowEstimate, ...]
    drift: Drift | None
    gates: tuple[GateResult, ...]
    comparison: Comparison | None
    sampler_tests: tuple[SamplerTest, ...]
    verdict: tuple[VerdictEntry, ...]
    # Block and tree rules, outside alpha: tokens per pass, accepted-depth histogram, per-depth rates.
    rules: tuple[RuleFigures, ...] = ()
    tree: RuleFigures | None = None  # the engine's tree (GateSpec.tree): per-depth rates from its histograms

    @property
    def reported(self) -> ReportedTally | None:
        return self.summary.reported

    @property
    def first_runs(self) -> FirstRuns | None:
        """The first runs with their accepted lengths, when the reading kept them (`Plan.first_runs`): a bounded
        preview that the table view and `-o json` show; engine metrics hold intervals, not runs."""
        return None if self.summary.engine is not None else self.summary.first_runs

    @property
    def sampler(self) -> SamplerTally | None:
        return self.summary.sampler

    @property
    def window_tally(self) -> WindowTally | None:
        """The windows the views draw: none on input that only bounds some units (see `conclude`)."""
        return self.summary.windows if not self.numbers.bounded else None

    @property
    def failures(self) -> tuple[Issue, ...]:
        return tuple(entry.issue for entry in self.verdict if entry.status == "fail" and entry.issue is not None)

    @property
    def warnings(self) -> tuple[Issue, ...]:
        return tuple(entry.issue for entry in self.verdict if entry.status == "warn" and entry.issue is not None)

    @property
    def failed(self) -> bool:
        return any(entry.status == "fail" for entry in self.verdict)

    def entries(self, check: str) -> tuple[VerdictEntry, ...]:
        return tuple(entry for entry in self.verdict if entry.check == check)

    def status(self, check: str) -> Status | None:
        """The worst status of a check's entries (None when it did not run)."""
        statuses = {entry.status for entry in self.entries(check)}
        for status in ("fail", "warn", "ok"):
            if status in statuses:
                return status
        return None

    def advice(self, cost_ratio: float) -> tuple[RuleAdvice, ...]:
        """Best-depth advice at cost ratio c for every rule outside alpha, then the engine's named tree, each by
        its own model (`summary.advice`): a question asked of the findings, like `Estimates.speedup`."""
        shape = self.spec.tree
        figures: list[tuple[RuleFigures, int | None]] = [(rule, None) for rule in self.rules]
        if self.tree is not None and shape is not None:
            figures.append((self.tree, shape.steps))
        return tuple(advice_of(rule, cost_ratio, steps) for rule, steps in figures)

    def verdict_list(self) -> list[dict[str, Any]]:
        """The verdict as `-o json` writes it: a list of {check, status, text}."""
        return [entry.to_dict() for entry in self.verdict]
