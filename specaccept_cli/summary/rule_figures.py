"""What the first screen says of a rule outside alpha (block, trees), from its `RuleTally`: tokens per pass with
its interval, the accepted-depth histogram and the per-depth conditional rates with their intervals.

A chain's alpha is never computed for them: a tree keeps the deepest node of its walk and block the longest
passing prefix, so accepted / examined is not a per-token rate; the conditional rate at depth d (of the runs
that reached d - 1 and could go to d, the share that kept d) is what `rule.expected.tokens_per_pass` multiplies
up. A run's capacity (block's drafted length, a tree's depth) plays a chain's k, so the figures are the chain
estimates of those runs (`summary.estimates`): tokens per pass and the per-position conditional rates, with
the same sandwich variances, degrees of freedom and score intervals, over requests when the log's runs come in
requests and the tally kept this rule's runs per request, else over runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.rule.registry import rule_named
from specaccept_cli.summary.bounded import added_histograms
from specaccept_cli.summary.clusters import ClusterTally
from specaccept_cli.summary.rules import IntArray, RuleTally
from specaccept_cli.summary.uncertainty import proportion_interval

if TYPE_CHECKING:
    from specaccept_cli.summary.state import Summary

# The units of the intervals below: the requests where the log's runs come in requests and the tally kept this
# rule's runs per request (a cluster sandwich, as the chain figures'); the runs in a log without requests (whose
# headline warns that its intervals hold for a replayed prompt set). A log of requests whose tally lacks this
# rule's runs per request (a summary saved before they were kept, or added to one) gets no interval: over runs
# they covered 17.5% (tokens per pass) and 56.9% (the rates) for a nominal 95% where requests are easy or hard as
# a whole (docs/statistics.md, the rule study).
INTERVALS_OVER = "runs"
OVER_REQUESTS = "requests"
NO_INTERVALS = "none"  # the runs come in requests, and this rule's runs were not kept per request


class DepthRate(Struct, frozen=True):
    """Reached depth d - 1 (and could go to d) -> kept depth d: `kept` of the `reached` runs, with its interval."""

    depth: int
    reached: int
    kept: int
    rate: float | None
    interval: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "reached": self.reached,
            "kept": self.kept,
            "rate": self.rate,
            "interval": None if self.interval is None else list(self.interval),
        }


class RuleFigures(Struct, frozen=True):
    """What the first screen says of a rule outside alpha: tokens per pass with its interval, the accepted-length
    (a tree's accepted-depth) histogram and the per-depth conditional rates; never a chain's alpha."""

    name: str
    runs: int
    histogram: tuple[int, ...]  # histogram[a] = runs that accepted exactly a tokens (a tree: depth a)
    tokens_per_pass: float | None
    interval: tuple[float, float] | None
    depth_rates: tuple[DepthRate, ...]
    tree: bool  # a tree rule: the histogram is of accepted depths (else of block's accepted lengths)
    over: str = INTERVALS_OVER
    engine: bool = False  # from an engine's own accepted-depth histograms (--tree), not recomputed runs
    requests: int | None = None  # the requests the intervals are over (`over` "requests")
    # Mean capacity (block's drafted length, a tree's depth) of the runs, where the tally kept it (joint counts):
    # the draft forward passes per verify pass, one per drafted position or tree level.
    capacity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "accepted_histogram": {str(a): n for a, n in enumerate(self.histogram) if n},
            "tokens_per_pass": self.tokens_per_pass,
            "tokens_per_pass_interval": None if self.interval is None else list(self.interval),
            "depth_rates": [rate.to_dict() for rate in self.depth_rates],
            "intervals_over": self.over,
            "requests": self.requests,
        }


def rule_figures(tally: RuleTally, in_requests: bool = False) -> tuple[RuleFigures, ...]:
    """The figures of every rule outside the counts, in the tally's order; `in_requests`: the log's runs come in
    requests (it has a cluster field), so the intervals are over requests where the tally kept the rule's runs per
    request, and there are none where it did not (intervals over runs would be too narrow)."""
    in_requests = in_requests or bool(tally.clusters)  # a group of block or tree runs alone has no chain clusters
    return tuple(_figures_of_rule(tally, name, in_requests) for name in tally.accepted)


def _figures_of_rule(tally: RuleTally, name: str, in_requests: bool) -> RuleFigures:
    clusters = tally.clusters.get(name) if in_requests else None
    intervals = not in_requests or clusters is not None
    figures = figures_of_runs(name, tally.joint_of(name), clusters, intervals=intervals)
    known = tally.joint.get(name)
    if known is None or not figures.runs:  # a file from before the joint counts: the capacities are not known
        return figures
    capacity = float(np.arange(known.shape[0]) @ known.sum(axis=1)) / figures.runs
    return replace(figures, capacity=capacity)


def figures_of(name: str, histogram: IntArray, *, engine: bool = False, intervals: bool = True) -> RuleFigures:
    """The figures of runs known only by their accepted lengths (an engine's histograms, a summary saved before
    the joint counts): each run taken as able to go one deeper than it did, up to the deepest accepted, which
    makes c_d = P(accepted >= d | accepted >= d - 1) for d = 1 .. deepest seen; intervals over runs."""
    joint = RuleTally(accepted={name: histogram}).joint_of(name)
    return figures_of_runs(name, joint, engine=engine, intervals=intervals)


def figures_of_runs(
    name: str,
    joint: IntArray,
    clusters: ClusterTally | None = None,
    *,
    engine: bool = False,
    intervals: bool = True,
) -> RuleFigures:
    """Tokens per pass and c_d (of the runs that reached depth d - 1 and could go to d, the share that kept d,
    for every depth some run reached) from joint[capacity, accepted], as the chain estimates of the same (k, a)
    runs give them: over `clusters` when given (requests), else over runs; none when not `intervals`."""
    from specaccept_cli.summary.estimates import estimate  # the estimates import the state, which imports rules
    from specaccept_cli.summary.state import Summary

    numbers = estimate(Summary(counts=joint, clusters=clusters))
    rates = tuple(
        DepthRate(row.position, row.reached, row.accepted, row.rate, row.rate_ci if intervals else None)
        for row in numbers.per_position
        if row.reached
    )
    counts = [int(n) for n in joint.sum(axis=0).tolist()]
    while len(counts) > max(1, len(rates) + 1) and not counts[-1]:
        counts.pop()
    tree = engine or rule_named(name).kind == "tree"
    runs = numbers.runs
    # The mean accepted length plus one, as `RuleTally.tokens_per_pass` and the warning give it (the same float).
    tokens = numbers.accepted_tokens / runs + 1.0 if runs else None
    over = (OVER_REQUESTS if clusters is not None else INTERVALS_OVER) if intervals else NO_INTERVALS
    return RuleFigures(
        name,
        runs,
        tuple(counts),
        tokens,
        numbers.tokens_per_pass_ci if intervals else None,
        rates,
        tree,
        over=over,
        engine=engine,
        requests=numbers.clusters if clusters is not None else None,
    )


class TreeShape(Struct, frozen=True):
    """The server's tree (SGLang's `speculative_eagle_topk`, `speculative_num_steps`,
    `speculative_num_draft_tokens`): at most `steps` deep, `draft_tokens - 1` drafted nodes per verify pass."""

    topk: int
    steps: int
    draft_tokens: int

    def describe(self) -> str:
        return f"topk {self.topk}, {self.steps} steps, {self.draft_tokens} draft tokens"

    def to_dict(self) -> dict[str, int]:
        return {"topk": self.topk, "steps": self.steps, "draft_tokens": self.draft_tokens}


def engine_tree_figures(
    summary: Summary, shape: TreeShape, tokens_interval_over_requests: tuple[float, float] | None
) -> RuleFigures | None:
    """Per-depth rates of an engine's tree from the accepted-depth histograms it reported, summed over requests
    (those read as bounded units, and any whose counts were pinned down); None without a histogram.

    Every verify pass could reach every depth of a fixed tree, so c_d = reached d / reached d - 1 is exact. The
    rates' intervals are over requests when the engine's depth tally holds every pass (`DepthTally`: the sandwich
    over requests), else over verify passes; tokens per pass takes the summary's own interval
    (`tokens_interval_over_requests`, clustered over requests as the headline shows it) when there is one.
    """
    if summary.engine is None:  # logged runs are recomputed by their rule: a tree's rows name a tree rule
        return None
    units = summary.engine.units
    summed: tuple[int, ...] = () if units is None else units.histogram
    if summary.counts.size:
        summed = added_histograms(summed, tuple(int(n) for n in summary.counts.sum(axis=0).tolist()))
    if not sum(summed):
        return None
    figures = figures_of(f"tree ({shape.describe()})", np.array(summed, dtype=np.int64), engine=True)
    depths = summary.engine.depths
    rates_over_requests = depths is not None and depths.passes == figures.runs and depths.requests >= 2
    if depths is not None and rates_over_requests:
        # Every pass came from a request whose histogram the depth tally holds: the rates' intervals over requests.
        rates = []
        for rate in figures.depth_rates:
            found = depths.rate_error(rate.depth)
            bounds = None
            if found is not None:
                bounds = proportion_interval(found[0], found[1], rate.reached, depths.requests, depths.requests - 1.0)
            rates.append(replace(rate, interval=bounds))
        figures = replace(figures, depth_rates=tuple(rates))
    if tokens_interval_over_requests is not None:
        figures = replace(figures, interval=tokens_interval_over_requests)
    over = {
        (True, True): "requests",
        (True, False): "requests (the rates) and verify passes (tokens per pass)",
        (False, True): "requests (tokens per pass) and verify passes (the rates)",
        (False, False): "verify passes",
    }[rates_over_requests, tokens_interval_over_requests is not None]
    return replace(figures, over=over)
