"""Issue 36: hostile values, URLs, peers, summaries and payloads, each as a user meets it (real subprocesses,
pipes, raw sockets on 127.0.0.1, address-space limits): one line naming what is wrong and exit 2, or an
endpoint's failure shown; never a traceback, a silent crash or a password on the terminal."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_process

ONE_RUN = b'{"p": [0.5], "q": [0.5], "r": [0.1]}\n'


def _one_line_refusal(result: subprocess.CompletedProcess[bytes], *words: str) -> str:
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert "Traceback" not in err and "Error:" not in err.replace("Error: Invalid value", "")
    for word in words:
        assert word in err, (word, err)
    return err


# --- 1, 2: Prometheus lines with no name, gauges beyond any draft -------------------------------


@pytest.mark.parametrize("page", [b"{\n", b'{"vllm:spec_decode_num_drafts_total"} 3\n', b"{\xfe\x00\xff}\n{ \x01\n"])
def test_a_prometheus_line_that_starts_with_a_brace_is_read_not_a_traceback(page: bytes) -> None:
    result = run_process("audit", "-", "--format", "prometheus", "-o", "json", input=page)
    err = result.stderr.decode()
    assert "Traceback" not in err and "IndexError" not in err
    if b"vllm:" in page:  # a Prometheus 3 quoted name of a spec-decoding series: a bad line, at its line
        assert result.returncode == 2 and "<stdin>:1: a Prometheus sample line that does not parse" in err
    else:  # no spec-decoding series: other server output, counted, and a scrape with nothing to read says so
        lines = page.count(b"\n")
        assert result.returncode == 2, err
        assert f"<stdin>: no prometheus metrics lines among its {lines} lines" in err


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("3", "sglang:spec_accept_length 1e23 is more than spec_num_steps 3 + 1"),
        (None, "sglang:spec_accept_length 1e23 is more than 65 (the longest draft)"),
    ],
)
def test_an_sglang_accept_length_beyond_its_draft_is_refused_at_its_line(steps: str | None, message: str) -> None:
    page = "sglang:spec_accept_length 1e23\n" + (f"sglang:spec_num_steps {steps}\n" if steps else "")
    result = run_process("audit", "-", "--format", "prometheus", input=page.encode())
    _one_line_refusal(result, f"<stdin>:1: {message}")


def test_an_sglang_accept_length_within_its_draft_is_still_bounded() -> None:
    page = b"sglang:spec_accept_length 3.5\nsglang:spec_num_steps 3\n"
    result = run_process("audit", "-", "--format", "prometheus", "-o", "json", input=page)
    assert result.returncode == 0, result.stderr.decode()
    engine = json.loads(result.stdout)["engine"]
    assert engine["intervals"] == 1 and engine["bad_lines"] == 0
    assert "per-token alpha in 0.83..0.94" in engine["examples"][0]


# --- 3: option values beyond any log ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("audit", "--follow", "--every", "100000000000000000000s"), "'--every': '100000000000000000000s' is longer"),
        (("watch", "http://127.0.0.1:1/m", "--every", "36501d"), "'--every': '36501d' is longer than 36500d"),
        (("audit", "--window", "100000000000000000000"), "more than 10**18, the widest window taken"),
        (("audit", "--window", "9" * 5000), f"'{'9' * 40}...' runs"),
        (("audit", "--time-field", "t", "--window", "100000000000000000000s"), "'--window': '1000000000000"),
    ],
)
def test_durations_and_widths_beyond_any_log_are_refused_as_the_options_are_parsed(
    tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(ONE_RUN)
    command = (*args, str(log)) if args[0] == "audit" else args
    result = run_process(*command, "-q", timeout=60)
    _one_line_refusal(result, words)


def test_the_longest_durations_and_widths_taken_still_run(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"p": [0.5], "q": [0.5], "r": [0.1], "t": 1700000000}\n')
    for args in (("--window", "1000000000000000000"), ("--time-field", "t", "--window", "36500d")):
        result = run_process("audit", str(log), *args, "-o", "json")
        assert result.returncode == 0, result.stderr.decode()
        assert json.loads(result.stdout)["runs"] == 1


# --- 4: URLs that do not parse, and a password in one ------------------------------------------


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://user:hunter2@127.0.0.1/m", "http://127.0.0.1/m: a user and password in the URL are not supported"),
        ("http://127.0.0.1:abc/x", "http://127.0.0.1:abc/x: not a URL (Port could not be cast"),
        ("http://[::1", "http://[::1: not a URL (Invalid IPv6 URL)"),
        ("http://127.0.0.1:99999/x", "not a URL (Port out of range"),
        ("http://u:hunter2@[::1/x", "http://[::1/x: not a URL"),
    ],
)
def test_watch_refuses_a_url_it_cannot_scrape_in_one_line_without_its_password(url: str, words: str) -> None:
    result = run_process("watch", url, "--every", "1s", "-q", timeout=30)
    err = _one_line_refusal(result, words)
    assert "hunter2" not in err + result.stdout.decode()


# --- 5: peers that break HTTP ----------------------------------------------------------------------

REPLIES = {
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n", "not an HTTP reply (no HTTP status line)"),
    "a header over 64 KiB": (
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n",
        "not a valid HTTP reply (a status or header line over 64 KiB)",
    ),
    "101 headers": (
        b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n",
        "not a valid HTTP reply (more than 100 headers)",
    ),
    "broken chunks": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
        "reply cut short (0 bytes of it read)",
    ),
}


@pytest.fixture
def raw_peer(request: pytest.FixtureRequest) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that answers every connection with the bytes of `request.param`, then closes."""
    reply = REPLIES[request.param][0]
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    connection.recv(65536)
                    connection.sendall(reply)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/metrics"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


