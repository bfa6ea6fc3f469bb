"""batch -> rule -> (per-run results, Summary part): the per-batch stage, and adding parts up.

`evaluate_batch` is the whole per-batch stage (the rule, the server audits, the group
split); it is a pure function, so it runs in a worker process as well as in this one.
`add_up` adds the results up in input order and feeds per-run sinks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field
from msgspec.structs import replace

from specaccept_cli.errors import InputError, OnError
from specaccept_cli.rule.batch import RunBatch, absent_from_both
from specaccept_cli.rule.faulty import faulty_counts
from specaccept_cli.rule.registry import DEFAULT_RULE
from specaccept_cli.rule.vectorized import BatchOutcome, accept_prefix_batch, run_sums
from specaccept_cli.summary.clusters import ClusterTally, KeyArray
from specaccept_cli.summary.first_runs import FirstRuns
from specaccept_cli.summary.groups import ColumnsBuilder, GroupColumns
from specaccept_cli.summary.rules import GREEDY_RULE, RuleTally, in_counts
from specaccept_cli.summary.server import ReportedTally, SamplerTally, parse_reported
from specaccept_cli.summary.state import Groups, Summary, add_groups, group_key
from specaccept_cli.summary.tokens import TokenTally
from specaccept_cli.summary.windows import WindowSpec, WindowTally, epoch_seconds, time_problem

# Per-run columns computed beside the rule (e.g. "reported", "mismatch"), for per-run records.
RunColumns = dict[str, npt.NDArray[np.generic]]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
RunSink = Callable[[RunBatch, BatchOutcome, RunColumns], None]


class Plan(Struct, frozen=True):
    """What to compute besides the rule itself."""

    group_by: str | None = None  # also summarise each value of this field apart
    reported_field: str | None = None  # compare the server's reported counts with the rule's
    check_sampler: bool = False  # calibration and r-uniformity tests
    sampler_significance: float = 0.001
    cluster_field: str | None = None  # runs sharing this field's value form one cluster (a request)
    # With no cluster_field: cluster by the first row's request-like field, when it has one (`pipeline.clusters`).
    detect_clusters: bool = True
    windows: WindowSpec | None = None  # acceptance over the log, by a time field or in input order
    first_runs: int = 0  # keep this many of the first runs in `Summary.first_runs` (the table view's preview)
    # The fields shown beside each kept run; None: the first row's request id or id (`pipeline.clusters`).
    run_ids: tuple[str, ...] | None = None


class Evaluated(Struct, frozen=True):
    """The per-batch stage's result for one block of runs, in input order.

    `summary` holds no groups; `groups` holds the block's groups apart, so that adding
    blocks up touches only the groups a block has. `batch`, `outcome` and `columns` are
    kept when per-run results were asked for; a batch evaluated in a worker carries its
    runs' lines, offsets and extras but no tokens (p, q and r are empty): only what
    per-run output needs crosses a process boundary.
    """

    summary: Summary
    runs: int
    groups: Groups | None = None
    batch: RunBatch | None = None
    outcome: BatchOutcome | None = None
    columns: RunColumns = field(default_factory=dict)
    # Windows of runs: each run's (k, accepted) in input order, for `add_up` to place by position
    # (a worker cannot know how many runs came before its block).
    sequence: tuple[IntArray, IntArray] | None = None
    absent: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the batch's `absent` extra fields

    def __add__(self, other: Evaluated) -> Evaluated:
        """Two blocks folded into one (only when per-run results are not kept)."""
        groups = self.groups
        if other.groups is not None:
            groups = other.groups if groups is None else groups + other.groups
        sequence = self.sequence or other.sequence  # a block without runs' order (engine intervals) adds none
        if self.sequence is not None and other.sequence is not None:
            sequence = (
                np.concatenate([self.sequence[0], other.sequence[0]]),
                np.concatenate([self.sequence[1], other.sequence[1]]),
            )
        absent = absent_from_both(self.absent, other.absent)
        return Evaluated(self.summary + other.summary, self.runs + other.runs, groups, sequence=sequence, absent=absent)


def evaluate(batch: RunBatch, per_run: bool = False, tallies: bool = False) -> BatchOutcome:
    """The rule's outcome; `tallies`: with the sampler's tallies (kept for greedy runs: they bin the stand-ins)."""
    standard = None if batch.greedy else batch.standard_runs
    if standard is not None:  # runs of other rules hold stand-ins: the rule runs over the standard runs alone
        return _thresholds_of(evaluate(batch.select(standard), per_run, tallies), batch, standard, per_run)
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r, per_run, tallies=tallies)
    if batch.greedy:  # p and q are 0/1 stand-ins, r is not logged: no threshold statistics
        return outcome.without_thresholds()
    return outcome


def _thresholds_of(standard_outcome: BatchOutcome, batch: RunBatch, standard: BoolArray, per_run: bool) -> BatchOutcome:
    """The outcome of every run of `batch` from its standard runs' (`standard_outcome`): the threshold sums and
    tallies are theirs alone, and a stand-in run (`rule.rows.stand_in_tokens`: p 1 on its kept positions and 0
    after, q 1, r 0.5) keeps exactly its kept positions and passes on them alone, which is what the rule decides
    on its tokens, so the rule need not run over them."""
    k = np.diff(batch.offsets).astype(np.int64)
    kept = run_sums(batch.offsets, batch.p == 1.0)  # a stand-in's kept positions; read for those runs alone
    accepted = np.where(standard, 0, kept)
    accepted[standard] = standard_outcome.accepted
    others = ~standard

    def spread(values: IntArray | None, stand_in: IntArray | int) -> IntArray | None:
        if values is None:
            return None
        every = np.zeros(standard.shape[0], dtype=np.int64)
        every[standard] = values
        every[others] = stand_in if isinstance(stand_in, int) else stand_in[others]
        return every

    return BatchOutcome(
        k=k,
        accepted=accepted,
        passing_tokens=standard_outcome.passing_tokens + int(kept[others].sum()),
        threshold_sum_fixed=standard_outcome.threshold_sum_fixed,
        sampled_tokens=standard_outcome.sampled_tokens,
        examined_threshold_sum_fixed=standard_outcome.examined_threshold_sum_fixed,
        passing_per_run=spread(standard_outcome.passing_per_run, kept) if per_run else None,
        threshold_fixed_per_run=spread(standard_outcome.threshold_fixed_per_run, 0),
        examined_threshold_fixed_per_run=spread(standard_outcome.examined_threshold_fixed_per_run, 0),
        tallies=standard_outcome.tallies,
    )


def evaluate_batch(batch: RunBatch, plan: Plan, keep_runs: bool) -> tuple[Evaluated, list[InputError]]:
    """The rule and everything the plan asks for, over one batch; rows found bad here are returned as errors."""
    errors: list[InputError] = []
    reported = None
    if plan.reported_field is not None:
        reported, valid, errors = parse_reported(batch, plan.reported_field)
        if errors:  # rows whose reported count is not a count: bad input like any other
            batch, reported = batch.select(valid), reported[valid]
    seconds, spec = None, plan.windows
    if spec is not None and spec.time_field is not None:
        seconds, valid, time_errors = parse_times(batch, spec.time_field)
        if time_errors:  # rows whose time is not a time: bad input like any other
            batch, seconds = batch.select(valid), seconds[valid]
            reported = None if reported is None else reported[valid]
            errors = sorted(errors + time_errors, key=lambda error: error.line or 0)
    # The rule, asked once for all that the tallies below need. Per-run token sums only where they are used:
    # splitting by group, diagnosing reported counts; the faulty rules' counts only where a count differs.
    outcome = evaluate(batch, per_run=plan.group_by is not None or reported is not None, tallies=plan.check_sampler)
    mismatching = reported is not None and bool(np.any(reported != outcome.accepted))
    faulty = faulty_counts(batch, outcome) if mismatching else None
    reported_tally, columns = None, {}
    if reported is not None:
        reported_tally, check = ReportedTally.of_batch(batch, outcome, reported, faulty)
        columns = {"reported": check.reported, "mismatch": check.mismatch}
    records, records_outcome = batch, outcome  # every run, for per-run records and the first runs
    all_keys = None if plan.cluster_field is None else cluster_hashes(batch.extras[plan.cluster_field])
    cluster_keys = all_keys
    names = rule_names(batch)
    rule_tally = None
    if names is not None:
        rule_tally = RuleTally.of_runs(names, outcome.accepted, outcome.k, plan.cluster_field, all_keys)
        flags = {name: in_counts(name) for name in set(names)}  # each rule looked up once, not once a run
        counted = np.fromiter((flags[name] for name in names), dtype=bool, count=len(names))
        if not all(flags.values()):  # block and tree runs: in the rule tally, not in the counts (nor alpha)
            batch = batch.select(counted)
            seconds = None if seconds is None else seconds[counted]
            cluster_keys = None if all_keys is None else all_keys[counted]
            outcome = evaluate(batch, per_run=plan.group_by is not None, tallies=plan.check_sampler)
    standard = batch.standard_runs
    sampled = batch if standard is None else batch.select(standard)  # the runs with real (p, q, r)
    part = replace(
        Summary.of_outcome(outcome),
        reported=reported_tally,
        sampler=None
        if not plan.check_sampler
        else SamplerTally.of_batch(
            outcome if standard is None else evaluate(sampled, tallies=True), plan.sampler_significance
        ),
        clusters=None
        if plan.cluster_field is None or cluster_keys is None
        else ClusterTally.of_runs(plan.cluster_field, cluster_keys, outcome.k, outcome.accepted),
        windows=None
        if seconds is None or spec is None
        else WindowTally.of_times(spec, seconds, outcome.k, outcome.accepted),
        one_hot_draft_tokens=0 if batch.greedy else int(np.count_nonzero(sampled.q == 1.0)),
        tokens=None if batch.greedy else TokenTally.of_batch(sampled),
        first_runs=None if not plan.first_runs else _first_runs(records, records_outcome, plan),
        rules=rule_tally,
    )
    groups = None
    if plan.group_by is not None:
        groups = split_by_group(outcome, batch.extras[plan.group_by], plan.cluster_field, cluster_keys)
        if names is not None:  # each group's own runs of every rule but `standard`, block and tree runs too
            groups = with_rule_tallies(groups, records.extras[plan.group_by], names, records_outcome, plan, all_keys)
    sequence = None
    if spec is not None and seconds is None:
        sequence = (outcome.k, outcome.accepted)
    if not keep_runs:
        return Evaluated(part, len(records), groups, sequence=sequence, absent=records.absent), errors
    records_outcome = replace(records_outcome, tallies=None)  # taken into the summary: not sent on with the runs
    if records.rules is not None:
        columns = {**columns, "rule": np.array(records.rules, dtype=object)}
    return Evaluated(part, len(records), groups, records, records_outcome, columns, sequence, records.absent), errors


def evaluate_batches(
    batches: Iterable[RunBatch], plan: Plan, keep_runs: bool, on_error: OnError
) -> Iterator[Evaluated]:
    """`evaluate_batch` over batches in input order, each batch's errors handed to `on_error` before its result."""
    for batch in batches:
        result, errors = evaluate_batch(batch, plan, keep_runs)
        for error in errors:
            on_error(error)
        yield result


