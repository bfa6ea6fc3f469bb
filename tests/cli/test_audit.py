"""`audit` end to end: its outputs, the table view, --group-by, and option wiring."""

from __future__ import annotations

import csv
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from msgspec.structs import replace

from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES
from specaccept_cli.summary.files import summary_from_object
from tests.helpers import (
    FIRST_EXAMPLE,
    MODEL_ROWS,
    all_commands,
    invoke,
    markdown_cell,
    run_process,
    write_jsonl,
)

# Three runs worked by hand:
#   seed example: k=3, a=1 (examined 2)
#   all kept:     k=2, a=2 (examined 2)
#   empty draft:  k=0, a=0 (examined 0)
ID_ROWS = [
    {**FIRST_EXAMPLE, "id": "a"},
    {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99], "id": "b"},
    {"p": [], "q": [], "r": [], "id": "c"},
]


@pytest.fixture
def id_log(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "hand.jsonl", ID_ROWS)


def test_audit_json_summary_by_hand(id_log: Path) -> None:
    result = invoke("audit", str(id_log), "-o", "json")
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["schema"] == "specaccept.summary/2"
    assert summary["runs"] == 3
    assert summary["drafted_tokens"] == 5
    assert summary["accepted_tokens"] == 3
    assert summary["examined_tokens"] == 4
    assert summary["alpha"] == 3 / 4
    assert summary["acceptance_rate"] == 3 / 5
    assert summary["mean_accepted"] == 1.0
    assert summary["tokens_per_pass"] == 2.0


def test_audit_jsonl_records(id_log: Path) -> None:
    result = invoke("audit", str(id_log), "-o", "jsonl", "--id-field", "id")
    records = [orjson.loads(line) for line in result.stdout_bytes.splitlines()]
    assert records == [
        {"source": str(id_log), "line": 1, "k": 3, "accepted": 1, "emitted": 2, "id": "a"},
        {"source": str(id_log), "line": 2, "k": 2, "accepted": 2, "emitted": 3, "id": "b"},
        {"source": str(id_log), "line": 3, "k": 0, "accepted": 0, "emitted": 1, "id": "c"},
    ]


def test_audit_csv_records(id_log: Path) -> None:
    result = invoke("audit", str(id_log), "-o", "csv", "--id-field", "id", "--id-field", "missing.field")
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["source", "line", "k", "accepted", "emitted", "id", "missing.field"]
    assert rows[1] == [str(id_log), "1", "3", "1", "2", "a", ""]
    assert [row[3] for row in rows[1:]] == ["1", "2", "0"]


def test_audit_table_view(id_log: Path) -> None:
    result = invoke("audit", str(id_log), "--max-rows", "2", "--full")
    assert result.exit_code == 0
    out = result.stdout
    runs = out.split(f"Runs of {id_log}")[1].split("more run")[0]  # one source: named once, above its runs
    rows = [line.split("│")[1:-1] for line in runs.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row[:4]] for row in rows] == [["1", "3", "1", "2"], ["2", "2", "2", "3"]]
    assert "1 more run" in out
    assert "alpha" in out and "0.7500" in out
    assert "tokens per pass" in out and "2.0000" in out
    assert "accepted/drafted understates it" in out


def test_empty_input_is_zero_runs_in_every_mode(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    summary = orjson.loads(invoke("audit", str(empty), "-o", "json").stdout)
    assert summary["runs"] == 0
    assert summary["alpha"] is None and summary["tokens_per_pass"] is None
    assert invoke("audit", str(empty), "-o", "jsonl").stdout == ""
    assert invoke("audit", str(empty), "-o", "csv").stdout == "source,line,k,accepted,emitted\n"
    table = invoke("audit", str(empty))
    assert table.exit_code == 0 and "—" in table.stdout


def test_data_strings_are_escaped_in_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative name: the source column does not fold it
    hostile = Path("[bold red]x\x1b[31m.jsonl")
    write_jsonl(hostile, [FIRST_EXAMPLE])
    result = invoke("audit", str(hostile), "--max-rows", "1")
    assert "[bold red]x\\x1b[31m.jsonl" in result.stdout
    assert "\x1b" not in result.stdout


def _stderr_on_a_terminal(*args: str) -> bytes:
    primary, secondary = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-m", "specaccept_cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=secondary,
            env={**os.environ, "TERM": "xterm-256color"},
            check=True,
            timeout=120,
        )
    finally:
        os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the other side is closed
            break
        if not chunk:
            break
        output += chunk
    os.close(primary)
    return output


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(tmp_path: Path) -> None:
    path = tmp_path / "sim.jsonl"
    invoke("simulate", "--runs", "20000", "--alpha", "0.7", "--k", "6", "--seed", "1", "-o", str(path))
    shown = _stderr_on_a_terminal("audit", str(path), "-o", "json")
    assert b"reading" in shown and b"runs" in shown
    assert _stderr_on_a_terminal("audit", str(path), "-o", "json", "-q") == b""
    piped = run_process("audit", str(path), "-o", "json")
    assert piped.returncode == 0 and piped.stderr == b""


def test_cli_default_line_limit_is_the_readers() -> None:
    (option,) = [param for param in all_commands()["audit"].params if param.name == "max_line_bytes"]
    assert option.default == DEFAULT_MAX_LINE_BYTES