@pytest.mark.parametrize("raw_peer", list(REPLIES), indirect=True)
def test_a_peer_that_breaks_http_is_an_endpoint_failure_shown_never_the_end_of_the_watch(
    raw_peer: str, request: pytest.FixtureRequest
) -> None:
    reason = REPLIES[request.node.callspec.params["raw_peer"]][1]
    process = subprocess.Popen(
        [sys.executable, "-m", "specaccept_cli", "watch", raw_peer, "--every", "1s", "--retries", "0", "-o", "jsonl"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    records = [json.loads(process.stdout.readline()) for _ in range(2)]  # two periods: the watch goes on
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert "Traceback" not in err.decode(), err.decode()
    assert all(record["endpoints"][0]["up"] is False for record in records)
    assert records[-1]["endpoints"][0]["error"] == reason
    assert f"scrapes failed (last: {reason})" in err.decode()


# --- 6, 7: saved summaries that no run wrote -------------------------------------------------------

SUMMARY_COMMANDS = {
    "merge": lambda bad, good, tmp: ("merge", bad, good, "-o", str(tmp / "merged.json")),
    "diff": lambda bad, good, tmp: ("diff", bad, good),
    "report": lambda bad, good, tmp: ("report", "--summary", bad, "-o", str(tmp / "report.html")),
    "audit --baseline": lambda bad, good, tmp: ("audit", str(tmp / "log.jsonl"), "--baseline", bad, "-q"),
    "plan --baseline": lambda bad, good, tmp: ("plan", "--baseline", bad, "--drop", "0.05"),
}


@pytest.fixture(scope="module")
def windowed_summaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log and its summary with windows of 50 runs (log.jsonl, good.json), and another's (other.json)."""
    directory = tmp_path_factory.mktemp("windowed")
    log = directory / "log.jsonl"
    made = run_process("simulate", "--runs", "200", "--alpha", "0.7", "--k", "4", "--seed", "1", "-o", str(log))
    assert made.returncode == 0, made.stderr.decode()
    saved = run_process("audit", str(log), "--window", "50", "--summary-out", str(directory / "good.json"), "-q")
    assert saved.returncode == 0, saved.stderr.decode()
    other = directory / "other.jsonl"  # another log: merging it with an edited copy of good.json is no overlap
    made = run_process("simulate", "--runs", "200", "--alpha", "0.7", "--k", "4", "--seed", "2", "-o", str(other))
    saved = run_process("audit", str(other), "--window", "50", "--summary-out", str(directory / "other.json"), "-q")
    assert made.returncode == saved.returncode == 0, saved.stderr.decode()
    return directory


@pytest.mark.parametrize("command", list(SUMMARY_COMMANDS))
@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (("windows", "width", 10**30), "counters out of range: windows.width holds 1e+30, outside 0 to 2**63-1"),
        (("windows", "width", 2**62), "windows hold a width that is not a whole number from 1 to"),
        (("windows", "windows", " 50 "), "windows.windows holds the string ' 50 ' where a whole number belongs"),
        (("passing_tokens", None, "556"), "passing_tokens holds the string '556' where a whole number belongs"),
    ],
)
def test_a_summary_no_run_wrote_is_refused_by_every_command_in_one_line(
    windowed_summaries: Path, command: str, edit: tuple[str, str | None, object], said: str
) -> None:
    data = json.loads((windowed_summaries / "good.json").read_bytes())
    part, key, value = edit
    if key is None:
        data["state"][part] = value
    elif key == "windows":
        data["state"][part][key][0][2] = value  # the first window's run count
    else:
        data["state"][part][key] = value
    bad = windowed_summaries / "bad.json"
    bad.write_text(json.dumps(data))
    args = SUMMARY_COMMANDS[command](str(bad), str(windowed_summaries / "other.json"), windowed_summaries)
    result = run_process(*args)
    err = _one_line_refusal(result, f"specaccept: {bad}: not a usable summary: {said}")
    assert err.count("\n") == 1


