"""Runs that read nothing say so: an empty log exits 0 and its first screen (and -o json) says nothing was read;
a `watch` whose endpoints never gave a page that could be read ends with exit 2, not 0."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.engines import counters, prom_text
from tests.helpers import run_process

NOTHING = "nothing was read: the input holds no rows (it is empty, or blank lines only)"


@pytest.mark.parametrize("content", [b"", b"\n  \n\t\r\n\n"], ids=["no bytes", "blank lines"])
def test_an_empty_log_exits_0_and_its_first_screen_says_nothing_was_read(tmp_path: Path, content: bytes) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_bytes(content)
    for argument, stdin in ((str(log), None), ("-", content)):
        done = run_process("audit", argument, input=stdin)
        assert done.returncode == 0, done.stderr
        screen = " ".join(done.stdout.decode().split())  # the panel may fold the line
        assert "warn nothing was read: the input holds no rows (it is empty, or blank lines only)" in screen
        as_json = run_process("audit", argument, "-o", "json", input=stdin)
        assert as_json.returncode == 0
        verdict = json.loads(as_json.stdout)["verdict"]
        assert {"check": "input", "status": "warn", "text": NOTHING} in verdict


def test_a_log_with_runs_does_not_say_nothing_was_read(tmp_path: Path) -> None:
    log = tmp_path / "one.jsonl"
    log.write_bytes(b'\n{"p": [0.5], "q": [0.5], "r": [0.1]}\n\n')
    done = run_process("audit", str(log), "-o", "json")
    assert done.returncode == 0
    assert all(entry["check"] != "input" for entry in json.loads(done.stdout)["verdict"])


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Metrics(http.server.BaseHTTPRequestHandler):
    """vLLM's counters, grown by 40 drafts of k = 4 per scrape."""

    scrapes = 0

    def do_GET(self) -> None:
        type(self).scrapes += 1
        rng = np.random.default_rng(type(self).scrapes)
        lengths = np.full(40 * type(self).scrapes, 4)
        accepted = rng.integers(0, 5, lengths.shape[0])
        body = ("\n".join(prom_text(counters(lengths, accepted, 4))) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _watch_for(seconds: float, *urls: str) -> tuple[int, str, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "specaccept_cli", "watch", *urls, "--every", "1s", "--retries", "0", "-o", "json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"},
    )
    time.sleep(seconds)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    return process.returncode, out.decode(), err.decode()


def test_watch_of_a_closed_port_ends_non_zero_saying_nothing_was_measured() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    status, out, err = _watch_for(3.5, url)
    assert status == 2, err
    assert err.splitlines()[-1].startswith(f"specaccept: {url}: no scrape of the endpoint could be read (")
    assert "nothing was measured" in err and "Traceback" not in err
    final = json.loads(out)  # the final summary is still written, then the error
    assert final["runs"] == 0
    assert [entry["text"] for entry in final["verdict"] if entry["check"] == "endpoint"] == [
        f"{url} never answered: cannot connect: Connection refused"
    ]
    assert all(entry["check"] != "input" for entry in final["verdict"])  # the endpoint's own words say why


def test_watch_of_a_server_that_answers_ends_0(server: str) -> None:
    status, out, err = _watch_for(3.5, server)
    assert status == 0, err
    assert json.loads(out)["runs"] > 0
    assert "no scrape" not in err


def test_watch_with_one_endpoint_answering_ends_0(server: str) -> None:
    status, out, err = _watch_for(3.5, server, f"http://127.0.0.1:{_closed_port()}/metrics")
    assert status == 0, err
    assert json.loads(out)["runs"] > 0