def _first_runs(batch: RunBatch, outcome: BatchOutcome, plan: Plan) -> FirstRuns:
    """The block's first runs for the preview (a block's worth at most: `FirstRuns.__add__` keeps the input's first)."""
    kept = plan.first_runs
    ids = [(name, batch.extras[name][:kept]) for name in plan.run_ids or () if name in batch.extras]
    lines, ks, accepted = (array[:kept].tolist() for array in (batch.lines, outcome.k, outcome.accepted))
    return FirstRuns.of_runs(kept, batch.source, lines, ks, accepted, ids, total=len(batch))


def parse_times(batch: RunBatch, name: str) -> tuple[npt.NDArray[np.float64], BoolArray, list[InputError]]:
    """Each run's time in Unix seconds (see `epoch_seconds`), which are valid, and an error for each that is not."""
    values = batch.extras[name]
    seconds = np.zeros(len(values), dtype=np.float64)
    valid = np.ones(len(values), dtype=bool)
    errors: list[InputError] = []
    for index, value in enumerate(values):
        moment = epoch_seconds(value)
        if moment is None:
            errors.append(InputError(batch.source, int(batch.lines[index]), time_problem(name, value)))
            valid[index] = False
        else:
            seconds[index] = moment
    return seconds, valid, errors


def add_up(
    results: Iterable[Evaluated],
    sink: RunSink | None = None,
    group_by: str | None = None,
    windows: WindowSpec | None = None,
) -> Summary:
    """Add up evaluated blocks in input order, handing per-run results to `sink` (they must have been kept).

    With `group_by`, the summary holds groups even when there were no runs. Groups are added
    as columns (`ColumnsBuilder`): however many there are, no object per group is made. With
    `windows`, the summary holds windows even when there were no runs; windows of runs are placed
    here, where the input order is known.
    """
    summary = Summary()
    columns = ColumnsBuilder()
    extras: dict[str, Summary] = {}
    by_runs = None if windows is None or windows.time_field is not None else WindowTally.empty(windows)
    for result in results:
        if sink is not None and result.batch is not None:  # engine intervals have no runs to hand on
            assert result.outcome is not None, "per-run results were not kept"
            sink(result.batch, result.outcome, result.columns)
        if result.groups is not None:
            columns.add(result.groups.columns)
            add_groups(extras, result.groups.extras)
        if by_runs is not None and result.sequence is not None:
            by_runs = by_runs.extended(*result.sequence)
        summary = summary + result.summary
    if by_runs is not None:
        summary = replace(summary, windows=by_runs)
    elif windows is not None and summary.windows is None:  # no runs had a time
        summary = replace(summary, windows=WindowTally.empty(windows))
    if group_by is None:
        return summary
    return replace(summary, group_by=group_by, groups=Groups(columns.build(), extras))


