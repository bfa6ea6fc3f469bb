"""`audit --follow` on real pipes and files, and `watch` on a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specaccept_cli.read.follow import FollowedStream
from tests.engines import counters, prom_text, simulate, vllm_full_line
from tests.helpers import expected_accepted, invoke, jsonl_bytes, random_rows

ENV = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}


def _start(*args: str, stdin: int | None = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "specaccept_cli", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )


def _records(process: subprocess.Popen[bytes], count: int, timeout: float = 30) -> list[dict[str, object]]:
    """Read `count` interval records from a running process's stdout as they appear."""
    assert process.stdout is not None
    records: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} records in {timeout}s"
        line = process.stdout.readline()
        assert line, "stdout ended early"
        records.append(json.loads(line))
    return records


def _feed(pipe: object, lines: list[bytes], per_second: float, stop: threading.Event) -> threading.Thread:
    """Write `lines` to `pipe` at a steady rate from a thread (a server writing its log)."""

    def write() -> None:
        for line in lines:
            if stop.is_set():
                return
            try:
                pipe.write(line + b"\n")  # type: ignore[attr-defined]
                pipe.flush()  # type: ignore[attr-defined]
            except (BrokenPipeError, ValueError):
                return
            time.sleep(1 / per_second)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


ROWS = random_rows(2000, seed=11)
LINES = jsonl_bytes(ROWS).splitlines()


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_a_followed_pipe_shows_intervals_as_they_happen_and_a_signal_ends_it_normally(stop_signal: int) -> None:
    process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl", "--min-alpha", "0.01")
    assert process.stdin is not None
    stop = threading.Event()
    writer = _feed(process.stdin, LINES, per_second=150, stop=stop)
    records = _records(process, 3)  # at least three intervals while the writer still writes
    assert writer.is_alive(), "the intervals came only after the writer stopped"
    assert all(record["schema"] == "specaccept.interval/1" and not record["final"] for record in records)
    assert [record["index"] for record in records] == [0, 1, 2]
    assert sum(record["interval"]["runs"] for record in records) == records[-1]["total"]["runs"]  # type: ignore[index]
    stop.set()
    writer.join()
    time.sleep(0.3)
    process.send_signal(stop_signal)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    rest = [json.loads(line) for line in out.splitlines()]
    final = rest[-1]
    assert final["final"] is True
    runs = final["total"]["runs"]
    # Every line written before the signal is counted (whole lines only; none was half written here).
    written = LINES[:runs]
    assert (
        runs >= 3
        and sum(expected_accepted([json.loads(line) for line in written])) == final["total"]["accepted_tokens"]
    )
    assert final["gates"] == [
        {
            "metric": "alpha",
            "threshold": 0.01,
            "value": final["total"]["alpha"],
            "passed": True,
            "outcome": "passed",
            "bounds_ci": None,
        }
    ]
    assert b"Traceback" not in err


