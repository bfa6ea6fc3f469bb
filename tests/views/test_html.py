"""The HTML report as text: self-contained, escaped, deterministic (golden file), and its numbers by hand."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.summary.state import Summary
from specaccept_cli.views.html import ks_critical, predicted_histogram
from specaccept_cli.views.svg import nice_ticks, text
from tests.helpers import GOLDEN, invoke, write_jsonl

HOSTILE = "<script>alert(1)</script>"


def golden_rows() -> list[dict[str, object]]:
    """A small simulated log with two models (one named to attack the page) and a time field."""
    log = invoke("simulate", "--runs", "240", "--alpha", "0.75", "--k", "1-6", "--seed", "4").stdout_bytes
    rows = [orjson.loads(line) for line in log.splitlines()]
    for index, row in enumerate(rows):
        row["model"] = HOSTILE if index % 3 == 0 else "$x$"
        row["ts"] = f"2026-11-30T14:{index // 60:02d}:{index % 60:02d}Z"
    return rows


def report_of(path: Path, out: Path, *options: str) -> bytes:
    result = invoke("report", str(path), "-o", str(out), *options)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""  # a report writes nothing to stdout
    return out.read_bytes()


def test_report_is_self_contained_and_escapes_data(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", golden_rows())
    page = report_of(tmp_path / "log.jsonl", tmp_path / "r.html", "--group-by", "model", "--time-field", "ts").decode()
    assert log.exists()
    assert (
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        in page
    )
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # Nothing to fetch: the only URL is the SVG namespace, an identifier that is never loaded.
    assert set(re.findall(r"(?:https?:)?//[\w.-]+[^\s\"'<>]*", page)) == {"http://www.w3.org/2000/svg"}
    # Sampler health is drawn whenever r is logged, as the terminal shows it (not only with --check-sampler).
    assert {"histogram", "positions", "timeline", "groups", "sampler"} == set(re.findall(r'data-plot="([\w-]+)"', page))


def test_report_is_the_same_bytes_each_time_and_on_any_number_of_processes(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", golden_rows())
    first = report_of(log, tmp_path / "a.html", "--group-by", "model", "--jobs", "1")
    again = report_of(log, tmp_path / "b.html", "--group-by", "model", "--jobs", "2")
    assert first == again


def test_report_matches_the_golden_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/golden/report.html; `SPECACCEPT_UPDATE_GOLDEN=1 pytest` rewrites it after a deliberate change."""
    monkeypatch.chdir(tmp_path)  # the page names the input as given: a relative path, the same everywhere
    write_jsonl(Path("log.jsonl"), golden_rows())
    page = report_of(Path("log.jsonl"), Path("r.html"), "--group-by", "model", "--time-field", "ts")
    golden = GOLDEN / "report.html"
    if os.environ.get("SPECACCEPT_UPDATE_GOLDEN"):
        golden.write_bytes(page)
    assert page == golden.read_bytes()


def test_audit_html_writes_the_same_report_beside_any_output(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", golden_rows())
    report = report_of(log, tmp_path / "report.html", "--group-by", "model")
    result = invoke("audit", str(log), "-o", "json", "--group-by", "model", "--html", str(tmp_path / "audit.html"))
    assert result.exit_code == 0 and orjson.loads(result.stdout)["runs"] == 240
    assert (tmp_path / "audit.html").read_bytes() == report


def test_report_checks_exit_1_after_writing(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", golden_rows())
    result = invoke("report", str(log), "-o", str(tmp_path / "r.html"), "--min-alpha", "0.99")
    assert result.exit_code == 1 and "alpha = " in result.stderr
    assert (tmp_path / "r.html").read_bytes().startswith(b"<!DOCTYPE html>")


def test_report_needs_an_output_path(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", golden_rows())
    result = invoke("report", str(log))
    assert result.exit_code == 2 and "Missing option '-o'" in result.stderr


def test_predicted_histogram_by_hand() -> None:
    """alpha 0.5: a run with k = 2 accepts 0, 1, 2 with 0.5, 0.25, 0.25; one with k = 1: 0.5, 0.5."""
    counts = np.zeros((3, 3), dtype=np.int64)
    counts[2, 0] = 1  # any (k, a) cell: the prediction uses the k marginal only
    counts[1, 1] = 1
    assert predicted_histogram(Summary(counts=counts), 0.5) == [1.0, 0.75, 0.25]


def test_ks_critical_is_kolmogorovs_quantile() -> None:
    assert ks_critical(0.05) == pytest.approx(1.3581, abs=1e-4)
    assert ks_critical(0.001) == pytest.approx(1.9495, abs=1e-4)


def test_ticks_and_text() -> None:
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(3.0, 1234.0) == [200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0]
    assert text('<a href="x">\x1b[31m') == "&lt;a href=&quot;x&quot;&gt;\\x1b[31m"


def test_report_of_merged_shard_summaries_is_the_report_of_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rows = golden_rows()
    options = ("--group-by", "model", "--time-field", "ts", "--check-sampler")  # the sampler tally saved too
    whole = report_of(write_jsonl(Path("all.jsonl"), rows), Path("whole.html"), *options).decode()
    shards = []
    for index, part in enumerate((rows[1::2], rows[::2])):  # shards need not be contiguous in time
        log = write_jsonl(Path(f"part-{index}.jsonl"), part)
        saved = invoke("audit", str(log), "-o", "csv", *options, "--summary-out", f"part-{index}.json")
        assert saved.exit_code == 0, saved.stderr
        shards += ["--summary", f"part-{index}.json"]
    result = invoke("report", *shards, "-o", "merged.html")
    assert result.exit_code == 0, result.stderr
    merged = Path("merged.html").read_text()
    assert merged.replace("part-0.json, part-1.json", "all.jsonl") == whole


def test_report_takes_logs_or_summaries_not_both(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", golden_rows())
    result = invoke("report", str(log), "--summary", str(log), "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 2 and "not both" in result.stderr


def test_report_of_parquet_is_the_report_of_the_same_jsonl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.chdir(tmp_path)
    rows = golden_rows()
    pq.write_table(pa.Table.from_pylist(rows), "log.parquet")  # ts: ISO strings, model: strings, p/q/r: lists
    options = ("--group-by", "model", "--time-field", "ts")
    parquet = report_of(Path("log.parquet"), Path("p.html"), *options).decode()
    jsonl = report_of(write_jsonl(Path("log.jsonl"), rows), Path("j.html"), *options).decode()
    assert parquet.replace("log.parquet", "log.jsonl") == jsonl


def test_an_empty_log_gets_a_page_without_plots(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    page = report_of(empty, tmp_path / "r.html", "--check-sampler", "--time-field", "ts").decode()
    assert "data-plot" not in page
    assert "No tokens were examined: there is nothing to plot." in page
