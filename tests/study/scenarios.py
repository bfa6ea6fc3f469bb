"""The study's logs: seeded scenarios built with `specaccept simulate`'s generator, and their exact truths.

Each scenario is a way serving logs come about: independent runs, acceptance falling along the
draft, requests whose prompts are easy or hard as a whole (alpha drawn per request from a Beta),
a drafter whose k follows the request's alpha, and small logs near alpha = 1. A log is summarised
through the real per-batch stage (`evaluate_batch`, with `--cluster-field request_id` when asked), or
written as JSONL and read by the front door with the defaults (`summary_by_default`: no cluster field named),
and every truth is an expectation computed exactly from the generating process, not estimated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from msgspec.structs import replace

from specaccept_cli.pipeline import summarise
from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.simulate import Requests, SimulatedChunk, simulate, write_jsonl
from specaccept_cli.summary.evaluate import Evaluated, Plan, add_up, evaluate_batch
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.windows import WindowSpec

CLUSTER_FIELD = "request_id"
_GRID = 4001  # Beta quadrature points for the truths of request-clustered scenarios


@dataclass(frozen=True)
class Truth:
    """What the estimates estimate, for one scenario (runs -> infinity)."""

    alpha: float
    tokens_per_pass: float
    rate: tuple[float, ...]  # conditional, per position
    unconditional_rate: tuple[float, ...]


@dataclass(frozen=True)
class Scenario:
    """A generating process: alpha (or the Beta of request alphas), a position profile, k, and requests."""

    name: str
    alpha: float
    k: tuple[int, int]
    profile: tuple[float, ...] | None = None  # per-position acceptance (the last repeats)
    requests: Requests | None = None
    # A fixed number of requests whose sizes are log-uniform in [low, high] runs (a log's `runs` is then
    # ignored): few and unequal clusters, the small-sample corner of every interval and test.
    unequal: tuple[int, tuple[int, int]] | None = None

    @property
    def clustered(self) -> bool:
        return self.requests is not None

    def _generating(self, drop: float) -> tuple[float, list[float] | None]:
        """(alpha, profile) of the process with every token's acceptance scaled by (1 - drop)."""
        profile = self.profile
        if drop:
            if self.requests is not None and self.requests.alpha_beta is not None:
                # With requests the profile scales each request's alpha: profile = mean x (1 - drop).
                base = profile or (self.requests.mean_alpha(self.alpha),)
                profile = tuple(value * (1.0 - drop) for value in base)
            elif profile is not None:
                profile = tuple(value * (1.0 - drop) for value in profile)
        alpha = self.alpha * (1.0 - drop) if profile is None else self.alpha
        return alpha, list(profile) if profile else None

    def summary(self, runs: int, seed: int, cluster: bool, drop: float = 0.0) -> Summary:
        """A simulated log of `runs` runs, token acceptance scaled by (1 - drop), summarised in-process."""
        alpha, profile = self._generating(drop)
        plan = Plan(cluster_field=CLUSTER_FIELD if cluster else None)
        total = Summary()
        for chunk in self._chunks(runs, alpha, seed, profile):
            count = chunk.offsets.shape[0] - 1
            extras: dict[str, list[object]] = {}
            if cluster:
                assert chunk.request is not None, "a log without requests has no cluster field"
                extras[CLUSTER_FIELD] = [f"req-{number}" for number in chunk.request.tolist()]
            batch = RunBatch("study", np.arange(1, count + 1), chunk.offsets, chunk.p, chunk.q, chunk.r, extras)
            evaluated, errors = evaluate_batch(batch, plan, keep_runs=False)
            assert not errors
            total = total + evaluated.summary
        return total

    def summary_as_served(self, runs: int, seed: int, drop: float = 0.0) -> Summary:
        """The log as the defaults read `specaccept simulate`'s rows (clustered by request_id, windows of runs),
        in-process, and split by a `group` field (even and odd requests: two groups of one truth)."""
        alpha, profile = self._generating(drop)
        plan = Plan(cluster_field=CLUSTER_FIELD, group_by="group", windows=WindowSpec())

        def evaluated() -> Iterator[Evaluated]:
            for chunk in self._chunks(runs, alpha, seed, profile):
                assert chunk.request is not None
                count = chunk.offsets.shape[0] - 1
                numbers = chunk.request.tolist()
                extras: dict[str, list[object]] = {
                    CLUSTER_FIELD: [f"req-{number}" for number in numbers],
                    "group": ["even" if number % 2 == 0 else "odd" for number in numbers],
                }
                batch = RunBatch("study", np.arange(1, count + 1), chunk.offsets, chunk.p, chunk.q, chunk.r, extras)
                result, errors = evaluate_batch(batch, plan, keep_runs=False)
                assert not errors
                yield result

        return add_up(evaluated(), group_by="group", windows=plan.windows)

    def summary_by_default(self, runs: int, seed: int, directory: Path, drop: float = 0.0) -> Summary:
        """The log written as `specaccept simulate` writes it (rows carry `request_id`) and read by the front
        door with no settings but windows of runs: whatever clusters it is found by the defaults."""
        alpha, profile = self._generating(drop)
        path = directory / f"study-{seed}.jsonl"
        with path.open("wb") as out:
            write_jsonl(self._chunks(runs, alpha, seed, profile), out)
        try:
            return summarise([str(path)], plan=Plan(windows=WindowSpec()))
        finally:
            path.unlink()

    def _chunks(self, runs: int, alpha: float, seed: int, profile: list[float] | None) -> Iterator[SimulatedChunk]:
        """The generator's chunks: `runs` runs, or with `unequal` its requests one by one, numbered in order."""
        if self.unequal is None:
            yield from simulate(runs, alpha, self.k[0], self.k[1], seed, profile, self.requests)
            return
        assert self.requests is not None, "unequal requests draw their alphas from `requests`"
        count, (low, high) = self.unequal
        rng = np.random.default_rng(seed)
        sizes = np.floor(np.exp(rng.uniform(np.log(low), np.log(high + 1), size=count))).astype(np.int64)
        for number, size in enumerate(sizes.tolist()):
            one = Requests((size, size), self.requests.alpha_beta, self.requests.k_follows_alpha)
            for chunk in simulate(size, alpha, self.k[0], self.k[1], seed * 1009 + number, profile, one):
                yield replace(chunk, request=np.full(chunk.offsets.shape[0] - 1, number, dtype=np.int64))

    def truth(self) -> Truth:
        """Expected sums per run over the scenario's (alpha, k) distribution, then their ratios."""
        k_low, k_high = self.k
        width = k_high
        if self.requests is not None and self.requests.alpha_beta is not None:
            a, b = self.requests.alpha_beta
            grid = (np.arange(_GRID) + 0.5) / _GRID
            weights = grid ** (a - 1) * (1 - grid) ** (b - 1)
            weights /= weights.sum()
            request_alphas = list(zip(grid.tolist(), weights.tolist()))
            mean = a / (a + b)
        else:
            request_alphas, mean = [(self.alpha, 1.0)], self.alpha
        kept = np.zeros(width)
        reached = np.zeros(width)
        drafts = np.zeros(width)
        for request_alpha, weight in request_alphas:
            if self.profile is None:
                by_position = np.full(width, request_alpha)
            else:
                profile = np.array([self.profile[min(j, len(self.profile) - 1)] for j in range(width)])
                by_position = profile if self.requests is None else np.minimum(1.0, profile * request_alpha / mean)
            if self.requests is not None and self.requests.k_follows_alpha:
                ks = [(min(k_low + int(np.floor(request_alpha * (k_high - k_low + 1))), k_high), 1.0)]
            else:
                ks = [(k, 1.0 / (k_high - k_low + 1)) for k in range(k_low, k_high + 1)]
            survive = np.cumprod(by_position)  # P(token j kept) = product of the rates up to j
            reach = np.concatenate([[1.0], survive[:-1]])
            for k, k_weight in ks:
                share = weight * k_weight
                kept[:k] += share * survive[:k]
                reached[:k] += share * reach[:k]
                drafts[:k] += share
        return Truth(
            alpha=float(kept.sum() / reached.sum()),
            tokens_per_pass=float(1.0 + kept.sum()),
            rate=tuple(float(x) for x in kept / np.where(reached > 0, reached, 1.0)),
            unconditional_rate=tuple(float(x) for x in kept / np.where(drafts > 0, drafts, 1.0)),
        )


