"""Per-cluster sums: counted by hand, additive by key across batches and files, and the sandwich by hand."""

from __future__ import annotations

import gzip
import lzma
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.summary.clusters import ClusterBlock, ClusterTally, decode_column, encode_column
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.evaluate import Plan, cluster_hash, cluster_hashes, evaluate_batch
from specaccept_cli.summary.files import json_bytes, merge_summaries, summary_from_object, summary_object
from specaccept_cli.summary.state import Summary
from tests.helpers import invoke, write_jsonl

RUNS = [(3, 1), (2, 2), (0, 0), (4, 4), (1, 0)]  # (k, a)
KEYS = ["b", "a", "a", "b", "c"]


def tally_of(runs: list[tuple[int, int]], keys: list[object]) -> ClusterTally:
    k = np.array([k for k, _ in runs], dtype=np.int64)
    a = np.array([a for _, a in runs], dtype=np.int64)
    return ClusterTally.of_runs("request_id", cluster_hashes(keys), k, a)


def test_cluster_sums_by_hand() -> None:
    sums = tally_of(RUNS, KEYS).sums
    by_key = {int(key): index for index, key in enumerate(sums.keys.tolist())}
    a, b, c = (by_key[cluster_hash(name)] for name in "abc")
    assert sums.runs[[a, b, c]].tolist() == [2, 2, 1]
    # b: (3, 1) and (4, 4). Position 1: both draft, both test, both keep; 2: both draft and test, one keeps;
    # 3: both draft, only (4, 4) tested it; 4: only (4, 4) drafts.
    assert sums.drafts[b].tolist() == [2, 2, 2, 1]
    assert sums.reached[b].tolist() == [2, 2, 1, 1]
    assert sums.kept[b].tolist() == [2, 1, 1, 1]
    # a: (2, 2) and the empty draft (0, 0)
    assert sums.drafts[a].tolist() == [1, 1, 0, 0] and sums.kept[a].tolist() == [1, 1, 0, 0]
    assert sums.reached[c].tolist() == [1, 0, 0, 0] and sums.kept[c].tolist() == [0, 0, 0, 0]


def test_keys_follow_group_keys_but_not_python_equality() -> None:
    assert cluster_hash("3") != cluster_hash(3)  # group keys `"3"` and `3`: a string and a number
    assert cluster_hash(True) != cluster_hash(1)  # "true" and "1", though True == 1
    assert cluster_hashes([1, True, [1, 2], "x"]).tolist() == [
        cluster_hash(1),
        cluster_hash(True),
        cluster_hash([1, 2]),
        cluster_hash("x"),
    ]


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 5)), max_size=80), st.data())
def test_tallies_of_parts_add_up_to_the_whole(rows: list[tuple[int, int, int]], data: st.DataObject) -> None:
    runs = [(k, min(a, k)) for k, a, _ in rows]
    keys: list[object] = [key for _, _, key in rows]
    whole = tally_of(runs, keys)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(runs)), max_size=6)))
    total = ClusterTally("request_id")
    for start, end in zip([0, *cuts], [*cuts, len(runs)]):
        total = total + tally_of(runs[start:end], keys[start:end])
    assert total == whole
    assert ClusterTally.from_dict(orjson.loads(orjson.dumps(total.to_dict()))) == whole
    assert len(total.sums) == len(set(keys))


def test_adding_many_small_tallies_keeps_few_blocks() -> None:
    total = ClusterTally("request_id")
    for batch in range(300):
        total = total + tally_of([(2, 1)] * 10, [f"r{batch * 10 + i}" for i in range(10)])
    assert len(total.blocks) <= 10  # a binary counter: about log2(300) blocks
    assert total.clusters == 3000


def test_tallies_of_different_fields_do_not_add() -> None:
    with pytest.raises(ValueError, match="different fields"):
        _ = tally_of(RUNS, KEYS) + ClusterTally("other")


def clustered_summary(runs: list[tuple[int, int]], keys: list[object]) -> Summary:
    counts = np.zeros((5, 5), dtype=np.int64)
    for k, a in runs:
        counts[k, a] += 1
    return Summary(counts=counts, clusters=tally_of(runs, keys))


