"""`RuleTally`: the runs of every verification rule other than `standard`, additive like the rest of the state.

Rules whose decision is a first-rejection scan (`standard`, `greedy-draft`, `sample-match`, `argmax`,
`typical`: the registry's chains with the chain model) feed the summary's (k, a) counts, so alpha = accepted /
examined means for them what it means for the seed's rule. `block` keeps the longest prefix whose joint test
passes and a tree keeps the deepest node of its walk: neither examines tokens one by one up to a rejection, so
their runs are left out of the counts (and out of alpha) and kept here per rule: a histogram of accepted lengths
(a tree's accepted depths), from which their tokens per pass are exact; the joint counts of (capacity,
accepted), a run's capacity being block's drafted length or the depth of a tree's deepest node, so that a run
whose tree has no depth d is not counted as reaching d; and, when the runs come in requests (a cluster field),
the same runs per request as a `ClusterTally` (k the capacity), so their intervals are over requests.

`standard` runs are never listed: they are the counts' runs less the other first-rejection rules' runs here,
so a summary without a tally (every file from before it) is "standard only", and two summaries add whatever
each holds. The joint counts and the per-request tally of a rule are known only where every part that holds
the rule's runs kept them: a file from before them lacks them, and a sum with such a file lacks them too (its
per-depth rates are then taken from the histogram as before, and a clustered log's get no interval).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field

from specaccept_cli.rule.registry import DEFAULT_RULE, rule_named
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH
from specaccept_cli.summary.clusters import ClusterTally, KeyArray

IntArray = npt.NDArray[np.int64]
GREEDY_RULE = "argmax"  # the table's rule for greedy token-id logs (a draft token kept iff it is the argmax)


def in_counts(name: str) -> bool:
    """Whether runs of this rule feed the (k, a) counts: a chain rule whose decision is a first-rejection scan."""
    rule = rule_named(name)
    return rule.kind == "chain" and rule.model == "chain"


def _joint_of(k: IntArray, accepted: IntArray) -> IntArray:
    """counts[k, a]: runs of capacity k that accepted a."""
    size = int(k.max()) + 1 if k.shape[0] else 1
    flat = np.bincount(k * size + accepted, minlength=size * size)
    return flat.astype(np.int64).reshape(size, size)


def _added(left: IntArray, right: IntArray) -> IntArray:
    """Two count arrays of one rank added, the smaller padded with zeros."""
    shape = tuple(max(a, b) for a, b in zip(left.shape, right.shape, strict=True))
    total = np.zeros(shape, dtype=np.int64)
    total[tuple(slice(0, n) for n in left.shape)] += left
    total[tuple(slice(0, n) for n in right.shape)] += right
    return total


class RuleTally(Struct, frozen=True):
    """Runs per rule other than `standard`, and for the rules outside the counts their accepted lengths, their
    joint (capacity, accepted) counts and, in a log of requests, their per-request sums."""

    runs: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, IntArray] = field(default_factory=dict)  # runs[a] per rule outside the counts
    # counts[k, a] per rule outside the counts (k its capacity); a rule is missing where a part did not keep it.
    joint: dict[str, IntArray] = field(default_factory=dict)
    # Per request (the plan's cluster field), per rule outside the counts; missing where a part did not keep it.
    clusters: dict[str, ClusterTally] = field(default_factory=dict)

    @classmethod
    def of_runs(
        cls,
        names: list[str],
        accepted: IntArray,
        k: IntArray | None = None,
        cluster_field: str | None = None,
        cluster_keys: KeyArray | None = None,
    ) -> RuleTally:
        """The tally of runs named by rule (canonical names, `standard` included: left out here); with their
        capacities `k`, the joint counts; with a cluster field and each run's key, the per-request sums."""
        distinct = set(names)
        labels = np.array(names, dtype=object) if len(distinct) > 1 else None  # one rule (a greedy log): no mask
        runs: dict[str, int] = {}
        histograms: dict[str, IntArray] = {}
        joint: dict[str, IntArray] = {}
        clusters: dict[str, ClusterTally] = {}
        for name in sorted(distinct - {DEFAULT_RULE}):
            mine = np.ones(len(names), dtype=bool) if labels is None else labels == name
            runs[name] = int(mine.sum())
            if in_counts(name):
                continue
            histograms[name] = np.bincount(accepted[mine], minlength=1).astype(np.int64)
            if k is None:
                continue
            joint[name] = _joint_of(k[mine], accepted[mine])
            if cluster_field is not None and cluster_keys is not None:
                clusters[name] = ClusterTally.of_runs(cluster_field, cluster_keys[mine], k[mine], accepted[mine])
        return cls(runs, histograms, joint, clusters)

    def __add__(self, other: RuleTally) -> RuleTally:
        runs = dict(self.runs)
        for name, count in other.runs.items():
            runs[name] = runs.get(name, 0) + count
        histograms = dict(self.accepted)
        for name, histogram in other.accepted.items():
            mine = histograms.get(name)
            histograms[name] = histogram if mine is None else _added(mine, histogram)
        joint: dict[str, IntArray] = {}
        clusters: dict[str, ClusterTally] = {}
        for name in histograms:
            # Known for the sum where every side holding runs of the rule kept it.
            sides = [tally for tally in (self, other) if name in tally.accepted]
            if all(name in side.joint for side in sides):
                parts = [side.joint[name] for side in sides]
                joint[name] = parts[0] if len(parts) == 1 else _added(parts[0], parts[1])
            if all(name in side.clusters for side in sides):
                tallies = [side.clusters[name] for side in sides]
                clusters[name] = tallies[0] if len(tallies) == 1 else tallies[0] + tallies[1]
        return RuleTally(
            dict(sorted(runs.items())),
            dict(sorted(histograms.items())),
            dict(sorted(joint.items())),
            dict(sorted(clusters.items())),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RuleTally):
            return NotImplemented
        return (
            self.runs == other.runs
            and self._histograms() == other._histograms()
            and self._joints() == other._joints()
            and self.clusters == other.clusters
        )

    __hash__ = None  # type: ignore[assignment]

    def _histograms(self) -> dict[str, list[int]]:
        return {name: np.trim_zeros(histogram, "b").tolist() for name, histogram in self.accepted.items()}

    def _joints(self) -> dict[str, list[list[int]]]:
        return {name: _cells(counts) for name, counts in self.joint.items()}

    def without_clusters(self) -> RuleTally:
        """The tally without its per-request sums (its intervals then over runs)."""
        return RuleTally(self.runs, self.accepted, self.joint)

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

    def joint_of(self, name: str) -> IntArray:
        """counts[k, a] of the rule's runs. A tally that did not keep them (a file from before them) has only
        the accepted lengths: every run is then taken as able to go one deeper than it did, up to the deepest
        accepted, which gives the per-depth rates those files always gave."""
        known = self.joint.get(name)
        if known is not None:
            return known
        histogram = np.trim_zeros(self.accepted[name], "b")
        top = max(0, histogram.shape[0] - 1)
        counts = np.zeros((top + 1, top + 1), dtype=np.int64)
        counts[top, : histogram.shape[0]] = histogram
        return counts

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "runs": dict(self.runs),
            "accepted_histograms": {name: histogram.tolist() for name, histogram in self.accepted.items()},
        }
        if self.joint:
            data["joint_counts"] = {name: _cells(counts) for name, counts in self.joint.items()}
        if self.clusters:
            data["clusters"] = {name: tally.to_dict() for name, tally in self.clusters.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleTally:
        """What `to_dict` wrote; ValueError on a rule the table does not know, a count that is not one, or parts
        that do not add up to one another (joint counts to the histogram, per-request sums to the joint counts)."""
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
            if len(values) > MAX_DRAFT_LENGTH + 1:
                raise ValueError(f"rules: the accepted-length histogram of {name!r} is longer than any draft")
            histograms[rule.name] = np.array(values, dtype=np.int64)
            if int(histograms[rule.name].sum()) != runs[rule.name]:
                raise ValueError(f"rules: the histogram of {name!r} does not add up to its runs")
        joint = {
            name: _joint_from_cells(name, cells, histograms)
            for name, cells in dict(data.get("joint_counts", {})).items()
        }
        clusters: dict[str, ClusterTally] = {}
        for name, tally_data in dict(data.get("clusters", {})).items():
            if name not in joint:
                raise ValueError(f"rules: per-request sums of {name!r} without its joint counts")
            tally = ClusterTally.from_dict(dict(tally_data))
            _check_clusters_add_up(name, tally, joint[name])
            clusters[name] = tally
        return cls(runs, histograms, dict(sorted(joint.items())), dict(sorted(clusters.items())))


def _cells(counts: IntArray) -> list[list[int]]:
    """The nonzero cells of counts[k, a] as [k, a, runs], in (k, a) order."""
    return [[int(k), int(a), int(counts[k, a])] for k, a in np.argwhere(counts)]


def _joint_from_cells(name: str, cells: object, histograms: dict[str, IntArray]) -> IntArray:
    """A rule's joint counts from their [k, a, runs] cells, checked against its accepted-length histogram."""
    if name not in histograms:
        raise ValueError(f"rules: joint counts of {name!r}, which has no accepted-length histogram")
    if not isinstance(cells, list) or any(
        not isinstance(cell, list) or len(cell) != 3 or any(type(value) is not int or value < 0 for value in cell)
        for cell in cells
    ):
        raise ValueError(f"rules: the joint counts of {name!r} are not [capacity, accepted, runs] counts")
    if any(cell[0] > MAX_DRAFT_LENGTH or cell[1] > cell[0] for cell in cells):
        raise ValueError(f"rules: the joint counts of {name!r} hold an impossible (capacity, accepted) cell")
    size = max((cell[0] for cell in cells), default=0) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    for k, a, n in cells:
        counts[k, a] += n
    marginal = np.trim_zeros(counts.sum(axis=0), "b").tolist()
    if marginal != np.trim_zeros(histograms[name], "b").tolist():
        raise ValueError(f"rules: the joint counts of {name!r} do not add up to its accepted-length histogram")
    return counts


def _check_clusters_add_up(name: str, tally: ClusterTally, counts: IntArray) -> None:
    """A rule's per-request sums must add up to its joint counts: runs, and per depth drafted, reached, kept."""
    sums = tally.sums
    size = counts.shape[0]
    positions = max(size - 1, sums.positions)
    by_k = np.zeros(positions + 1, dtype=np.int64)
    by_k[:size] = counts.sum(axis=1)
    by_a = np.zeros(positions + 1, dtype=np.int64)
    by_a[:size] = counts.sum(axis=0)
    full = np.zeros(positions + 1, dtype=np.int64)
    full[:size] = np.diagonal(counts)
    at_least_k = np.cumsum(by_k[::-1])[::-1]
    at_least_a = np.cumsum(by_a[::-1])[::-1]
    padded = sums.padded(positions)
    expected = {
        "drafts": at_least_k[1:],
        "reached": at_least_a[:-1] - full[:-1],
        "kept": at_least_a[1:],
    }
    if int(sums.runs.sum()) != int(counts.sum()) or any(
        getattr(padded, column).sum(axis=0, dtype=np.int64).tolist() != values.tolist()
        for column, values in expected.items()
    ):
        raise ValueError(f"rules: the per-request sums of {name!r} do not add up to its joint counts")
