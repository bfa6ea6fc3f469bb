"""Which field clusters the runs: the one named, or the request-like field of the input's first row.

Runs of one request share its prompt: intervals over runs are right only for a replayed prompt set.
So when no cluster field is named (`Plan.cluster_field` None and `Plan.detect_clusters`), the first
row of the input decides: its first request-like field (`summary.clusters.REQUEST_FIELDS`) clusters
every run of every source. The row is read ahead on the stream the reader then reads
(`read.sources.read_ahead_first_row`), so a piped or followed stdin loses nothing and no source is
opened twice; a Parquet file's schema names its columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from msgspec import Struct
from msgspec import field as struct_field
from msgspec.structs import replace

from specaccept_cli.read.formats import Kind
from specaccept_cli.read.sources import (
    FIRST_ROW_BYTES,
    OpenSource,
    Reading,
    Replayed,
    open_source,
    read_ahead_first_row,
)
from specaccept_cli.summary.clusters import REQUEST_FIELDS, field_value, request_field, request_field_of_columns
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.state import Summary

if TYPE_CHECKING:
    from collections.abc import Sequence

    from specaccept_cli.read.sources import Source


class ClusterDetection(Struct):
    """The decision, made once per input at its first row, and the plans every source is then read with.

    The same look finds the id shown beside each run of the table view's preview (`Plan.run_ids` None):
    the first row's request-like field, else its `id` (`RUN_ID_FIELDS`).
    """

    decided: bool = False
    field: str | None = None
    run_id: str | None = None
    # The run id of each source's first rows, by (source, line), read ahead when the reading does not carry
    # the field: reading it from every row would cost an audit of plain rows about a tenth of its time.
    ids_ahead: dict[tuple[str, int], object] = struct_field(default_factory=dict)

    def resolve(self, opened: OpenSource, reading: Reading, plan: Plan) -> tuple[OpenSource, Reading, Plan]:
        """`opened` (reading ahead when it had to look), and the reading and plan with the cluster field in them."""
        clusters = plan.cluster_field is None and plan.detect_clusters
        run_id = plan.first_runs > 0 and plan.run_ids is None
        if not (clusters or run_id):
            return opened, reading, plan
        if not self.decided and opened.kind is Kind.RUNS:
            opened, found, seen = _first_row_field(opened)
            if seen:
                self.decided, (self.field, self.run_id) = True, found
        if clusters:
            reading, plan = with_cluster_field(reading, plan, self.field)
        if run_id:
            name = self.run_id
            plan = replace(plan, run_ids=() if name is None else (name,))
            if name is not None and name not in reading.fields.extras and opened.kind is Kind.RUNS:
                opened = self._read_ids_ahead(opened, name, plan.first_runs)
        return opened, reading, plan

    def _read_ids_ahead(self, opened: OpenSource, name: str, rows: int) -> OpenSource:
        """`opened` to read on, with the run id of its first `rows` rows noted (as far as IDS_AHEAD_BYTES go)."""
        if opened.format == "parquet":
            for line, value in enumerate(_parquet_values(opened.source, name, rows), start=1):
                self.ids_ahead[(opened.source.name, line)] = value
            return opened
        opened, ahead = read_ahead_rows(opened, rows, IDS_AHEAD_BYTES)
        for line, row in ahead:
            self.ids_ahead[(opened.source.name, line)] = field_value(row, name)
        return opened

    def with_ids(self, summary: Summary, name: str | None) -> Summary:
        """The summary whose first runs have the run ids read ahead, where the reading did not carry them."""
        runs = summary.first_runs
        if runs is None or name is None or not self.ids_ahead:
            return summary
        return replace(summary, first_runs=runs.with_ids(name, self.ids_ahead))


IDS_AHEAD_BYTES = 4 << 20  # the first runs' ids are read ahead within this much of a source


# Besides the request-like fields, a run's own id names it in the preview (it does not cluster runs: a run
# is no request).
RUN_ID_FIELDS = (*REQUEST_FIELDS, "id")


def read_ahead_rows(opened: OpenSource, rows: int, limit: int) -> tuple[OpenSource, list[tuple[int, object]]]:
    """The first `rows` rows of a JSONL source with their line numbers (a row that is not JSON as None), read
    ahead on the stream the reader then reads (`read_ahead_first_row`), within `limit` bytes."""
    opened, _ = read_ahead_first_row(opened, min(limit, FIRST_ROW_BYTES))
    stream = opened.text
    assert isinstance(stream, Replayed)
    found: list[tuple[int, object]] = []
    seen, line = 0, 1
    while len(found) < rows and seen < limit:
        text = stream.peek_line(seen, limit - seen)
        if text is None:
            break
        if text.strip():
            try:
                found.append((line, orjson.loads(text.removeprefix(b"\xef\xbb\xbf") if seen == 0 else text)))
            except orjson.JSONDecodeError:
                found.append((line, None))
        seen, line = seen + len(text) + 1, line + 1
    return opened, found


def _parquet_values(source: Source, name: str, rows: int) -> list[object]:
    """The field's values in the first `rows` rows of a Parquet file ([] when it cannot be looked at)."""
    if not source.can_reopen:
        return []
    import pyarrow.parquet as pq

    try:
        if source.remote is not None:
            with source.remote.open_random() as handle:
                return _first_values(pq.ParquetFile(handle), name, rows)
        return _first_values(pq.ParquetFile(str(source.path)), name, rows)
    except Exception:  # a damaged file: the reader reports it where the error policy applies
        return []


