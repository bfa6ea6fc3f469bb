"""Best-depth advice for the rules outside alpha, by each rule's own model: `rule_advice(figures, cost_ratio)`.

The chain's advice (`formulas.optimal_k`) needs a per-token alpha; block and tree runs have none, so each gets
what its figures let one say honestly:

- A tree (a tree rule's recomputed runs, or an engine's tree named with its shape): every level of the walk is
  decided from the levels above it alone, so cutting the tree at depth D' keeps min(accepted depth, D') and the
  tokens per pass at D' are exactly 1 + sum over d <= D' of c_1 ... c_d from the per-depth rates. A pass costs
  one target forward and one draft forward per level (EAGLE drafts a level per step: SGLang's `num_steps`), so
  the speedup at D' is that over 1 + D' c. Depths past the deepest one the input shows are not known (no pass
  said how a deeper level would fare): the advice stops there and says so, never extrapolates.
- The observed speedup is tokens per pass / (1 + c x draft forward passes per verify pass): the tree's steps
  when the shape is named; for recomputed rows, each run's own capacity (a tree's depth, block's drafted
  length: a draft pass per level or position), so it is sum(a + 1) / sum(1 + c x capacity) over the runs, exact.
  Only a summary saved before capacities were kept lacks them: there the deepest depth any pass accepted stands
  in, runs are at least that deep, so the figure is an upper bound ("at most") and is labelled so.
- Block verification decides jointly (the longest prefix whose test passes), so a shorter draft changes every
  decision and its histogram says nothing exact about another k. It keeps at least the chain rule's tokens on the
  same drafts (Sun et al. 2025, Theorem 2): the chain model at the drafts' per-token alpha is a floor, "at least",
  as `expect --rule block` shows it. The tally of block runs keeps their accepted lengths only (no per-token
  alpha, no draft length), so the advice gives the observed tokens per pass, the observed speedup bounded the
  same way as a tree's, and says where the floor comes from.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

from specaccept_cli.rule.expected import tokens_per_pass
from specaccept_cli.summary.rule_figures import RuleFigures

# What the observed speedup's draft passes per verify pass are: the tree's named steps or the runs' mean capacity
# (exact), or the deepest accepted depth or length standing in for them (an upper bound on the speedup).
Passes = Literal["steps", "capacity", "deepest"]
PASSES_FROM = {"steps": "tree steps", "capacity": "the runs' capacities", "deepest": "deepest accepted (assumed)"}


class DepthAdvice(Struct, frozen=True):
    """The tree cut at `depth`: expected tokens per pass and speedup at the cost ratio."""

    depth: int
    tokens_per_pass: float
    speedup: float

    def to_dict(self) -> dict[str, Any]:
        return {"depth": self.depth, "tokens_per_pass": self.tokens_per_pass, "speedup": self.speedup}


class RuleAdvice(Struct, frozen=True):
    """One rule's advice at cost ratio c, by its own model (`model`: "tree", or "at-least-chain" for block)."""

    name: str
    model: str
    cost_ratio: float
    tokens_per_pass: float | None  # observed, over the rule's runs (a tree's verify passes)
    draft_passes: float  # draft forward passes per verify pass the observed speedup divides by (a mean)
    passes_from: Passes
    speedup: float | None  # observed: tokens per pass / (1 + c x draft_passes)
    depths: tuple[DepthAdvice, ...]  # tree: cut at 1 .. known_depth; block: none (truncating changes decisions)
    best: int | None  # the depth with the largest speedup among `depths`
    known_depth: int  # the deepest depth whose rate the input gives: deeper is not known

    @property
    def speedup_bound(self) -> str:
        """How the observed speedup is meant: "exact" with the tree's steps or the runs' capacities, else "at
        most" (a deeper tree or a longer draft than the deepest accepted costs more draft passes)."""
        return "at most" if self.passes_from == "deepest" else "exact"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "cost_ratio": self.cost_ratio,
            "tokens_per_pass": self.tokens_per_pass,
            "speedup": self.speedup,
            "speedup_bound": self.speedup_bound,
            "draft_passes_per_verify_pass": self.draft_passes,
            "draft_passes_from": PASSES_FROM[self.passes_from],
            "by_depth": [row.to_dict() for row in self.depths],
            "best_depth": self.best,
            "known_depth": self.known_depth,
            **({"floor": "at least the chain model at the drafts' per-token alpha"} if self.model != "tree" else {}),
        }


def rule_advice(
    name: str,
    tree: bool,
    histogram: tuple[int, ...],
    rates: tuple[float | None, ...],
    cost_ratio: float,
    steps: int | None = None,
    capacity: float | None = None,
) -> RuleAdvice:
    """Advice for one rule from its accepted-length histogram and per-depth conditional rates (`RuleFigures`);
    `steps`: the tree's depth when its shape is named (draft passes per verify pass, and the depth every pass
    could reach, so the rates past the deepest accepted are known to be 0 up to it); `capacity`: the runs' mean
    capacity where it was kept (their draft passes per verify pass)."""
    runs = sum(histogram)
    deepest = max((depth for depth, count in enumerate(histogram) if count), default=0)
    observed = None if not runs else sum(depth * count for depth, count in enumerate(histogram)) / runs + 1.0
    passes: float = float(max(deepest, 1))
    passes_from: Passes = "deepest"
    if steps is not None:
        passes, passes_from = float(steps), "steps"
    elif capacity is not None:
        passes, passes_from = capacity, "capacity"
    speedup = None if observed is None else observed / (1.0 + cost_ratio * passes)
    depths: list[DepthAdvice] = []
    known = 0
    if tree and runs:
        known = steps if steps is not None else max(deepest, len(rates))  # a depth reached, none kept: rate 0
        known_rates = [rate if rate is not None else 0.0 for rate in rates[:known]]
        known_rates += [0.0] * (known - len(known_rates))  # a named tree's levels no pass kept: rate 0, known
        for depth in range(1, known + 1):
            tokens = tokens_per_pass(known_rates[:depth])
            depths.append(DepthAdvice(depth, tokens, tokens / (1.0 + cost_ratio * depth)))
    best = max(depths, key=lambda row: row.speedup).depth if depths else None
    return RuleAdvice(
        name,
        "tree" if tree else "at-least-chain",
        cost_ratio,
        observed,
        passes,
        passes_from,
        speedup,
        tuple(depths),
        best,
        known,
    )


def advice_of(figures: RuleFigures, cost_ratio: float, steps: int | None = None) -> RuleAdvice:
    """`rule_advice` of a rule's figures (`steps`: the named tree's, for an engine's tree)."""
    rates = tuple(rate.rate for rate in figures.depth_rates)
    return rule_advice(figures.name, figures.tree, figures.histogram, rates, cost_ratio, steps, figures.capacity)
