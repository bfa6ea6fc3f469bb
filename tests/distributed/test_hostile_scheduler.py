"""`--scheduler` at something that is not a Dask scheduler: one line within the connect timeout, never a hang,
a `struct.error` or an allocation of what a garbage length announces. Real sockets on 127.0.0.1."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from specaccept_cli.errors import SpecacceptError
from specaccept_cli.pipeline.distributed import connect
from tests.helpers import FIRST_EXAMPLE, invoke, write_jsonl

pytest.importorskip("distributed")


@contextlib.contextmanager
def fake_peer(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that answers every connection with `answer`, then closes it; stops on exit."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                peer, _ = server.accept()
            except TimeoutError:
                continue
            with peer:
                answer(peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        done.set()
        thread.join(timeout=10)
        server.close()


def _silent(peer: socket.socket) -> None:
    peer.settimeout(5)
    with contextlib.suppress(OSError):
        peer.recv(1 << 16)  # waits for the client to speak, as an HTTP server does


PEERS = {
    "silent": (_silent, "it accepted the connection but sent no Dask handshake within 1 s"),
    "garbage": (
        lambda peer: peer.sendall(b"\xff" * 64),
        "its first message announces 18,446,744,073,709,551,615 bytes, not a handshake",
    ),
    "3 EiB": (
        lambda peer: peer.sendall((3 << 60).to_bytes(8, "little") + bytes(8)),
        "its first message announces 3,458,764,513,820,540,928 bytes, not a handshake",
    ),
    "short": (lambda peer: peer.sendall(b"\x01\x02\x03"), "it closed the connection before a Dask handshake"),
    "framing": (
        lambda peer: peer.sendall((64).to_bytes(8, "little") + (10**6).to_bytes(8, "little")),
        "its first message is not Dask's framing",
    ),
}


@pytest.mark.parametrize("kind", PEERS)
def test_a_peer_that_is_not_a_scheduler_is_refused_in_one_line(kind: str) -> None:
    answer, said = PEERS[kind]
    with fake_peer(answer) as address:
        started = time.monotonic()
        with pytest.raises(SpecacceptError) as caught, connect(address, timeout=1):
            pass
        assert time.monotonic() - started < 5
    assert str(caught.value) == f"{address} is not a Dask scheduler: {said}"


def test_a_closed_port_is_refused_at_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(SpecacceptError) as caught, connect(f"tcp://127.0.0.1:{port}", timeout=1):
        pass
    assert time.monotonic() - started < 5
    assert str(caught.value) == f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: Connection refused"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_an_http_server_as_scheduler_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """The audit's own connect timeout (10 s) bounds the wait: an HTTP server waits for a request forever."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    log = write_jsonl(tmp_path / "log.jsonl", [FIRST_EXAMPLE])
    address = f"tcp://127.0.0.1:{server.server_address[1]}"
    try:
        started = time.monotonic()
        result = invoke("audit", str(log), "--scheduler", address)
        elapsed = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: {address} is not a Dask scheduler: it accepted the connection but sent no Dask handshake"
        " within 10 s\n"
    )
    assert elapsed < 30


def test_a_real_scheduler_passes_the_check(cluster: str, tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", [FIRST_EXAMPLE] * 5)
    result = invoke("audit", str(log), "--scheduler", cluster, "-o", "json")
    assert result.exit_code == 0, result.stderr
