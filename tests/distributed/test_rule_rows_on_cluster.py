"""Rows of every verification rule on a Dask cluster: the same per-run records and summary as one process."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import invoke
from tests.read.test_rule_rows import mixed_rows, records_without_source, write, write_parquet

pytest.importorskip("distributed")


def test_a_log_mixing_every_rule_gives_the_same_results_on_a_cluster(tmp_path: Path) -> None:
    rows = mixed_rows()
    paths = [str(write(tmp_path / "m.jsonl", rows)), str(write_parquet(tmp_path / "m.parquet", rows))]
    here = invoke("audit", *paths, "-o", "jsonl")
    spread = invoke("audit", *paths, "-o", "jsonl", "--scheduler", "local:2")
    assert spread.exit_code == here.exit_code, spread.stderr
    assert records_without_source(spread.stdout_bytes) == records_without_source(here.stdout_bytes)
    assert [run["accepted"] for run in orjson.loads(b"[" + b",".join(spread.stdout_bytes.splitlines()) + b"]")] == [
        row["accepted"] for row in rows + rows
    ]
    summaries = [
        invoke("audit", *paths, "-o", "json", *extra).stdout_bytes for extra in ((), ("--scheduler", "local:2"))
    ]
    assert [orjson.loads(summary)["rules"] for summary in summaries] == [orjson.loads(summaries[0])["rules"]] * 2
    assert orjson.loads(summaries[0])["rules"]["block"] == 2 * sum(row["rule"] == "block" for row in rows)


def test_groups_of_block_and_tree_runs_are_the_same_on_a_cluster(tmp_path: Path) -> None:
    """Each group's rule tally, per request, and the figures over requests: the same bytes as one process."""
    rows = mixed_rows()
    paths = [str(write(tmp_path / "m.jsonl", rows)), str(write_parquet(tmp_path / "m.parquet", rows))]
    summaries = [
        orjson.loads(invoke("audit", *paths, "--group-by", "rule", "-o", "json", *extra).stdout_bytes)
        for extra in ((), ("--scheduler", "local:2"))
    ]
    here, spread = summaries
    assert spread["outside_alpha"] == here["outside_alpha"] and spread["state"]["rules"] == here["state"]["rules"]
    assert spread["groups"] == here["groups"]
    tree = here["groups"]["tree-match"]["outside_alpha"]["tree-match"]
    assert tree["intervals_over"] == "requests" and tree["runs"] == 2 * sum(row["rule"] == "tree-match" for row in rows)
