"""The framework-neutral task (Spark, Ray): Arrow batches of partitions, added in order, give one process's summary."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from msgspec.structs import replace

from specaccept_cli.errors import InputError
from specaccept_cli.pipeline import summarise
from specaccept_cli.pipeline.frameworks import add_summaries, summarise_batches, summary_bytes, summary_of_bytes
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.evaluate import Plan
from tests.helpers import simulated_rows, write_parquet

FIELDS, PLAN = FieldSpec(extras=("host",)), Plan(group_by="host")


def files_with_bad_rows(directory: Path) -> list[Path]:
    paths = []
    for index in range(3):
        rows = simulated_rows(3_000, seed=index)
        for bad in (5 + index, 2_000 + index):
            rows[bad] = {**rows[bad], "q": [0.0] * len(rows[bad]["q"])}  # type: ignore[arg-type]
        paths.append(write_parquet(directory / f"shard-{index}.parquet", rows, 500))
    return paths


def partitions(paths: list[Path], rows_per_partition: int) -> list[list[pa.RecordBatch]]:
    """What a framework hands out: batches with each row's file and 0-based row index, cut anywhere."""
    tables = []
    for path in paths:
        table = pq.read_table(path)
        count = table.num_rows
        table = table.append_column("file_path", pa.array([str(path)] * count))
        tables.append(table.append_column("row_index", pa.array(range(count), pa.int64())))
    whole = pa.concat_tables(tables)
    return [
        whole.slice(start, rows_per_partition).to_batches(max_chunksize=777)
        for start in range(0, whole.num_rows, rows_per_partition)
    ]


@pytest.mark.parametrize("rows_per_partition", [1_000, 2_345, 9_000])
def test_partitions_added_in_order_give_one_process_summary(tmp_path: Path, rows_per_partition: int) -> None:
    paths = files_with_bad_rows(tmp_path)
    alone = summarise([str(path) for path in paths], FIELDS, PLAN, on_error="skip")
    shipped = [
        summary_bytes(
            summarise_batches(batches, FIELDS, PLAN, source_column="file_path", row_column="row_index", on_error="skip")
        )
        for batches in partitions(paths, rows_per_partition)
    ]
    assert alone.skipped_rows == 6
    assert add_summaries(summary_of_bytes(cell) for cell in shipped) == alone


def test_fail_mode_names_the_file_and_row(tmp_path: Path) -> None:
    paths = files_with_bad_rows(tmp_path)
    with pytest.raises(InputError) as alone:
        summarise([str(path) for path in paths[1:]])
    with pytest.raises(InputError) as spread:
        summarise_batches(partitions(paths[1:], 10_000)[0], source_column="file_path", row_column="row_index")
    assert str(spread.value) == str(alone.value)


def test_a_partition_that_skips_rows_is_numbered_by_its_row_index(tmp_path: Path) -> None:
    paths = files_with_bad_rows(tmp_path)
    (batches,) = partitions(paths[:1], 10_000)
    table = pa.Table.from_batches(batches)
    kept = sorted({*random.Random(1).sample(range(table.num_rows), 2_000), 5, 2_000})
    filtered = table.take(pa.array(kept)).to_batches(max_chunksize=300)
    summary = summarise_batches(filtered, source_column="file_path", row_column="row_index", on_error="skip")
    assert [(row.source, row.line) for row in summary.errors] == [(str(paths[0]), 6), (str(paths[0]), 2_001)]


def test_without_row_columns_rows_are_numbered_in_batch_order(tmp_path: Path) -> None:
    (path,) = files_with_bad_rows(tmp_path)[:1]
    summary = summarise_batches(pq.ParquetFile(path).iter_batches(batch_size=700), source="t", on_error="skip")
    assert [(row.source, row.line) for row in summary.errors] == [("t", 6), ("t", 2_001)]
    alone = summarise([str(path)], on_error="skip")
    assert replace(summary, errors=()) == replace(alone, errors=())


def test_only_summaries_are_unpickled() -> None:
    import pickle

    with pytest.raises(InputError, match="not a summary: dict"):
        summary_of_bytes(pickle.dumps({"runs": 1}))


def test_the_spark_recipe_partition_function_gives_one_process_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/spark_audit.py's task, fed what `mapInArrow` feeds it (PySpark itself is not installed here)."""
    import importlib.util
    import sys
    import types

    spark_sql = types.ModuleType("pyspark.sql")
    spark_sql.SparkSession = object  # type: ignore[attr-defined]  # only `main` uses these
    spark_sql.functions = types.SimpleNamespace()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    monkeypatch.setitem(sys.modules, "pyspark.sql", spark_sql)
    recipe = Path(__file__).resolve().parents[2] / "examples" / "spark_audit.py"
    spec = importlib.util.spec_from_file_location("spark_audit", recipe)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    rows = simulated_rows(4_000, seed=9)
    paths = [write_parquet(tmp_path / f"part-{index}.parquet", rows[index::2], 700) for index in range(2)]
    cells = [cell for batches in partitions(paths, 1_500) for cell in module.partition(iter(batches))]
    assert len(cells) == 3
    summary = add_summaries(summary_of_bytes(cell.column("summary")[0].as_py()) for cell in cells)
    assert summary == summarise([str(path) for path in paths])
