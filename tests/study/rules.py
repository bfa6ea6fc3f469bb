"""The rule study: block and tree runs in requests, their tokens per pass and per-depth rates against the truth.

Block verification and a tree's walk are left out of alpha (`summary.rules`): what the first screen gives for
them is tokens per pass (mean accepted length or depth, plus one) and the conditional rate at each depth
c_d = kept d / reached d - 1, over the runs whose capacity (block's drafted length, a tree's depth) goes to d.
Each log is drawn by `specaccept simulate`'s generator with acceptance decaying by depth: request i has its
own alpha_i ~ Beta(7, 3) that scales every depth's rate (so a request is easy or hard as a whole), and each
run its own capacity (drafts of 1-8 tokens for block, trees 2-6 deep). Its (capacity, accepted) runs are
handed to the real per-batch stage as the readers hand a block's or a tree's rows on (stand-in tokens with
the run's rule, `rule.rows.stand_in_tokens`), with `--cluster-field request_id` or without, and the figures
are `rule_figures`' as the first screen and `-o json` show them. The truth is the process's, exact
(`Scenario.truth`: per depth, the expected kept over the expected reached, with the Beta integrated).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.rows import stand_in_tokens
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.simulate import Requests
from specaccept_cli.summary.evaluate import Plan, evaluate_batch
from specaccept_cli.summary.rule_figures import RuleFigures, rule_figures
from specaccept_cli.summary.state import Summary
from tests.study.scenarios import CLUSTER_FIELD, DECAY, Scenario

TREE_DECAY = (0.85, 0.75, 0.66, 0.58, 0.5, 0.45)  # a tree's per-depth rates, falling with depth
BETA = (7.0, 3.0)


@dataclass(frozen=True)
class RuleCase:
    """One row of the table: a rule's runs from a scenario, at a log size, read with or without the cluster field."""

    key: str
    rule: str
    scenario: Scenario
    runs: int
    cluster: bool


def _cases() -> tuple[RuleCase, ...]:
    serving = Requests((5, 20), BETA)
    long = Requests((50, 500), BETA)
    block = Scenario("block, drafts 1-8, rates 0.9 -> 0.59 by depth", 0.7, (1, 8), DECAY, serving)
    tree = Scenario("tree, depth 2-6, rates 0.85 -> 0.45 by depth", 0.7, (2, 6), TREE_DECAY, serving)
    tree_long = Scenario("tree, depth 2-6, rates 0.85 -> 0.45 by depth", 0.7, (2, 6), TREE_DECAY, long)
    tree_iid = Scenario("tree, depth 2-6, rates 0.85 -> 0.45 by depth, no requests", 0.7, (2, 6), TREE_DECAY)
    cases = [
        RuleCase("block_serving", "block", block, 4000, True),
        RuleCase("tree_serving", "tree-match", tree, 4000, True),
        RuleCase("tree_long", "tree-residual", tree_long, 20000, True),
        RuleCase("tree_long_over_runs", "tree-residual", tree_long, 20000, False),
        RuleCase("tree_iid", "tree-match", tree_iid, 2000, False),
    ]
    for count in (5, 10, 20):
        few = Scenario(
            f"tree, depth 2-6, rates 0.85 -> 0.45 by depth, {count} requests of 20-2,000 runs (log-uniform)",
            0.7,
            (2, 6),
            TREE_DECAY,
            Requests((20, 2000), BETA),
            unequal=(count, (20, 2000)),
        )
        cases.append(RuleCase(f"tree_unequal_{count}", "tree-target-cdf", few, 0, True))
    return tuple(cases)


RULE_CASES = {case.key: case for case in _cases()}
DEEP_LOGS = 1000
FAST_LOGS = 150


