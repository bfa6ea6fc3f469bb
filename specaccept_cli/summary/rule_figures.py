"""What the first screen says of a rule outside alpha (block, trees), from its `RuleTally` histogram: tokens per
pass with its interval, the accepted-depth histogram and the per-depth conditional rates with their intervals.

A chain's alpha is never computed for them: a tree keeps the deepest node of its walk and block the longest
passing prefix, so accepted / examined is not a per-token rate; the conditional rate at depth d (of the runs
that reached d - 1, the share that kept d) is what `rule.expected.tokens_per_pass` multiplies up.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.rule.registry import rule_named
from specaccept_cli.summary.bounded import added_histograms
from specaccept_cli.summary.rules import IntArray, RuleTally
from specaccept_cli.summary.uncertainty import proportion_interval, tokens_interval

if TYPE_CHECKING:
    from specaccept_cli.summary.state import Summary

# The units of every interval below. The tally keeps one histogram per rule, without a request id, so the
# runs are the units: right for runs that are independent (a log without requests, where the headline warns that
# its intervals hold for a replayed prompt set), too narrow where runs come in requests that are easy or hard as
# a whole (a seeded study gave 72-77% coverage for nominal 95%). So a log whose runs come in requests gets no
# interval for these rules until the tally keeps their runs per request.
INTERVALS_OVER = "runs"
NO_INTERVALS = "none"  # the runs come in requests, and this rule's runs are not yet kept per request


class DepthRate(Struct, frozen=True):
    """Reached depth d - 1 -> kept depth d: `kept` of the `reached` runs, with Wilson's score interval."""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "accepted_histogram": {str(a): n for a, n in enumerate(self.histogram) if n},
            "tokens_per_pass": self.tokens_per_pass,
            "tokens_per_pass_interval": None if self.interval is None else list(self.interval),
            "depth_rates": [rate.to_dict() for rate in self.depth_rates],
            "intervals_over": self.over,
        }


def rule_figures(tally: RuleTally, in_requests: bool = False) -> tuple[RuleFigures, ...]:
    """The figures of every rule outside the counts, in the tally's order; `in_requests`: the log's runs come in
    requests (it has a cluster field), so intervals over runs would be too narrow and none are given."""
    return tuple(figures_of(name, tally.accepted[name], intervals=not in_requests) for name in tally.accepted)


def figures_of(name: str, histogram: IntArray, *, engine: bool = False, intervals: bool = True) -> RuleFigures:
    """Tokens per pass (mean accepted + 1, Student t / score interval over runs, inside [1, 1 + deepest]) and
    c_d = P(accepted >= d | accepted >= d - 1) for d = 1 .. deepest seen, each with its score interval."""
    counts = [int(n) for n in histogram.tolist()]
    while len(counts) > 1 and not counts[-1]:
        counts.pop()
    runs = sum(counts)
    top = len(counts) - 1
    tokens: float | None = None
    interval: tuple[float, float] | None = None
    if runs:
        mean = sum(a * n for a, n in enumerate(counts)) / runs
        tokens = mean + 1.0
        if runs >= 2 and intervals:
            variance = sum(n * (a - mean) ** 2 for a, n in enumerate(counts)) / (runs - 1)
            error = math.sqrt(variance / runs)
            interval = tokens_interval(top, runs * top, tokens, error, runs, float(runs - 1))
    rates = []
    reached = runs
    for depth in range(1, top + 1):
        kept = reached - counts[depth - 1]
        rate = kept / reached if reached else None
        bounds = None
        if rate is not None and reached >= 2 and intervals:
            error = math.sqrt(rate * (1.0 - rate) / reached)
            bounds = proportion_interval(rate, error, reached, reached, float(reached - 1))
        rates.append(DepthRate(depth, reached, kept, rate, bounds))
        reached = kept
    tree = engine or rule_named(name).kind == "tree"
    over = INTERVALS_OVER if intervals else NO_INTERVALS
    return RuleFigures(name, runs, tuple(counts), tokens, interval, tuple(rates), tree, over=over, engine=engine)


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
