"""Server output recognised wherever its first metrics line stands: files, gzip, pipes and a followed FIFO.

A vLLM log (the example `make examples` writes) after 1.5 MB of start-up and access lines gives the same
runs as the log alone; a text with no known line ends in one line that says so; `--follow` waits for the
first metrics line of a stream that starts with start-up lines.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import run_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"
STARTUP = (
    b"INFO 11-30 12:58:01 [__init__.py:239] Automatically detected platform cuda.\n"
    b"INFO 11-30 12:58:09 [loader.py:447] Loading weights took 12.31 seconds\n"
    b"INFO 11-30 12:58:40 [gpu_model_runner.py:1624] Graph capturing finished in 21 secs, took 0.53 GiB\n"
)
ACCESS = b'(APIServer pid=4242) INFO:     10.0.0.7:52344 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
FIGURES = ("runs", "accepted_tokens", "drafted_tokens", "accepted_histogram", "examined_tokens", "per_position")


def _before(size: int) -> bytes:
    """Start-up lines, then access lines up to `size` bytes: a busy server's first seconds."""
    return STARTUP + ACCESS * ((size - len(STARTUP)) // len(ACCESS) + 1)


def _figures(stdout: bytes) -> dict[str, object]:
    summary = json.loads(stdout)
    return {name: summary[name] for name in FIGURES}


@pytest.fixture(scope="module")
def alone() -> dict[str, object]:
    done = run_process("audit", str(EXAMPLE), "-o", "json")
    assert done.returncode == 0, done.stderr.decode()
    figures = _figures(done.stdout)
    assert figures["runs"] and figures["accepted_tokens"]  # the log holds metrics: the comparison means something
    return figures


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("busy") / "busy.log"
    path.write_bytes(_before(1_500_000) + EXAMPLE.read_bytes())
    assert path.stat().st_size > (1 << 20) + 400_000  # past the first MiB, which detection once stopped at
    return path


@pytest.mark.parametrize("compressed", [False, True])
def test_a_log_after_one_and_a_half_mb_of_other_lines_gives_the_runs_of_the_log_alone(
    busy: Path, alone: dict[str, object], compressed: bool, tmp_path: Path
) -> None:
    path = busy
    if compressed:
        path = tmp_path / "busy.log.gz"
        path.write_bytes(gzip.compress(busy.read_bytes(), compresslevel=1))
    as_file = run_process("audit", str(path), "-o", "json")
    through_pipe = run_process("audit", "-", "-o", "json", input=path.read_bytes())
    for done in (as_file, through_pipe):
        assert done.returncode == 0, done.stderr.decode()
        assert b"invalid JSON" not in done.stderr
        assert _figures(done.stdout) == alone
    engine = json.loads(as_file.stdout)["engine"]
    assert engine["lines"] == busy.read_bytes().count(b"\n")  # every line counted, the skipped ones too


def test_a_bad_metrics_line_after_the_skipped_lines_keeps_its_own_line_number(tmp_path: Path) -> None:
    before = _before(1_200_000)
    path = tmp_path / "bad.log"
    path.write_bytes(before + b"INFO 11-30 13:00:10 [loggers.py:123] SpecDecoding metrics: nothing here\n")
    done = run_process("audit", str(path))
    assert done.returncode == 2
    number = before.count(b"\n") + 1
    assert f"{path}:{number}:" in done.stderr.decode()


@pytest.mark.parametrize("size", [10_000, 1_500_000])
def test_a_text_with_no_known_line_says_so_in_one_line(tmp_path: Path, size: int) -> None:
    text = _before(size)
    path = tmp_path / "server.log"
    path.write_bytes(text)
    lines = text.count(b"\n")
    for argument, stdin, name in ((str(path), None, str(path)), ("-", text, "<stdin>")):
        done = run_process("audit", argument, input=stdin)
        assert done.returncode == 2
        said = done.stderr.decode()
        assert "Traceback" not in said and "invalid JSON" not in said
        assert said.count("\n") == 1, said
        assert said.startswith(f"specaccept: {name}: no line of a known format among its {lines:,} lines")
        assert "vllm-log" in said and "llamacpp-log" in said and "prometheus" in said and "--format" in said


def test_an_empty_input_is_no_text_without_a_known_line() -> None:
    done = run_process("audit", "-", input=b"")
    assert b"no line of a known format" not in done.stderr


def test_a_start_up_line_that_looks_like_json_does_not_make_the_log_jsonl(
    tmp_path: Path, alone: dict[str, object]
) -> None:
    config = b'{"model": "Qwen/Qwen3-8B", "speculative_config": {"num_speculative_tokens": 3}}\n'
    path = tmp_path / "server.log"
    path.write_bytes(STARTUP + config + _before(1_200_000) + EXAMPLE.read_bytes())
    done = run_process("audit", str(path), "-o", "json")
    assert done.returncode == 0, done.stderr.decode()
    assert _figures(done.stdout) == alone


def test_json_rows_with_a_stray_first_line_are_still_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl.txt"
    path.write_bytes(b"# written by a script\n" + b'{"p": [0.5], "q": [0.4], "r": [0.1]}\n' * 20)
    done = run_process("audit", str(path))
    assert done.returncode == 2 and f"{path}:1: invalid JSON" in done.stderr.decode()


def test_json_rows_are_still_told_from_their_first_line(tmp_path: Path) -> None:
    path = tmp_path / "rows"
    path.write_bytes(b'{"p": [0.5], "q": [0.4], "r": [0.1]\n' + ACCESS)
    done = run_process("audit", str(path))
    assert done.returncode == 2 and "invalid JSON" in done.stderr.decode()  # JSON that is broken: said so


def _follow(fifo: Path, *options: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "specaccept_cli", "audit", "--follow", str(fifo), "--every", "1s", *options]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_follow_waits_through_start_up_lines_for_the_metrics_seconds_later(
    tmp_path: Path, alone: dict[str, object]
) -> None:
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    process = _follow(fifo)

    def server() -> None:
        with fifo.open("wb") as pipe:
            pipe.write(_before(200_000))
            pipe.flush()
            time.sleep(3)  # the first metrics line comes seconds after the start-up lines
            for line in EXAMPLE.read_bytes().splitlines(keepends=True):
                pipe.write(line)
            pipe.flush()

    writer = threading.Thread(target=server, daemon=True)
    writer.start()
    out, err = process.communicate(timeout=60)
    writer.join(timeout=10)
    assert process.returncode == 0, err.decode()
    records = [json.loads(line) for line in out.splitlines()]  # into a pipe: JSON lines only
    final = records[-1]
    assert final["final"] is True
    assert final["total"]["runs"] == alone["runs"]
    assert final["total"]["accepted_tokens"] == alone["accepted_tokens"]
    assert b"waiting for" not in err  # not a terminal: nothing said about the wait
    assert b"invalid JSON" not in err


def test_follow_on_a_terminal_says_what_it_waits_for(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1"}
    command = [sys.executable, "-m", "specaccept_cli", "audit", "--follow", str(fifo), "--every", "1s"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    said = b""
    with fifo.open("wb") as pipe:
        pipe.write(_before(5_000))
        pipe.flush()
        deadline = time.monotonic() + 30
        while b"waiting for" not in said and time.monotonic() < deadline:
            said += os.read(leader, 4096)
        pipe.write(EXAMPLE.read_bytes())
    out, _ = process.communicate(timeout=60)
    os.close(leader)
    assert b"waiting for a line of vllm-log" in said and b"--format" in said
    assert process.returncode == 0 and json.loads(out.splitlines()[-1])["final"] is True
