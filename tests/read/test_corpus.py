"""The corpus of bad inputs (tests/corpus, made by make_corpus.py): one file per class of problem.

For each: `--on-error fail` exits 2 with one line `FILE:LINE: what`, naming the right line;
`--on-error skip` reads everything else, and runs + skipped_rows equals the non-blank lines."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    CORPUS,
    invoke,
    table_column,
)

# file, line named (None: the source as a whole), words the message holds
ROW_CLASSES = [
    ("invalid_json.jsonl", 3, ["invalid JSON at column 46: "]),  # after the colon: orjson's words
    ("not_an_object.jsonl", 3, ["row is an array, not a JSON object"]),
    ("missing_field.jsonl", 3, ["missing field 'p'", "the row has keys: id, target_p, q, r"]),
    ("not_a_list.jsonl", 3, ["'p' is 0.5, not a list of numbers"]),
    ("non_numeric.jsonl", 3, ["p[1] is the string '0.7', not a number"]),
    ("nan.jsonl", 3, ["NaN or Infinity at column 13 is not valid JSON"]),
    ("infinity.jsonl", 3, ["number at column 20 is too large for a double (it would be Infinity)"]),
    ("different_lengths.jsonl", 3, ["p, q and r have different lengths (2, 1, 2)"]),
    ("out_of_range.jsonl", 3, ["r[2] = 1.5 is out of range (r must be in [0, 1])"]),
    ("q_zero.jsonl", 3, ["q[1] = 0.0 is zero: a drafted token always has q > 0"]),
    ("invalid_utf8.jsonl", 3, ["line is not valid UTF-8 (byte 0xe9 at column 12)"]),
    ("overlong_line.jsonl", 3, ["line is longer than 300 bytes (the max_line_bytes limit)"]),
    ("nan_value.parquet", 2, ["p[1] = nan is not a finite number"]),
]


SOURCE_CLASSES = [
    # file, words, runs read before the failure
    ("truncated.jsonl.gz", ["compressed stream is truncated or corrupt after 126 lines"], 126),
    ("not_parquet.parquet", ["is not a Parquet file, or its footer is damaged ("], 0),  # then pyarrow's words
    ("missing_column.parquet", ["missing column 'r' (columns: p, q, u)"], 0),
]


OPTIONS = ["--max-line-bytes", "300", "-o", "json"]


def _nonblank_rows(path: Path) -> int:
    """Non-blank lines as the reader counts them (JSONL), or rows (Parquet)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    data = path.read_bytes()
    return sum(1 for line in data.split(b"\n") if line and not line.isspace())


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize(("name", "line", "words"), ROW_CLASSES)
def test_bad_row_fails_naming_file_and_line(name: str, line: int, words: list[str]) -> None:
    path = CORPUS / name
    result = invoke("audit", str(path), *OPTIONS)
    assert result.exit_code == 2
    message = _one_error_line(result.stderr)
    assert message.startswith(f"specaccept: {path}:{line}: ")
    for word in words:
        assert word in message


@pytest.mark.parametrize(("name", "line", "words"), ROW_CLASSES)
def test_bad_row_is_skipped_and_counted(name: str, line: int, words: list[str]) -> None:
    path = CORPUS / name
    result = invoke("audit", str(path), *OPTIONS, "--on-error", "skip")
    assert result.exit_code == 0
    summary = orjson.loads(result.stdout)
    assert summary["skipped_rows"] == 1 and summary["skipped_sources"] == 0
    assert summary["runs"] == _nonblank_rows(path) - 1
    assert summary["runs"] + summary["skipped_rows"] == _nonblank_rows(path)
    [error] = summary["errors"]
    assert error["source"] == str(path) and error["line"] == line
    assert all(word in error["message"] for word in words)
    # the stderr table names it too, however narrow the terminal and long the path (the name may fold)
    assert f"{path.name}:{line}" in table_column(result.stderr, 0) and "Skipped 1 bad row" in result.stderr


@pytest.mark.parametrize(("name", "words", "runs"), SOURCE_CLASSES)
def test_bad_source_fails_naming_the_file(name: str, words: list[str], runs: int) -> None:
    path = CORPUS / name
    result = invoke("audit", str(path), *OPTIONS)
    assert result.exit_code == 2
    message = _one_error_line(result.stderr)
    assert message.startswith(f"specaccept: {path}: ")
    for word in words:
        assert word in message


