"""The HTML report in a real browser (headless Chromium), and the browser test tested on reports broken on purpose."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import orjson
import pytest

from tests.helpers import TESTS, invoke, jsonl_bytes
from tests.views.browser import PHONE, Findings, inspect_page, layout_at, require_browser

EXAMPLES = TESTS.parent / "examples"
ALL_PLOTS = {"histogram", "positions", "timeline", "groups", "baseline", "server", "sampler"}
HOSTILE_GROUPS = ("<script>alert(1)</script>", "$x$", 'draft "b" & <i>')


def full_report(directory: Path) -> Path:
    """A report with every plot: groups (hostile names), time windows, a baseline, reported counts, the sampler."""
    rows = [
        orjson.loads(line)
        for line in gzip.decompress((EXAMPLES / "server-reported.jsonl.gz").read_bytes()).splitlines()
    ]
    for index, row in enumerate(rows):
        row["model"] = HOSTILE_GROUPS[index % len(HOSTILE_GROUPS)]
        row["ts"] = 1_764_500_000 + index * 2
    log = directory / "server.jsonl"
    log.write_bytes(jsonl_bytes(rows))
    baseline = directory / "baseline.json"
    assert (
        invoke("audit", str(EXAMPLES / "serving-logs.jsonl.gz"), "-o", "json", "--summary-out", str(baseline)).exit_code
        == 0
    )
    report = directory / "report.html"
    result = invoke(
        "report",
        str(log),
        "-o",
        str(report),
        "--group-by",
        "model",
        "--time-field",
        "ts",
        "--reported-field",
        "reported",
        "--check-sampler",
        "--baseline",
        str(baseline),
        "--cost-ratio",
        "0.05",
    )
    assert result.exit_code == 1, result.stderr  # the baseline regresses: the report is written all the same
    return report


@pytest.fixture(scope="module")
def chromium() -> str:
    return require_browser()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return full_report(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def findings(report: Path, chromium: str) -> Findings:
    return inspect_page(report, chromium)


def test_report_opens_clean_with_every_plot_drawn(findings: Findings) -> None:
    assert findings.problems(ALL_PLOTS) == []
    assert {plot.plot_id for plot in findings.plots} == ALL_PLOTS
    assert findings.requests and all(url.startswith("file:") for url in findings.requests)  # the page itself


def test_plots_carry_axis_text_and_hover_titles(findings: Findings) -> None:
    text = {plot.plot_id: plot.text for plot in findings.plots}
    assert "accepted length a" in text["histogram"]
    assert "draft position" in text["positions"]
    assert "time (UTC)" in text["timeline"]
    assert "recomputed accepted count" in text["server"] and "no-prefix-break" in text["server"]
    assert "ECDF(r) - r" in text["sampler"]
    assert "tolerated floor" in text["baseline"]
    assert all(plot.titles >= 3 for plot in findings.plots)


def test_hostile_group_names_stay_text(findings: Findings) -> None:
    groups = next(plot for plot in findings.plots if plot.plot_id == "groups")
    assert "$x$" in groups.text
    assert findings.page_errors == [] and findings.console_errors == []  # no <script> ran, none was refused


def test_on_a_phone_the_page_never_scrolls_sideways_and_every_plot_fits(report: Path, chromium: str) -> None:
    layout = layout_at(report, chromium)
    assert layout.width == PHONE["width"]
    assert layout.problems() == []
    assert {name for name, _, _ in layout.plots} == ALL_PLOTS
    assert all(0 <= left < right <= layout.width for _, left, right in layout.plots)  # every chart whole
    wide = layout_at(report, chromium, {"width": 1280, "height": 900})
    assert wide.problems() == [] and max(right - left for _, left, right in wide.plots) >= 400  # not shrunk there


# --- the test tested: each of these breakages must be caught -------------------------------------


def broken(report: Path, directory: Path, name: str, change: tuple[str, str]) -> Path:
    page = report.read_text()
    old, new = change
    assert old in page
    path = directory / f"{name}.html"
    path.write_text(page.replace(old, new, 1))
    return path


def test_an_external_image_is_caught(report: Path, chromium: str, tmp_path: Path) -> None:
    page = broken(report, tmp_path, "image", ("</h1>", '</h1><img src="https://example.com/pixel.png" alt="">'))
    found = inspect_page(page, chromium)
    assert any("https://example.com/pixel.png" in problem for problem in found.problems(ALL_PLOTS))


def test_a_script_is_caught(report: Path, chromium: str, tmp_path: Path) -> None:
    page = broken(report, tmp_path, "script", ("</h1>", "</h1><script>undefinedFunction()</script>"))
    problems = inspect_page(page, chromium).problems(ALL_PLOTS)
    assert any(problem.startswith(("console error", "page error")) for problem in problems), problems


def test_an_empty_plot_is_caught(report: Path, chromium: str, tmp_path: Path) -> None:
    page = report.read_text()
    figure = re.search(r'<figure data-plot="histogram">(.*?)<figcaption>', page, re.S)
    assert figure is not None
    emptied = tmp_path / "empty.html"
    emptied.write_text(page.replace(figure.group(1), '<svg width="560" height="300"></svg>', 1))
    problems = inspect_page(emptied, chromium).problems(ALL_PLOTS)
    assert "plot 'histogram' is blank (0.0% non-white)" in problems
    assert "plot 'histogram' has no hover titles" in problems


def test_a_missing_plot_is_caught(report: Path, chromium: str, tmp_path: Path) -> None:
    page = broken(report, tmp_path, "missing", ('data-plot="sampler"', 'data-plot="something-else"'))
    assert "plot 'sampler' missing" in inspect_page(page, chromium).problems(ALL_PLOTS)


def test_an_empty_report_opens_clean(chromium: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert invoke("report", str(empty), "-o", str(tmp_path / "r.html")).exit_code == 0
    found = inspect_page(tmp_path / "r.html", chromium)
    assert found.problems(set()) == [] and found.plots == []


def test_without_chromium_the_test_fails_in_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.views.browser.shutil.which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        require_browser()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        require_browser()


def test_a_plot_wider_than_a_phone_is_caught(report: Path, chromium: str, tmp_path: Path) -> None:
    page = broken(report, tmp_path, "fixed", ("figure svg{max-width:100%;height:auto}", ""))
    problems = layout_at(page, chromium).problems()
    assert problems and "px wide in a 390 px viewport" in problems[0]
    assert any(" in histogram reaches " in problem for problem in problems)
