"""Typos and empty results fail loudly: a field no row has, nothing valid read, unwritable outputs, Ctrl-C, wording."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import orjson
import pytest

from specaccept_cli.cli.ways_out import SKIP
from tests.helpers import FIRST_EXAMPLE, MODEL_ROWS, invoke, invoke_env, write_jsonl


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_group_by_a_field_no_row_has_names_it_and_the_closest_keys(tmp_path: Path, jobs: str) -> None:
    path = write_jsonl(tmp_path / "models.jsonl", MODEL_ROWS)
    result = invoke("audit", str(path), "--group-by", "modle", "-j", jobs)
    assert result.exit_code == 2
    assert result.stderr == (
        "specaccept: no row has the field 'modle'; did you mean 'model'? (a row has: p, q, r, model)\n"
    )


def test_id_field_no_row_has_fails_in_every_output_form(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "ids.jsonl", [{**FIRST_EXAMPLE, "request_id": "r-1"}])
    for output in ("jsonl", "csv", "table", "json"):
        result = invoke("audit", str(path), "--id-field", "requestid", "-o", output)
        assert result.exit_code == 2, output
        assert "no row has the field 'requestid'; did you mean 'request_id'?" in result.stderr


def test_nested_field_typo_suggests_the_sibling_path(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "nested.jsonl", [{**FIRST_EXAMPLE, "meta": {"model": "a", "zone": "eu"}}])
    result = invoke("audit", str(path), "--group-by", "meta.modle")
    assert result.exit_code == 2
    assert "did you mean 'meta.model'? (a row has: meta.model, meta.zone)" in result.stderr


def test_a_field_that_some_row_has_is_no_typo(tmp_path: Path) -> None:
    """Only a field that NO row has fails: one late row, an explicit null, or another source is enough."""
    rows: list[dict[str, object]] = [dict(FIRST_EXAMPLE) for _ in range(30_000)]  # 3 MB: more than one block
    rows[-1] = {**FIRST_EXAMPLE, "model": "late"}
    late = write_jsonl(tmp_path / "late.jsonl", rows)
    for jobs in ("1", "2"):
        result = invoke("audit", str(late), "--group-by", "model", "-o", "json", "-j", jobs)
        assert result.exit_code == 0, result.stderr
        assert orjson.loads(result.stdout)["groups"].keys() == {"null", "late"}
    nulls = write_jsonl(tmp_path / "nulls.jsonl", [{**FIRST_EXAMPLE, "model": None}])
    assert invoke("audit", str(nulls), "--group-by", "model").exit_code == 0
    bare = write_jsonl(tmp_path / "bare.jsonl", [FIRST_EXAMPLE])
    named = write_jsonl(tmp_path / "named.jsonl", [{**FIRST_EXAMPLE, "model": "a"}])
    assert invoke("audit", str(bare), str(named), "--group-by", "model").exit_code == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert invoke("audit", str(empty), "--group-by", "model").exit_code == 0  # no row to judge by


def test_messages_name_values_plainly(tmp_path: Path) -> None:
    result = invoke("audit", "-", "--min-alpha", "abc", input=b"")
    assert result.exit_code == 2 and "'abc' is not a valid number." in result.stderr
    result = invoke("audit", "-", "--max-rows", "x", input=b"")
    assert result.exit_code == 2 and "'x' is not a valid integer." in result.stderr
    nested = write_jsonl(tmp_path / "nested.jsonl", [{"p": [0.5], "q": [0.5], "r": [[0.1]]}])
    assert invoke("audit", str(nested)).stderr == f"specaccept: {nested}:1: r[0] is an array, not a number; {SKIP}\n"
    row = write_jsonl(tmp_path / "object.jsonl", [{"p": [0.5], "q": {"a": 1}, "r": [0.1]}])
    assert invoke("audit", str(row)).stderr == (
        f"specaccept: {row}:1: 'q' is an object, not a list of numbers; "
        "name the field that holds q with --q-field NAME (a dotted path reaches inside objects)\n"
    )


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(256)) * 8,  # a binary file
        gzip.compress(b'{"p": [0.5], "q": [0.5], "r": [0.1]}\n' * 100)[:12],  # a gzip stream cut after its header
    ],
    ids=["binary", "cut-gzip"],
)
def test_skip_with_no_valid_run_exits_1_unless_allowed(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_bytes(data)
    result = invoke("audit", str(path), "--on-error", "skip", "-o", "json")
    assert result.exit_code == 1
    [line] = [line for line in result.stderr.splitlines() if line.startswith("specaccept:")]
    assert line.startswith("specaccept: no valid run: skipped ")
    assert line.endswith("(--on-error skip; --allow-empty accepts that)")
    assert orjson.loads(result.stdout)["runs"] == 0  # the output is still written first
    allowed = invoke("audit", str(path), "--on-error", "skip", "--allow-empty", "-o", "json")
    assert allowed.exit_code == 0


def test_an_empty_input_is_still_no_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    assert invoke("audit", str(empty), "--on-error", "skip").exit_code == 0
    some = write_jsonl(tmp_path / "some.jsonl", [FIRST_EXAMPLE])
    assert invoke("audit", str(some), "--on-error", "skip").exit_code == 0
    misuse = invoke("audit", str(some), "--allow-empty")
    assert misuse.exit_code == 2 and "--allow-empty applies to --on-error skip" in misuse.stderr


def test_outputs_are_checked_before_the_input_is_read(tmp_path: Path) -> None:
    """A bad row on line 1 would stop the audit: the output's error comes first, so nothing was read."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"not json\n")
    missing = tmp_path / "no-such-directory" / "summary.json"
    result = invoke("audit", str(bad), "--summary-out", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"specaccept: cannot write --summary-out {missing}: No such file or directory\n"
    html = tmp_path / "no-such-directory" / "report.html"
    result = invoke("audit", str(bad), "--html", str(html))
    assert result.stderr == f"specaccept: cannot write HTML report {html}: No such file or directory\n"
    step = tmp_path / "no-such-directory" / "step-summary.md"
    result = invoke_env({"GITHUB_STEP_SUMMARY": str(step)}, "audit", str(bad), "--github")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"specaccept: cannot append to $GITHUB_STEP_SUMMARY ({step})")
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    readonly.chmod(0o555)
    if not os.access(readonly, os.W_OK):  # root may write anywhere
        result = invoke("audit", str(bad), "--summary-out", str(readonly / "s.json"))
        assert "Permission denied" in result.stderr