@pytest.mark.parametrize(("name", "words", "runs"), SOURCE_CLASSES)
def test_bad_source_is_skipped_and_the_next_is_read(name: str, words: list[str], runs: int) -> None:
    """Skip mode abandons the rest of a broken source, counts it, keeps its good rows, and goes on."""
    path = CORPUS / name
    result = invoke("audit", str(path), str(CORPUS / "q_zero.jsonl"), *OPTIONS, "--on-error", "skip")
    assert result.exit_code == 0
    summary = orjson.loads(result.stdout)
    assert summary["skipped_sources"] == 1 and summary["skipped_rows"] == 1
    assert summary["runs"] == runs + 3
    first = summary["errors"][0]
    assert first["source"] == str(path) and first["line"] is None
    assert all(word in first["message"] for word in words)
    assert "1 unreadable source" in result.stderr


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_path_that_does_not_exist_is_exit_2_in_any_mode(mode: str) -> None:
    missing = CORPUS / "no_such_file.jsonl"
    result = invoke("audit", str(missing), "--on-error", mode)
    assert result.exit_code == 2
    assert _one_error_line(result.stderr) == f"specaccept: {missing}: no such file or directory"


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_directory_without_parquet_is_exit_2_in_any_mode(mode: str) -> None:
    directory = CORPUS / "no_parquet_dir"
    result = invoke("audit", str(directory), "--on-error", mode)
    assert result.exit_code == 2
    assert _one_error_line(result.stderr) == f"specaccept: {directory}: directory holds no .parquet or .jsonl files"


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_unreadable_file(mode: str) -> None:
    """/proc/self/mem exists but reading its first byte is an I/O error: an unreadable source."""
    result = invoke("audit", "/proc/self/mem", str(CORPUS / "q_zero.jsonl"), "-o", "json", "--on-error", mode)
    if mode == "fail":
        assert result.exit_code == 2
        assert _one_error_line(result.stderr) == "specaccept: /proc/self/mem: cannot read: Input/output error"
        return
    alone = invoke("audit", "/proc/self/mem", "-o", "json", "--on-error", mode)
    assert alone.exit_code == 1 and "Skipped 1 unreadable source" in alone.stderr  # nothing valid was read
    assert "specaccept: no valid run: skipped 1 unreadable source (" in alone.stderr
    assert invoke("audit", "/proc/self/mem", "-o", "json", "--on-error", mode, "--allow-empty").exit_code == 0
    assert result.exit_code == 0
    summary = orjson.loads(result.stdout)
    assert (summary["runs"], summary["skipped_rows"], summary["skipped_sources"]) == (3, 1, 1)
    assert "cannot read: Input/output error" in result.stderr


@pytest.mark.parametrize("name", ["empty.jsonl", "blank_lines.jsonl", "empty.parquet"])
@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_empty_input_is_zero_runs_and_exit_0(name: str, output: str, mode: str) -> None:
    result = invoke("audit", str(CORPUS / name), "-o", output, "--on-error", mode)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    if output == "json":
        summary = orjson.loads(result.stdout)
        assert summary["runs"] == 0 and summary["skipped_rows"] == 0 and summary["errors"] == []
    elif output == "jsonl":
        assert result.stdout == ""
    elif output == "csv":
        assert result.stdout == "source,line,k,accepted,emitted\n"
    elif output == "markdown":
        assert "| runs | 0 |" in result.stdout
    else:
        assert "runs" in result.stdout and "—" in result.stdout


def test_empty_stdin_is_zero_runs() -> None:
    result = invoke("audit", "-", "-o", "json", input=b"")
    assert result.exit_code == 0
    assert orjson.loads(result.stdout)["runs"] == 0


def test_whole_corpus_in_one_skip_run_adds_up() -> None:
    """Every file at once: each bad row counted once, each broken source once, the rest read."""
    names = [name for name, _, _ in ROW_CLASSES] + [name for name, _, _ in SOURCE_CLASSES]
    paths = [str(CORPUS / name) for name in names]
    result = invoke("audit", *paths, *OPTIONS, "--on-error", "skip")
    assert result.exit_code == 0
    summary = orjson.loads(result.stdout)
    assert summary["skipped_rows"] == len(ROW_CLASSES)
    assert summary["skipped_sources"] == len(SOURCE_CLASSES)
    row_runs = sum(_nonblank_rows(CORPUS / name) - 1 for name, _, _ in ROW_CLASSES)
    assert summary["runs"] == row_runs + sum(runs for _, _, runs in SOURCE_CLASSES)
    assert len(summary["errors"]) == len(ROW_CLASSES) + len(SOURCE_CLASSES)  # 16 <= 20: all kept, in order
    assert [error["source"] for error in summary["errors"]] == paths
    assert "Skipped 13 bad rows and 3 unreadable sources" in result.stderr