def _first_values(parquet: Any, name: str, rows: int) -> list[object]:
    top = name.split(".")[0]
    for batch in parquet.iter_batches(batch_size=rows, columns=[top]):
        return [field_value(row, name) for row in batch.to_pylist()]
    return []


def with_cluster_field(reading: Reading, plan: Plan, name: str | None) -> tuple[Reading, Plan]:
    """The reading that carries `name` as an extra field, and the plan that clusters by it (as given: None)."""
    if name is None:
        return reading, replace(plan, detect_clusters=False)
    fields = reading.fields
    extras = fields.extras if name in fields.extras else (*fields.extras, name)
    return replace(reading, fields=replace(fields, extras=extras)), replace(plan, cluster_field=name)


def _first_row_field(opened: OpenSource) -> tuple[OpenSource, tuple[str | None, str | None], bool]:
    """(the source to read on, the first row's (request-like field, run id field), whether a row or schema was
    seen)."""
    if opened.format == "parquet":
        names = _parquet_columns(opened.source)
        if names is None:
            return opened, (None, None), False
        return opened, (request_field_of_columns(names), request_field_of_columns(names, RUN_ID_FIELDS)), True
    opened, row = read_ahead_first_row(opened)
    if not isinstance(row, dict):
        return opened, (None, None), row is not None
    return opened, (request_field(row), request_field(row, RUN_ID_FIELDS)), True


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


def detected_field(sources: Sequence[Source], reading: Reading, plan: Plan) -> tuple[Reading, Plan, ClusterDetection]:
    """The reading and plan of a driver that cannot stream its sources (a cluster's): decided up front.

    Files and objects can be opened again, so the first source that holds a row is opened here to look;
    a pipe given as a path cannot (looking would consume it, or wait on its writer): its runs are then
    over runs unless a cluster field is named.
    """
    detection = ClusterDetection()
    looks = (plan.cluster_field is None and plan.detect_clusters) or (plan.first_runs > 0 and plan.run_ids is None)
    for source in sources:
        if detection.decided or not looks:
            break
        if not source.can_reopen:
            break
        try:
            with open_source(source, reading.input_format) as opened:
                detection.resolve(opened, reading, plan)
        except Exception:  # an unreadable source: its shares report it
            continue
    if plan.first_runs > 0 and plan.run_ids is None:
        plan = replace(plan, run_ids=() if detection.run_id is None else (detection.run_id,))
    reading, plan = with_cluster_field(reading, plan, detection.field if detection.decided else plan.cluster_field)
    return reading, plan, detection
