"""Parquet through real pyarrow files: list types, shards, struct columns, bad values, damaged files."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.parquet import read_parquet_file
from specaccept_cli.rule.batch import FieldSpec
from tests.helpers import (
    CORPUS,
    ROWS,
    expected_accepted,
    invoke,
    per_run,
    random_rows,
    run_process,
    without_provenance,
    write_jsonl,
)
from tests.specdec import greedy_runs, model_pair


def _list_type(kind: str, value_type: pa.DataType, k: int) -> pa.DataType:
    if kind == "list":
        return pa.list_(value_type)
    if kind == "large_list":
        return pa.large_list(value_type)
    return pa.list_(value_type, k)


@pytest.mark.parametrize("kind", ["list", "large_list", "fixed_size_list"])
@pytest.mark.parametrize("value_type", [pa.float32(), pa.float64()])
def test_parquet_shard_directory(tmp_path: Path, kind: str, value_type: pa.DataType) -> None:
    k = 5
    rows = random_rows(400, seed=2, k_max=k)
    if kind == "fixed_size_list":
        rows = [row for row in rows if len(row["p"]) == k]  # type: ignore[arg-type]
    shard_dir = tmp_path / "shards" / "day=1"
    shard_dir.mkdir(parents=True)
    list_type = _list_type(kind, value_type, k)
    halves = [rows[: len(rows) // 2], rows[len(rows) // 2 :]]
    for index, part in enumerate(halves):
        table = pa.table({name: pa.array([row[name] for row in part], type=list_type) for name in ("p", "q", "r")})
        pq.write_table(table, shard_dir / f"part-{index}.parquet", row_group_size=37)
    (tmp_path / "shards" / "_SUCCESS").write_text("")
    result = invoke("audit", str(tmp_path / "shards"), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = per_run(result.stdout_bytes)
    # The rule sees each value as the file stores it (float32 widened exactly to float64).
    widened = [
        {name: [float(pa.scalar(x, value_type).as_py()) for x in row[name]] for name in ("p", "q", "r")}  # type: ignore[attr-defined]
        for row in rows
    ]
    assert [r["accepted"] for r in records] == expected_accepted(widened)
    assert [r["line"] for r in records] == list(range(1, len(halves[0]) + 1)) + list(range(1, len(halves[1]) + 1))
    assert records[0]["source"].endswith("part-0.parquet")
    assert records[-1]["source"].endswith("part-1.parquet")


def test_parquet_struct_column_and_id_field(tmp_path: Path) -> None:
    rows = ROWS[:40]
    spec = pa.array([{"target_p": row["p"], "draft_q": row["q"], "u": row["r"]} for row in rows])
    table = pa.table({"request": pa.array([row["id"] for row in rows]), "spec": spec})
    pq.write_table(table, tmp_path / "nested.parquet")
    result = invoke(
        "audit",
        str(tmp_path / "nested.parquet"),
        "-o",
        "jsonl",
        "--p-field",
        "spec.target_p",
        "--q-field",
        "spec.draft_q",
        "--r-field",
        "spec.u",
        "--id-field",
        "request",
    )
    assert result.exit_code == 0, result.stderr
    records = per_run(result.stdout_bytes)
    assert [r["accepted"] for r in records] == expected_accepted(rows)
    assert [r["request"] for r in records] == [row["id"] for row in rows]


def test_parquet_detected_by_magic_without_extension_and_on_stdin(tmp_path: Path) -> None:
    table = pa.table({name: pa.array([row[name] for row in ROWS[:60]]) for name in ("p", "q", "r")})
    path = tmp_path / "export.bin"
    pq.write_table(table, path)
    result = invoke("audit", str(path), "-o", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert [r["accepted"] for r in per_run(result.stdout_bytes)] == expected_accepted(ROWS[:60])
    piped = run_process("audit", "-", "-o", "jsonl", input=path.read_bytes())
    assert piped.returncode == 0, piped.stderr
    assert [r["accepted"] for r in per_run(piped.stdout)] == expected_accepted(ROWS[:60])


def test_prefetched_batches_keep_order_errors_and_stop_early() -> None:

    from specaccept_cli.read.parquet import _prefetched

    assert list(_prefetched(iter(range(50)))) == list(range(50))

    def broken() -> Iterator[int]:
        yield 1
        raise OSError("disk went away")

    reader = _prefetched(broken())
    assert next(reader) == 1
    with pytest.raises(OSError, match="disk went away"):
        next(reader)

    started = threading.active_count()
    endless = _prefetched(iter(range(10**9)))
    assert next(endless) == 0
    endless.close()  # the consumer stops early (a broken pipe, fail mode): the thread must end too
    for _ in range(50):
        if threading.active_count() <= started:
            break
        threading.Event().wait(0.05)
    assert threading.active_count() <= started


def test_parquet_bad_value_names_the_row(tmp_path: Path) -> None:
    table = pa.table(
        {"p": [[0.5], [0.5, 0.7], [0.2]], "q": [[0.5], [0.5, 0.0], [0.4]], "r": [[0.1], [0.2, 0.3], [0.5]]}
    )
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    result = invoke("audit", str(path))
    assert result.exit_code == 2
    assert f"{path}:2: q[1] = 0.0 is zero" in result.stderr


def test_parquet_nulls_and_length_mismatch(tmp_path: Path) -> None:
    table = pa.table({"p": [[0.5], None, [0.2]], "q": [[0.5], [0.4], [0.4]], "r": [[0.1], [0.2], [0.5]]})
    pq.write_table(table, tmp_path / "nulls.parquet")
    result = invoke("audit", str(tmp_path / "nulls.parquet"))
    assert result.exit_code == 2
    assert "nulls.parquet:2: 'p' is null" in result.stderr
    table = pa.table({"p": [[0.5], [0.5, 0.5]], "q": [[0.5], [0.4]], "r": [[0.1], [0.2, 0.1]]})
    pq.write_table(table, tmp_path / "ragged.parquet")
    result = invoke("audit", str(tmp_path / "ragged.parquet"))
    assert "ragged.parquet:2: p, q and r have different lengths (2, 1, 2)" in result.stderr


def test_parquet_missing_column_lists_the_columns(tmp_path: Path) -> None:
    pq.write_table(pa.table({"p": [[0.5]], "q": [[0.5]], "u": [[0.1]]}), tmp_path / "cols.parquet")
    result = invoke("audit", str(tmp_path / "cols.parquet"))
    assert result.exit_code == 2
    assert "missing column 'r' (columns: p, q, u)" in result.stderr


def test_parquet_column_that_is_not_a_list(tmp_path: Path) -> None:
    pq.write_table(pa.table({"p": [0.5], "q": [[0.5]], "r": [[0.1]]}), tmp_path / "flat.parquet")
    result = invoke("audit", str(tmp_path / "flat.parquet"))
    assert result.exit_code == 2
    assert "column 'p' is " in result.stderr and ", not a list of numbers" in result.stderr  # the type: pyarrow's name


def test_a_column_error_stops_the_prefetch_thread_before_it_travels_on(tmp_path: Path) -> None:
    """The error is raised while the prefetch thread decodes ahead; the thread is joined before the error leaves
    the reader, even while the error (and its traceback, which holds the reader's frame) is still alive."""
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"p": ["x"] * 200_000, "q": [[0.5]] * 200_000, "r": [[0.1]] * 200_000}), path)
    with pytest.raises(InputError) as caught:
        list(read_parquet_file(path, str(path), FieldSpec(), on_error=lambda error: None))
    assert "not a list of numbers" in str(caught.value)
    assert not [thread for thread in threading.enumerate() if thread.name == "parquet-prefetch"]


