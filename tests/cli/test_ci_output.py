"""Output for CI: markdown (golden files), --github step summary and annotations that cannot be forged."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    FIRST_EXAMPLE,
    GOLDEN,
    HAND_ROWS,
    invoke,
    invoke_env,
    run_process,
    write_jsonl,
)

# A baseline worked by hand, four runs: (k=2, a=2), (k=2, a=2), (k=3, a=1), (k=1, a=0)
# -> alpha = 5 / (2 + 2 + 2 + 1) = 5/7, tokens per pass = 9/4.
BASELINE_ROWS = [
    {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99]},
    {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.5, 0.5]},
    FIRST_EXAMPLE,
    {"p": [0.1], "q": [0.9], "r": [0.5]},
]


def check_golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME; `SPECACCEPT_UPDATE_GOLDEN=1 pytest` rewrites the files instead."""
    path = GOLDEN / name
    if os.environ.get("SPECACCEPT_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.fixture
def logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(baseline summary, current log) as relative paths, so the output does not depend on tmp_path."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "baseline.jsonl", BASELINE_ROWS)
    write_jsonl(tmp_path / "current.jsonl", HAND_ROWS)
    assert invoke("audit", "baseline.jsonl", "-o", "json", "--summary-out", "baseline.json").exit_code == 0
    return "baseline.json", "current.jsonl"


def test_audit_markdown_golden(logs: tuple[str, str]) -> None:
    """The alpha row by hand: baseline a = (2, 2, 1, 0), e = (2, 2, 2, 1), alpha 5/7,
    se^2 = 4/3 * (16 + 16 + 9 + 25)/49 / 49 = 88/2401; current a = (1, 2, 0), e = (2, 2, 0),
    alpha 3/4, se^2 = 3/2 * 0.5 / 16 = 3/64; z = (0.75 - 0.98 * 5/7) / sqrt(3/64 + 0.98^2 * 88/2401)
    = 0.05 / 0.28649 = +0.17, p = 0.569.
    """
    baseline, current = logs
    args = [
        "audit",
        current,
        "-o",
        "markdown",
        "--baseline",
        baseline,
        "--min-alpha",
        "0.7",
        "--min-tokens-per-pass",
        "3",
    ]
    result = invoke(*args)
    assert result.exit_code == 1
    check_golden("audit-baseline.md", result.stdout)


def test_audit_markdown_without_checks_golden(logs: tuple[str, str]) -> None:
    _, current = logs
    result = invoke("audit", current, "-o", "markdown")
    assert result.exit_code == 0
    check_golden("audit.md", result.stdout)


def test_diff_markdown_golden(logs: tuple[str, str]) -> None:
    baseline, current = logs
    assert invoke("audit", current, "--summary-out", "current.json", "-o", "json").exit_code == 0
    result = invoke("diff", baseline, "current.json", "-o", "markdown", "--max-drop", "0.05")
    check_golden("diff.md", result.stdout)


def test_github_step_summary_and_annotations(logs: tuple[str, str], tmp_path: Path) -> None:
    baseline, current = logs
    step_summary = tmp_path / "step-summary.md"
    step_summary.write_text("earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(step_summary)}
    result = invoke_env(env, "audit", current, "--github", "--min-alpha", "0.8", "--baseline", baseline, "-o", "json")
    assert result.exit_code == 1
    written = step_summary.read_text()
    assert written.startswith("earlier step\n### specaccept\n")  # appended, not replaced
    assert "| --min-alpha | 0.8 | 0.7500 | failed |" in written
    assert "### Baseline comparison" in written
    annotations = [line for line in result.stderr.splitlines() if line.startswith("::")]
    assert (
        annotations[0] == "::error title=specaccept gate::alpha = 0.75 is below 0.8 (--min-alpha) (input current.jsonl)"
    )
    errors = [line for line in annotations if line.startswith("::error")]
    assert len(errors) == 1 + result.stderr.count("regressed: ")
    assert all(line.startswith(("::error", "::warning")) for line in annotations)
    assert result.stdout.startswith("{")  # stdout stays the JSON document


def test_github_without_step_summary_still_annotates(logs: tuple[str, str]) -> None:
    _, current = logs
    result = invoke_env({"GITHUB_STEP_SUMMARY": ""}, "audit", current, "--github", "--min-tokens-per-pass", "2.5")
    assert result.exit_code == 1
    assert "::error title=specaccept gate::tokens per pass = 2 is below 2.5 (--min-tokens-per-pass)" in result.stderr


def test_github_passing_run_prints_no_annotation(logs: tuple[str, str], tmp_path: Path) -> None:
    _, current = logs
    step_summary = tmp_path / "summary.md"
    result = invoke_env({"GITHUB_STEP_SUMMARY": str(step_summary)}, "audit", current, "--github", "--min-alpha", "0.5")
    assert result.exit_code == 0
    assert "::error" not in result.stderr
    assert "::warning title=specaccept intervals::intervals are over runs, not requests" in result.stderr
    assert "| --min-alpha | 0.5 | 0.7500 | passed |" in step_summary.read_text()


def test_a_hostile_file_name_cannot_forge_an_annotation(tmp_path: Path) -> None:
    hostile = tmp_path / "x\n::error::forged%0A::warning::also\r::error title=t::y.jsonl"
    write_jsonl(hostile, HAND_ROWS)
    step_summary = tmp_path / "summary.md"
    result = invoke_env(
        {"GITHUB_STEP_SUMMARY": str(step_summary)}, "audit", str(hostile), "--github", "--min-alpha", "0.9"
    )
    assert result.exit_code == 1
    lines = result.stderr.replace("\r", "\n").splitlines()
    commands = [line for line in lines if line.lstrip().startswith("::")]
    assert len(commands) == 2  # the failed gate, and a warning (intervals over runs)
    assert commands[0].startswith("::error title=specaccept gate::alpha = 0.75 is below 0.9 (--min-alpha) (input ")
    assert all("x%0A::error::forged%250A::warning::also%0D::error title=t::y.jsonl" in line for line in commands)
    # The plain stderr line and the table show the name with its control characters escaped.
    assert all(
        line.startswith(("specaccept: ", "::error title=specaccept gate::", "::warning title=")) for line in lines
    )
    assert not any(line.lstrip().startswith("::") for line in result.stdout.replace("\r", "\n").splitlines())


def test_diff_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "good.jsonl", BASELINE_ROWS * 50)
    write_jsonl(tmp_path / "bad.jsonl", [{"p": [0.1], "q": [0.9], "r": [0.5]}, FIRST_EXAMPLE] * 50)
    invoke("audit", "good.jsonl", "--summary-out", "good.json", "-o", "json")
    invoke("audit", "bad.jsonl", "--summary-out", "bad.json", "-o", "json")
    step_summary = tmp_path / "summary.md"
    result = invoke_env({"GITHUB_STEP_SUMMARY": str(step_summary)}, "diff", "good.json", "bad.json", "--github")
    assert result.exit_code == 1
    assert "::error title=specaccept regression::alpha regressed: " in result.stderr
    assert "(baseline good.json; current bad.json)" in result.stderr
    assert step_summary.read_text().startswith("### Baseline comparison\n")


def test_github_in_a_real_process_keeps_stdout_json(logs: tuple[str, str], tmp_path: Path) -> None:
    _, current = logs
    step_summary = tmp_path / "step.md"
    result = run_process(
        "audit", str(tmp_path / current), "-o", "json", "--github", "--min-alpha", "0.9",
        env={"GITHUB_STEP_SUMMARY": str(step_summary)},
    )  # fmt: skip
    assert result.returncode == 1
    assert orjson.loads(result.stdout)["gates"][0]["passed"] is False
    assert result.stderr.decode().splitlines()[0].startswith("::error title=specaccept gate::alpha = 0.75 is below")
    assert "### Gates" in step_summary.read_text()
