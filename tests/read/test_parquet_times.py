"""Parquet temporal columns (timestamps at nanoseconds, past the year 9999, times of day, durations) as the
time field, groups, ids, clusters and reported counts: each value at its own precision, never a traceback."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.read.arrow_values import python_values
from tests.helpers import invoke, per_run

try:  # pandas writes timestamp[ns] by default: the case that failed
    import pandas  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # not installed here: the same file from pyarrow, with the schema and metadata pandas writes
    pandas = None

NS = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z
YEAR_10000_US = 253_402_300_800_000_000  # 10000-01-01T00:00:00 in microseconds


def _rows(n: int) -> dict[str, list[object]]:
    return {"p": [[0.5, 0.4]] * n, "q": [[0.6, 0.5]] * n, "r": [[0.1, 0.9]] * n}


def _temporal_file(tmp_path: Path) -> Path:
    """Four rows: sub-microsecond timestamps (naive and UTC), a time of day, a duration, a year past 9999."""
    n = 4
    columns = {
        **_rows(n),
        "t": pa.array([NS + i for i in range(n)], pa.timestamp("ns")),
        "tz": pa.array([NS + i for i in range(n)], pa.timestamp("ns", tz="UTC")),
        "tod": pa.array([1_000_000_001 + i for i in range(n)], pa.time64("ns")),
        "dur": pa.array([1_000_000_001 + i for i in range(n)], pa.duration("ns")),
        "far": pa.array([YEAR_10000_US + i for i in range(n)], pa.timestamp("us")),
        "reported": [1] * n,
    }
    path = tmp_path / "times.parquet"
    pq.write_table(pa.table(columns), path)
    return path


def _pandas_file(tmp_path: Path) -> Path:
    """What `DataFrame.to_parquet` writes for a frame with a datetime64[ns] column: by pandas when it is
    installed, else the same schema (timestamp[ns], the index as `__index_level_0__`, the `pandas`
    metadata) by pyarrow."""
    path = tmp_path / "pandas.parquet"
    times = [NS + 1000 * i + i for i in range(6)]
    if pandas is not None:
        frame = pandas.DataFrame({**_rows(6), "ts": pandas.to_datetime(times, unit="ns")})
        frame.index = pandas.RangeIndex(10, 16)  # not a RangeIndex from 0: pandas keeps it as a column
        frame.to_parquet(path)
        return path
    table = pa.table({**_rows(6), "ts": pa.array(times, pa.timestamp("ns")), "__index_level_0__": list(range(10, 16))})
    metadata = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [],
        "columns": [
            {"name": "ts", "field_name": "ts", "pandas_type": "datetime", "numpy_type": "datetime64[ns]"},
            {"name": None, "field_name": "__index_level_0__", "pandas_type": "int64", "numpy_type": "int64"},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    pq.write_table(table.replace_schema_metadata({b"pandas": orjson.dumps(metadata)}), path)
    return path


def _json(*args: str) -> dict[str, Any]:
    result = invoke("audit", *args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr
    data: dict[str, Any] = orjson.loads(result.stdout)
    return data


def test_nanosecond_timestamps_group_at_their_own_precision(tmp_path: Path) -> None:
    path = str(_temporal_file(tmp_path))
    for column, zone in (("t", ""), ("tz", "Z")):
        groups = _json(path, "--group-by", column, "--max-groups", "0")["groups"]
        assert list(groups) == [f"2023-11-14T22:13:20.12345678{digit}{zone}" for digit in "9"] + [
            f"2023-11-14T22:13:20.12345679{digit}{zone}" for digit in "012"
        ]  # four groups one nanosecond apart, none merged by rounding


@pytest.mark.parametrize(
    ("column", "first"),
    [("tod", "00:00:01.000000001"), ("dur", "PT1.000000001S"), ("far", "+010000-01-01T00:00:00.000000")],
)
def test_times_of_day_durations_and_far_years_are_groups_and_ids(tmp_path: Path, column: str, first: str) -> None:
    path = str(_temporal_file(tmp_path))
    groups = _json(path, "--group-by", column)["groups"]
    assert len(groups) == 4 and first in groups
    records = invoke("audit", path, "--id-field", column, "-o", "jsonl")
    assert records.exit_code == 0, records.stderr
    assert per_run(records.stdout_bytes)[0][column] == first
    clustered = _json(path, "--cluster-field", column)
    assert clustered["cluster_field"] == column and clustered["clusters"] == 4


def test_nanosecond_timestamps_are_times_windows_and_clusters(tmp_path: Path) -> None:
    path = str(_temporal_file(tmp_path))
    for column in ("t", "tz"):
        data = _json(path, "--time-field", column, "--window", "1m", "--cluster-field", column)
        assert data["windows"][0]["start"] == 1_699_999_980 and data["windows"][0]["runs"] == 4
        assert data["clusters"] == 4
    ids = invoke("audit", path, "--id-field", "t", "-o", "csv")
    assert ids.exit_code == 0 and "2023-11-14T22:13:20.123456790" in ids.stdout


@pytest.mark.parametrize(("column", "what"), [("tod", "a time of day"), ("dur", "a length of time")])
def test_a_column_that_holds_no_moments_is_refused_as_the_time_field(tmp_path: Path, column: str, what: str) -> None:
    path = _temporal_file(tmp_path)
    result = invoke("audit", str(path), "--time-field", column)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert str(path) in lines[0] and f"column '{column}'" in lines[0] and what in lines[0]
    assert "timestamp or date column" in lines[0] and "windows of runs" in lines[0]  # the way out
    skipped = invoke("audit", str(path), "--time-field", column, "--on-error", "skip")
    assert skipped.exit_code == 1 and "skipped 1 unreadable source" in skipped.stderr  # the file, not its rows


def test_a_year_past_9999_is_a_bad_time_row_not_a_crash(tmp_path: Path) -> None:
    path = _temporal_file(tmp_path)
    result = invoke("audit", str(path), "--time-field", "far")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"{path}:1: far = '+010000-01-01T00:00:00.000000' is not a time" in result.stderr
    assert "to the year 5138" in result.stderr


def test_a_duration_as_reported_counts_is_a_bad_row(tmp_path: Path) -> None:
    path = _temporal_file(tmp_path)
    result = invoke("audit", str(path), "--reported-field", "dur")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"{path}:1: 'dur' is the string 'PT1.000000001S', not a non-negative count" in result.stderr


def test_a_quarantined_row_keeps_its_nanoseconds(tmp_path: Path) -> None:
    table = pa.table(
        {
            "p": [[0.5], [0.5]],
            "q": [[0.6], [0.0]],  # row 2: q = 0 is bad
            "r": [[0.1], [0.1]],
            "t": pa.array([NS, NS + 1], pa.timestamp("ns")),
        }
    )
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    quarantine = tmp_path / "bad.jsonl"
    result = invoke("audit", str(path), "--group-by", "t", "--on-error", "skip", "--quarantine", str(quarantine))
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(quarantine.read_bytes())["t"] == "2023-11-14T22:13:20.123456790"


def test_a_pandas_parquet_file_with_nanosecond_times(tmp_path: Path) -> None:
    path = str(_pandas_file(tmp_path))
    assert pq.read_schema(path).field("ts").type == pa.timestamp("ns")
    grouped = _json(path, "--group-by", "ts", "--max-groups", "0")["groups"]
    assert "2023-11-14T22:13:20.123457790" in grouped and len(grouped) == 6
    timed = _json(path, "--time-field", "ts", "--window", "10s")
    assert timed["windows"][0]["runs"] == 6


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_timestamp_text_is_the_calendar_datetime_gives(value: int) -> None:
    """Every int64 of microseconds spelled as datetime spells it (where datetime reaches), and never a crash."""
    text = python_values(pa.array([value], pa.timestamp("us", tz="UTC")))[0]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    try:
        moment = epoch + dt.timedelta(microseconds=value)
    except OverflowError:  # outside the years 1 to 9999
        assert isinstance(text, str) and text[0] in "+-0" and text.endswith("Z")
        return
    assert text == moment.strftime("%Y-%m-%dT%H:%M:%S.%f").rjust(26, "0") + "Z"
    assert dt.datetime.fromisoformat(str(text)) == moment


def test_nested_times_are_text_too() -> None:
    times = pa.array([NS, None, NS + 1], pa.timestamp("ns"))
    rows = pa.StructArray.from_arrays([times, pa.array([1, 2, 3])], names=["at", "n"])
    assert python_values(rows.slice(1)) == [{"at": None, "n": 2}, {"at": "2023-11-14T22:13:20.123456790", "n": 3}]
    lists = pa.array([[1], None, [2, 3]], pa.list_(pa.duration("ns")))
    assert python_values(lists.slice(1)) == [None, ["PT0.000000002S", "PT0.000000003S"]]
    assert python_values(pa.array([-1], pa.duration("ms"))) == ["-PT0.001S"]
    assert python_values(pa.array([19_675, None], pa.date32())) == ["2023-11-14", None]
