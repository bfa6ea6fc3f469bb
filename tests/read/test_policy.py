"""The error policy: fail raises, skip counts, keeps the first errors and quarantines the raw lines."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.summary.state import Summary
from tests.helpers import (
    CORPUS,
    FIRST_EXAMPLE,
    invoke,
    run_process,
    write_jsonl,
)


@given(st.lists(st.booleans(), max_size=60), st.integers(0, 60))
def test_policy_on_split_input_merges_to_the_policy_on_the_whole(bad: list[bool], cut: int) -> None:
    """Skipping over two halves and adding the summaries = skipping over the whole."""

    def run(flags: list[bool], first: int) -> Summary:
        policy = ErrorPolicy("skip")
        for offset, is_bad in enumerate(flags):
            if is_bad:
                policy(InputError("s", first + offset, "bad"))
        return Summary(
            skipped_rows=policy.skipped_rows, skipped_sources=policy.skipped_sources, errors=tuple(policy.errors)
        )

    assert run(bad[:cut], 1) + run(bad[cut:], 1 + len(bad[:cut])) == run(bad, 1)


def test_fail_policy_raises_and_skip_policy_quarantines_raw_lines() -> None:
    error = InputError("s", 3, "bad", raw=b'{"p": [NaN]}')
    with pytest.raises(InputError):
        ErrorPolicy("fail")(error)
    sink = io.BytesIO()
    policy = ErrorPolicy("skip", sink)
    policy(error)
    policy(InputError("s", 4, "line is longer than 10 bytes"))  # an overlong line has no bytes kept
    policy.source_failed(InputError("t.gz", None, "compressed stream is truncated"))
    assert sink.getvalue() == b'{"p": [NaN]}\n'
    assert (policy.skipped_rows, policy.skipped_sources, policy.skipped) == (2, 1, 3)


def test_quarantine_holds_the_raw_lines_exactly(tmp_path: Path) -> None:
    corpus = CORPUS
    names = ["invalid_utf8.jsonl", "nan.jsonl", "q_zero.jsonl", "truncated.jsonl.gz"]
    quarantine = tmp_path / "bad.jsonl"
    args = [str(corpus / name) for name in names]
    result = invoke("audit", *args, "-o", "json", "--on-error", "skip", "--quarantine", str(quarantine))
    assert result.exit_code == 0
    raw = [(corpus / name).read_bytes().split(b"\n")[2] for name in names[:3]]
    assert quarantine.read_bytes() == b"".join(line + b"\n" for line in raw)  # a broken source has no line
    assert orjson.loads(result.stdout)["skipped_rows"] == 3


def test_quarantine_is_written_even_when_empty_and_not_left_half_done(tmp_path: Path) -> None:
    quarantine = tmp_path / "bad.jsonl"
    good = write_jsonl(tmp_path / "good.jsonl", [FIRST_EXAMPLE])
    assert invoke("audit", str(good), "--on-error", "skip", "--quarantine", str(quarantine)).exit_code == 0
    assert quarantine.read_bytes() == b""
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".specaccept-")] == []


@pytest.mark.parametrize("option", [["--max-errors", "3"], ["--quarantine", "q.jsonl"]])
def test_skip_only_options_need_skip(option: list[str]) -> None:
    result = invoke("audit", "-", *option, input=b"")
    assert result.exit_code == 2
    assert f"{option[0]} applies to --on-error skip" in result.stderr


@pytest.mark.parametrize(("limit", "status"), [("0", 1), ("1", 1), ("2", 0)])
def test_max_errors_is_a_gate(tmp_path: Path, limit: str, status: int) -> None:
    corpus = CORPUS
    args = [str(corpus / "nan.jsonl"), str(corpus / "q_zero.jsonl"), "-o", "json", "--on-error", "skip"]
    result = invoke("audit", *args, "--max-errors", limit)
    assert result.exit_code == status
    assert orjson.loads(result.stdout)["skipped_rows"] == 2  # the output is complete either way
    if status:
        assert result.stderr.splitlines()[-1] == f"specaccept: skipped 2 bad rows: more than --max-errors {limit}"


def test_many_errors_keep_the_first_twenty(tmp_path: Path) -> None:
    rows = b"".join(b'{"p": [0.5], "q": [0], "r": [0.%d]}\n' % i for i in range(25))
    path = tmp_path / "many.jsonl"
    path.write_bytes(rows + orjson.dumps(FIRST_EXAMPLE) + b"\n")
    result = invoke("audit", str(path), "-o", "json", "--on-error", "skip")
    summary = orjson.loads(result.stdout)
    assert (summary["runs"], summary["skipped_rows"]) == (1, 25)
    assert [error["line"] for error in summary["errors"]] == list(range(1, 21))
    assert "… and 5 more" in result.stderr


def test_bad_reported_counts_are_ordered_and_quarantined_alike_in_one_or_two_processes(tmp_path: Path) -> None:
    # Every 10 lines: line 1 has a reported count that is not one, line 2 a value error.
    block = [{**FIRST_EXAMPLE, "reported": "bad"}, {"p": [0.5], "q": [0.0], "r": [0.1], "reported": 0}]
    block += [{**FIRST_EXAMPLE, "reported": 1}] * 8
    path = write_jsonl(tmp_path / "mixed.jsonl", block * 3000)
    outputs = []
    for jobs in ("1", "2"):
        quarantine = tmp_path / f"q{jobs}.jsonl"
        args = ["--reported-field", "reported", "--on-error", "skip", "--quarantine", str(quarantine), "--jobs", jobs]
        result = run_process("audit", str(path), "-o", "json", *args)
        assert result.returncode == 0, result.stderr
        summary = orjson.loads(result.stdout)
        assert summary["skipped_rows"] == 6000
        assert [error["line"] for error in summary["errors"][:4]] == [1, 2, 11, 12]
        assert quarantine.read_bytes().count(b'"reported":"bad"') == 3000  # rows dropped for their count too
        outputs.append((summary["errors"], quarantine.read_bytes()))
    assert outputs[0] == outputs[1]
    failing = invoke("audit", str(path), "--reported-field", "reported")
    assert f"{path}:1: 'reported' is the string 'bad'" in failing.stderr