def _address_space(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.fixture(scope="module")
def json_array_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """230 KB of gzip holding a 240 MB JSON array of empty arrays: within the decompression bound, over 5 GB
    parsed (without the bound, under 4 GB orjson's MemoryError came out as a SystemError traceback, or a
    segmentation fault, after minutes of paging)."""
    import gzip

    path = tmp_path_factory.mktemp("bomb") / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as stream:
        stream.write(b"[")
        for _ in range(80):
            stream.write(b"[]," * 1_000_000)
        stream.write(b"[]]")
    return path


@pytest.mark.parametrize("command", list(SUMMARY_COMMANDS))
def test_a_summary_that_parses_to_gigabytes_is_refused_before_parsing_under_a_4_gb_address_space(
    json_array_bomb: Path, windowed_summaries: Path, command: str
) -> None:
    args = SUMMARY_COMMANDS[command](str(json_array_bomb), str(windowed_summaries / "good.json"), windowed_summaries)
    result = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", *args],
        capture_output=True,
        preexec_fn=lambda: _address_space(4 << 30),
        timeout=120,
        check=False,
    )
    said = "holds more than 10,000,000 JSON values: more than a summary holds"
    err = _one_line_refusal(result, f"specaccept: {json_array_bomb}: {said}")
    assert err.count("\n") == 1


# --- 8: payloads that claim more than they hold ----------------------------------------------------


def _aiperf(histogram: dict[str, int], steps: int | None, k: int | None = None) -> dict[str, object]:
    """An AIPerf records line (`spec_decode_acceptance`, src/aiperf/common/models/spec_decode_models.py)."""
    record: dict[str, object] = {"engine": "vllm", "acceptance_histogram": histogram, "num_spec_tokens": k}
    if steps is not None:
        record["num_spec_steps"] = steps
    return {"metadata": {"x_request_id": "r1"}, "spec_decode_acceptance": record}


def _sglang(histogram: dict[str, int]) -> dict[str, object]:
    """An SGLang /generate response's meta_info (tokenizer_manager.py), the histogram in its sparse form."""
    return {"text": "...", "meta_info": {"id": "s1", "spec_verify_ct": 2, "spec_correct_drafts_histogram": histogram}}


AMPLIFIED = {
    "AIPerf key 1e9": (
        _aiperf({"0": 1, "1000000000": 1}, 2),
        "acceptance_histogram has the key '1000000000': more accepted tokens than any draft (1024)",
    ),
    "AIPerf key 1e20": (
        _aiperf({"0": 1, "100000000000000000000": 1}, 2),
        "acceptance_histogram has the key '100000000000000000000': more accepted tokens than any draft (1024)",
    ),
    "SGLang key 1e9": (
        _sglang({"0": 1, "1000000000": 1}),
        "spec_correct_drafts_histogram has the key '1000000000': more accepted tokens than any draft (1024)",
    ),
    "3e8 steps": (
        _aiperf({"0": 200_000_000, "4": 100_000_000}, 300_000_000, k=4),
        "300,000,000 verify steps in one request: more than any request makes (at most 4,194,304)",
    ),
    "a draft of 1e6": (_aiperf({"0": 2}, 2, k=1_000_000), "a draft of 1,000,000 tokens: longer than any draft"),
}


@pytest.mark.parametrize("case", list(AMPLIFIED))
def test_a_payload_of_a_few_hundred_bytes_is_refused_at_its_line_within_a_small_address_space(
    tmp_path: Path, case: str
) -> None:
    payload, said = AMPLIFIED[case]
    path = tmp_path / "requests.jsonl"
    path.write_bytes(json.dumps(payload).encode() + b"\n")
    assert path.stat().st_size < 400
    result = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", str(path), "-q"],
        capture_output=True,
        preexec_fn=lambda: _address_space(2 << 30),  # 3.5 GB and 64 s before
        timeout=60,
        check=False,
    )
    _one_line_refusal(result, f"specaccept: {path}:1: bad per-request payload: {said}")


