"""`s3://` and `gs://` reads against stores on 127.0.0.1 that hang, reset and answer slowly (issue 35).

Every remote read has a deadline and bounded retries: a store that never answers is an error naming the
URL in bounded time (exit 2, one line), and SIGTERM or SIGINT end a read that is waiting as they end
any run, even while pyarrow's C++ is blocked inside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("pyarrow.fs")

ENV = {
    **os.environ,
    "COLUMNS": "120",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
for _name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
    ENV.pop(_name, None)


class Store:
    """A listening socket that answers every request the way `mode` says: hang, reset, or one byte a second."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.requests = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.settimeout(30)
            connection.recv(65536)
            self.requests += 1
            if self.mode == "reset":  # an RST, not a FIN
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.close()
                return
            if self.mode == "hang":
                self.held.append(connection)
                self.stopped.wait(120)
                return
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n":
                if self.stopped.is_set():
                    return
                connection.sendall(bytes([byte]))
                time.sleep(1)

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
        for connection in self.held:
            connection.close()


@contextlib.contextmanager
def store(mode: str) -> Iterator[Store]:
    server = Store(mode)
    try:
        yield server
    finally:
        server.close()


def _url_and_options(scheme: str, port: int) -> list[str]:
    options = ["--storage-option", f"endpoint=http://127.0.0.1:{port}"]
    if scheme == "gs":
        options += ["--storage-option", "anonymous=true"]
    return [f"{scheme}://serving-logs/logs/runs.jsonl", *options]


def _start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "specaccept_cli", "audit", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )


@pytest.mark.parametrize("scheme", ["s3", "gs"])
@pytest.mark.parametrize("mode", ["hang", "reset", "slow"])
def test_a_store_that_hangs_resets_or_trickles_is_an_error_in_bounded_time(scheme: str, mode: str) -> None:
    with store(mode) as server:
        started = time.monotonic()
        process = _start(*_url_and_options(scheme, server.port), "--storage-option", "timeout=3")
        out, err = process.communicate(timeout=120)
        took = time.monotonic() - started
    text = err.decode()
    assert process.returncode == 2, text
    assert took < 45, f"{took:.1f}s"
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"specaccept: {scheme}://serving-logs/logs/runs.jsonl: "), text
    assert "no answer within 3s (storage option timeout)" in text or "cannot read: " in text
    assert "Traceback" not in text and out == b""
    assert server.requests >= 1


@pytest.mark.parametrize("scheme", ["s3", "gs"])
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_read_blocked_in_the_store(scheme: str, stop_signal: int) -> None:
    with store("hang") as server:
        process = _start(*_url_and_options(scheme, server.port))  # the default deadline: a minute
        deadline = time.monotonic() + 30
        while server.requests == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests >= 1, "the store was never asked"
        time.sleep(0.5)  # well inside the blocked request
        started = time.monotonic()
        process.send_signal(stop_signal)
        _, err = process.communicate(timeout=30)
        took = time.monotonic() - started
    assert took < 5, f"the signal took {took:.1f}s"
    assert process.returncode == -stop_signal, err.decode()
    word = "terminated (SIGTERM)" if stop_signal == signal.SIGTERM else "interrupted"
    assert f"specaccept: {word}" in err.decode() and b"Traceback" not in err