def test_sandwich_over_clusters_by_hand() -> None:
    summary = clustered_summary(RUNS, KEYS)
    numbers = estimate(summary)
    # accepted / examined per cluster: b (1 + 4) / (2 + 4), a 2 / 2, c 0 / 1 -> alpha = 7 / 9
    alpha = 7 / 9
    residuals = [5 - alpha * 6, 2 - alpha * 2, 0 - alpha * 1]
    leverages = [6 / 9, 2 / 9, 1 / 9]  # CR2: each cluster's squared residual over 1 - its share of examined
    expected = math.sqrt(sum(r * r / (1 - h) for r, h in zip(residuals, leverages))) / 9
    assert numbers.alpha == pytest.approx(alpha)
    assert numbers.alpha_standard_error == pytest.approx(expected)
    assert numbers.clusters == 3 and numbers.degrees_of_freedom == 2 and numbers.cluster_field == "request_id"
    # tokens per pass (accepted + runs) / runs: per cluster (5 + 2), (2 + 2), (0 + 1) over runs 2, 2, 1
    tpp = 12 / 5
    residuals = [7 - tpp * 2, 4 - tpp * 2, 1 - tpp * 1]
    leverages = [2 / 5, 2 / 5, 1 / 5]
    variance = sum(r * r / (1 - h) for r, h in zip(residuals, leverages))
    assert numbers.tokens_per_pass_standard_error == pytest.approx(math.sqrt(variance) / 5)
    assert "cluster-robust" in numbers.interval_method


def test_clusters_round_trip_and_merge(tmp_path: Path) -> None:
    whole = clustered_summary(RUNS, KEYS)
    left, right = clustered_summary(RUNS[:2], KEYS[:2]), clustered_summary(RUNS[2:], KEYS[2:])
    assert left + right == whole
    data = orjson.loads(json_bytes(summary_object(whole)))
    assert summary_from_object(data) == whole
    assert data["clusters"] == 3 and data["cluster_field"] == "request_id"
    parts = [(name, orjson.loads(json_bytes(summary_object(part)))) for name, part in (("l", left), ("r", right))]
    merged = merge_summaries(parts)
    assert merged.pop("provenance")["merged_from"] == ["l", "r"]  # merge records what it was made of
    assert merged == data
    with pytest.raises(Exception, match="cluster tally"):
        merge_summaries([parts[0], ("plain", orjson.loads(json_bytes(summary_object(Summary(counts=whole.counts)))))])


def test_a_tally_that_does_not_add_up_to_the_counts_is_refused() -> None:
    def altered(name: str, change: Callable[[np.ndarray], None]) -> dict[str, Any]:
        data = orjson.loads(json_bytes(summary_object(clustered_summary(RUNS, KEYS))))
        clusters = data["state"]["clusters"]
        column = decode_column(clusters[name], name, clusters["clusters"], None if name == "runs" else 4).copy()
        change(column)
        clusters[name] = encode_column(column)
        return data

    def more_runs(column: np.ndarray) -> None:
        column[0] += 1

    def more_kept(column: np.ndarray) -> None:
        column[0, 0] = 99

    for data in (altered("runs", more_runs), altered("kept", more_kept)):
        with pytest.raises(ValueError, match="clusters"):
            summary_from_object(data)


def test_clusters_are_written_compactly_and_files_of_lists_still_read() -> None:
    whole = clustered_summary(RUNS, KEYS)
    written = summary_object(whole)["state"]["clusters"]
    assert written["encoding"] == "numpy-le-deflate-base64" and written["clusters"] == 3
    assert written["runs"]["dtype"] == "u1" and written["keys"]["dtype"] == "u8"
    sums = whole.clusters.sums if whole.clusters is not None else None
    assert sums is not None
    listed = {
        "field": "request_id",
        **{name: getattr(sums, name).tolist() for name in ("keys", "runs", "drafts", "reached", "kept")},
    }
    assert ClusterTally.from_dict(listed) == ClusterTally.from_dict(written) == whole.clusters
    for broken in (
        {**written, "encoding": "pickle"},
        {**written, "runs": {**written["runs"], "shape": [4]}},
        {**written, "runs": {**written["runs"], "dtype": "f8"}},
        {**written, "kept": {**written["kept"], "data": "not base64!"}},
        {**written, "keys": written["runs"]},
    ):
        with pytest.raises(ValueError, match="clusters"):
            ClusterTally.from_dict(broken)


