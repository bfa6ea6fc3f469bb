"""A real llama.cpp server for the tests: where `make engines` builds it, and one run of it on 127.0.0.1.

`run_server` starts llama-server on a free port with the tiny models of `llamacpp_models`, scrapes
/metrics, sends bounded greedy requests to /completion and /v1/completions, scrapes /metrics again, and
stops the server by its pid whatever happens. Everything it wrote (stdout and stderr, one file), the two
scrapes and the JSON responses come back as a `Capture`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

VERSION = "0.3.36"  # llama-cpp-python's sdist, which vendors llama.cpp at commit 0c1e570
CACHE = Path(os.environ.get("SPECACCEPT_ENGINES_CACHE", str(Path.home() / ".cache" / "specaccept" / "engines")))
BUILD = CACHE / f"llama.cpp-{VERSION}"
SERVER = BUILD / "bin" / "llama-server"
GGUF_PY = BUILD / "gguf-py"
STARTUP_SECONDS = 180  # a loaded 2-core machine; the tiny models load in about a second when idle
REQUEST_SECONDS = 300

# Prompts with repeats, so the n-gram drafters find matches too; greedy decoding, bounded lengths.
PROMPTS = (
    "the cat sat on the mat and the cat sat on the mat and the",
    "one two three four one two three four one two three",
    "he said that she said that he said that",
)
N_PREDICT = 48


def require_build() -> None:
    """Skip without the built server, except under CI=true, where .ci/run builds it: there it must run."""
    if SERVER.is_file() and os.access(SERVER, os.X_OK) and (GGUF_PY / "gguf").is_dir():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"llama-server is not at {SERVER}: .ci/run builds it with `make engines` before the tests")
    pytest.skip(f"llama-server is not built at {SERVER}: `make engines` builds it (~900 CPU-seconds, once)")


@dataclass
class Capture:
    """What one server run wrote and answered."""

    log: Path
    before: Path  # /metrics before the requests
    after: Path  # /metrics after them
    responses: Path  # one JSON response a line, /completion and /v1/completions
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
        answer: dict[str, Any] = orjson.loads(response.read())
        return answer


@contextlib.contextmanager
def server(models: tuple[Path, Path], log: Path, args: Sequence[str], env: dict[str, str]) -> Iterator[str]:
    """llama-server running on 127.0.0.1 (its base URL), stopped by its pid on the way out."""
    target, _ = models
    port = free_port()
    command = [
        str(SERVER),
        "-m",
        str(target),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics",
        "-c",
        "1024",
        "-np",
        "1",
        "-t",
        "1",
        "--no-webui",
        *args,
    ]
    environment = {key: value for key, value in os.environ.items() if not key.startswith("LLAMA_")} | env
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"llama-server exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}"
                )
            with contextlib.suppress(OSError):
                status, _ = _get(f"{base}/health", timeout=5)
                if status == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama-server not ready in {STARTUP_SECONDS} s:\n{log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def run_server(
    models: tuple[Path, Path], directory: Path, args: Sequence[str], env: dict[str, str] | None = None
) -> Capture:
    """One server run: scrape, the requests (two /completion per prompt and one /v1/completions), scrape."""
    directory.mkdir(parents=True, exist_ok=True)
    capture = Capture(
        log=directory / "server.log",
        before=directory / "before.prom",
        after=directory / "after.prom",
        responses=directory / "responses.jsonl",
    )
    with server(models, capture.log, args, env or {}) as base:
        capture.before.write_bytes(_get(f"{base}/metrics", timeout=30)[1])
        for prompt in PROMPTS:
            common = {"temperature": 0.0, "seed": 7, "cache_prompt": False}
            capture.bodies.append(_post(f"{base}/completion", {"prompt": prompt, "n_predict": N_PREDICT, **common}))
            capture.bodies.append(
                _post(f"{base}/v1/completions", {"prompt": prompt, "max_tokens": N_PREDICT // 2, **common})
            )
        capture.after.write_bytes(_get(f"{base}/metrics", timeout=30)[1])
        time.sleep(0.5)  # the last request's log lines are written after its response is sent
    capture.responses.write_bytes(b"".join(orjson.dumps(body) + b"\n" for body in capture.bodies))
    return capture


def counter(scrape: Path, name: str) -> float:
    """A llamacpp: sample's value as printed, from a /metrics text."""
    for line in scrape.read_text().splitlines():
        if line.startswith(f"llamacpp:{name} "):
            return float(line.split()[1])
    return 0.0  # absent before the first speculative request
