"""Which field clusters the runs: the one named, or the request-like field of the input's first row.

Runs of one request share its prompt: intervals over runs are right only for a replayed prompt set.
So when no cluster field is named (`Plan.cluster_field` None and `Plan.detect_clusters`), the first
row of the input decides: its first request-like field (`summary.clusters.REQUEST_FIELDS`) clusters
every run of every source. The row is read ahead on the stream the reader then reads
(`read.sources.read_ahead_first_row`), so a piped or followed stdin loses nothing and no source is
opened twice; a Parquet file's schema names its columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.read.formats import Kind
from specaccept_cli.read.sources import OpenSource, Reading, open_source, read_ahead_first_row
from specaccept_cli.summary.clusters import request_field, request_field_of_columns
from specaccept_cli.summary.evaluate import Plan

if TYPE_CHECKING:
    from collections.abc import Sequence

    from specaccept_cli.read.sources import Source


class ClusterDetection(Struct):
    """The decision, made once per input at its first row, and the plans every source is then read with."""

    decided: bool = False
    field: str | None = None

    def resolve(self, opened: OpenSource, reading: Reading, plan: Plan) -> tuple[OpenSource, Reading, Plan]:
        """`opened` (reading ahead when it had to look), and the reading and plan with the cluster field in them."""
        if plan.cluster_field is not None or not plan.detect_clusters:
            return opened, reading, plan
        if not self.decided and opened.kind is Kind.RUNS:
            opened, found, seen = _first_row_field(opened)
            if seen:
                self.decided, self.field = True, found
        return opened, *with_cluster_field(reading, plan, self.field)


def with_cluster_field(reading: Reading, plan: Plan, name: str | None) -> tuple[Reading, Plan]:
    """The reading that carries `name` as an extra field, and the plan that clusters by it (as given: None)."""
    if name is None:
        return reading, replace(plan, detect_clusters=False)
    fields = reading.fields
    extras = fields.extras if name in fields.extras else (*fields.extras, name)
    return replace(reading, fields=replace(fields, extras=extras)), replace(plan, cluster_field=name)


def _first_row_field(opened: OpenSource) -> tuple[OpenSource, str | None, bool]:
    """(the source to read on, the first row's request-like field, whether a row or schema was seen)."""
    if opened.format == "parquet":
        names = _parquet_columns(opened.source)
        return opened, None if names is None else request_field_of_columns(names), names is not None
    opened, row = read_ahead_first_row(opened)
    return opened, request_field(row) if isinstance(row, dict) else None, row is not None


def _parquet_columns(source: Source) -> list[str] | None:
    """Column paths of a Parquet file, struct fields dotted (`request.id`); None when it cannot be looked at.

    A Parquet stream on stdin is spooled by the reader, after this: it is read over runs unless a
    --cluster-field names its request column.
    """
    if not source.can_reopen:
        return None
    from specaccept_cli.read.parquet import column_paths

    try:
        if source.remote is not None:
            with source.remote.open_random() as handle:
                return column_paths(handle)
        return column_paths(str(source.path))
    except Exception:  # a damaged file: the reader reports it where the error policy applies
        return None


def detected_field(sources: Sequence[Source], reading: Reading, plan: Plan) -> tuple[Reading, Plan]:
    """The reading and plan of a driver that cannot stream its sources (a cluster's): decided up front.

    Files and objects can be opened again, so the first source that holds a row is opened here to look;
    a pipe given as a path cannot (looking would consume it, or wait on its writer): its runs are then
    over runs unless a cluster field is named.
    """
    detection = ClusterDetection()
    for source in sources:
        if detection.decided or plan.cluster_field is not None or not plan.detect_clusters:
            break
        if not source.can_reopen:
            break
        try:
            with open_source(source, reading.input_format) as opened:
                detection.resolve(opened, reading, plan)
        except Exception:  # an unreadable source: its shares report it
            continue
    if not detection.decided:
        return with_cluster_field(reading, plan, plan.cluster_field)
    return with_cluster_field(reading, plan, detection.field)