def split_by_group(
    outcome: BatchOutcome,
    values: list[object],
    cluster_field: str | None = None,
    cluster_keys: KeyArray | None = None,
) -> Groups:
    """The groups of a batch's runs, keyed in order of first appearance, as columns.

    Keys are coded in one pass (a dict lookup per run); the joint counts of every group then
    come from one count of the (code, k, a) cells that occur, and the token sums from exact
    integer scatter-adds: no pass over the runs per group, and no object per group. With
    clusters, each group gets the tally of its own runs (runs sorted by group once, then sliced),
    kept beside the columns.
    """
    codes_of: dict[str, int] = {}
    codes = np.fromiter(_group_codes(values, codes_of), dtype=np.int64, count=len(values))
    assert outcome.passing_per_run is not None and outcome.threshold_fixed_per_run is not None, "evaluate per run"
    assert outcome.examined_threshold_fixed_per_run is not None, "evaluate per run"
    columns = GroupColumns.of_runs(
        list(codes_of),
        codes,
        outcome.k.astype(np.int64),
        outcome.accepted.astype(np.int64),
        outcome.passing_per_run.astype(np.int64),
        outcome.threshold_fixed_per_run.astype(np.int64),
        outcome.examined_threshold_fixed_per_run.astype(np.int64),
        sampled=bool(outcome.sampled_tokens),  # a batch is sampled or greedy as a whole
    )
    extras: dict[str, Summary] = {}
    if cluster_field is not None and cluster_keys is not None:
        for key, runs in _runs_of_groups(codes, codes_of, np.arange(len(codes))):
            tally = ClusterTally.of_runs(cluster_field, cluster_keys[runs], outcome.k[runs], outcome.accepted[runs])
            extras[key] = Summary(clusters=tally)
    return Groups(columns, extras)


