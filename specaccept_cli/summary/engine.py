"""`EngineTally`: what a summary built from engine metrics (not from runs) knows, and what it does not.

A serving engine's metrics lines and counters give, per interval, either the exact (k, a)
histogram of its drafts (vLLM's per-position counters with a fixed draft length) or only
totals and printed rates. Exact intervals go into the summary's counts like logged runs;
the rest stay here as totals and bounds, so nothing read is dropped and nothing bounded is
passed off as exact. Additive like the rest of the state.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from specaccept_cli.summary.bounded import BoundedUnits, steps_bounds
from specaccept_cli.summary.depths import DepthTally

MAX_KEPT_INTERVALS = 20  # intervals kept for the view: what the engine printed beside what it means


class EngineTally(Struct, frozen=True):
    """Engine metrics read into a summary: line counts, exact and bounded intervals."""

    engines: tuple[str, ...] = ()  # e.g. ("vllm",), in the order first seen
    formats: tuple[str, ...] = ()  # the exact variants, e.g. ("vllm-log-v1-full",)
    lines: int = 0  # every line read
    metrics_lines: int = 0  # lines (or scrape differences) that gave an interval
    ignored_lines: int = 0  # ordinary server output
    bad_lines: int = 0  # looked like metrics but did not parse or add up (reported under the error policy)
    resets: int = 0  # Prometheus counter resets (a restart between scrapes)
    duplicate_lines: int = 0  # metrics lines repeating an earlier one exactly (a log shipper's duplicate): dropped
    intervals: int = 0
    recovered: int = 0  # intervals whose (k, a) histogram is exact: they are in the summary's counts
    # Intervals that could not be recovered exactly: their token totals and the bounds they allow.
    bounded: int = 0
    # Their rows, one per interval or request (`summary.bounded`): exact totals, steps and examined-token bounds.
    units: BoundedUnits | None = None
    unquantified: int = 0  # intervals with printed rates only, no token counts (SGLang's 'accept len')
    running_totals: int = 0  # lines that repeat counts since the start (llama.cpp's statistics): shown, not added
    lone_scrapes: int = 0  # intervals of a single scrape: counts since the server started, not over a chosen span
    # Per-request payloads (`read.payloads`): requests read (each also an interval, exact or bounded), those
    # exact only if every draft had full width (SGLang's nominal proposed count), null payloads, and the
    # fields no reader knows (schema drift, reported once).
    requests: int = 0
    requests_assuming_full_drafts: int = 0
    null_payloads: int = 0
    drift: tuple[str, ...] = ()
    # Recovered intervals that are exact only if every draft had k tokens (Drafted = k x drafts taken to say so):
    # the examined tokens they put in the counts, and the bounds on those without the assumption.
    assumed: int = 0
    assumed_examined: int = 0
    assumed_examined_low: int = 0
    assumed_examined_high: int = 0
    # describe() of the first intervals, in input order: what the engine printed and what it means.
    examples: tuple[str, ...] = ()
    # Bounded requests' accepted-depth histograms, per depth over requests (a tree's rates, `audit --tree`).
    depths: DepthTally | None = None

    def __add__(self, other: EngineTally) -> EngineTally:
        return EngineTally(
            engines=tuple(dict.fromkeys(self.engines + other.engines)),
            formats=tuple(dict.fromkeys(self.formats + other.formats)),
            lines=self.lines + other.lines,
            metrics_lines=self.metrics_lines + other.metrics_lines,
            ignored_lines=self.ignored_lines + other.ignored_lines,
            bad_lines=self.bad_lines + other.bad_lines,
            resets=self.resets + other.resets,
            duplicate_lines=self.duplicate_lines + other.duplicate_lines,
            intervals=self.intervals + other.intervals,
            recovered=self.recovered + other.recovered,
            bounded=self.bounded + other.bounded,
            units=self.units + other.units
            if self.units is not None and other.units is not None
            else self.units or other.units,
            unquantified=self.unquantified + other.unquantified,
            running_totals=self.running_totals + other.running_totals,
            lone_scrapes=self.lone_scrapes + other.lone_scrapes,
            assumed=self.assumed + other.assumed,
            assumed_examined=self.assumed_examined + other.assumed_examined,
            assumed_examined_low=self.assumed_examined_low + other.assumed_examined_low,
            assumed_examined_high=self.assumed_examined_high + other.assumed_examined_high,
            examples=(self.examples + other.examples)[:MAX_KEPT_INTERVALS],
            requests=self.requests + other.requests,
            requests_assuming_full_drafts=self.requests_assuming_full_drafts + other.requests_assuming_full_drafts,
            null_payloads=self.null_payloads + other.null_payloads,
            drift=tuple(dict.fromkeys(self.drift + other.drift)),
            depths=self.depths + other.depths
            if self.depths is not None and other.depths is not None
            else self.depths or other.depths,
        )

    @property
    def bounded_accepted(self) -> int:
        return 0 if self.units is None else self.units.total("accepted")

    @property
    def bounded_draft_tokens(self) -> int:
        return 0 if self.units is None else self.units.total("drafted")

    @property
    def bounded_examined_low(self) -> int:
        return 0 if self.units is None else self.units.total("examined_low")

    @property
    def bounded_examined_high(self) -> int:
        return 0 if self.units is None else self.units.total("examined_high")

    def to_dict(self) -> dict[str, Any]:
        depths = {} if self.depths is None else {"depths": self.depths.to_dict()}  # absent: as files were
        return depths | {
            "engines": list(self.engines),
            "formats": list(self.formats),
            "lines": self.lines,
            "metrics_lines": self.metrics_lines,
            "ignored_lines": self.ignored_lines,
            "bad_lines": self.bad_lines,
            "counter_resets": self.resets,
            "duplicate_lines": self.duplicate_lines,
            "intervals": self.intervals,
            "recovered_intervals": self.recovered,
            "bounded_intervals": self.bounded,
            "bounded_accepted_tokens": self.bounded_accepted,
            "bounded_drafted_tokens": self.bounded_draft_tokens,
            "bounded_examined_tokens": [self.bounded_examined_low, self.bounded_examined_high],
            "unquantified_intervals": self.unquantified,
            "running_totals": self.running_totals,
            "lone_scrapes": self.lone_scrapes,
            # Exact only if every draft had k tokens: the view says so, and the bounds do not assume it.
            "assumes_full_drafts": self.assumed > 0,
            "assumed_full_draft_intervals": self.assumed,
            "assumed_examined_tokens": [self.assumed_examined, self.assumed_examined_low, self.assumed_examined_high],
            "examples": list(self.examples),
            "bounded_units": None if self.units is None else self.units.to_dict(),
            "requests": self.requests,
            "requests_assuming_full_drafts": self.requests_assuming_full_drafts,
            "null_payloads": self.null_payloads,
            "schema_drift": list(self.drift),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineTally:
        low, high = data["bounded_examined_tokens"]
        units = data.get("bounded_units")
        if units is not None:
            bounded_units: BoundedUnits | None = BoundedUnits.from_dict(units)
        elif data["bounded_intervals"]:  # a file written before the rows: its totals as one unit
            accepted, drafted = data["bounded_accepted_tokens"], data["bounded_drafted_tokens"]
            steps = steps_bounds(None, None, accepted, drafted, (low, high), None)
            bounded_units = BoundedUnits.one(0, steps, accepted, drafted, (low, high), None)
        else:
            bounded_units = None
        assumed = data.get("assumed_examined_tokens", [0, 0, 0])  # absent from files written before it
        return cls(
            engines=tuple(data["engines"]),
            formats=tuple(data["formats"]),
            lines=data["lines"],
            metrics_lines=data["metrics_lines"],
            ignored_lines=data["ignored_lines"],
            bad_lines=data["bad_lines"],
            resets=data["counter_resets"],
            duplicate_lines=data.get("duplicate_lines", 0),  # absent from files written before it
            intervals=data["intervals"],
            recovered=data["recovered_intervals"],
            bounded=data["bounded_intervals"],
            units=bounded_units,
            unquantified=data["unquantified_intervals"],
            running_totals=data.get("running_totals", 0),
            lone_scrapes=data.get("lone_scrapes", 0),  # absent from files written before it
            assumed=data.get("assumed_full_draft_intervals", 0),
            assumed_examined=assumed[0],
            assumed_examined_low=assumed[1],
            assumed_examined_high=assumed[2],
            examples=tuple(data["examples"]),
            requests=data.get("requests", 0),
            requests_assuming_full_drafts=data.get("requests_assuming_full_drafts", 0),
            null_payloads=data.get("null_payloads", 0),
            drift=tuple(data.get("schema_drift", ())),
            depths=DepthTally.from_dict(data["depths"]) if "depths" in data else None,
        )


class TreeEvidence(Struct, frozen=True):
    """SGLang counts that read like an EAGLE tree's: `width` drafts proposed per verify pass (SGLang's
    `speculative_num_draft_tokens - 1`, counted the same for a chain's k and a tree's nodes), but over `passes`
    passes none kept more than `deepest`; `reached` passes got that deep and not one went further."""

    width: int
    deepest: int
    passes: int
    reached: int

    @property
    def chain_rate_at_most(self) -> float:
        """The 95% upper bound on a chain's rate at depth deepest + 1 after `reached` tries kept none of it
        (the exact binomial bound 1 - 0.05^(1 / reached), about 3 / reached)."""
        return 1.0 - float(0.05 ** (1.0 / self.reached))


def tree_evidence(engine: EngineTally | None) -> TreeEvidence | None:
    """What SGLang's per-request counts say of a tree without its shape, or None where they say nothing.

    They cannot prove one (python/sglang/srt/managers/tokenizer_manager.py and managers/schedule_batch.py in
    sgl-project/sglang): the proposed count is verify passes x (speculative_num_draft_tokens - 1) whatever the
    tree, `spec_accept_rate` is accepted / that count, and `spec_correct_drafts_histogram` grows to the
    deepest accepted length (`update_spec_correct_drafts_histogram` extends it on demand), not to
    `speculative_num_steps` + 1; neither `speculative_eagle_topk` nor the steps are written per request. A chain
    of `width` drafts that never accepted all of them reads exactly the same, so the evidence is statistical:
    passes that reached the deepest accepted depth and never went further. Read only where every count is
    SGLang's, every request wrote its histogram, and the width is one whole number over all of them.
    """
    if engine is None or engine.engines != ("sglang",) or engine.units is None or engine.recovered:
        return None
    units = engine.units
    if not units.histogram_complete or not units.histogram:
        return None
    steps = units.total("steps_low")
    if not steps or steps != units.total("steps_high") or sum(units.histogram) != steps:
        return None
    drafted = units.total("drafted")
    if drafted % steps:
        return None
    width = drafted // steps
    histogram = units.histogram
    deepest = max(depth for depth, count in enumerate(histogram) if count)
    if deepest < 1 or width <= deepest:
        return None
    evidence = TreeEvidence(width, deepest, steps, histogram[deepest])
    # Said only where the stop is sharp: the chain's bound at depth deepest + 1 below the rate seen at deepest.
    rate_at_deepest = histogram[deepest] / sum(histogram[deepest - 1 :])
    return evidence if evidence.chain_rate_at_most < rate_at_deepest else None
