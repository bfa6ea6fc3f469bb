"""`--rule-field` on a Dask cluster: the workers read each row's rule from the named field, as one process does."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import invoke
from tests.read.test_rule_field import SCHEMA, moved
from tests.read.test_rule_rows import mixed_rows, records_without_source, write

pytest.importorskip("distributed")


def test_rule_field_gives_the_same_records_on_a_cluster(tmp_path: Path) -> None:
    rows = mixed_rows()
    teams = moved(rows)
    parquet = tmp_path / "teams.parquet"
    pq.write_table(pa.Table.from_pylist(teams, schema=SCHEMA), parquet, row_group_size=61)
    paths = [str(write(tmp_path / "teams.jsonl", teams)), str(parquet)]
    here = invoke("audit", *paths, "-o", "jsonl", "--rule-field", "meta.verifier")
    spread = invoke("audit", *paths, "-o", "jsonl", "--rule-field", "meta.verifier", "--scheduler", "local:2")
    assert here.exit_code in (0, 1) and spread.exit_code == here.exit_code, spread.stderr
    assert records_without_source(spread.stdout_bytes) == records_without_source(here.stdout_bytes)
    assert [run["accepted"] for run in records_without_source(spread.stdout_bytes)] == [
        row["accepted"] for row in rows + rows
    ]
    refused = invoke("audit", *paths, "-o", "jsonl", "--scheduler", "local:2")
    assert refused.exit_code == 2 and "'rule' is 'team-0'" in refused.stderr
