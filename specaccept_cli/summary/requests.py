"""Per-request records -> Summary: each request is a cluster, always.

The records come from `read.payloads`, read source by source in `pipeline.servers`; this module only
turns each `rule.requests.RequestRecord` into a summary part.

A record whose runs are pinned down (per-step arrays, a histogram by draft length, or a
histogram with every draft at full width) adds its (k, a) histogram to the counts and its
sums to the summary's per-cluster tally under `REQUEST_FIELD`, keyed by the request's id
(or its file and line when it has none). So every interval is over requests: alpha, tokens
per pass, per position, groups, the baseline gate, the drift test and merged summaries use
the same sandwich as `--cluster-field` on logged runs. A record that only bounds its counts
(llama.cpp's totals) adds its totals and bounds to the `EngineTally`, never to the counts.
A payload that breaks an identity goes to the error policy like a bad row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
from msgspec.structs import replace

from specaccept_cli.errors import InputError, OnError
from specaccept_cli.rule.batch import IntArray
from specaccept_cli.summary.bounded import BoundedUnits, added_histograms, steps_bounds
from specaccept_cli.summary.clusters import ClusterTally, KeyArray
from specaccept_cli.summary.depths import DepthTally
from specaccept_cli.summary.engine import MAX_KEPT_INTERVALS, EngineTally
from specaccept_cli.summary.evaluate import Evaluated, Plan, cluster_hash
from specaccept_cli.summary.intervals import REQUEST_FIELD, interval_runs
from specaccept_cli.summary.state import Groups, Summary, label_key
from specaccept_cli.summary.windows import WindowTally

if TYPE_CHECKING:
    from specaccept_cli.rule.requests import RequestRecord


def request_parts(
    items: Iterable[InputError | tuple[int, RequestRecord]],
    source: str,
    plan: Plan,
    on_error: OnError,
    labels: set[str],
) -> Iterator[Evaluated]:
    """Every request of one source (its line and record, or a bad line's error), as summary parts in input order;
    `labels` collects every label name met."""
    block = RequestBlock(source) if plan.group_by is None and plan.windows is None else None
    for item in items:
        if isinstance(item, InputError):
            on_error(item)
            continue
        line, record = item
        labels.update(record.labels)
        if block is not None:  # requests added a block at a time: the same sums, without a summary per request
            block.add(record, line)
            if block.requests >= BLOCK_REQUESTS:
                yield block.part()
                block = RequestBlock(source)
            continue
        part = request_part(record, source, line, plan, on_error)
        if part is not None:
            yield part
    if block is not None and block.requests:
        yield block.part()


BLOCK_REQUESTS = 2048


class RequestBlock:
    """Requests gathered into one summary part: runs, cluster keys and engine tallies, summed once."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.requests = 0
        self.k: list[IntArray] = []
        self.accepted: list[IntArray] = []
        self.keys: list[KeyArray] = []
        self.engines: dict[str, None] = {}
        self.formats: dict[str, None] = {}
        self.examples: list[str] = []
        self.recovered = self.assumed = self.bounded = self.unquantified = 0
        self.rows: list[tuple[int, int, int, int, int, int, int]] = []  # bounded requests: key, then COLUMNS
        self.histogram: tuple[int, ...] = ()
        self.without_histogram = 0
        self.depths: DepthTally | None = None

    def add(self, record: RequestRecord, line: int) -> None:
        self.requests += 1
        self.engines[record.engine] = None
        self.formats[record.fmt] = None
        where = f"{self.source}:{line}"
        found = record.runs()
        if len(self.examples) < MAX_KEPT_INTERVALS:
            said = f"{record.fmt} request {record.request_id or where}: " + _describe(record, found is not None)
            self.examples.append(f"{where}: " + "; ".join((said, *record.notes)))
        key = request_key(record, where)
        if found is None:
            row = bounded_row(record, key)
            if row is None:
                self.unquantified += 1
                return
            self.bounded += 1
            self.rows.append(row)
            if record.histogram is None:
                self.without_histogram += 1
            else:
                self.histogram = added_histograms(self.histogram, record.histogram)
                one = DepthTally.of_histogram(record.histogram)
                self.depths = one if self.depths is None else self.depths + one
            return
        k, accepted = found
        self.recovered += 1
        self.assumed += 1 if record.drafted_nominal and record.per_step_accepted is None else 0
        self.k.append(k)
        self.accepted.append(accepted)
        self.keys.append(np.full(k.shape[0], key, dtype=np.uint64))

    def part(self) -> Evaluated:
        k = np.concatenate(self.k) if self.k else np.zeros(0, dtype=np.int64)
        accepted = np.concatenate(self.accepted) if self.accepted else np.zeros(0, dtype=np.int64)
        engine = EngineTally(
            engines=tuple(self.engines),
            formats=tuple(self.formats),
            intervals=self.requests,
            requests=self.requests,
            recovered=self.recovered,
            requests_assuming_full_drafts=self.assumed,
            bounded=self.bounded,
            units=BoundedUnits.of_rows(self.rows, self.histogram, self.without_histogram) if self.rows else None,
            unquantified=self.unquantified,
            examples=tuple(self.examples),
            depths=self.depths,
        )
        if not k.shape[0]:
            return Evaluated(Summary(engine=engine), 0)
        size = int(k.max()) + 1
        counts = np.bincount(k * size + accepted, minlength=size * size).astype(np.int64).reshape(size, size)
        clusters = ClusterTally.of_runs(REQUEST_FIELD, np.concatenate(self.keys), k, accepted)
        return Evaluated(Summary(counts=counts, clusters=clusters, engine=engine), int(k.shape[0]))


def request_part(record: RequestRecord, source: str, line: int, plan: Plan, on_error: OnError) -> Evaluated | None:
    """One request as a summary part: its runs in the counts and in its cluster, or its totals as bounds."""
    where = f"{source}:{line}"
    found = record.runs()
    said = f"{record.fmt} request {record.request_id or where}: " + _describe(record, found is not None)
    common = EngineTally(
        engines=(record.engine,),
        formats=(record.fmt,),
        intervals=1,
        requests=1,
        examples=(f"{where}: " + "; ".join((said, *record.notes)),),
    )
    key = request_key(record, where)
    if found is None:
        unit = bounded_unit(record, key)
        if unit is None:
            part = Summary(engine=replace(common, unquantified=1))
        else:
            depths = None if record.histogram is None else DepthTally.of_histogram(record.histogram)
            part = Summary(engine=replace(common, bounded=1, units=unit, depths=depths))
        return Evaluated(part, 0, _groups(record, part, plan))
    k, accepted = found
    size = int(k.max()) + 1 if k.shape[0] else 1
    counts = np.bincount(k * size + accepted, minlength=size * size).astype(np.int64).reshape(size, size)
    keys = np.full(k.shape[0], key, dtype=np.uint64)
    assumed = 1 if record.drafted_nominal and record.per_step_accepted is None else 0
    part = Summary(
        counts=counts,
        clusters=ClusterTally.of_runs(REQUEST_FIELD, keys, k, accepted) if k.shape[0] else None,
        engine=replace(common, recovered=1, requests_assuming_full_drafts=assumed),
    )
    sequence = None
    if plan.windows is not None and k.shape[0]:
        if record.per_step_accepted is None:  # a histogram: its runs spread evenly through the request
            k, accepted = interval_runs(counts)
        if plan.windows.time_field is None:
            sequence = (k, accepted)
        elif record.timestamp is None:
            on_error(InputError(source, line, "this request carries no time (created) to place it in a window"))
            return None
        else:
            times = np.full(k.shape[0], record.timestamp, dtype=np.float64)
            part = replace(part, windows=WindowTally.of_times(plan.windows, times, k, accepted))
    return Evaluated(part, int(k.shape[0]), _groups(record, part, plan), sequence=sequence)


def request_key(record: RequestRecord, where: str) -> int:
    """The request's cluster key: its id, or its file and line when it has none."""
    return cluster_hash(record.request_id if record.request_id is not None else f"{where}#{record.fmt}")


def bounded_row(record: RequestRecord, key: int) -> tuple[int, int, int, int, int, int, int] | None:
    """A request whose runs are not pinned down, as one bounded row (key, then `bounded.COLUMNS`); None when it
    gives no token counts."""
    bounds = record.examined_bounds()
    if bounds is None or record.accepted is None or record.drafted is None:
        return None
    # Every step emits its accepted drafts and one token more, all within the output: steps <= output - accepted.
    output = record.completion_tokens
    emitted = (0, output - record.accepted) if output is not None and output > record.accepted else None
    steps = steps_bounds(record.steps, emitted, record.accepted, record.drafted, bounds, record.k)
    return (key, steps[0], steps[1], record.accepted, record.drafted, bounds[0], bounds[1])


def bounded_unit(record: RequestRecord, key: int) -> BoundedUnits | None:
    """`bounded_row` as a summary's bounded units."""
    row = bounded_row(record, key)
    if row is None:
        return None
    return BoundedUnits.of_rows([row], record.histogram or (), 0 if record.histogram is not None else 1)


def _groups(record: RequestRecord, part: Summary, plan: Plan) -> Groups | None:
    if plan.group_by is None:
        return None
    value = record.labels.get(plan.group_by)
    if value is None and plan.group_by in ("request_id", "id"):
        value = record.request_id
    return Groups.of({label_key(value): replace(part, windows=None)})


def _describe(record: RequestRecord, exact: bool) -> str:
    bits = [f"{record.steps} steps" if record.steps is not None else "steps not written"]
    if record.accepted is not None:
        bits.append(f"{record.accepted} accepted")
    if record.drafted is not None:
        bits.append(f"{record.drafted} drafted")
    if record.k is not None:
        bits.append(f"k = {record.k}")
    if exact:
        bits.append("exact (k, a) histogram")
    else:
        bounds = record.examined_bounds()
        if bounds is not None and record.accepted is not None:
            low = record.accepted / bounds[1] if bounds[1] else 0.0
            high = record.accepted / bounds[0] if bounds[0] else 1.0
            bits.append(f"alpha in [{low:.3f}, {high:.3f}] (totals only)")
    return ", ".join(bits)