def test_parquet_column_error_always_exits_2(tmp_path: Path) -> None:
    """A column of the wrong type ends the read while a background thread decodes ahead: never an abort."""
    pq.write_table(
        pa.table({"p": ["x"] * 200_000, "q": [[0.5]] * 200_000, "r": [[0.1]] * 200_000}), tmp_path / "s.parquet"
    )
    for _ in range(6):
        result = run_process("audit", str(tmp_path / "s.parquet"), "-o", "json")
        assert result.returncode == 2, result.stderr
        assert b"column 'p' is " in result.stderr and b", not a list of numbers" in result.stderr


def test_parquet_reported_nulls_are_quarantined(tmp_path: Path) -> None:
    table = pa.table({"p": [[0.5], [0.5]], "q": [[0.5], [0.5]], "r": [[0.1], [0.1]], "reported": [1, None]})
    pq.write_table(table, tmp_path / "rep.parquet")
    quarantine = tmp_path / "q.jsonl"
    args = ["--reported-field", "reported", "--on-error", "skip", "--quarantine", str(quarantine), "-o", "json"]
    result = invoke("audit", str(tmp_path / "rep.parquet"), *args)
    assert orjson.loads(result.stdout)["skipped_rows"] == 1
    assert orjson.loads(quarantine.read_bytes().splitlines()[0])["reported"] is None


@pytest.fixture(scope="module")
def parquet_bytes() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"p": [[0.5, 0.2]] * 50, "q": [[0.5, 0.4]] * 50, "r": [[0.1, 0.9]] * 50, "id": list(range(50))})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.none() | st.integers(0, 10**6),
)
def test_damaged_parquet_is_an_input_error_never_a_crash(
    tmp_path: Path, parquet_bytes: bytes, flips: list[tuple[int, int]], cut: int | None
) -> None:
    """Random bytes overwritten (and maybe the file cut short): pyarrow's many exceptions become one line."""
    data = bytearray(parquet_bytes)
    for position, value in flips:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % len(data)]
    path = tmp_path / "damaged.parquet"
    path.write_bytes(bytes(data))
    for mode in ("fail", "skip"):
        result = invoke("audit", str(path), "-o", "json", "--on-error", mode, "--id-field", "id")
        assert result.exit_code in (0, 1, 2)
        if result.exit_code == 2:
            assert result.stderr.startswith(f"specaccept: {path}") and len(result.stderr.splitlines()) == 1
        else:
            summary = orjson.loads(result.stdout)
            assert summary["schema"] == "specaccept.summary/2"
            # Exit 1 only for what skip mode left out when nothing valid was read at all.
            nothing_valid = summary["runs"] == 0 and (summary["skipped_rows"] or summary["skipped_sources"])
            assert result.exit_code == (1 if nothing_valid else 0)


