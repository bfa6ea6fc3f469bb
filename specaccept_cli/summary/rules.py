"""`RuleTally`: the runs of every verification rule other than `standard`, additive like the rest of the state.

Rules whose decision is a first-rejection scan (`standard`, `greedy-draft`, `sample-match`, `argmax`,
`typical`: the registry's chains with the chain model) feed the summary's (k, a) counts, so alpha = accepted /
examined means for them what it means for the seed's rule. `block` keeps the longest prefix whose joint test
passes and a tree keeps the deepest node of its walk: neither examines tokens one by one up to a rejection, so
their runs are left out of the counts (and out of alpha) and kept here as a histogram of accepted lengths (a
tree's accepted depths) per rule, from which their tokens per pass are exact.

`standard` runs are never listed: they are the counts' runs less the other first-rejection rules' runs here,
so a summary without a tally (every file from before it) is "standard only", and two summaries add whatever
each holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field

from specaccept_cli.rule.registry import DEFAULT_RULE, rule_named

IntArray = npt.NDArray[np.int64]


def in_counts(name: str) -> bool:
    """Whether runs of this rule feed the (k, a) counts: a chain rule whose decision is a first-rejection scan."""
    rule = rule_named(name)
    return rule.kind == "chain" and rule.model == "chain"


class RuleTally(Struct, frozen=True):
    """Runs per rule other than `standard`, and for the rules outside the counts their accepted lengths."""

    runs: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, IntArray] = field(default_factory=dict)  # runs[a] per rule outside the counts

    @classmethod
    def of_runs(cls, names: list[str], accepted: IntArray) -> RuleTally:
        """The tally of runs named by rule (canonical names, `standard` included: left out here)."""
        labels = np.array(names, dtype=object)
        runs: dict[str, int] = {}
        histograms: dict[str, IntArray] = {}
        for name in sorted(set(names) - {DEFAULT_RULE}):
            mine = labels == name
            runs[name] = int(mine.sum())
            if not in_counts(name):
                histograms[name] = np.bincount(accepted[mine], minlength=1).astype(np.int64)
        return cls(runs, histograms)

    def __add__(self, other: RuleTally) -> RuleTally:
        runs = dict(self.runs)
        for name, count in other.runs.items():
            runs[name] = runs.get(name, 0) + count
        histograms = dict(self.accepted)
        for name, histogram in other.accepted.items():
            mine = histograms.get(name)
            if mine is None:
                histograms[name] = histogram
                continue
            size = max(mine.shape[0], histogram.shape[0])
            histograms[name] = np.pad(mine, (0, size - mine.shape[0])) + np.pad(
                histogram, (0, size - histogram.shape[0])
            )
        return RuleTally(dict(sorted(runs.items())), dict(sorted(histograms.items())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RuleTally):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def runs_by_rule(self, counted_runs: int) -> dict[str, int]:
        """Runs per rule name, `standard` first: the counts' runs less the other first-rejection rules'."""
        standard = counted_runs - sum(count for name, count in self.runs.items() if in_counts(name))
        every = {DEFAULT_RULE: standard} if standard else {}
        return every | self.runs

    def outside_alpha(self) -> dict[str, int]:
        """Runs per rule left out of the counts (block and tree rules)."""
        return {name: self.runs[name] for name in self.accepted}

    def tokens_per_pass(self, name: str) -> float | None:
        """Mean accepted length (or depth) plus one, over the rule's runs outside the counts."""
        histogram = self.accepted[name]
        runs = int(histogram.sum())
        if not runs:
            return None
        return float(np.arange(histogram.shape[0]) @ histogram) / runs + 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": dict(self.runs),
            "accepted_histograms": {name: histogram.tolist() for name, histogram in self.accepted.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleTally:
        """What `to_dict` wrote; ValueError on a rule the table does not know or a count that is not one."""
        runs: dict[str, int] = {}
        for name, count in dict(data["runs"]).items():
            rule = rule_named(str(name))
            if type(count) is not int or count < 0:
                raise ValueError(f"rules: runs of {name!r} is not a count")
            runs[rule.name] = count
        histograms: dict[str, IntArray] = {}
        for name, values in dict(data.get("accepted_histograms", {})).items():
            rule = rule_named(str(name))
            if in_counts(rule.name) or rule.name not in runs:
                raise ValueError(f"rules: an accepted-length histogram of {name!r}, a rule in the counts")
            if not isinstance(values, list) or any(type(value) is not int or value < 0 for value in values):
                raise ValueError(f"rules: the accepted-length histogram of {name!r} is not a list of counts")
            histograms[rule.name] = np.array(values, dtype=np.int64)
            if int(histograms[rule.name].sum()) != runs[rule.name]:
                raise ValueError(f"rules: the histogram of {name!r} does not add up to its runs")
        return cls(runs, histograms)