def test_groups_carry_their_own_clusters() -> None:
    offsets = np.array([0, 2, 3, 5, 6], dtype=np.int64)
    p = np.array([0.9, 0.2, 0.1, 0.9, 0.9, 0.5])
    q = np.full(6, 0.5)
    r = np.full(6, 0.4)
    extras: dict[str, list[object]] = {"model": ["x", "y", "x", "x"], "request_id": ["r1", "r1", "r2", "r1"]}
    batch = RunBatch("t", np.arange(1, 5), offsets, p, q, r, extras)
    evaluated, _ = evaluate_batch(batch, Plan(group_by="model", cluster_field="request_id"), keep_runs=False)
    assert evaluated.summary.clusters is not None and evaluated.summary.clusters.clusters == 2
    assert evaluated.groups is not None
    x, y = evaluated.groups["x"], evaluated.groups["y"]
    assert x.clusters is not None and x.clusters.clusters == 2 and int(x.clusters.sums.runs.sum()) == 3
    assert y.clusters is not None and y.clusters.clusters == 1 and int(y.clusters.sums.runs.sum()) == 1


def test_cli_cluster_field_serial_parallel_and_parquet(tmp_path: Path) -> None:
    log, parquet = tmp_path / "requests.jsonl", tmp_path / "requests.parquet"
    for path in (log, parquet):  # the same seeded log in both formats
        args = ["--runs", "3000", "--alpha", "0.7", "--k", "1-6", "--seed", "4", "--requests", "20-80"]
        invoke("simulate", *args, "--request-alpha-beta", "7,3", "-o", str(path))
    outputs = [
        orjson.loads(invoke("audit", str(path), "--cluster-field", "request_id", "-o", "json", "-j", jobs).stdout)
        for path, jobs in ((log, "1"), (log, "2"), (parquet, "1"))
    ]
    for output in outputs:  # the files differ, and provenance says so
        assert output.pop("provenance")["settings"]["cluster_field"] == "request_id"
    assert outputs[0] == outputs[1] == {**outputs[2], "errors": outputs[0]["errors"]}
    data = outputs[0]
    assert 40 <= data["clusters"] <= 150 and data["alpha_ci_method"].startswith("cluster-robust")
    plain = orjson.loads(invoke("audit", str(log), "--cluster-field", "none", "-o", "json").stdout)
    assert plain["clustering"] == {"over": "runs", "field": None, "requests": None}
    width = data["alpha_ci"][1] - data["alpha_ci"][0]
    assert width > 2 * (plain["alpha_ci"][1] - plain["alpha_ci"][0])  # prompts differ: the runs are not independent
    for path in (log, parquet):  # no flag: the first row's request_id clusters the runs, as if it had been named
        found = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
        assert found.pop("provenance")["settings"]["cluster_field"] == "request_id"
        assert found["alpha_ci"] == data["alpha_ci"] and found["clusters"] == data["clusters"]
        assert found["clustering"] == {"over": "requests", "field": "request_id", "requests": data["clusters"]}


def test_cli_clusters_by_the_first_rows_request_field_and_says_so(tmp_path: Path) -> None:
    rows = [
        {"request_id": f"r{i // 3}", "p": [0.5, 0.9], "q": [0.6, 0.5], "r": [0.3, 0.8 - i / 100]} for i in range(30)
    ]
    log = write_jsonl(tmp_path / "log.jsonl", rows)
    baseline = tmp_path / "base.json"
    assert invoke("audit", str(log), "-o", "json", "--summary-out", str(baseline)).exit_code == 0
    result = invoke("audit", str(log), "--baseline", str(baseline), "--max-rows", "0")
    assert "clustered by request_id: 10 requests" in result.stdout
    assert "warning" not in result.stderr and result.exit_code == 0
    off = invoke("audit", str(log), "--cluster-field", "none", "--baseline", str(baseline), "--max-rows", "0")
    assert "intervals are over runs, not requests: they hold only for a replayed prompt set" in off.stdout
    assert "standard errors are over runs (one side only" in off.stderr
    nested = write_jsonl(
        tmp_path / "nested.jsonl",
        [{"request": {"id": row["request_id"]}, "p": row["p"], "q": row["q"], "r": row["r"]} for row in rows],
    )
    assert "clustered by request.id: 10 requests" in invoke("audit", str(nested)).stdout
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"p": [0.5], "q": [0.6], "r": [0.3]}] * 5)
    assert (
        "intervals are over runs, not requests: they hold only for a replayed prompt set"
        in invoke("audit", str(plain)).stdout
    )


