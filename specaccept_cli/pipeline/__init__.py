"""The front door: a `ReadRequest` -> batches -> rule -> Summary, in this process or on a pool.

`summarise` is the one wiring of the stages that the command line, the library and any
distributed driver call. A request is read in this process (`pipeline.local`), JSONL on a pool
of worker processes with `jobs` > 1 (`pipeline.parallel`); `pipeline.distributed.summarise`
reads the same request on a Dask cluster, each task calling the same core on its share, and
gives the same summary, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from specaccept_cli.pipeline.local import summarise_here
from specaccept_cli.pipeline.parallel import default_jobs, skipped_input
from specaccept_cli.pipeline.request import ReadOptions, ReadRequest, as_request
from specaccept_cli.read.sources import ProgressHook, Source
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.evaluate import Plan, RunSink
from specaccept_cli.summary.state import Summary

__all__ = ["ReadRequest", "default_jobs", "skipped_input", "summarise"]


def summarise(
    request: ReadRequest | Sequence[str] | Sequence[Source] | str,
    fields: FieldSpec | None = None,
    plan: Plan | None = None,
    *,
    sink: RunSink | None = None,
    progress: ProgressHook | None = None,
    **options: Unpack[ReadOptions],
) -> Summary:
    """Summarise every run of a `ReadRequest`, or of inputs read with these fields, plan and settings.

    `summarise(ReadRequest(["logs.jsonl.gz"], jobs=2))` and `summarise(["logs.jsonl.gz"], jobs=2)` are
    the same call; see `ReadRequest` for every setting. `sink(batch, outcome, columns)` receives
    per-run results in input order while the summary is built, so per-run output streams;
    `progress` hears of each source and block read in this process (not on a cluster).

    Server output (vLLM, SGLang and llama.cpp metrics lines, Prometheus scrapes: found by content,
    or named by `input_format`) is read as intervals, not runs: exact intervals add to the counts,
    the rest to `Summary.engine` as bounds, and no per-run result reaches `sink`. Prometheus
    files form one series of scrapes in the order given.

    Intervals and tests are over the clusters of `plan.cluster_field`; with none named, the first
    row's request-like field (`request_id`, `request.id`, `req_id`, `rid`, ...) clusters the runs
    (`pipeline.clusters`), unless `plan.detect_clusters` is false: then they are over runs, which
    holds only for a replayed prompt set.
    """
    request = as_request(request, fields, plan, options)
    if request.scheduler is not None:  # pipeline.distributed imports this module: it cannot be called from here
        raise ValueError("a request with a scheduler is read by pipeline.distributed.summarise")
    return summarise_here(request, sink=sink, progress=progress)