def rule_summary(case: RuleCase, seed: int) -> Summary:
    """One seeded log of the case: its runs as (capacity, accepted) of the case's rule, through the per-batch
    stage as a reader hands them on."""
    scenario = case.scenario
    alpha, profile = scenario._generating(0.0)
    plan = Plan(cluster_field=CLUSTER_FIELD if case.cluster else None)
    total = Summary()
    for chunk in scenario._chunks(case.runs, alpha, seed, profile):
        chain = accept_prefix_batch(chunk.offsets, chunk.p, chunk.q, chunk.r, False)
        count = chain.k.shape[0]
        p, q, r = stand_in_tokens(chain.k, chain.accepted)
        extras: dict[str, list[object]] = {}
        if case.cluster:
            assert chunk.request is not None, "a log without requests has no cluster field"
            extras[CLUSTER_FIELD] = [f"req-{number}" for number in chunk.request.tolist()]
        batch = RunBatch("study", np.arange(1, count + 1), chunk.offsets, p, q, r, extras, rules=[case.rule] * count)
        evaluated, errors = evaluate_batch(batch, plan, keep_runs=False)
        assert not errors
        total = total + evaluated.summary
    return total


def figures(summary: Summary) -> RuleFigures:
    assert summary.rules is not None
    (only,) = rule_figures(summary.rules, summary.clusters is not None)
    return only


@dataclass
class RuleOutcome:
    """Counts over the logs of one case."""

    logs: int = 0
    requests: float = 0.0
    tokens_intervals: int = 0
    tokens_covered: int = 0
    rate_intervals: dict[int, int] = field(default_factory=dict)  # by depth
    rate_covered: dict[int, int] = field(default_factory=dict)

    def tokens_rate(self) -> float:
        return self.tokens_covered / max(1, self.tokens_intervals)

    def rates_rate(self) -> float:
        return sum(self.rate_covered.values()) / max(1, sum(self.rate_intervals.values()))

    def worst_depth(self) -> tuple[int, float] | None:
        """The depth whose rate's intervals covered least (among those given in at least half the logs)."""
        shown = [depth for depth, count in self.rate_intervals.items() if count >= self.logs // 2]
        if not shown:
            return None
        depth = min(shown, key=lambda d: self.rate_covered.get(d, 0) / self.rate_intervals[d])
        return depth, self.rate_covered.get(depth, 0) / self.rate_intervals[depth]


def run_rule_case(case: RuleCase, logs: int, seed: int = 0) -> RuleOutcome:
    truth = case.scenario.truth()
    outcome = RuleOutcome()
    for index in range(logs):
        shown = figures(rule_summary(case, seed * 1_000_003 + index))
        outcome.logs += 1
        outcome.requests += shown.requests or 0
        if shown.interval is not None:
            outcome.tokens_intervals += 1
            outcome.tokens_covered += shown.interval[0] <= truth.tokens_per_pass <= shown.interval[1]
        for rate in shown.depth_rates:
            if rate.interval is None or rate.depth > len(truth.rate):
                continue
            value = truth.rate[rate.depth - 1]
            outcome.rate_intervals[rate.depth] = outcome.rate_intervals.get(rate.depth, 0) + 1
            covered = rate.interval[0] <= value <= rate.interval[1]
            outcome.rate_covered[rate.depth] = outcome.rate_covered.get(rate.depth, 0) + covered
    return outcome


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def rule_table(logs: int) -> str:
    """The rule study as markdown."""
    lines = [
        "| rule | scenario | runs | intervals over | requests | tokens/pass | per-depth rates | worst depth |",
        "|---|---|--:|---|--:|--:|--:|--:|",
    ]
    for case in RULE_CASES.values():
        outcome = run_rule_case(case, logs)
        worst = outcome.worst_depth()
        runs = "as drawn" if case.scenario.unequal is not None else f"{case.runs:,}"
        requests = f"{outcome.requests / outcome.logs:,.0f}" if case.cluster else ""
        lines.append(
            f"| {case.rule} | {case.scenario.name} | {runs} | {'requests' if case.cluster else 'runs'} | "
            f"{requests} | {_percent(outcome.tokens_rate())} | {_percent(outcome.rates_rate())} | "
            f"{'' if worst is None else f'{worst[0]}: {_percent(worst[1])}'} |"
        )
    return (
        f"Block and tree runs ({logs:,} logs a case; nominal 95%; requests' alphas ~ Beta(7, 3) scale every "
        "depth's rate; the row over runs is the same kind of log read without its request ids: what "
        "intervals over runs would give it):\n\n" + "\n".join(lines)
    )
