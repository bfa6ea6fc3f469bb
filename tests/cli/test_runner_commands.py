"""No string from data becomes a GitHub Actions workflow command, in any output a job's log shows.

The runner (actions/runner, src/Runner.Common/ActionCommand.cs and
src/Runner.Worker/ActionCommandManager.cs) reads each line of a step's stdout and stderr two ways:
`TryParseV2` takes a line that starts (after blanks) with `::name ...::data`, and `TryParse` takes
`##[name ...]data` anywhere in a line; `::stop-commands::TOKEN` makes it ignore every command until
one named TOKEN. `runner_commands` below is that reading, so the tests ask what the runner would do.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.helpers import FIRST_EXAMPLE, run_process, write_jsonl

# The commands a runner knows (any spelling of their case).
KNOWN = {
    "add-mask",
    "add-matcher",
    "add-path",
    "debug",
    "echo",
    "endgroup",
    "error",
    "group",
    "notice",
    "remove-matcher",
    "save-state",
    "set-env",
    "set-output",
    "stop-commands",
    "warning",
}
ACTIONS = {"GITHUB_ACTIONS": "true"}


def _parsed(line: str, known: set[str]) -> tuple[str, str] | None:
    """The runner's reading of one line: (command, data), or None when it is no command."""
    stripped = line.lstrip()
    if stripped.startswith("::"):
        end = stripped.find("::", 2)
        if end >= 0:
            name = stripped[2:end].split(" ")[0]
            if name.lower() in known:
                return name, stripped[end + 2 :]
    start = line.find("##[")
    if start >= 0:
        close = line.find("]", start)
        if close >= 0:
            name = line[start + 3 : close].split(" ")[0]
            if name.lower() in known:
                return name, line[close + 1 :]
    return None


def runner_commands(stream: str) -> list[str]:
    """The lines of `stream` the runner acts on, fenced stretches (`::stop-commands::`) left out."""
    acted: list[str] = []
    token: str | None = None
    for line in stream.splitlines():
        command = _parsed(line, KNOWN | ({token.lower()} if token else set()))
        if command is None:
            continue
        name, data = command
        if token is not None:
            if name.lower() == token.lower():
                token = None
            continue
        if name.lower() == "stop-commands":
            token = data
            continue
        acted.append(line)
    assert token is None, "a fence left open: every later command of the step would be ignored"
    return acted


def test_the_runner_model_reads_both_spellings() -> None:
    assert runner_commands("x ##[add-mask]hunter2\n  ::error::y\n::nothing::z\n") == [
        "x ##[add-mask]hunter2",
        "  ::error::y",
    ]
    assert runner_commands("::stop-commands::t1\n##[set-output name=a;]1\n::t1::\n::warning::w\n") == ["::warning::w"]


def test_the_error_line_of_a_forged_command_in_a_field(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"p":"##[add-mask]hunter2","q":[1],"r":[0]}\n')
    result = run_process("audit", str(path), env=ACTIONS)
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert runner_commands(stderr) == []
    assert "'##\\x5badd-mask]hunter2'" in stderr  # shown, escaped visibly


FORGED_ID = "##[set-output name=x;]1"


def _forged_log(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "b.jsonl",
        [{**FIRST_EXAMPLE, "request_id": FORGED_ID}, {**FIRST_EXAMPLE, "request_id": "plain"}],
    )


def test_a_forged_request_id_in_table_cells(tmp_path: Path) -> None:
    result = run_process("audit", str(_forged_log(tmp_path)), "--id-field", "request_id", "--group-by", "request_id")
    assert result.returncode == 0, result.stderr
    stdout = result.stdout.decode()
    assert runner_commands(stdout) == []
    assert "##\\x5b" in stdout  # the key is shown, escaped


def test_a_forged_request_id_in_json_lines_keeps_its_value(tmp_path: Path) -> None:
    result = run_process("audit", str(_forged_log(tmp_path)), "--id-field", "request_id", "-o", "jsonl", env=ACTIONS)
    assert result.returncode == 0, result.stderr
    stdout = result.stdout.decode()
    assert runner_commands(stdout) == []
    assert "##\\u005bset-output" in stdout
    assert [orjson.loads(line)["request_id"] for line in stdout.splitlines()] == [FORGED_ID, "plain"]


