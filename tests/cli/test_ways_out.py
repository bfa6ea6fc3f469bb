"""Every input error a user can cause names its way out: the option, the command or the form that fixes it.

Each once said only what was wrong (`missing field 'p' (the row has keys: ...)`, `row is an array, not a
JSON object`, a cut gzip, `-o report.html` refused) and left the user to find the option in `--help`.
"""

from __future__ import annotations

import gzip
import json
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specaccept_cli.cli import ways_out
from specaccept_cli.cli.ways_out import SKIP
from specaccept_cli.errors import InputError, Problem, Reason, SpecacceptError, UsageError, Why
from specaccept_cli.pipeline.parallel import evaluate_source
from specaccept_cli.pipeline.request import ReadRequest
from specaccept_cli.read.formats import Kind, names
from specaccept_cli.read.sources import Source
from specaccept_cli.rule.batch import FieldSpec
from tests.helpers import invoke, run_process, write_jsonl

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


def test_a_parquet_file_given_to_follow_names_audit_without_follow(tmp_path: Path) -> None:
    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"p": [[0.5]], "q": [[0.6]], "r": [[0.1]]}), path)
    line = error_line("audit", "--follow", str(path))
    assert line.endswith("is Parquet: only text (JSONL or server output) can be followed; audit it without --follow")


def test_a_value_of_another_type_names_the_option_that_picks_the_field(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "rows.jsonl", [{**ROW, "p": 0.5}])
    line = error_line("audit", str(log))
    assert line.endswith(
        "'p' is 0.5, not a list of numbers; name the field that holds p with --p-field NAME "
        "(a dotted path reaches inside objects)"
    )


# --- the reason each way out is keyed on, set where the core raises the error ---------------------------

VLLM_LOG = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"


def _rows(tmp_path: Path, rows: list[object]) -> str:
    return str(write_jsonl(tmp_path / "rows.jsonl", rows))


