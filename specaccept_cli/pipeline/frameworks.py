"""Data frameworks (Spark, Ray, anything that hands out Arrow record batches): one framework-neutral task.

`summarise_batches` turns the Arrow record batches of one partition into a `Summary` with the
same core as every other path (`read.parquet.runs_of_record_batch`, `summary.evaluate`); the
framework runs it once per partition and the driver adds the summaries in partition order
(`add_summaries`). Rows name their file and row (Spark: `_metadata.file_path` and a row index),
so errors point at `file:row` as they do from one process; a partition that mixes files, or skips
rows (a filter), is cut into stretches of consecutive rows of one file.

`summary_bytes` / `summary_of_bytes` ship a summary as a binary cell (pickle: tens of KB
however many runs), which is what Spark's `mapInArrow` can return. None of this imports a
framework: the recipe (README, `examples/spark_audit.py`) does.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from specaccept_cli.errors import InputError
from specaccept_cli.pipeline.parallel import skipped_input
from specaccept_cli.read.parquet import columns_to_read, runs_of_record_batch
from specaccept_cli.read.policy import ErrorPolicy, Mode
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.evaluate import Evaluated, Plan, add_up, evaluate_batch
from specaccept_cli.summary.state import Summary

__all__ = ["add_summaries", "summarise_batches", "summary_bytes", "summary_of_bytes"]

_DEFAULT_FIELDS = FieldSpec()
_DEFAULT_PLAN = Plan()


def summarise_batches(
    batches: Iterable[pa.RecordBatch],
    fields: FieldSpec = _DEFAULT_FIELDS,
    plan: Plan = _DEFAULT_PLAN,
    *,
    source_column: str | None = None,
    row_column: str | None = None,
    source: str = "<arrow>",
    on_error: Mode = "fail",
) -> Summary:
    """The summary of every run in `batches`, in order.

    `source_column` holds each row's file and `row_column` its 0-based row index in that file (as
    Spark's `_metadata.file_path` and `_metadata.row_index` do); without them, rows are `source`'s,
    numbered from 1 in batch order. Fail mode raises the first bad row as an `InputError`.
    A partition does not see the input's first row, so no request field is found here: name it
    (`Plan(cluster_field="request_id")`, with the field in `fields.extras`) for cluster-robust intervals.
    """
    policy = ErrorPolicy(on_error)

    def evaluated() -> Iterator[Evaluated]:
        next_row = 1
        for record_batch in batches:
            for name, first_row, stretch in _stretches(record_batch, source_column, row_column, source, next_row):
                # A missing column is the stretch's source failing: skipped whole in skip mode.
                yield from policy.guard(_evaluate(stretch, first_row, name, fields, plan, policy))
            next_row += record_batch.num_rows

    return add_up(evaluated(), None, plan.group_by) + skipped_input(policy)


def _evaluate(
    record_batch: pa.RecordBatch, first_row: int, source: str, fields: FieldSpec, plan: Plan, policy: ErrorPolicy
) -> Iterator[Evaluated]:
    columns_to_read(record_batch.schema.names, source, fields)
    batch, errors = runs_of_record_batch(record_batch, first_row, source, fields)
    result, more = evaluate_batch(batch, plan, keep_runs=False)
    for error in sorted(errors + more, key=lambda error: error.line or 0):
        policy(error)
    yield result


def _stretches(
    record_batch: pa.RecordBatch, source_column: str | None, row_column: str | None, source: str, next_row: int
) -> Iterator[tuple[str, int, pa.RecordBatch]]:
    """(source, first row number, rows) for each stretch of consecutive rows of one source."""
    if source_column is None and row_column is None:
        yield source, next_row, record_batch
        return
    count = record_batch.num_rows
    names = record_batch.column(source_column).to_pylist() if source_column is not None else [source] * count
    if row_column is not None:
        rows = record_batch.column(row_column).to_numpy(zero_copy_only=False).astype(np.int64) + 1
    else:
        rows = np.arange(next_row, next_row + count, dtype=np.int64)
    starts = [0]
    for index in range(1, count):
        if names[index] != names[index - 1] or rows[index] != rows[index - 1] + 1:
            starts.append(index)
    for start, end in zip(starts, [*starts[1:], count]):
        if end > start:
            yield str(names[start]), int(rows[start]), record_batch.slice(start, end - start)


def summary_bytes(summary: Summary) -> bytes:
    """A summary as one binary value, for frameworks that ship Arrow cells (Spark's `mapInArrow`)."""
    return pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)


def summary_of_bytes(data: bytes) -> Summary:
    """The summary `summary_bytes` shipped (only from a trusted framework: this is pickle)."""
    summary = pickle.loads(data)
    if not isinstance(summary, Summary):
        raise InputError("<engine>", None, f"not a summary: {type(summary).__name__}")
    return summary


def add_summaries(summaries: Iterable[Summary]) -> Summary:
    """Partition summaries added in partition order (kept errors and group order follow it)."""
    total = Summary()
    for summary in summaries:
        total = total + summary
    return total