def rule_names(batch: RunBatch) -> list[str] | None:
    """Each run's rule, or None when every run is a `standard` one. A greedy token-id batch is `argmax` (the
    table's rule for it), whatever its runs were read as: they are (p, q, r) stand-ins of the argmax test."""
    if not batch.greedy:
        return batch.rules
    if batch.rules is None:
        return [GREEDY_RULE] * len(batch)
    return [GREEDY_RULE if name == DEFAULT_RULE else name for name in batch.rules]


def with_rule_tallies(
    groups: Groups,
    values: list[object],
    names: list[str],
    outcome: BatchOutcome,
    plan: Plan,
    cluster_keys: KeyArray | None,
) -> Groups:
    """`groups` (the batch's counted runs) with each group's `RuleTally` of its runs of every rule but `standard`
    (and their per-request sums when clustered) in its extras; a group holding only block or tree runs is there
    too, with no counted run."""
    codes_of: dict[str, int] = {}
    codes = np.fromiter(_group_codes(values, codes_of), dtype=np.int64, count=len(values))
    other = np.flatnonzero(np.array([name != DEFAULT_RULE for name in names], dtype=bool))
    extras = dict(groups.extras)
    for key, runs in _runs_of_groups(codes, codes_of, other):
        if not runs.shape[0]:
            continue
        tally = RuleTally.of_runs(
            [names[index] for index in runs.tolist()],
            outcome.accepted[runs],
            outcome.k[runs],
            plan.cluster_field,
            None if cluster_keys is None else cluster_keys[runs],
        )
        known = extras.get(key)
        if known is None:  # no counted run: a clustered log's group is clustered all the same (by no request)
            no_runs = None if plan.cluster_field is None else ClusterTally(plan.cluster_field)
            extras[key] = Summary(rules=tally, clusters=no_runs)
        else:
            extras[key] = replace(known, rules=tally)
    missing = [key for key in codes_of if key not in groups.columns.index and key in extras]
    columns = groups.columns
    if missing:  # groups of block and tree runs alone: keys with no counted run
        empty = np.zeros(0, dtype=np.int64)
        columns = columns + GroupColumns.of_runs(missing, empty, empty, empty, empty, empty, empty, sampled=False)
    return Groups(columns, extras)