def test_greedy_parquet_rows_are_quarantined_too(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "greedy.parquet"
    pq.write_table(pa.table({"d": [[1, 2], [3, 4]], "t": [[1, 2, 5], [3]]}), path)
    quarantine = tmp_path / "bad.jsonl"
    greedy = ["--draft-tokens-field", "d", "--target-tokens-field", "t"]
    result = invoke("audit", str(path), *greedy, "-o", "json", "--on-error", "skip", "--quarantine", str(quarantine))
    summary = orjson.loads(result.stdout)
    assert (summary["runs"], summary["skipped_rows"]) == (1, 1)
    assert summary["errors"][0]["line"] == 2
    assert quarantine.read_bytes() == b'{"d": [3, 4], "t": [3]}\n'


def test_parquet_quarantine_writes_json_rows(tmp_path: Path) -> None:
    corpus = CORPUS
    quarantine = tmp_path / "bad.jsonl"
    result = invoke(
        "audit", str(corpus / "nan_value.parquet"), "-o", "json", "--on-error", "skip", "--quarantine", str(quarantine)
    )
    assert result.exit_code == 0
    assert quarantine.read_bytes() == b'{"p": [0.5, NaN], "q": [0.5, 0.5], "r": [0.1, 0.1]}\n'


def test_group_by_parquet_column_matches_jsonl(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = []
    for index in range(300):
        k = int(rng.integers(0, 6))
        rows.append(
            {
                "p": rng.random(k).tolist(),
                "q": (1 - rng.random(k)).tolist(),
                "r": rng.random(k).tolist(),
                "meta": {"model": ["small", "large", "tiny"][index % 3], "shard": index % 2},
            }
        )
    jsonl = write_jsonl(tmp_path / "g.jsonl", rows)
    parquet = tmp_path / "g.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet, row_group_size=50)
    for field in ("meta.model", "meta.shard"):
        json_bytes = invoke("audit", str(jsonl), "-o", "json", "--group-by", field).stdout_bytes
        parquet_bytes = invoke("audit", str(parquet), "-o", "json", "--group-by", field).stdout_bytes
        assert without_provenance(json_bytes) == without_provenance(parquet_bytes)  # only the inputs differ
        from_json = orjson.loads(json_bytes)
        groups = from_json["groups"]
        assert sum(group["runs"] for group in groups.values()) == 300
    assert set(from_json["groups"]) == {"0", "1"}


def test_group_by_a_missing_parquet_column_is_an_input_error(tmp_path: Path) -> None:
    parquet = tmp_path / "g.parquet"
    pq.write_table(pa.Table.from_pylist([{"p": [0.5], "q": [0.5], "r": [0.1]}]), parquet)
    result = invoke("audit", str(parquet), "--group-by", "model")
    assert result.exit_code == 2
    assert "missing column 'model'" in result.stderr


def test_greedy_parquet_matches_jsonl(tmp_path: Path) -> None:
    target, draft = model_pair(vocab=40, quality=0.5, seed=15)
    rows = list(greedy_runs(target, draft, runs=300, k=6, seed=15))
    table = pa.table(
        {
            "draft": pa.array([row["draft_tokens"] for row in rows], type=pa.list_(pa.int32())),
            "target": pa.array([row["target_tokens"] for row in rows], type=pa.large_list(pa.int64())),
        }
    )
    pq.write_table(table, tmp_path / "greedy.parquet", row_group_size=50)
    args = ("--draft-tokens-field", "draft", "--target-tokens-field", "target", "-o", "jsonl")
    records = [
        orjson.loads(line)
        for line in invoke("audit", str(tmp_path / "greedy.parquet"), *args).stdout_bytes.splitlines()
    ]
    assert [r["accepted"] for r in records] == [row["accepted"] for row in rows]
    assert [r["line"] for r in records] == list(range(1, 301))
    bad = pa.table({"draft": [[1, 2, 3], [1]], "target": [[1, 2, 3], [1, 2, 3]]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    result = invoke(
        "audit", str(tmp_path / "bad.parquet"), "--draft-tokens-field", "draft", "--target-tokens-field", "target"
    )
    assert result.exit_code == 2
    assert "bad.parquet:2: 'target' has 3 entries; 1 drafted tokens need 1 or 2" in result.stderr