def test_cli_clusters_a_piped_stdin_read_once(tmp_path: Path) -> None:
    """A pipe is seen once: the first row is read ahead on the stream the reader reads, and no run is lost."""
    log = tmp_path / "requests.jsonl"
    args = ["--runs", "2000", "--alpha", "0.7", "--k", "4", "--seed", "9", "--requests", "10-30"]
    invoke("simulate", *args, "--request-alpha-beta", "7,3", "-o", str(log))
    named = orjson.loads(invoke("audit", str(log), "--cluster-field", "request_id", "-o", "json").stdout)
    for compress in (False, True):
        data = gzip.compress(log.read_bytes()) if compress else log.read_bytes()
        writer = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        audit = subprocess.Popen(
            [sys.executable, "-m", "specaccept_cli", "audit", "-", "-o", "json"],
            stdin=writer.stdout,
            stdout=subprocess.PIPE,
        )
        assert writer.stdin is not None and writer.stdout is not None
        writer.stdout.close()
        writer.stdin.write(data[:37])  # the first row arrives in pieces, as from a followed log
        writer.stdin.flush()
        time.sleep(0.2)
        writer.stdin.write(data[37:])
        writer.stdin.close()
        out, _ = audit.communicate(timeout=60)
        writer.wait(timeout=10)
        piped = orjson.loads(out)
        assert audit.returncode == 0 and piped["runs"] == named["runs"] == 2000
        assert piped["clustering"] == named["clustering"] and piped["alpha_ci"] == named["alpha_ci"]


def test_block_combination_sums_equal_keys() -> None:
    one = ClusterBlock.of_runs(np.array([5, 3], dtype=np.uint64), np.array([2, 1]), np.array([1, 1]))
    two = ClusterBlock.of_runs(np.array([3], dtype=np.uint64), np.array([3]), np.array([0]))
    both = ClusterBlock.combined([one, two])
    assert both.keys.tolist() == [3, 5] and both.runs.tolist() == [2, 1]
    assert both.drafts.tolist() == [[2, 1, 1], [1, 1, 0]]


def test_engine_metrics_have_no_runs_to_cluster() -> None:
    log = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"
    result = invoke("audit", str(log), "--cluster-field", "request_id")
    assert result.exit_code == 2
    assert "a cluster field has nothing to cluster" in result.stderr


def test_first_row_fields_of_gzip_parquet_and_other_files(tmp_path: Path) -> None:
    from specaccept_cli.read.sources import expand_inputs, first_row_fields

    examples = Path(__file__).resolve().parents[2] / "examples"
    fields = {name: first_row_fields(expand_inputs([str(examples / name)])[0]) for name in os.listdir(examples)}
    assert fields["server-reported.jsonl.gz"][0] == "request_id"  # gzip, read through the same decompression
    assert fields["serving-logs.parquet"] == ["id", "p", "q", "r"]
    assert fields["vllm-server.log"] == []  # not JSON rows: no suggestion, and no error
    blank_first = write_jsonl(tmp_path / "blank.jsonl", [])
    blank_first.write_bytes(b"\n  \n" + orjson.dumps({"rid": 1, "p": []}) + b"\n")
    assert first_row_fields(expand_inputs([str(blank_first)])[0]) == ["rid", "p"]
    # A first row longer than the 64 KiB read ahead to tell a .jsonl.gz's format: the rest comes from the stream.
    long_first = tmp_path / "long.jsonl.gz"
    long_first.write_bytes(gzip.compress(orjson.dumps({"request_id": "r" * 200_000, "p": [0.5]}) + b"\n"))
    assert first_row_fields(expand_inputs([str(long_first)])[0]) == ["request_id", "p"]
    # Damaged compressed text is no suggestion and no error (the audit reports it, with its line).
    for name, packed in (
        ("bad.jsonl.gz", gzip.compress(b'{"rid": 1}\n')),
        ("bad.jsonl.xz", lzma.compress(b'{"rid": 1}\n')),
    ):
        damaged = tmp_path / name
        damaged.write_bytes(packed[:12] + bytes(64))
        assert first_row_fields(expand_inputs([str(damaged)])[0]) == []


def test_a_comparison_with_one_clustered_side_says_so() -> None:
    from specaccept_cli.cli.hints import warning_text
    from specaccept_cli.verdict.checks import compare

    clustered = estimate(clustered_summary(RUNS * 4, [f"{key}{i // 5}" for i, key in enumerate(KEYS * 4)]))
    plain = estimate(Summary(counts=clustered_summary(RUNS * 4, KEYS * 4).counts))
    warnings = compare(plain, clustered).warnings
    assert [(warning.kind, warning.at) for warning in warnings] == [("unclustered", "one side")]
    assert "one side only has --cluster-field" in warning_text(warnings[0])  # the command line's words
    assert compare(plain, clustered).method.startswith("over runs")
    assert compare(clustered, clustered).method.startswith("cluster-robust")