def _raw(tmp_path: Path, data: bytes, name: str = "rows.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _parquet(tmp_path: Path, columns: dict[str, list[object]]) -> str:
    pq.write_table(pa.table(columns), tmp_path / "runs.parquet")
    return str(tmp_path / "runs.parquet")


def _cut_gzip(tmp_path: Path) -> str:
    whole = gzip.compress(b"".join(json.dumps(ROW).encode() + b"\n" for _ in range(5000)))
    return _raw(tmp_path, whole[: len(whole) // 2], "cut.jsonl.gz")


ENGINE_LINES = names(Kind.INTERVALS)[0]
# (what the user runs, in TMP_PATH; the reason and data the way out is keyed on). Every case of this file's tests.
REASONS: dict[str, tuple[Callable[[Path], list[str]], Why]] = {
    "missing p": (
        lambda tmp: [_rows(tmp, [{"target_prob": [0.5], "draft_prob": [0.6], "u": [0.1]}])],
        Why(Reason.MISSING_FIELD, "p"),
    ),
    "missing dotted q": (lambda tmp: [_rows(tmp, [ROW]), "--q-field", "spec.q"], Why(Reason.MISSING_FIELD, "spec.q")),
    "missing r": (lambda tmp: [_rows(tmp, [ROW]), "--r-field", "coin"], Why(Reason.MISSING_FIELD, "coin")),
    "missing tokens": (
        lambda tmp: [_rows(tmp, [ROW]), "--draft-tokens-field", "drafted", "--target-tokens-field", "target"],
        Why(Reason.MISSING_FIELD, "drafted"),
    ),
    "missing column": (
        lambda tmp: [_parquet(tmp, {"p": [[0.5]], "q": [[0.6]], "uniform": [[0.1]]})],
        Why(Reason.MISSING_FIELD, "r"),
    ),
    "p not a list": (lambda tmp: [_rows(tmp, [{**ROW, "p": 0.5}])], Why(Reason.WRONG_FIELD, "p")),
    "no object on the way": (
        lambda tmp: [_rows(tmp, [{**ROW, "spec": 3}]), "--q-field", "spec.q"],
        Why(Reason.WRONG_FIELD, "spec.q"),
    ),
    "column of another type": (
        lambda tmp: [_parquet(tmp, {"p": [0.5], "q": [[0.6]], "r": [[0.1]]})],
        Why(Reason.WRONG_FIELD, "p"),
    ),
    "an array row": (lambda tmp: [_raw(tmp, b"[1, 2, 3]\n")], Why(Reason.NOT_AN_OBJECT)),
    "no JSON": (lambda tmp: [_raw(tmp, b"p=0.5 q=0.6\n")], Why(Reason.NOT_JSON)),
    "a cut gzip": (lambda tmp: [_cut_gzip(tmp)], Why(Reason.CUT)),  # lines: checked against the message
    "nothing of the format": (
        lambda tmp: [_rows(tmp, [ROW]), "--format", ENGINE_LINES],
        Why(Reason.NOTHING_OF_FORMAT, ENGINE_LINES),
    ),
    "no summary": (lambda tmp: [_rows(tmp, [ROW]), "--baseline", _rows(tmp, [ROW])], Why(Reason.NOT_A_SUMMARY)),
    "no Parquet": (lambda tmp: [_raw(tmp, b"not parquet\n", "runs.parquet")], Why(Reason.BROKEN_PARQUET)),
    "engine lines clustered": (
        lambda tmp: [str(VLLM_LOG), "--cluster-field", "request_id"],
        Why(Reason.CLUSTERED_ENGINE),
    ),
    "Parquet followed": (
        lambda tmp: ["--follow", _parquet(tmp, {"p": [[0.5]], "q": [[0.6]], "r": [[0.1]]})],
        Why(Reason.PARQUET_FOLLOWED),
    ),
    "a group field no row has": (
        lambda tmp: [_rows(tmp, [{**ROW, "model": "m"}] * 3), "--group-by", "tenant"],
        Why(Reason.ABSENT_FIELD, "tenant"),
    ),
    "a cluster field no row has": (
        lambda tmp: [_rows(tmp, [{**ROW, "request_id": "r1"}] * 3), "--cluster-field", "tenant"],
        Why(Reason.ABSENT_FIELD, "tenant"),
    ),
    "a rule field naming no rule": (
        lambda tmp: [_rows(tmp, [{**ROW, "rule": "team-a"}])],
        Why(Reason.NOT_A_RULE, "rule"),
    ),
    "a rule field of a number": (lambda tmp: [_rows(tmp, [{**ROW, "rule": 3}])], Why(Reason.NOT_A_RULE, "rule")),
    "a moved rule field": (
        lambda tmp: [_rows(tmp, [{**ROW, "meta": {"verifier": "nope"}}]), "--rule-field", "meta.verifier"],
        Why(Reason.NOT_A_RULE, "meta.verifier"),
    ),
}


def raised(monkeypatch: pytest.MonkeyPatch, *args: str) -> SpecacceptError:
    """The error `audit ARGS` ends with, as the command line's boundary got it (run in this process)."""
    seen: list[SpecacceptError] = []
    real = ways_out.way_out

    def spy(error: SpecacceptError, meta: Mapping[str, object]) -> str | None:
        seen.append(error)
        return real(error, meta)

    monkeypatch.setattr(ways_out, "way_out", spy)
    result = invoke("audit", *args)
    assert result.exit_code == 2 and len(seen) == 1, result.stderr
    return seen[0]


@pytest.mark.parametrize("case", list(REASONS))
def test_every_error_a_way_out_answers_carries_its_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str
) -> None:
    """A raise site that loses its reason loses its way out silently: each is named here, with its data."""
    make, expected = REASONS[case]
    error = raised(monkeypatch, *make(tmp_path))
    assert error.why is not None, f"{case}: {error} carries no reason"
    if expected.reason is Reason.CUT:
        assert error.why.lines is not None and 0 < error.why.lines < 5000
        assert isinstance(error, InputError) and f" after {error.why.lines} lines (" in error.message
        expected = expected._replace(lines=error.why.lines)
    assert error.why == expected
    assert ways_out.way_out(error, {}) is not None or expected.reason in (
        Reason.MISSING_FIELD,
        Reason.WRONG_FIELD,
        Reason.ABSENT_FIELD,
    )


def test_words_alone_name_no_way_out() -> None:
    """The words of an error are read for no reason: the same words without one get only a bad row's way out."""
    typed = InputError("x.jsonl", 3, Problem("row is an array, not a JSON object", Why(Reason.NOT_AN_OBJECT)))
    untyped = InputError("x.jsonl", 3, "row is an array, not a JSON object")
    assert typed.why == Why(Reason.NOT_AN_OBJECT) and type(typed.message) is str
    assert ways_out.way_out(typed, {}) == f"{ways_out.ONE_OBJECT_PER_LINE}; {SKIP}"
    assert ways_out.way_out(untyped, {}) == SKIP
    assert (
        ways_out.way_out(InputError("x.jsonl", None, "compressed stream is truncated or corrupt after 3 lines"), {})
        is None
    )


def test_an_error_pickled_keeps_its_reason() -> None:
    cut = InputError(
        "x.gz", None, "compressed stream is truncated or corrupt after 7 lines (x)", why=Why(Reason.CUT, lines=7)
    )
    row = InputError(
        "x.jsonl", 2, Problem("missing field 'p' (the row has keys: u)", Why(Reason.MISSING_FIELD, "p")), raw=b"{}"
    )
    absent = UsageError(Problem("no row has the field 'tenant' (a row has: p)", Why(Reason.ABSENT_FIELD, "tenant")))
    for error in (cut, row, absent):
        again = pickle.loads(pickle.dumps(error))
        assert (type(again), str(again), again.why) == (type(error), str(error), error.why)


# Row problems met in a worker process (`--jobs 2`): each crosses back with its reason.
WORKER_ROWS = {
    "missing p": ({"q": [0.6], "r": [0.1]}, Why(Reason.MISSING_FIELD, "p")),
    "p not a list": ({**ROW, "p": 0.5}, Why(Reason.WRONG_FIELD, "p")),
    "an array row": ([1, 2, 3], Why(Reason.NOT_AN_OBJECT)),
    "a rule field naming no rule": ({**ROW, "rule": "team-a"}, Why(Reason.NOT_A_RULE, "rule")),
}


@pytest.mark.parametrize("case", list(WORKER_ROWS))
def test_jobs_2_gives_the_way_out_of_one_process(tmp_path: Path, case: str) -> None:
    bad, expected = WORKER_ROWS[case]
    path = write_jsonl(tmp_path / "rows.jsonl", [ROW] * 400 + [bad] + [ROW] * 20)
    meta = {ways_out.FIELD_OPTIONS: ways_out.field_options({"--p-field": "p", "--q-field": "q", "--r-field": "r"})}

    def fail(error: InputError) -> None:
        raise error

    found = []
    for jobs in (1, 2):  # small blocks: the bad row is read in a worker process, far from the file's start
        request = ReadRequest(fields=FieldSpec(), jobs=jobs)
        with pytest.raises(InputError) as caught:
            for _ in evaluate_source(
                Source(str(path), path, path.stat().st_size), request, fail, block_bytes=512, blocks_per_task=1
            ):
                pass
        found.append((caught.value.line, caught.value.why, ways_out.with_way_out(caught.value, meta)))
    assert found[0] == found[1]
    assert found[0][:2] == (401, expected)
    alone, pooled = (invoke("audit", str(path), "--jobs", jobs) for jobs in ("1", "2"))
    assert alone.exit_code == pooled.exit_code == 2
    assert pooled.stderr == alone.stderr and found[0][2] in alone.stderr