def _runs_of_groups(codes: IntArray, codes_of: dict[str, int], runs: IntArray) -> Iterator[tuple[str, IntArray]]:
    """Each group's key and those of the runs `runs` (indices, `codes[i]` run i's group) that are its, in order:
    the runs sorted by group once, then sliced, so no pass over the runs per group."""
    by_group = runs[np.argsort(codes[runs], kind="stable")]
    bounds = np.searchsorted(codes[by_group], np.arange(len(codes_of) + 1))
    for key, code in codes_of.items():
        yield key, by_group[bounds[code] : bounds[code + 1]]


def _group_codes(values: Sequence[object], codes_of: dict[str, int]) -> Iterator[int]:
    """Each value's group code (new keys coded in order of first appearance into `codes_of`); each distinct
    value is spelled once (by type too: True == 1, but not as keys)."""
    seen: dict[tuple[type, object], int] = {}
    for value in values:
        try:
            code = seen.get((type(value), value))
        except TypeError:  # unhashable (a list or an object): spelled each time
            yield codes_of.setdefault(group_key(value), len(codes_of))
            continue
        if code is None:
            code = seen[type(value), value] = codes_of.setdefault(group_key(value), len(codes_of))
        yield code


def cluster_hash(value: object) -> int:
    """The 64-bit key of a cluster field's value: BLAKE2b of its group key (`group_key`), little-endian."""
    text = group_key(value).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def cluster_hashes(values: Sequence[object]) -> KeyArray:
    """Keys of a batch's runs; each distinct value is hashed once (by type too: True == 1, but not as keys)."""
    seen: dict[tuple[type, object], int] = {}
    out = np.empty(len(values), dtype=np.uint64)
    for index, value in enumerate(values):
        try:
            key = seen.get((type(value), value))
        except TypeError:  # unhashable (a list or an object): hash its text each time
            out[index] = cluster_hash(value)
            continue
        if key is None:
            key = seen[type(value), value] = cluster_hash(value)
        out[index] = key
    return out
