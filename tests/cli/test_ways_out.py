"""Every input error a user can cause names its way out: the option, the command or the form that fixes it.

Each once said only what was wrong (`missing field 'p' (the row has keys: ...)`, `row is an array, not a
JSON object`, a cut gzip, `-o report.html` refused) and left the user to find the option in `--help`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specaccept_cli.read.formats import Kind, names
from tests.helpers import run_process, write_jsonl

ROW = {"p": [0.5, 0.9], "q": [0.6, 0.3], "r": [0.1, 0.2]}


def error_line(*args: str, input: bytes | None = None) -> str:
    done = run_process(*args, input=input)
    text = done.stderr.decode()
    assert done.returncode == 2, text
    assert "Traceback" not in text
    return text.splitlines()[-1]


def test_a_missing_p_names_the_option_that_picks_the_field(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "renamed.jsonl", [{"target_prob": [0.5], "draft_prob": [0.6], "u": [0.1]}])
    line = error_line("audit", str(log))
    assert line.startswith(f"specaccept: {log}:1: missing field 'p' (the row has keys: target_prob, draft_prob, u); ")
    assert line.endswith("name the field that holds p with --p-field NAME (a dotted path reaches inside objects)")


@pytest.mark.parametrize(
    ("options", "option"),
    [
        (("--q-field", "spec.q"), "--q-field"),  # a dotted path the rows do not have
        (("--r-field", "coin"), "--r-field"),
        (("--draft-tokens-field", "drafted", "--target-tokens-field", "target"), "--draft-tokens-field"),
    ],
)
def test_every_field_option_is_named_for_its_own_missing_field(
    tmp_path: Path, options: tuple[str, ...], option: str
) -> None:
    log = write_jsonl(tmp_path / "rows.jsonl", [ROW])
    line = error_line("audit", str(log), *options)
    assert f"; name the field that holds {option[2:-6].replace('-', ' ')} with {option} NAME" in line, line


def test_a_parquet_file_without_the_column_names_the_option(tmp_path: Path) -> None:
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"p": [[0.5]], "q": [[0.6]], "uniform": [[0.1]]}), path)
    line = error_line("audit", str(path))
    assert "missing column 'r'" in line and line.endswith("with --r-field NAME (a dotted path reaches inside objects)")


@pytest.mark.parametrize(("row", "what"), [(b"[1, 2, 3]\n", "row is an array"), (b"p=0.5 q=0.6\n", "invalid JSON")])
def test_a_row_that_is_no_json_object_says_one_object_per_line(tmp_path: Path, row: bytes, what: str) -> None:
    log = tmp_path / "rows.jsonl"
    log.write_bytes(row)
    line = error_line("audit", str(log))
    assert what in line
    assert line.endswith(
        "; the input must hold one JSON object per line (JSONL); --on-error skip reads past bad rows and counts them"
    )


def test_a_cut_gzip_names_on_error_skip_and_how_many_rows_it_keeps(tmp_path: Path) -> None:
    rows = [ROW] * 5000
    whole = gzip.compress(b"".join(json.dumps(row).encode() + b"\n" for row in rows))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    line = error_line("audit", str(cut))
    kept = int(line.split("--on-error skip keeps the ")[1].split(" lines before the cut")[0].replace(",", ""))
    assert 0 < kept < 5000
    # What it promises is what it does: those rows are the runs read with --on-error skip.
    done = run_process("audit", str(cut), "--on-error", "skip", "-o", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["runs"] == kept
    assert summary["skipped_sources"] == 1


def test_a_bad_row_with_fail_names_on_error_skip(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "rows.jsonl", [ROW, {"p": [0.5], "q": [0.6, 0.7], "r": [0.1]}])
    line = error_line("audit", str(log))
    assert ":2: p, q and r have different lengths" in line
    assert line.endswith("; --on-error skip reads past bad rows and counts them")


@pytest.mark.parametrize("command", ["audit", "watch"])
def test_an_html_file_given_to_o_names_html_and_report(command: str) -> None:
    line = error_line(command, "-o", "report.html", "x")
    assert "'report.html' is not one of" in line
    assert line.endswith("write an HTML report with --html report.html, or with specaccept report -o report.html")


def test_a_file_name_given_to_o_names_the_form_and_a_redirection() -> None:
    line = error_line("audit", "-o", "runs.csv", "x")
    assert line.endswith("-o picks what goes to stdout, not a file: -o csv > runs.csv")


def test_a_format_that_finds_nothing_names_format_auto(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "rows.jsonl", [ROW])
    engine_lines = names(Kind.INTERVALS)[0]
    line = error_line("audit", str(log), "--format", engine_lines)
    assert f"no {engine_lines} metrics lines among its 1 lines" in line
    assert line.endswith(
        "; --format auto detects what the file holds; --format names another form (audit --help lists them)"
    )


def test_a_baseline_that_is_no_summary_says_what_writes_one(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "rows.jsonl", [ROW])
    line = error_line("audit", str(log), "--baseline", str(log))
    assert line.endswith("; a summary file is what audit --summary-out (or -o json) writes")


def test_a_parquet_column_of_another_type_names_the_option(tmp_path: Path) -> None:
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"p": [0.5], "q": [[0.6]], "r": [[0.1]]}), path)
    line = error_line("audit", str(path))
    assert "column 'p' is double, not a list of numbers; name the field that holds p with --p-field NAME" in line


def test_a_file_that_is_no_parquet_names_on_error_skip(tmp_path: Path) -> None:
    path = tmp_path / "runs.parquet"
    path.write_bytes(b"not parquet\n")
    line = error_line("audit", str(path))
    assert line.endswith("; --on-error skip reads the other sources and counts this one as skipped")


def test_engine_lines_with_a_cluster_field_name_the_option_to_drop() -> None:
    log = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"
    line = error_line("audit", str(log), "--cluster-field", "request_id")
    assert line.endswith(
        "so a cluster field has nothing to cluster; audit per-run logs for cluster-robust intervals; "
        "audit it without --cluster-field"
    )


def test_a_message_that_names_its_way_out_gets_no_second_one() -> None:
    log = Path(__file__).resolve().parents[1] / "read" / "engine_logs" / "vllm-v0-metrics.prom"
    line = error_line("audit", str(log))
    assert line.endswith("audit the server's 'Speculative metrics' log lines instead")


@pytest.mark.parametrize("option", ["--group-by", "--cluster-field"])
def test_an_extra_field_no_row_has_names_the_option_that_named_it(tmp_path: Path, option: str) -> None:
    log = write_jsonl(tmp_path / "rows.jsonl", [{**ROW, "model": "m", "request_id": "r1"}] * 3)
    line = error_line("audit", str(log), option, "tenant")  # nothing near it: no "did you mean"
    assert line.startswith("specaccept: no row has the field 'tenant'")
    assert line.endswith(
        f"; {option} tenant names a field no row has: give one of the row's keys (a dotted path reaches inside)"
    )


@pytest.mark.parametrize("value", ["team-a", 3])
def test_a_rule_field_naming_no_rule_names_rule_field_as_the_way_out(tmp_path: Path, value: object) -> None:
    """Rows whose own `rule` field means something else: the error says how to point at another field, or none."""
    log = write_jsonl(tmp_path / "teams.jsonl", [{**ROW, "rule": value}])
    line = error_line("audit", str(log))
    assert f"{log}:1: 'rule' is " in line and "not a rule" in line
    assert "--rule-field NAME names the field that holds the verification rule" in line
    assert "--rule-field none" in line
    moved = write_jsonl(tmp_path / "moved.jsonl", [{**ROW, "meta": {"verifier": "nope"}}])
    line = error_line("audit", str(moved), "--rule-field", "meta.verifier")
    assert "'meta.verifier' is 'nope', not a rule this audit knows" in line and "--rule-field NAME" in line
