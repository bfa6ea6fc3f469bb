"""Audit a lakehouse table with PySpark: one summary per partition, added on the driver.

    pip install specaccept pyspark
    spark-submit examples/spark_audit.py 's3a://bucket/logs/2026-11-30/*.parquet' > summary.json

Every partition runs specaccept's framework-neutral task (`pipeline.frameworks.summarise_batches`)
on its Arrow record batches through `mapInArrow`, and sends back one small binary cell (its
summary, pickled). Rows carry their file and row index (`_metadata`), so a bad row is reported
as `file:row`, as `specaccept audit` reports it. The result is the machine format of
`specaccept audit -o json`; `specaccept check`, `diff` and `merge` read it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession, functions

from specaccept_cli.pipeline.frameworks import add_summaries, summarise_batches, summary_bytes, summary_of_bytes
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.files import json_bytes, summary_object

FIELDS = FieldSpec()  # p, q, r; add extras=("model",) and Plan(group_by="model") to split by a column
PLAN = Plan()


def partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    summary = summarise_batches(batches, FIELDS, PLAN, source_column="file_path", row_column="row_index")
    yield pa.RecordBatch.from_pydict({"summary": [summary_bytes(summary)]})


def main(path: str) -> None:
    spark = SparkSession.builder.appName("specaccept").getOrCreate()
    table = spark.read.parquet(path).select(
        "p",
        "q",
        "r",
        functions.col("_metadata.file_path").alias("file_path"),
        # The row index in its file (0-based); where a reader lacks it, drop row_column below:
        # rows are then numbered in partition order and only the counts are comparable.
        functions.col("_metadata.row_index").alias("row_index"),
    )
    cells = table.mapInArrow(partition, "summary binary").collect()
    summary = add_summaries(summary_of_bytes(row["summary"]) for row in cells)
    sys.stdout.buffer.write(json_bytes(summary_object(summary, None, estimate(summary))))


if __name__ == "__main__":
    main(sys.argv[1])
