"""`watch` against broken and hostile servers on 127.0.0.1: a broken page is refused and shown, never counted.

The server is a raw socket loop (not http.server), so that it can do what real servers and proxies do
wrong: trickle one byte a second, cut a page short of its Content-Length, serve every series twice,
gzip the page, put escape sequences in the reason phrase, redirect in a loop or to ftp:// (issue 36).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines import counters, prom_text, simulate

ENV = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
SECRET = "tok-8c1f0e77"


def _many_series() -> bytes:
    """60 MB of distinct vLLM series (under the 64 MiB cap): a page that parsed to 3.25 GB."""
    line = 'vllm:spec_decode_num_drafts_total{engine="0",model_name="m%07d"} 1.0\n'
    return "".join(line % i for i in range(60_000_000 // len(line % 0))).encode()


BIG_PAGES = {"many": _many_series, "newlines": lambda: b"\n" * (64 << 20)}


class Hostile:
    """One listening socket; each connection is answered by the behaviour its path names."""

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.scrapes: dict[str, int] = {}
        self.runs_after_first: dict[str, int] = {}
        self.lock = threading.Lock()
        self.landed_headers: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def page(self, name: str) -> bytes:
        """vLLM's counters for endpoint `name`, grown by 40 drafts per scrape (the runs after the first count)."""
        with self.lock:
            count = self.scrapes.get(name, 0) + 1
            self.scrapes[name] = count
            if count > 1:
                self.runs_after_first[name] = self.runs_after_first.get(name, 0) + 40
        lengths, accepted = simulate(7, 40 * count, 4, 0.7)
        return ("\n".join(prom_text(counters(lengths, accepted, 4))) + "\n").encode()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                piece = connection.recv(4096)
                if not piece:
                    return
                request += piece
            path = request.split(b" ", 2)[1].decode()
            name = path.split("?", 1)[0].strip("/")
            with contextlib.suppress(OSError):  # the watch hung up (a timeout, a stop)
                self._behave(connection, name, path, request)

    def _send(self, connection: socket.socket, status: str, body: bytes, *headers: str) -> None:
        head = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close", *headers]
        connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body)

    def _behave(self, connection: socket.socket, name: str, path: str, request: bytes = b"") -> None:
        if name in ("ok", "other", "secret"):
            self._send(connection, "200 OK", self.page(name), "Content-Type: text/plain; version=0.0.4")
        elif name == "slow":  # slowloris: one byte a second, for ever
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Padding: " + b"a" * 10_000:
                if self.stopped.is_set():
                    return
                connection.sendall(bytes([byte]))
                time.sleep(1)
        elif name == "dup":  # every series twice in one page
            page = self.page(name)
            self._send(connection, "200 OK", page + page)
        elif name == "blank":  # blank lines inside one page are one page (the exposition format ignores them)
            self._send(
                connection,
                "200 OK",
                self.page(name).replace(b"\nvllm:spec_decode_num_accepted", b"\n\nvllm:spec_decode_num_accepted"),
            )
        elif name == "cut":  # Content-Length larger than the body, then the connection closes
            page = self.page(name)
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(page)}\r\nConnection: close\r\n\r\n".encode()
            connection.sendall(head + page[: len(page) * 2 // 3])
        elif name == "unended":  # no Content-Length, closed inside a line
            page = self.page(name)
            connection.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + page[: len(page) - 3])
        elif name in BIG_PAGES:
            self._send(connection, "200 OK", BIG_PAGES[name]())
        elif name == "gzip":
            self._send(connection, "200 OK", gzip.compress(self.page(name)), "Content-Encoding: gzip")
        elif name == "reason":
            self._send(connection, "500 \x1b[2J\x1b[31mOWNED\u202egnp.exe", b"")
        elif name == "loop":
            self._send(connection, "302 Found", b"", "Location: /loop")
        elif name == "away":  # to another host (127.0.0.2 is this machine too): the token must not follow
            self._send(connection, "302 Found", b"", f"Location: http://127.0.0.2:{self.port}/landed")
        elif name == "landed":
            with self.lock:
                self.landed_headers.append(request)
            self._send(connection, "200 OK", self.page(name))
        elif name == "ftp":
            self._send(connection, "302 Found", b"", f"Location: ftp://127.0.0.1:{self.port}/ftp-reached")
        elif name == "ftp-reached":
            self._send(connection, "200 OK", self.page(name))
        else:
            self._send(connection, "404 Not Found", b"")

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    try:
        yield server
    finally:
        server.close()


def _watch(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "specaccept_cli", "watch", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )


def _run_for(seconds: float, *args: str) -> tuple[list[dict[str, object]], str, float, int]:
    """Watch for `seconds`, then SIGTERM: the records, stderr, how long the stop took, the exit status."""
    process = _watch("--every", "1s", "--retries", "0", "-o", "jsonl", *args)
    time.sleep(seconds)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    took = time.monotonic() - started
    return [json.loads(line) for line in out.splitlines()], err.decode(), took, process.returncode


def _counted(runs: object, served: int) -> bool:
    """Every page read was counted: `served` minus at most the one page a stop cut short, in whole pages."""
    assert isinstance(runs, int)
    return runs > 0 and runs % 40 == 0 and served - 40 <= runs <= served


def _endpoint(record: dict[str, object], url: str) -> dict[str, object]:
    found = [item for item in record["endpoints"] if item["url"] == url]  # type: ignore[attr-defined]
    assert len(found) == 1, record["endpoints"]
    return found[0]  # type: ignore[no-any-return]


def test_a_slowloris_endpoint_times_out_and_delays_no_other(hostile: Hostile) -> None:
    slow, ok = hostile.url("/slow"), hostile.url("/ok")
    records, err, took, status = _run_for(6.5, slow, ok, "--timeout", "2")
    assert status == 0, err
    assert took < 3, f"stopping took {took:.1f}s"
    final = records[-1]
    assert _endpoint(final, slow)["error"] == "timed out after 2s"
    assert _endpoint(final, ok)["up"] is True
    # The good endpoint was scraped every period, not once per slow scrape.
    assert hostile.scrapes["ok"] >= 5
    assert _counted(final["total"]["runs"], hostile.runs_after_first["ok"])  # type: ignore[index]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/dup", "appears twice in one page"),
        ("/cut", "page cut short"),
        ("/unended", "ends inside a line"),
    ],
)
def test_a_broken_page_is_refused_and_never_counted(hostile: Hostile, path: str, words: str) -> None:
    records, err, _, status = _run_for(3.5, hostile.url(path))
    assert status == 2, err  # the only endpoint never answered with a page that was read: nothing was measured
    final = records[-1]
    state = _endpoint(final, hostile.url(path))
    assert state["up"] is False and words in str(state["error"])
    assert final["total"]["runs"] == 0  # type: ignore[index]
    assert hostile.scrapes[path.strip("/")] >= 2
    assert any(words in line for line in err.splitlines())