def test_a_payload_within_the_bounds_is_still_read_exactly(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    payload = _aiperf({"0": 1, "1024": 1}, 2, k=1024)
    payload["spec_decode_acceptance"] |= {"num_accepted_draft_tokens": 1024, "num_draft_tokens": 2048}  # type: ignore[operator]
    path.write_bytes(json.dumps(payload).encode() + b"\n")
    result = run_process("audit", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout)["runs"] == 2 and json.loads(result.stdout)["accepted_tokens"] == 1024


# --- 21, 22, 23: payloads told apart, and a capture cut short --------------------------------------


def _responses(count: int) -> list[dict[str, object]]:
    from tests.payloads import requests, vllm_response

    return [vllm_response(request) for request in requests(seed=3, count=count)]


def test_a_payload_whose_first_line_is_over_64_kb_is_recognised(tmp_path: Path) -> None:
    first, *rest = _responses(3)
    first["choices"][0]["message"]["content"] = "x" * 70_000  # type: ignore[index]
    path = tmp_path / "responses.jsonl"
    path.write_bytes(b"".join(json.dumps(item).encode() + b"\n" for item in [first, *rest]))
    assert path.read_bytes().index(b"\n") > 70_000
    result = run_process("audit", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout)["engine"]["requests"] == 3


def test_a_payload_file_that_starts_with_a_bom_is_read_as_a_row_file_is(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    lines = [json.dumps(item).encode() + b"\n" for item in _responses(3)]
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(lines))
    for fmt in ("auto", "vllm-payload"):
        result = run_process("audit", str(path), "--format", fmt, "-o", "json")
        assert result.returncode == 0, result.stderr.decode()
        assert json.loads(result.stdout)["engine"]["requests"] == 3


def _stream(response: dict[str, object]) -> bytes:
    """One request's SSE capture: two content chunks, then the usage chunk holding the payload."""
    chunk = {
        "id": response["id"],
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": "a"}}],
    }
    final = {"id": response["id"], "object": "chat.completion.chunk", "choices": [], "usage": response["usage"]}
    final["metrics"] = response["metrics"]
    return b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in (chunk, chunk, final))


def test_an_sse_capture_cut_mid_event_before_its_payload_is_a_cut_request_not_an_ignored_line(
    tmp_path: Path,
) -> None:
    whole, cut = _responses(2)
    last = _stream(cut)
    lost = last[: last.rindex(b'"metrics"')]  # the capture stopped inside the usage chunk, before the payload
    path = tmp_path / "stream.txt"
    path.write_bytes(_stream(whole) + lost)
    line = path.read_bytes().count(b"\n") + 1
    result = run_process("audit", str(path), "--format", "vllm-payload", "-q")
    _one_line_refusal(result, f"{path}:{line}: an SSE data: event cut short or not JSON, its request's payload lost")
    skipped = run_process("audit", str(path), "--format", "vllm-payload", "--on-error", "skip", "-o", "json")
    assert skipped.returncode == 0, skipped.stderr.decode()
    summary = json.loads(skipped.stdout)
    assert summary["engine"]["requests"] == 1 and summary["skipped_rows"] == 1
    path.write_bytes(_stream(whole) + _stream(cut) + b"data: [DONE]\n\n")  # the whole capture: both read
    assert json.loads(run_process("audit", str(path), "-o", "json").stdout)["engine"]["requests"] == 2


# --- 26: a closed stderr with something to report -------------------------------------------------


def test_a_closed_stderr_with_skipped_rows_to_report_ends_with_status_2_and_a_silent_run_is_unchanged(
    tmp_path: Path,
) -> None:
    from tests.helpers import shell

    log = tmp_path / "log.jsonl"
    log.write_bytes(ONE_RUN + b"not json\n")
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(ONE_RUN)
    table = shell(f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip 2>/dev/null')
    closed = shell(f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip 2>&-')
    assert table.returncode == 0 and closed.returncode == 2  # the skipped rows' table could not be shown
    assert closed.stdout == table.stdout and b"runs" in closed.stdout  # the result itself is all there
    silent = shell(f'"$SPECACCEPT" -m specaccept_cli audit {clean} -o json 2>&-')
    assert silent.returncode == 0 and json.loads(silent.stdout)["runs"] == 1
    # Descriptor 2 stays held: the output the run opens never becomes it (nothing else lands in it).
    out = tmp_path / "summary.json"
    held = shell(f'"$SPECACCEPT" -m specaccept_cli audit {log} --on-error skip --summary-out {out} -q 2>&-')
    assert held.returncode == 2 and json.loads(out.read_bytes())["skipped_rows"] == 1


def test_an_empty_or_keep_alive_sse_event_is_still_ignored(tmp_path: Path) -> None:
    (whole,) = _responses(1)
    path = tmp_path / "stream.txt"
    path.write_bytes(b"data: \n\ndata: keep-alive\n\n" + _stream(whole) + b"data: [DONE]\n\n")
    result = run_process("audit", str(path), "--format", "vllm-payload", "-o", "json")
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout)["engine"]["requests"] == 1