def test_table_view_shows_every_statistic(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", MODEL_ROWS)
    result = invoke("audit", str(path), "--max-rows", "0", "--cost-ratio", "0.1", "--conventions", "--full")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for text in (
        "alpha 95% interval",
        "expected alpha",
        "predicted (i.i.d.)",
        "no evidence against the i.i.d. model",
        "Per position",
        "Accepted length",
        "█",
        "observed speedup",
        "best",
        "What each engine would report",
        "vllm_v0",
        "system_efficiency",
        "They divide different counts",
    ):
        assert text in out, text


def test_conventions_only_with_the_flag(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", MODEL_ROWS)
    assert "What each engine would report" not in invoke("audit", str(path), "--max-rows", "0").stdout


def test_group_by_json_field_by_hand(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", MODEL_ROWS)
    result = invoke("audit", str(path), "-o", "json", "--group-by", "model")
    summary = orjson.loads(result.stdout)
    assert summary["group_by"] == "model"
    assert set(summary["groups"]) == {"a", "b"}
    a, b = summary["groups"]["a"], summary["groups"]["b"]
    assert (a["runs"], a["accepted_tokens"], a["examined_tokens"]) == (2, 1, 3)
    assert (b["runs"], b["accepted_tokens"], b["examined_tokens"]) == (1, 2, 2)
    assert a["alpha"] == pytest.approx(1 / 3)
    assert a["conventions"]["vllm_v0"]["acceptance_rate"] == 2 / 4  # group a's own passing tokens
    # over examined tokens: run 1 tested [1, 0.25], run 3 tested [0.2]; over drafted: run 1's third token too
    assert a["expected_alpha"] == pytest.approx((1.25 + 0.2) / 3, abs=1e-9)
    assert a["expected_alpha_drafted"] == pytest.approx((2.25 + 0.2) / 4, abs=1e-9)
    assert summary["runs"] == 3  # the whole is still there
    rebuilt = summary_from_object(summary)
    assert rebuilt.groups == {"a": summary_from_object(a), "b": summary_from_object(b)}
    rebuilt = replace(rebuilt, group_by=None, groups=None, windows=None)  # windows: whole log only
    assert rebuilt == summary_from_object(a) + summary_from_object(b)  # the groups partition the runs


def test_group_by_missing_or_non_string_values(tmp_path: Path) -> None:
    rows = [
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": 0.7}},
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": 0.7}},
        {"p": [0.5], "q": [0.5], "r": [0.1]},
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": None}},
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": [1, 2]}},
    ]
    path = write_jsonl(tmp_path / "g.jsonl", rows)
    summary = orjson.loads(invoke("audit", str(path), "-o", "json", "--group-by", "meta.t").stdout)
    assert {key: group["runs"] for key, group in summary["groups"].items()} == {"0.7": 2, "null": 2, "[1,2]": 1}


def test_hostile_group_values_are_escaped_in_the_table(tmp_path: Path) -> None:
    rows = [
        {"p": [0.5], "q": [0.5], "r": [0.1], "m": "[bold red]boom[/] \x1b[31mred\x07"},
        {"p": [0.5], "q": [0.5], "r": [0.1], "m": "plain"},
    ]
    path = write_jsonl(tmp_path / "g.jsonl", rows)
    result = invoke("audit", str(path), "--group-by", "m", "--max-rows", "0")
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "[bold red]boom[/]" in result.stdout  # shown literally, not interpreted
    assert "By m" in result.stdout


def test_group_by_does_not_change_per_run_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", MODEL_ROWS)
    plain = invoke("audit", str(path), "-o", "jsonl").stdout
    grouped = invoke("audit", str(path), "-o", "jsonl", "--group-by", "model").stdout
    assert plain == grouped
    assert "model" not in grouped


@pytest.mark.parametrize("name", ["k", "source", "accepted", "line", "emitted"])
def test_id_fields_cannot_overwrite_the_tool_s_own_columns(tmp_path: Path, name: str) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{**FIRST_EXAMPLE, name: 99}])
    result = invoke("audit", str(path), "-o", "jsonl", "--id-field", name)
    assert result.exit_code == 2
    assert "would collide with the per-run column" in result.stderr
    reported = invoke("audit", str(path), "-o", "jsonl", "--reported-field", name, "--id-field", "mismatch")
    assert reported.exit_code == 2


def test_emoji_codes_in_data_stay_text(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / ":fire:.jsonl", [{**FIRST_EXAMPLE, "model": ":warning:"}])
    result = invoke("audit", str(path), "--group-by", "model", "--max-rows", "1")
    assert ":fire:.jsonl" in result.stdout and ":warning:" in result.stdout
    assert "🔥" not in result.stdout and "⚠" not in result.stdout


def test_markdown_cells_cannot_make_links_or_images(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"p": [0.5], "q": [0.0], "r": [0.1], "m": 1}, FIRST_EXAMPLE])
    result = invoke("audit", str(path), "-o", "markdown", "--on-error", "skip")
    assert "q\\[0\\]" in result.stdout
    assert markdown_cell("![i](https://x)[l](https://y)") == "\\!\\[i\\](https://x)\\[l\\](https://y)"


def test_bad_field_path_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("audit", "--p-field", "spec..p", "-")
    assert result.exit_code == 2
    assert "dotted field path" in result.stderr


def test_state_stays_the_last_key_and_cost_keys_need_a_cost_ratio(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", MODEL_ROWS)
    plain = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert list(plain)[-1] == "state"
    assert not {"cost_ratio", "speedup", "optimal_k", "groups"} & set(plain)
    grouped = orjson.loads(invoke("audit", str(path), "-o", "json", "--group-by", "model").stdout)
    assert list(grouped)[-1] == "state"
    assert list(grouped["groups"]["a"])[-1] == "state"