def test_a_follow_that_ends_at_eof_prints_the_final_table_and_applies_the_gates(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(jsonl_bytes(ROWS[:300]))
    with log.open("rb") as stdin:
        process = _start("audit", "--follow", "--every", "1s", "--min-alpha", "0.99", stdin=stdin.fileno())
        out, err = process.communicate(timeout=30)
    assert process.returncode == 1
    records = [json.loads(line) for line in out.splitlines()]  # not a terminal: JSON lines only, the final last
    assert records[-1]["final"] is True and records[-1]["total"]["runs"] == 300
    text = err.decode()  # the final view is human text: on stderr
    assert "300" in text and "Gates" in text
    assert "--min-alpha 0.99" in text


def test_a_followed_file_is_read_across_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "server.jsonl"
    log.write_bytes(jsonl_bytes(ROWS[:100]))
    process = _start("audit", "--follow", str(log), "--every", "1s", "-o", "jsonl", stdin=subprocess.DEVNULL)
    _records(process, 1)
    with log.open("ab") as handle:
        handle.write(jsonl_bytes(ROWS[100:150]))
    time.sleep(1.5)
    log.rename(tmp_path / "server.jsonl.1")  # rotation: a new file under the same name
    log.write_bytes(jsonl_bytes(ROWS[150:250]))
    time.sleep(1.5)
    log.write_bytes(jsonl_bytes(ROWS[250:260]))  # truncated and written again
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    final = json.loads(out.splitlines()[-1])
    assert final["final"] is True
    assert final["total"]["runs"] == 260
    assert final["total"]["accepted_tokens"] == sum(expected_accepted(ROWS[:260]))
    assert "rotated" in err.decode() and "truncated" in err.decode()


def test_engine_metrics_lines_count_live() -> None:
    lines = []
    truth = 0
    for seed in range(6):
        lengths, accepted = simulate(seed, 300, 5, 0.7)
        truth += int(accepted.sum())
        lines.append(vllm_full_line(*counters(lengths, accepted, 5)).encode())
    process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl")
    assert process.stdin is not None
    writer = _feed(process.stdin, lines, per_second=3, stop=threading.Event())
    records = _records(process, 2)
    assert records[-1]["total"]["runs"] > 0  # type: ignore[index]
    writer.join()
    process.stdin.close()  # EOF ends the follow like a signal
    process.stdin = None
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    final = json.loads(out.splitlines()[-1])
    assert final["total"]["accepted_tokens"] == truth
    assert final["total"]["runs"] == 6 * 300


SLOW_STOP = """
import sys, threading, time
from specaccept_cli.cli.live import stopping_on_signals
stop = threading.Event()
with stopping_on_signals(stop):
    print("ready", flush=True)
    stop.wait(30)
    print("stopping", flush=True)
    time.sleep(30)  # a slow final summary
print("finished", flush=True)
"""


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_stops_in_order_and_a_second_quits_at_once(stop_signal: int) -> None:
    process = subprocess.Popen([sys.executable, "-c", SLOW_STOP], stdout=subprocess.PIPE, env=ENV)
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"
    process.send_signal(stop_signal)
    assert process.stdout.readline() == b"stopping\n"  # the first: an orderly end, not death
    time.sleep(1.2)  # past the moment within which the same signal again is the same request
    started = time.monotonic()
    process.send_signal(stop_signal)
    process.wait(timeout=10)
    process.stdout.close()
    assert process.returncode == -stop_signal  # the second: dies of it, without finishing
    assert time.monotonic() - started < 5


def test_live_options_need_follow_and_one_input(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(jsonl_bytes(ROWS[:3]))
    result = invoke("audit", str(log), "--every", "5s")
    assert result.exit_code == 2 and "--every applies to a live audit" in result.output
    result = invoke("audit", str(log), str(log), "--follow")
    assert result.exit_code == 2 and "follows one input" in result.output
    result = invoke("audit", str(log), "--follow", "--every", "0s")
    assert result.exit_code == 2 and "is not a duration" in result.output
    result = invoke("audit", str(log), "--follow", "-o", "csv")
    assert result.exit_code == 2 and "not csv" in result.output


def test_a_stopped_stream_holds_back_a_line_still_being_written() -> None:
    read_end, write_end = os.pipe()
    stop = threading.Event()
    stream = FollowedStream("<pipe>", stop, fd=read_end, poll=0.05)
    os.write(write_end, b'{"a": 1}\n{"b": ')
    assert stream.read(1 << 19) == b'{"a": 1}\n'  # the whole line at once, without waiting for more
    stop.set()
    assert stream.read(1 << 19) == b""
    assert stream.unfinished_bytes == len(b'{"b": ')
    os.close(write_end)
    os.close(read_end)


def test_at_a_real_end_the_last_line_is_read_as_it_is() -> None:
    read_end, write_end = os.pipe()
    stream = FollowedStream("<pipe>", threading.Event(), fd=read_end, poll=0.05)
    os.write(write_end, b"one\ntwo")
    os.close(write_end)
    assert stream.read(100) == b"one\n"
    assert stream.read(100) == b"two"
    assert stream.read(100) == b""
    os.close(read_end)


# --- watch: a real HTTP server on 127.0.0.1 -----------------------------------------------------


class _Server:
    """Serves vLLM counters that grow per scrape; `mode` makes it fail, hang or restart (counters reset)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.scrapes = 0
        self.lengths: list[object] = []
        self.total = (0, 0, 0, [0] * 4)
        self.counted_runs = 0  # runs added after the first successful scrape: what watch must count
        self.counted_accepted = 0
        self.started = False
        self.lock = threading.Lock()

    def grow(self, seed: int) -> None:
        lengths, accepted = simulate(seed, 50, 4, 0.75)
        drafts, tokens, acc, per_pos = counters(lengths, accepted, 4)
        d0, t0, a0, p0 = self.total
        self.total = (d0 + drafts, t0 + tokens, a0 + acc, [x + y for x, y in zip(p0, per_pos)])
        if self.started:
            self.counted_runs += drafts
            self.counted_accepted += acc

    def body(self) -> bytes:
        with self.lock:
            self.scrapes += 1
            if self.mode == "reset":  # a restarted server: counters from zero, then growing again
                self.total = (0, 0, 0, [0] * 4)
                self.mode = "ok"
            self.grow(self.scrapes)
            self.started = True
            return ("\n".join(prom_text(self.total)) + "\n").encode()


@pytest.fixture
def metrics_server() -> Iterator[tuple[str, _Server]]:
    state = _Server()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != "Bearer s3cret-token":
                self.send_error(401)
                return
            if state.mode == "fail":
                self.send_error(500)
                return
            if state.mode == "hang":
                time.sleep(2.5)
                self.send_error(503)
                return
            body = state.body()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", state
    finally:
        server.shutdown()
        server.server_close()


def test_watch_counts_what_happens_while_watching_through_failures_hangs_and_a_restart(
    metrics_server: tuple[str, _Server],
) -> None:
    url, state = metrics_server
    process = _start(
        "watch",
        url,
        "--every",
        "1s",
        "--timeout",
        "1",
        "--retries",
        "0",
        "--header",
        "Authorization=Bearer s3cret-token",
        "-o",
        "jsonl",
        "--group-by",
        "model_name",
        stdin=subprocess.DEVNULL,
    )
    seen: list[dict[str, object]] = _records(process, 3)
    state.mode = "fail"
    seen += _records(process, 2)
    state.mode = "hang"
    seen += _records(process, 3)
    state.mode = "reset"
    seen += _records(process, 3)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    records = seen + [json.loads(line) for line in out.splitlines() if line.startswith(b"{")]
    endpoint_states = [record["endpoints"][0] for record in records]  # type: ignore[index]
    assert any(item["error"] == "HTTP 500 Internal Server Error" for item in endpoint_states)
    assert any(item["error"] == "timed out after 1s" for item in endpoint_states)
    final = records[-1]
    assert final["final"] is True
    last = final["endpoints"][0]  # type: ignore[index]
    assert last["up"] is True and last["counter_resets"] == 1 and last["failed_scrapes"] >= 2
    # Every run served after the first scrape is counted: across the failures (the next good scrape counts
    # the gap) and the restart (counted from zero, as Prometheus's increase() does).
    assert final["total"]["runs"] == state.counted_runs  # type: ignore[index]
    assert final["total"]["accepted_tokens"] == state.counted_accepted  # type: ignore[index]
    text = out.decode() + err.decode()
    assert "s3cret-token" not in text and "Traceback" not in text


def test_watch_refuses_what_is_not_an_http_url() -> None:
    result = invoke("watch", "ftp://example.invalid/metrics")
    assert result.exit_code == 2 and "not an http:// or https:// URL" in result.output
    result = invoke("watch", "http://127.0.0.1:1/metrics", "--header", "Authorization")
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


def test_a_followed_stream_is_clustered_by_its_request_field_and_payloads_count_live(tmp_path: Path) -> None:
    rows = [{**row, "request_id": f"r{index // 10}"} for index, row in enumerate(ROWS[:200])]
    log = tmp_path / "runs.jsonl"
    log.write_bytes(jsonl_bytes(rows))
    with log.open("rb") as stdin:
        process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl", stdin=stdin.fileno())
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    total = json.loads(out.splitlines()[-1])["total"]
    assert (total["runs"], total["over"], total["cluster_field"], total["clusters"]) == (
        200,
        "clusters",
        "request_id",
        20,
    )
    payloads = Path(__file__).resolve().parents[2] / "examples" / "vllm-payloads.jsonl"
    with payloads.open("rb") as stdin:
        process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl", stdin=stdin.fileno())
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    total = json.loads(out.splitlines()[-1])["total"]
    assert total["over"] == "clusters" and total["clusters"] == 24 and total["runs"] == 662


def test_the_first_line_shows_in_the_first_period_even_when_nothing_follows() -> None:
    """Telling the request field reads the first row ahead: it must not wait for a second line to hand it on."""
    process = _start("audit", "--follow", "--every", "1s", "-o", "jsonl")
    assert process.stdin is not None
    try:
        process.stdin.write(jsonl_bytes([{**ROWS[0], "request_id": "r1"}]))
        process.stdin.flush()  # and nothing more: the stream stays open and quiet
        # Periods end on whole seconds, so the line may land in the first period or the next; never later.
        shown = [record["total"] for record in _records(process, 3)]
        assert any(total["runs"] == 1 and total["cluster_field"] == "request_id" for total in shown[:2]), shown
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert process.returncode == 0
