"""Per-run accepted lengths on the first screen: every run of a small log with its id, the first runs of a large one
and the way to all of them, within 50 lines for 2,000 runs; the same preview in `-o json` when --max-rows is given,
from one process, a pool and Parquet alike; and a preview that stays bounded however the input is cut."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.summary.first_runs import FirstRuns
from tests.helpers import invoke, invoke_env, write_jsonl, write_parquet


def _records(path: Path, *options: str) -> list[dict[str, object]]:
    result = invoke("audit", str(path), "-o", "jsonl", *options)
    assert result.exit_code == 0, result.stderr
    return [orjson.loads(line) for line in result.stdout_bytes.splitlines()]


def _runs_rows(out: str, path: Path) -> list[list[str]]:
    """The cells of the runs table under 'Runs of PATH'."""
    section = out.split(f"Runs of {path}")[1]
    table = section.split("└")[0]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("first-runs")
    six = directory / "six.jsonl"
    many = directory / "many.jsonl"
    assert invoke("simulate", "--runs", "6", "--alpha", "0.7", "--k", "1-6", "--seed", "5", "-o", str(six))
    assert invoke("simulate", "--runs", "2000", "--alpha", "0.7", "--k", "1-8", "--seed", "6", "-o", str(many))
    rows = [orjson.loads(line) for line in many.read_bytes().splitlines()]
    requests = [{**row, "request_id": f"req-{index // 3}"} for index, row in enumerate(rows)]
    return {
        "six": six,
        "many": many,
        "requests": write_jsonl(directory / "requests.jsonl", requests),
        "parquet": write_parquet(directory / "requests.parquet", requests, row_group_size=300),
    }


def test_a_small_log_shows_every_run_with_its_id(logs: dict[str, Path]) -> None:
    six = logs["six"]
    result = invoke("audit", str(six))
    assert result.exit_code == 0, result.stderr
    assert re.search(r"┃ line ┃ +k ┃ accepted ┃ emitted ┃ id ┃", result.stdout)  # the rows' own id, unasked
    records = _records(six, "--id-field", "id")
    expected = [[str(r["line"]), str(r["k"]), str(r["accepted"]), str(r["emitted"]), str(r["id"])] for r in records]
    assert _runs_rows(result.stdout, six) == expected and len(expected) == 6
    assert "more run" not in result.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_the_first_screen_of_2000_runs_fits_50_lines(logs: dict[str, Path], columns: int) -> None:
    many = logs["many"]
    out = invoke_env({"COLUMNS": str(columns)}, "audit", str(many)).stdout
    lines = out.splitlines()
    assert len(lines) <= 50, (columns, len(lines))
    assert all(len(line) <= columns for line in lines)
    records = _records(many)[:10]
    assert [row[2] for row in _runs_rows(out, many)] == [str(record["accepted"]) for record in records]
    assert "… and 1,990 more runs: -o jsonl or -o csv writes all" in " ".join(out.split())


def test_json_has_the_first_runs_when_max_rows_is_given(logs: dict[str, Path]) -> None:
    path = logs["requests"]
    plain = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert "first_runs" not in plain  # by default -o json is the summary a file holds
    data = orjson.loads(invoke("audit", str(path), "-o", "json", "--max-rows", "4").stdout)
    keys = list(data)
    assert keys.index("first_runs") + 1 == keys.index("verdict") and keys[-1] == "state"
    records = _records(path, "--id-field", "request_id")
    assert data["first_runs"] == {"count": 2000, "shown": 4, "runs": records[:4]}  # the request id found unasked
    assert {key: value for key, value in data.items() if key != "first_runs"} == plain | {
        "provenance": data["provenance"]
    }


def test_a_pool_and_parquet_give_the_same_first_runs(logs: dict[str, Path]) -> None:
    previews = []
    for path, jobs in ((logs["requests"], "1"), (logs["requests"], "2"), (logs["parquet"], "1")):
        data = orjson.loads(invoke("audit", str(path), "-o", "json", "--max-rows", "700", "-j", jobs).stdout)
        runs = data["first_runs"]["runs"]
        assert data["first_runs"]["count"] == 2000 and len(runs) == 700  # across blocks and row groups
        previews.append([{key: value for key, value in run.items() if key != "source"} for run in runs])
    assert previews[0] == previews[1] == previews[2]
    assert previews[0][699]["request_id"] == "req-233"


def test_max_rows_zero_shows_no_runs(logs: dict[str, Path]) -> None:
    assert "Runs of" not in invoke("audit", str(logs["six"]), "--max-rows", "0").stdout


@given(
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=12),
    limit=st.integers(1, 20),
    data=st.data(),
)
def test_first_runs_add_in_input_order_and_stay_bounded(sizes: list[int], limit: int, data: st.DataObject) -> None:
    lines = list(range(1, sum(sizes) + 1))
    whole = FirstRuns.of_runs(limit, "log", lines, [3] * len(lines), [line % 4 for line in lines])
    parts = []
    start = 0
    for size in sizes:
        block = lines[start : start + size]
        parts.append(FirstRuns.of_runs(limit, "log", block, [3] * size, [line % 4 for line in block]))
        start += size
    # added in input order by any bracketing: the preview of the whole
    split = data.draw(st.integers(0, len(parts)))
    left = sum(parts[1:split], parts[0]) if split else None
    right = sum(parts[split + 1 :], parts[split]) if split < len(parts) else None
    total = left if right is None else right if left is None else left + right
    assert total == whole
    assert len(total.rows) == min(limit, len(lines)) and total.total == len(lines)


def test_ids_are_read_ahead_from_stdin_gzip_and_every_source_with_their_lines(tmp_path: Path) -> None:
    """The id that the reading does not carry is read at each source's first rows, on the stream the reader
    reads: from a pipe, through gzip, past blank lines, into the next source, with its own line numbers."""
    rows = [{"p": [0.9, 0.1], "q": [0.5, 0.5], "r": [0.1, 0.9], "id": f"run-{index}"} for index in range(3)]
    plain = b"\n\n" + b"\n".join(orjson.dumps(row) for row in rows) + b"\n"
    first = tmp_path / "first.jsonl.gz"
    first.write_bytes(gzip.compress(plain))
    second = write_jsonl(tmp_path / "second.jsonl", [{**row, "id": row["id"].upper()} for row in rows])
    data = orjson.loads(invoke("audit", str(first), str(second), "-o", "json", "--max-rows", "5").stdout)
    assert [(run["source"], run["line"], run["id"]) for run in data["first_runs"]["runs"]] == [
        (str(first), 3, "run-0"),
        (str(first), 4, "run-1"),
        (str(first), 5, "run-2"),
        (str(second), 1, "RUN-0"),
        (str(second), 2, "RUN-1"),
    ]
    piped = invoke("audit", "-", input=plain)
    assert [row[-1] for row in _runs_rows(piped.stdout, Path("<stdin>"))] == ["run-0", "run-1", "run-2"]
    assert _records(second, "--id-field", "id")[0]["id"] == "RUN-0"


def test_the_preview_has_a_ceiling(logs: dict[str, Path]) -> None:
    result = invoke("audit", str(logs["six"]), "--max-rows", "10001")
    assert result.exit_code == 2 and "--max-rows" in result.stderr and "10000" in result.stderr
    assert invoke("audit", str(logs["six"]), "--max-rows", "10000").exit_code == 0
