"""The front door: inputs -> batches -> rule -> Summary, serial or on several processes.

`summarise` is the one wiring of the stages that the command line, the library and
any distributed driver call. It opens each source once (`read.open_source`), reads it
in this process or on a pool of worker processes (`pipeline.parallel`), applies the
per-batch stage (`summary.evaluate`), hands per-run results to an optional sink in
input order, and returns one `Summary` that includes whatever the error policy
skipped: nothing comes back through a side channel.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import IO

from specaccept_cli.errors import UsageError
from specaccept_cli.pipeline.clusters import ClusterDetection
from specaccept_cli.pipeline.engine import EngineReading
from specaccept_cli.pipeline.parallel import default_jobs, evaluate_source
from specaccept_cli.read.policy import ErrorPolicy, Mode
from specaccept_cli.read.sources import Format, ProgressHook, Reading, Source, expand_inputs
from specaccept_cli.read.storage import Storage
from specaccept_cli.rule.batch import FieldSpec, absent_from_both
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES, did_you_mean
from specaccept_cli.summary.evaluate import Evaluated, Plan, RunSink, add_up
from specaccept_cli.summary.state import Summary

__all__ = ["default_jobs", "summarise"]

SHOWN_KEYS = 12  # keys listed when a field is not found

_DEFAULT_FIELDS = FieldSpec()
_DEFAULT_PLAN = Plan()


def summarise(
    inputs: Sequence[str] | Sequence[Source],
    fields: FieldSpec = _DEFAULT_FIELDS,
    plan: Plan = _DEFAULT_PLAN,
    *,
    jobs: int | None = 1,
    on_error: Mode = "fail",
    quarantine: IO[bytes] | None = None,
    sink: RunSink | None = None,
    progress: ProgressHook | None = None,
    input_format: Format = "auto",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    draft_length: int | None = None,
    storage: Storage | None = None,
    require_fields: bool = True,
) -> Summary:
    """Summarise every run of `inputs` (paths, directories of Parquet shards, or "-" for stdin).

    `jobs`: processes parsing JSONL (None: every usable core; 1: this process only); the result
    is the same whatever the number. `on_error="skip"` leaves bad rows and unreadable sources
    out, counts them in the summary and copies their raw lines to `quarantine`; "fail" raises
    the first as an `InputError`. `sink(batch, outcome, columns)` receives per-run results in
    input order while the summary is built, so per-run output streams.

    Server output (vLLM, SGLang and llama.cpp metrics lines, Prometheus scrapes: found by content,
    or named by `input_format`) is read as intervals, not runs: exact intervals add to the counts,
    the rest to `Summary.engine` as bounds, and no per-run result reaches `sink`. Prometheus
    files form one series of scrapes in the order given. `draft_length` is the server's draft
    length k when its lines do not carry it; it tightens the bounds. `storage`: options for
    s3:// and gs:// inputs (`read.storage`). An extra field that no row has is a `UsageError`
    (a typo), unless `require_fields` is false: a share of a larger input may lack what others have.

    Intervals and tests are over the clusters of `plan.cluster_field`; with none named, the first
    row's request-like field (`request_id`, `request.id`, `req_id`, `rid`, ...) clusters the runs
    (`pipeline.clusters`), unless `plan.detect_clusters` is false: then they are over runs, which
    holds only for a replayed prompt set.
    """

    sources = [item for item in inputs if isinstance(item, Source)]
    if len(sources) < len(inputs):  # paths as the user gave them: resolved here (a missing path is an InputError)
        sources = expand_inputs([str(item) for item in inputs], storage)
    policy = ErrorPolicy(on_error, quarantine)
    reading = Reading(fields, input_format, max_line_bytes)
    workers = default_jobs() if jobs is None else jobs

    engine = EngineReading(draft_length)
    clusters = ClusterDetection()  # with no plan.cluster_field: the first row's request field, if any
    absent: dict[str, tuple[str, ...]] | None = None  # extra fields no row read so far has

    def tracked(results: Iterator[Evaluated]) -> Iterator[Evaluated]:
        nonlocal absent
        for result in results:
            absent = result.absent if absent is None else absent_from_both(absent, result.absent)
            yield result

    def evaluated() -> Iterator[Evaluated]:
        for source in sources:
            results = evaluate_source(
                source,
                reading,
                policy,
                progress,
                jobs=workers,
                keep_runs=sink is not None,
                plan=plan,
                engine=engine,
                clusters=clusters,
            )
            yield from tracked(policy.guard(results))
        yield from tracked(policy.guard(engine.finish(plan, policy)))

    summary = add_up(evaluated(), sink, plan.group_by, plan.windows)
    if require_fields and summary.runs and absent:
        raise UsageError(field_not_found(*next(iter(absent.items()))))
    return summary + skipped_input(policy)


def skipped_input(policy: ErrorPolicy) -> Summary:
    """What an error policy left out, as a summary to add to what was read."""
    return Summary(
        skipped_rows=policy.skipped_rows, skipped_sources=policy.skipped_sources, errors=tuple(policy.errors)
    )


def field_not_found(name: str, keys: Sequence[str]) -> str:
    """A field no row has (a typo, most likely), with the closest keys the rows do have."""
    hint = did_you_mean(name, keys)
    shown = ", ".join(keys[:SHOWN_KEYS]) + (", ..." if len(keys) > SHOWN_KEYS else "")
    return f"no row has the field '{name}'{hint} (a row has: {shown or 'no keys'})"
