"""One verdict in every view: the terminal, markdown, the GitHub step summary and annotations, the HTML
report and `-o json` say the same checks in the same words, because they all draw one `Findings`.

The log fails a gate, drops beyond --max-drop without significance, drifts, and has wrong reported
counts; the three screens that once contradicted themselves each have their own test below.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.text import workflow_data
from tests.helpers import invoke, invoke_env, markdown_cell, run_process, write_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
K = 4


def rows(runs: int, alphas: list[float], seed: int, wrong_every: int = 0) -> list[dict[str, object]]:
    """Runs of k = 4 tokens accepted with probability alpha (p = alpha, q = 1), alpha changing over the log;
    every `wrong_every`-th run reports one accepted token more than the rule gives."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, object]] = []
    for index in range(runs):
        alpha = alphas[index * len(alphas) // runs]
        r = rng.random(K).round(6).tolist()
        accepted = next((i for i, value in enumerate(r) if value > alpha), K)
        wrong = bool(wrong_every) and index % wrong_every == 0
        row: dict[str, object] = {"p": [alpha] * K, "q": [1.0] * K, "r": r}
        row["reported"] = min(K, accepted + 1) if wrong and accepted < K else accepted
        out.append(row)
    return out


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    directory = tmp_path_factory.mktemp("verdict")
    baseline = directory / "baseline.json"
    write_jsonl(directory / "baseline.jsonl", rows(300, [0.83], seed=1))
    saved = invoke("audit", str(directory / "baseline.jsonl"), "--summary-out", str(baseline), "-o", "json")
    assert saved.exit_code == 0, saved.stderr
    log = write_jsonl(directory / "current.jsonl", rows(2000, [0.86, 0.74], seed=2, wrong_every=10))
    options = ["--min-alpha", "0.9", "--baseline", str(baseline), "--reported-field", "reported"]
    return log, [*options, "--max-mismatches", "0", "--check-drift"]


def verdict_of(log: Path, options: list[str]) -> list[dict[str, str]]:
    result = invoke("audit", str(log), *options, "-o", "json")
    assert result.exit_code == 1, result.stderr
    verdict: list[dict[str, str]] = orjson.loads(result.stdout)["verdict"]
    return verdict


def test_the_case_has_each_kind_of_finding(case: tuple[Path, list[str]]) -> None:
    verdict = verdict_of(*case)
    statuses = {(entry["check"], entry["status"]) for entry in verdict}
    assert {("gate", "fail"), ("server", "fail"), ("drift", "fail"), ("baseline", "warn")} <= statuses
    drop = next(entry["text"] for entry in verdict if entry["check"] == "baseline" and entry["status"] == "warn")
    assert "a drop beyond the tolerated 0.02, but not significant (Holm p = " in drop


def not_ok(verdict: list[dict[str, str]]) -> list[str]:
    return [entry["text"] for entry in verdict if entry["status"] != "ok"]


def test_terminal_shows_the_verdict(case: tuple[Path, list[str]]) -> None:
    log, options = case
    table = invoke_env({"COLUMNS": "400"}, "audit", str(log), *options).stdout
    panel = table.split("╰")[0]
    for text in not_ok(verdict_of(log, options)):
        assert text in panel, text  # in the headline, before any table


def test_markdown_shows_the_verdict(case: tuple[Path, list[str]]) -> None:
    log, options = case
    markdown = invoke("audit", str(log), *options, "-o", "markdown").stdout
    headline = markdown.split("### Acceptance")[0]
    for entry in verdict_of(log, options):
        if entry["status"] != "ok":
            assert f"- **{entry['status']}**: {markdown_cell(entry['text'])}" in headline, entry


def test_github_step_summary_and_annotations_show_the_verdict(case: tuple[Path, list[str]], tmp_path: Path) -> None:
    log, options = case
    step = tmp_path / "step.md"
    result = invoke_env({"GITHUB_STEP_SUMMARY": str(step)}, "audit", str(log), *options, "--github", "-o", "json")
    assert result.exit_code == 1
    written = step.read_text()
    annotations = [line for line in result.stderr.splitlines() if line.startswith("::")]
    for entry in verdict_of(log, options):
        if entry["status"] == "ok":
            continue
        assert markdown_cell(entry["text"]) in written, entry
        command = "::error" if entry["status"] == "fail" else "::warning"
        assert any(workflow_data(entry["text"]) in line for line in annotations if line.startswith(command)), entry
    assert sum(line.startswith("::error") for line in annotations) == sum(
        entry["status"] == "fail" for entry in verdict_of(log, options)
    )


def test_html_report_shows_the_verdict(case: tuple[Path, list[str]], tmp_path: Path) -> None:
    log, options = case
    page_path = tmp_path / "report.html"
    result = invoke("report", str(log), *options, "-o", str(page_path))
    assert result.exit_code == 1  # the checks exit as audit's do, after the page is written
    page = page_path.read_text()
    listed = page.split('<ul class="verdict">')[1].split("</ul>")[0]
    for entry in verdict_of(log, options):
        assert f'<li class="{entry["status"]}"><b>{entry["status"]}</b> {html.escape(entry["text"], quote=False)}' in (
            listed.replace("&#x27;", "'")
        ), entry
    cards = page.split('<div class="cards">')[1].split("</div>\n")[0]
    for label in ("gates", "reported counts", "drift over the log"):
        assert re.search(rf"<span>{label}</span><b class=\"bad\">fail</b>", cards), label
    assert re.search(r"<span>baseline</span><b class=\"warn\">warn</b>", cards)


def test_drift_that_fails_is_named_in_the_headline() -> None:
    """The vLLM example drifts (p = 1.4e-5): the headline said "no evidence against the i.i.d. model" while
    --check-drift exited 1; now the first verdict line is the drift failure."""
    result = run_process("audit", str(EXAMPLES / "vllm-server.log"), "--check-drift", env={"COLUMNS": "200"})
    assert result.returncode == 1
    panel = result.stdout.decode().split("╰")[0]
    first = next(line for line in panel.splitlines() if "fail" in line)
    assert "alpha is not constant over the log (p = 1.42e-05 < 0.01)" in first and "(--check-drift)" in first
    assert result.stderr.decode().splitlines()[-1].startswith("specaccept: drift: alpha is not constant")


def test_a_drop_beyond_max_drop_that_is_not_significant_is_not_no_drop(tmp_path: Path) -> None:
    """Alpha 3.85% below the baseline with --max-drop 0.02, Holm p above 0.01: a warning with its p,
    in the panel and on the HTML card alike (it read "no drop from the baseline")."""
    baseline = tmp_path / "baseline.json"
    write_jsonl(tmp_path / "baseline.jsonl", rows(250, [0.832], seed=3))
    invoke("audit", str(tmp_path / "baseline.jsonl"), "--summary-out", str(baseline), "-o", "json")
    log = write_jsonl(tmp_path / "current.jsonl", rows(400, [0.8], seed=4))
    data = orjson.loads(invoke("audit", str(log), "--baseline", str(baseline), "-o", "json").stdout)
    alpha = data["comparison"]["metrics"][0]
    assert alpha["verdict"] == "ok" and alpha["change"] < -0.02 and alpha["p_adjusted"] >= 0.01
    warned = [entry for entry in data["verdict"] if entry["check"] == "baseline" and entry["status"] == "warn"]
    assert len(warned) >= 1 and f"Holm p = {alpha['p_adjusted']:.3g}, not below 0.01" in warned[0]["text"]
    table = invoke_env({"COLUMNS": "300"}, "audit", str(log), "--baseline", str(baseline)).stdout
    assert "no drop" not in table.split("╰")[0].split("alpha")[0]
    assert warned[0]["text"] in table
    page = tmp_path / "r.html"
    assert invoke("report", str(log), "--baseline", str(baseline), "-o", str(page)).exit_code == 0
    card = page.read_text().split("<span>baseline</span>")[1].split("</div>")[0]
    assert card.startswith('<b class="warn">warn</b>') and "not significant" in card


def test_mismatching_reported_counts_colour_the_report(tmp_path: Path) -> None:
    """1,473 of 2,000 reported counts are wrong in the example: the card said nothing and every card was green."""
    page = tmp_path / "r.html"
    example = str(EXAMPLES / "server-reported.jsonl.gz")
    assert invoke("report", example, "--reported-field", "reported", "-o", str(page)).exit_code == 0
    text = page.read_text()
    card = text.split("<span>reported counts</span>")[1].split("</div>")[0]
    assert card.startswith('<b class="warn">warn</b><span>1,473 of 2,000 reported counts mismatch')
    assert (
        invoke("report", example, "--reported-field", "reported", "--max-mismatches", "0", "-o", str(page)).exit_code
        == 1
    )
    assert '<span>reported counts</span><b class="bad">fail</b>' in page.read_text()
    # The heatmap writes its counts in the cells and has a colour scale labelled in runs.
    heat = text.split('aria-label="Reported x recomputed"')[1].split("</svg>")[0]
    assert re.search(r'<text class="count"[^>]*>[0-9,k]+</text>', heat)
    assert '<text class="tick" x="' in heat and ">runs</text>" in heat


def test_group_lines_have_a_key(tmp_path: Path) -> None:
    log = write_jsonl(
        tmp_path / "g.jsonl", [{**row, "model": f"m{i % 3}"} for i, row in enumerate(rows(300, [0.8], 5))]
    )
    page = tmp_path / "r.html"
    assert invoke("report", str(log), "--group-by", "model", "-o", str(page)).exit_code == 0
    key = page.read_text().split('<p class="legend">groups: ')[1].split("</p>")[0]
    assert [name for name in re.findall(r"</span>([^<]+)", key)] == ["m0", "m1", "m2"]


def test_the_drift_test_runs_once_for_every_view(
    case: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON, the saved summary, the table and the HTML report of one audit: one drift test, in `conclude`."""
    from specaccept_cli.summary import files, windows

    calls = []
    real = windows.drift_test

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(windows, "drift_test", counted)
    monkeypatch.setattr(files, "drift_test", counted)
    log, options = case
    saved, page = tmp_path / "s.json", tmp_path / "r.html"
    result = invoke("audit", str(log), *options, "-o", "json", "--summary-out", str(saved), "--html", str(page))
    assert result.exit_code == 1 and saved.exists() and page.exists()
    assert len(calls) == 1
    assert orjson.loads(saved.read_bytes())["drift"] == orjson.loads(result.stdout)["drift"] is not None
