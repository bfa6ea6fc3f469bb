"""Engine output that repeats itself or holds nothing: a vLLM metrics line delivered twice by a log shipper is
counted once and said, two engines' equal lines are both counted, and a scrape with no metric says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specaccept_cli.read.engines import parse_engine_log
from specaccept_cli.read.engines.repeats import REPEAT_WINDOW, VllmRepeats
from tests.engines import counters, prom_text, server_log, simulate, vllm_full_line

WARNING = "metrics lines repeated an earlier one exactly (time stamp and process included)"


def _audit(path: Path, *options: str) -> tuple[int, dict[str, object], str]:
    result = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", str(path), "-o", "json", *options],
        capture_output=True,
        check=False,
    )
    data = json.loads(result.stdout) if result.stdout else {}
    return result.returncode, data, result.stderr.decode()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_log_shippers_duplicates_are_counted_once_said_and_kept_on_request(tmp_path: Path) -> None:
    lines = server_log(seed=7, intervals=12, k=4, alpha=0.75)  # per interval: access, Engine 000, SpecDecoding
    once = _write(tmp_path / "once.log", lines)
    # At-least-once delivery: each line sent twice in a row, and then the last batch of six sent again.
    twice = _write(tmp_path / "twice.log", [line for line in lines for _ in range(2)] + lines[-6:])
    status, truth, _ = _audit(once)
    assert status == 0 and truth["engine"]["duplicate_lines"] == 0
    status, data, err = _audit(twice)
    assert status == 0, err
    assert data["runs"] == truth["runs"] and data["accepted_tokens"] == truth["accepted_tokens"]
    assert data["alpha_ci"] == truth["alpha_ci"]  # not sqrt(2) too narrow
    assert data["engine"]["duplicate_lines"] == 12 + 2
    assert data["engine"]["metrics_lines"] == 12 and data["engine"]["lines"] == 2 * len(lines) + 6
    said = [entry["text"] for entry in data["verdict"] if entry["status"] == "warn"]
    assert f"14 {WARNING}: taken for a log shipper's duplicate, dropped, not counted twice" in said
    assert f"specaccept: warning: 14 {WARNING}" in err and "(--keep-duplicate-lines)" in err
    status, kept, err = _audit(twice, "--keep-duplicate-lines")
    assert status == 0 and WARNING not in err
    tail = _audit(_write(tmp_path / "tail.log", lines[-6:]))[1]["runs"]  # the batch sent a third time
    assert kept["runs"] == 2 * truth["runs"] + tail
    assert kept["engine"]["duplicate_lines"] == 0


def test_two_engines_of_one_process_printing_the_same_line_in_the_same_second_are_both_counted(tmp_path: Path) -> None:
    lengths, accepted = simulate(3, 200, 4, 0.7)
    metrics = vllm_full_line(*counters(lengths, accepted, 4))
    engine = (
        "(APIServer pid=4242) INFO 11-30 13:00:01 [loggers.py:123] Engine {:03d}: Avg prompt throughput: 0.0 tokens/s"
    )
    log = _write(tmp_path / "dp.log", [engine.format(0), metrics, engine.format(1), metrics])
    status, data, err = _audit(log)
    assert status == 0, err
    assert data["runs"] == 400 and data["engine"]["duplicate_lines"] == 0 and WARNING not in err
    # The same pair delivered again (engine line and metrics line) is a duplicate of each.
    again = _write(tmp_path / "dp-again.log", [engine.format(0), metrics, engine.format(1), metrics] * 2)
    status, data, _ = _audit(again)
    assert data["runs"] == 400 and data["engine"]["duplicate_lines"] == 2


def test_a_repeated_line_without_a_time_stamp_is_counted(tmp_path: Path) -> None:
    lengths, accepted = simulate(5, 300, 4, 0.7)
    bare = vllm_full_line(*counters(lengths, accepted, 4)).split("] ", 1)[1]  # no logger prefix: nothing dates it
    status, data, err = _audit(_write(tmp_path / "bare.log", [bare, bare]))
    assert status == 0, err
    assert data["runs"] == 600 and data["engine"]["duplicate_lines"] == 0


def test_the_window_of_lines_remembered_is_bounded() -> None:
    repeats = VllmRepeats()
    line = "(APIServer pid=1) INFO 11-30 13:00:{:02d} [metrics.py:120] SpecDecoding metrics: Accepted: {} tokens"
    first = line.format(0, 0)
    assert not repeats.repeated(first) and repeats.repeated(first)
    for i in range(1, 3 * REPEAT_WINDOW):
        assert not repeats.repeated(line.format(i % 60, i))
        repeats.context(f"(APIServer pid={i}) INFO 11-30 13:00:01 [loggers.py:123] Engine 000: Avg")
    assert len(repeats.seen) == len(repeats.recent) == REPEAT_WINDOW
    assert len(repeats.engine_of) <= REPEAT_WINDOW
    assert not repeats.repeated(first)  # further back than the window: a line of its own


def test_the_parser_counts_repeats_apart_from_metrics_ignored_and_bad_lines() -> None:
    lengths, accepted = simulate(9, 100, 3, 0.6)
    metrics = vllm_full_line(*counters(lengths, accepted, 3))
    parse = parse_engine_log([metrics, "hello", metrics, metrics], "x.log")
    items = list(parse)
    assert len(items) == 1
    assert (parse.tally.lines, parse.tally.metrics, parse.tally.ignored, parse.tally.duplicates) == (4, 1, 1, 2)
    kept = parse_engine_log([metrics, "hello", metrics, metrics], "x.log", keep_duplicates=True)
    assert len(list(kept)) == 3 and kept.tally.duplicates == 0


# --- a scrape with no metric -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "options"),
    [
        ("empty.prom", "", ()),
        ("comments.prom", "# HELP x y\n# TYPE x counter\n", ()),
        ("node.prom", "# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total 3\n", ()),
        ("node.txt", "node_cpu_seconds_total 3\nprocess_open_fds 9\n", ("--format", "prometheus")),
    ],
)
def test_a_scrape_with_no_metric_says_so_and_exits_2(
    tmp_path: Path, name: str, text: str, options: tuple[str, ...]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    status, data, err = _audit(path, *options)
    lines = text.count("\n")
    assert status == 2 and not data
    assert err.startswith(f"specaccept: {path}: no prometheus metrics lines among its {lines} lines (no sample of a ")
    assert "vllm:spec_decode_*" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_scrape_with_no_metric_beside_a_good_one_is_an_unreadable_source_under_skip(tmp_path: Path) -> None:
    lengths, accepted = simulate(2, 200, 4, 0.7)
    good = _write(tmp_path / "good.prom", prom_text(counters(lengths, accepted, 4)))
    empty = tmp_path / "empty.prom"
    empty.write_text("# nothing scraped\n")
    status, data, err = _audit(good, "--on-error", "skip")
    assert status == 0, err
    status, both, err = _audit(good, "--on-error", "skip", str(empty))
    assert status == 0, err
    assert both["runs"] == data["runs"] == 200 and both["skipped_sources"] == 1
