"""Messages that name the likely mistake: CSV given as input, a saved summary given to `audit`, a command
misspelt; a gzipped server log on stdin read as the server log it is; `report` saying where it wrote.

Each once said "invalid JSON at column N" (or nothing) with no hint.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.helpers import run_process

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOG = str(EXAMPLES / "serving-logs.jsonl.gz")

FORMATS = "JSONL rows of (p, q, r), Parquet, an engine's server log or payloads, or a Prometheus scrape"


def one_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture(scope="module")
def own_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `audit -o csv` writes: the per-run table, an output only."""
    done = run_process("audit", str(EXAMPLES / "serving-logs.jsonl.gz"), "-o", "csv", "-q")
    assert done.returncode == 0
    path = tmp_path_factory.mktemp("csv") / "runs.csv"
    path.write_bytes(done.stdout)
    assert done.stdout.startswith(b"source,line,k,accepted,emitted")
    return path


def test_the_tools_own_csv_is_refused_as_csv_naming_the_input_formats(own_csv: Path) -> None:
    done = run_process("audit", str(own_csv))
    assert done.returncode == 2
    assert (
        one_line(done.stderr)
        == f"specaccept: {own_csv}: CSV is not an input (-o csv is an output only): give {FORMATS}"
    )


@pytest.mark.parametrize("name", ["rows.txt", "rows"])
def test_csv_under_another_name_or_on_stdin_is_known_by_its_header(tmp_path: Path, own_csv: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"p,q,r\n0.5,0.4,0.1\n0.2,0.9,0.3\n")
    for argument, stdin in ((str(path), None), ("-", own_csv.read_bytes())):
        done = run_process("audit", argument, input=stdin)
        assert done.returncode == 2
        line = one_line(done.stderr)
        assert "this looks like CSV (its first line is " in line and "CSV is not an input" in line, line
        assert line.endswith(FORMATS)


def test_a_jsonl_file_with_a_broken_first_line_is_still_named_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"p": [0.5], "q": [0.4], "r": [0.1]\n{"p": [0.5], "q": [0.4], "r": [0.1]}\n')
    done = run_process("audit", str(path))
    assert done.returncode == 2 and f"{path}:1: invalid JSON at column" in one_line(done.stderr)


@pytest.mark.parametrize("compressed", [False, True])
def test_a_saved_summary_given_to_audit_names_baseline_diff_and_report(tmp_path: Path, compressed: bool) -> None:
    path = tmp_path / ("summary.json.gz" if compressed else "summary.json")
    made = run_process("audit", str(EXAMPLES / "serving-logs.jsonl.gz"), "-q", "--summary-out", str(path))
    assert made.returncode == 0
    for argument, stdin in ((str(path), None), ("-", path.read_bytes())):
        done = run_process("audit", argument, input=stdin)
        assert done.returncode == 2
        line = one_line(done.stderr)
        assert "this is a saved summary (--summary-out, -o json), not a log" in line
        assert all(word in line for word in ("--baseline", "specaccept diff", "specaccept report --summary")), line


@pytest.mark.parametrize("name", ["vllm-server.log", "vllm-payloads.jsonl"])
def test_a_gzipped_server_log_on_stdin_reads_as_the_file_does(name: str) -> None:
    """Compressed stdin is looked at after decompression, as a compressed file is."""
    plain = EXAMPLES / name
    from_file = run_process("audit", str(plain), "-o", "json", "-q")
    from_stdin = run_process("audit", "-", "-o", "json", "-q", input=gzip.compress(plain.read_bytes()))
    assert from_file.returncode == from_stdin.returncode == 0, from_stdin.stderr.decode()
    file_summary, stdin_summary = json.loads(from_file.stdout), json.loads(from_stdin.stdout)
    assert stdin_summary["runs"] == file_summary["runs"] > 0
    engine = file_summary["engine"]
    assert engine["engines"] and stdin_summary["engine"]["engines"] == engine["engines"]
    assert stdin_summary["accepted_histogram"] == file_summary["accepted_histogram"]
    assert stdin_summary["alpha"] == file_summary["alpha"]


def test_gzipped_jsonl_on_stdin_is_read_whole_by_one_process_and_by_two() -> None:
    data = (EXAMPLES / "serving-logs.jsonl.gz").read_bytes()
    for jobs in ("1", "2"):
        done = run_process("audit", "-", "-o", "json", "-q", "-j", jobs, input=data)
        assert done.returncode == 0 and json.loads(done.stdout)["runs"] == 2000


@pytest.mark.parametrize(("typed", "meant"), [("audti", "audit"), ("mrege", "merge"), ("wach", "watch")])
def test_a_misspelt_command_gets_the_nearest_name(typed: str, meant: str) -> None:
    done = run_process(typed, "x")
    assert done.returncode == 2
    assert f"Error: No such command '{typed}'. Did you mean '{meant}'?" in done.stderr.decode()


def test_a_command_like_no_other_gets_no_guess() -> None:
    done = run_process("zzzzzz")
    assert done.returncode == 2
    assert "No such command 'zzzzzz'." in done.stderr.decode() and "Did you mean" not in done.stderr.decode()


def test_report_says_where_it_wrote_on_stderr_and_leaves_stdout_empty(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = run_process("report", str(EXAMPLES / "serving-logs.jsonl.gz"), "-o", str(page))
    assert done.returncode == 0 and done.stdout == b""
    assert one_line(done.stderr) == f"wrote the HTML report to {page} ({page.stat().st_size:,} bytes)"
    summary = tmp_path / "s.json"
    assert run_process("audit", LOG, "-q", "--summary-out", str(summary)).returncode == 0
    done = run_process("report", "--summary", str(summary), "-o", str(page))
    assert done.returncode == 0 and one_line(done.stderr).startswith(f"wrote the HTML report to {page} (")