def test_a_forged_group_key_in_json_keeps_its_value(tmp_path: Path) -> None:
    result = run_process("audit", str(_forged_log(tmp_path)), "--group-by", "request_id", "-o", "json", env=ACTIONS)
    assert result.returncode == 0, result.stderr
    assert runner_commands(result.stdout.decode()) == []
    assert FORGED_ID in orjson.loads(result.stdout)["groups"]


def test_a_forged_request_id_in_csv_is_fenced_on_the_log(tmp_path: Path) -> None:
    result = run_process("audit", str(_forged_log(tmp_path)), "--id-field", "request_id", "-o", "csv", env=ACTIONS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert runner_commands("\n".join(lines)) == []
    assert lines[1].startswith("::stop-commands::") and lines[-1] == f"::{lines[1].split('::')[2]}::"
    rows = list(csv.DictReader(io.StringIO("\n".join([lines[0], *lines[2:-1]]))))
    assert [row["request_id"] for row in rows] == [FORGED_ID, "plain"]  # the cell keeps its bytes


def test_a_fence_closes_before_the_gates_annotation(tmp_path: Path) -> None:
    result = run_process(
        "audit",
        str(_forged_log(tmp_path)),
        "--id-field",
        "request_id",
        "-o",
        "csv",
        "--min-alpha",
        "0.99",
        "--github",
        env={**ACTIONS, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")},
    )
    assert result.returncode == 1
    assert runner_commands(result.stdout.decode()) == []  # the fence is closed when stdout ends
    annotations = runner_commands(result.stderr.decode())
    assert any(line.startswith("::error title=specaccept gate::") for line in annotations), annotations


def test_csv_without_a_command_has_no_fence(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{**FIRST_EXAMPLE, "request_id": "plain"}])
    result = run_process("audit", str(path), "--id-field", "request_id", "-o", "csv", env=ACTIONS)
    assert b"::" not in result.stdout


@pytest.mark.parametrize("env", [ACTIONS, {}])
def test_csv_in_a_file_keeps_its_bytes(tmp_path: Path, env: dict[str, str]) -> None:
    """`> out.csv` is a file, not the log: no fence, and the cell is the data's."""
    log = _forged_log(tmp_path)
    out = tmp_path / "out.csv"
    with out.open("wb") as handle:
        subprocess.run(
            [sys.executable, "-m", "specaccept_cli", "audit", str(log), "--id-field", "request_id", "-o", "csv"],
            stdout=handle,
            env={**os.environ, **env},
            check=True,
        )
    text = out.read_text()
    assert "::stop-commands::" not in text
    assert [row["request_id"] for row in csv.DictReader(io.StringIO(text))] == [FORGED_ID, "plain"]


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_a_forged_file_name_in_every_error_line(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "x##[error]forged.jsonl"
    path.write_bytes(orjson.dumps(FIRST_EXAMPLE) + b"\n" + b'{"p":"bad","q":[1],"r":[0]}\n')
    result = run_process("audit", str(path), "--on-error", mode, "-o", "jsonl", env=ACTIONS)
    stderr = result.stderr.decode()
    assert result.returncode == (2 if mode == "fail" else 0)
    assert "forged.jsonl" in stderr
    assert runner_commands(stderr) == []
    assert runner_commands(result.stdout.decode()) == []
    if mode == "skip":
        assert orjson.loads(result.stdout.splitlines()[0])["source"] == str(path)


def test_a_forged_name_in_a_usage_error() -> None:
    """A name from a glob may land where an option or a choice was expected: click quotes it back."""
    for args in (["audit", "--format", "x##[error]y"], ["audit", "--bogus-##[error]y"], ["aud##[error]y"]):
        result = run_process(*args, env=ACTIONS)
        assert result.returncode == 2
        assert runner_commands(result.stderr.decode()) == [], args