DECAY = (0.9, 0.82, 0.75, 0.69, 0.64, 0.61, 0.59)  # acceptance falling along the draft, 0.9 -> 0.59
CLUSTERED = Requests((50, 500), (7.0, 3.0))  # the requests: 50-500 runs, alpha ~ Beta(7, 3)

SCENARIOS = {
    "iid": Scenario("i.i.d. runs, alpha 0.75, k 1-8", 0.75, (1, 8)),
    "position": Scenario("acceptance by position 0.9 -> 0.59, k 1-8", 0.0, (1, 8), profile=DECAY),
    "clustered": Scenario("requests of 50-500 runs, alpha ~ Beta(7, 3), k 1-8", 0.7, (1, 8), requests=CLUSTERED),
    "k_tied": Scenario(
        "requests, alpha ~ Beta(7, 3), k follows alpha in 1-8",
        0.7,
        (1, 8),
        requests=Requests((50, 500), (7.0, 3.0), k_follows_alpha=True),
    ),
    # Serving traffic: short requests (5-20 runs), many of them, each easy or hard as a whole.
    "serving": Scenario(
        "requests of 5-20 runs, alpha ~ Beta(7, 3), k 1-8", 0.7, (1, 8), requests=Requests((5, 20), (7.0, 3.0))
    ),
    # Few and unequal requests: 5, 10 or 20 of 20-2,000 runs (log-uniform, 1x-100x), alpha ~ Beta(7, 3).
    **{
        f"unequal_{count}": Scenario(
            f"{count} requests of 20-2,000 runs (log-uniform), alpha ~ Beta(7, 3), k 1-8",
            0.7,
            (1, 8),
            requests=Requests((20, 2000), (7.0, 3.0)),
            unequal=(count, (20, 2000)),
        )
        for count in (5, 10, 20)
    },
    # The same requests at one alpha (no request effect): the null of the i.i.d. check.
    **{
        f"unequal_{count}_flat": Scenario(
            f"{count} requests of 20-2,000 runs (log-uniform), alpha 0.7, k 1-8",
            0.7,
            (1, 8),
            requests=Requests((20, 2000)),
            unequal=(count, (20, 2000)),
        )
        for count in (5, 10, 20)
    },
    # Serving traffic of one-run and of ten-run requests.
    "one_run": Scenario(
        "requests of 1 run, alpha ~ Beta(7, 3), k 1-8", 0.7, (1, 8), requests=Requests((1, 1), (7.0, 3.0))
    ),
    "ten_run": Scenario(
        "requests of 10 runs, alpha ~ Beta(7, 3), k 1-8", 0.7, (1, 8), requests=Requests((10, 10), (7.0, 3.0))
    ),
    "small_90": Scenario("small logs, alpha 0.9, k 2", 0.9, (2, 2)),
    "small_99": Scenario("small logs, alpha 0.99, k 2", 0.99, (2, 2)),
}