@pytest.mark.parametrize("path", ["/gzip", "/blank"])
def test_a_gzip_page_and_blank_lines_are_read(hostile: Hostile, path: str) -> None:
    records, err, _, status = _run_for(3.5, hostile.url(path))
    assert status == 0, err
    final = records[-1]
    assert _endpoint(final, hostile.url(path))["up"] is True
    runs = final["total"]["runs"]  # type: ignore[index]
    assert _counted(runs, hostile.runs_after_first[path.strip("/")])


def test_a_reason_phrase_is_escaped_and_a_redirect_loop_is_one_line(hostile: Hostile) -> None:
    process = _watch(hostile.url("/reason"), hostile.url("/loop"), "--every", "1s", "--retries", "0", "-o", "table")
    time.sleep(3.5)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    text = out.decode() + err.decode()
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\x1b[2J" in text and "\\u202e" in text
    loop = [line for line in err.decode().splitlines() if "/loop" in line and line.startswith("specaccept: ")]
    assert len(loop) == 1 and "redirect loop" in loop[0], err.decode()


def test_a_redirect_to_ftp_is_not_followed(hostile: Hostile) -> None:
    records, _, _, _ = _run_for(2.5, hostile.url("/ftp"))
    state = _endpoint(records[-1], hostile.url("/ftp"))
    assert "only http and https are followed" in str(state["error"])
    assert "ftp-reached" not in hostile.scrapes


def test_a_token_in_the_query_is_written_nowhere(hostile: Hostile, tmp_path: Path) -> None:
    url = hostile.url(f"/secret?token={SECRET}&format=text")
    summary, html = tmp_path / "summary.json", tmp_path / "report.html"
    records, err, _, status = _run_for(3.5, url, "--summary-out", str(summary), "--html", str(html))
    assert status == 0, err
    shown = hostile.url("/secret?token=***&format=***")
    assert _endpoint(records[-1], shown)["up"] is True
    for text in (json.dumps(records), err, summary.read_text(), html.read_text()):
        assert SECRET not in text
    assert _counted(records[-1]["total"]["runs"], hostile.runs_after_first["secret"])  # type: ignore[index]


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory is read from /proc")
@pytest.mark.parametrize(("path", "words"), [("/many", "spec-decoding series"), ("/newlines", "lines, more than")])
def test_a_page_that_would_take_gigabytes_is_refused_in_bounded_memory(hostile: Hostile, path: str, words: str) -> None:
    process = _watch(hostile.url(path), "--every", "2s", "--retries", "0", "--timeout", "20", "-o", "jsonl")
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    records: list[dict[str, object]] = []
    while time.monotonic() < deadline:  # until a record shows the page refused
        record = json.loads(process.stdout.readline())
        records.append(record)
        if _endpoint(record, hostile.url(path))["error"]:
            break
    peak = _peak_mib(process.pid)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    state = _endpoint(records[-1], hostile.url(path))
    assert words in str(state["error"]), err.decode()
    # The page itself (64 MiB at most), its bytes joined once, and the interpreter: never a parse of it.
    assert peak < 400, f"peak {peak:.0f} MiB"
    assert process.returncode == 2  # its only endpoint never answered with a page that was read


# --- what watch shows: the verdict, groups, the engine's own rate, the final table, the terminal --------------


def test_a_refused_endpoint_is_in_the_verdict_and_groups_and_the_engines_rate_are_in_the_records(
    hostile: Hostile, tmp_path: Path
) -> None:
    ok = hostile.url("/ok")
    refused = "http://127.0.0.1:1/metrics"
    summary = tmp_path / "summary.json"
    records, err, _, status = _run_for(
        5.5, ok, refused, "--group-by", "model_name", "--summary-out", str(summary), "-o", "table"
    )
    assert status == 0, err
    for record in records[1:]:
        warnings = [entry for entry in record["verdict"] if entry["check"] == "endpoint"]  # type: ignore[attr-defined]
        assert warnings == [
            {
                "check": "endpoint",
                "status": "warn",
                "text": f"{refused} never answered: cannot connect: Connection refused",
            }
        ]
    final = records[-1]
    runs = final["total"]["runs"]  # type: ignore[index]
    assert _counted(runs, hostile.runs_after_first["ok"])
    assert [(group["group"], group["runs"]) for group in final["groups"]] == [("m", runs)]  # type: ignore[attr-defined]
    drafted = 4 * runs  # type: ignore[operator]
    assert final["total"]["acceptance_rate"] == final["total"]["accepted_tokens"] / drafted  # type: ignore[index]
    # The final summary's verdict says it too, as its view does (the human view is on stderr: not a terminal).
    assert f"{refused} never answered" in err
    assert "never answered" not in summary.read_text()  # the saved summary is the counts, not the verdict
    lines_read = [line for line in err.splitlines() if "lines read" in line]
    cells = lines_read[0].split("│")
    pages = hostile.scrapes["ok"]
    assert int(cells[2].strip().replace(",", "")) >= 10 * (pages - 1)  # ten lines a page, every good page read
    assert re.search(r"\b[1-9][0-9,]* metrics lines", cells[3]), lines_read
    labels = [line.split("│")[1].strip() for line in err.splitlines() if "(scrape " in line]
    assert len(labels) >= 2 and len(set(labels)) == len(labels)  # each interval told apart


@pytest.mark.skipif(shutil.which("tmux") is None, reason="the terminal is tmux's")
def test_the_terminal_view_redraws_in_place_with_alerts_above_it_groups_and_the_engines_rate(
    hostile: Hostile, tmp_path: Path
) -> None:
    socket_name = f"specaccept-test-{os.getpid()}"
    command = (
        f"{sys.executable} -m specaccept_cli watch {hostile.url('/ok')} http://127.0.0.1:1/m --every 1s --retries 0"
        " --alert --min-alpha 0.7 --group-by model_name; sleep 60"
    )
    tmux = ["tmux", "-L", socket_name]
    env = {key: value for key, value in ENV.items() if key not in ("TERM", "NO_COLOR", "COLUMNS")}
    subprocess.run([*tmux, "new-session", "-d", "-s", "w", "-x", "90", "-y", "14", command], env=env, check=True)
    try:
        time.sleep(7)
        screen = subprocess.run(
            [*tmux, "capture-pane", "-p", "-S", "-500", "-t", "w"], capture_output=True, check=True, env=env
        ).stdout.decode()
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False)
    assert screen.count("specaccept live") == 1, screen  # one frame, however often it was drawn
    assert screen.count("alert: gate alpha FAILS") == 1, screen  # above the frame, not through it
    assert screen.index("alert: gate alpha") < screen.index("specaccept live")
    assert "engine's rate" in screen and "accepted / drafted" in screen
    assert "never answered" in screen


def test_a_redirect_to_another_host_gets_no_header(hostile: Hostile) -> None:
    second = socket.socket()
    try:
        second.bind(("127.0.0.2", hostile.port))  # 127.0.0.2 answers on Linux: the same server, another host
    except OSError:
        pytest.skip("127.0.0.2 is not this machine here")
    second.listen(16)

    def relay() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = second.accept()
                threading.Thread(target=hostile._answer, args=(connection,), daemon=True).start()

    threading.Thread(target=relay, daemon=True).start()
    try:
        records, err, _, status = _run_for(4.5, hostile.url("/away"), "--header", f"Authorization=Bearer {SECRET}")
    finally:
        second.close()
    assert status == 0, err
    assert _endpoint(records[-1], hostile.url("/away"))["up"] is True, records[-1]["endpoints"]
    assert hostile.landed_headers and all(SECRET.encode() not in request for request in hostile.landed_headers)
