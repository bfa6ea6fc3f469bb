"""Any input, any pipe, any signal: exit status in {0, 1, 2, 130}, never a traceback, nothing lost.

Property tests feed arbitrary bytes and arbitrary JSON lines; a differential test holds the reader
to `json.loads` plus the reference routine; real subprocesses check `| head -1`, SIGINT and full disks.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specaccept_cli.read.sources import MAGIC
from specaccept_cli.text import visible
from tests.conftest import FIRST_EXAMPLE, invoke, spec_accept, write_jsonl
from tests.fuzz_reader import COMPRESS, check_compressed, check_reader

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def nonblank_lines(data: bytes) -> int:
    """The reader's definition: pieces between b"\\n" that are neither empty nor all ASCII whitespace
    (bytes.isspace: space, \\t, \\n, \\r, \\x0b, \\x0c). A line over --max-line-bytes always counts."""
    return sum(1 for line in data.split(b"\n") if line and not line.isspace())


def audit_bytes(tmp_path: Path, data: bytes, *options: str) -> Any:
    path = tmp_path / "input.jsonl"
    path.write_bytes(data)
    # catch_exceptions=False (in invoke): any exception escaping the command fails the test
    return invoke("audit", str(path), *options)


# --- arbitrary bytes ------------------------------------------------------------------------------


@PROPERTY
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    for mode in ("fail", "skip"):
        result = audit_bytes(tmp_path, data, "-o", "json", "--on-error", mode, "--max-line-bytes", "120")
        assert result.exit_code in (0, 1, 2)
        assert "Traceback" not in result.stderr
        if result.exit_code == 2:
            assert len(result.stderr.splitlines()) == 1
            assert result.stderr.startswith("specaccept: ")
        if mode == "skip":
            assert result.exit_code == 0
            summary = orjson.loads(result.stdout)
            if summary["skipped_sources"]:  # only a compressed stream can fail as a whole here
                assert data.startswith(tuple(MAGIC))
                continue
            assert summary["runs"] + summary["skipped_rows"] == nonblank_lines(data)


@st.composite
def messy_lines(draw: st.DrawFn) -> bytes:
    """Lines that are mostly almost-valid rows: wrong types, lengths, ranges, junk, blanks, cut-offs."""
    number = st.one_of(
        st.floats(allow_nan=False, allow_infinity=False, min_value=-0.5, max_value=1.5),
        st.sampled_from([0, 1, 0.0, 1.0, -0.0, 2, 1e-320, 5e-324]),
    )
    anything = st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | number | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=8,
    )
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        k = draw(st.integers(0, 4))
        row: dict[str, Any] = {}
        for name in ("p", "q", "r"):
            length = draw(st.sampled_from([k, k, k, k + 1]))
            row[name] = draw(st.lists(st.one_of(number, number, number, anything), min_size=length, max_size=length))
            if draw(st.integers(0, 19)) == 0:
                row[name] = draw(anything)
        if draw(st.integers(0, 19)) == 0:
            del row[draw(st.sampled_from(["p", "q", "r"]))]
        line = json.dumps(row).encode()  # Python's json writes NaN/Infinity only if asked: here never
        kind = draw(st.integers(0, 19))
        if kind == 0:
            line = line[: draw(st.integers(0, len(line)))]
        elif kind == 1:
            line = draw(st.sampled_from([b"", b"   ", b"\t\r", b"[]", b"null", b"{}", b"\xff\xfe", b"NaN"]))
        elif kind == 2:
            line = json.dumps(draw(anything)).encode()
        lines.append(line)
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


@PROPERTY
@given(data=messy_lines())
def test_arbitrary_json_lines_are_counted_exactly(tmp_path: Path, data: bytes) -> None:
    result = audit_bytes(tmp_path, data, "-o", "json", "--on-error", "skip")
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["skipped_sources"] == 0
    assert summary["runs"] + summary["skipped_rows"] == nonblank_lines(data)
    assert len(summary["errors"]) == min(20, summary["skipped_rows"])
    failed = audit_bytes(tmp_path, data, "-o", "json")
    assert failed.exit_code == (2 if summary["skipped_rows"] else 0)
    if summary["skipped_rows"]:  # fail mode stops at exactly the first row skip mode skipped
        first = summary["errors"][0]
        message = visible(f"{first['source']}:{first['line']}: {first['message']}")
        assert failed.stderr == f"specaccept: {message}\n"


@PROPERTY
@given(data=st.binary(max_size=300), block=st.integers(1, 100), limit=st.integers(1, 60))
def test_fuzz_target_on_tiny_blocks(data: bytes, block: int, limit: int) -> None:
    """The `make fuzz` target, briefly: block boundaries and overlong lines never lose or double a line."""
    check_reader(data, block, limit)


@PROPERTY
@given(
    data=st.lists(st.sampled_from([b'{"p": [0.5], "q": [0.5], "r": [0.1]}', b"", b"{"]), max_size=30).map(b"\n".join),
    kind=st.sampled_from(list(COMPRESS)),
    cut=st.integers(0, 400),
)
def test_fuzz_target_on_cut_compressed_streams(data: bytes, kind: str, cut: int) -> None:
    check_compressed(data, kind, cut)


# --- differential: the reader against json.loads and the reference routine ----------------------------


def oracle(line: bytes) -> int | None:
    """Accepted length of a line by json.loads and the reference routine, or None when the row is invalid."""
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or not all(isinstance(row.get(name), list) for name in "pqr"):
        return None
    p, q, r = row["p"], row["q"], row["r"]
    if not len(p) == len(q) == len(r):
        return None
    for values, low_open in ((p, False), (q, True), (r, False)):
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return None
            if value > 1 or value < 0 or (low_open and value == 0):
                return None
    return spec_accept(p, q, r)


@st.composite
def valid_ish_rows(draw: st.DrawFn) -> bytes:
    """Rows written by json.dumps in its many styles: separators, indentation, ASCII escapes, key order."""
    k = draw(st.integers(0, 5))
    unit = st.floats(min_value=0, max_value=1) | st.sampled_from([0, 1])
    positive = st.floats(min_value=5e-324, max_value=1) | st.just(1)
    row: dict[str, Any] = {
        "p": draw(st.lists(unit, min_size=k, max_size=k)),
        "q": draw(st.lists(positive, min_size=k, max_size=k)),
        "r": draw(st.lists(unit, min_size=k, max_size=k)),
    }
    if draw(st.booleans()):
        row["id"] = draw(st.text(max_size=6) | st.integers(-(2**63), 2**63 - 1))
    if draw(st.booleans()):
        row = dict(reversed(list(row.items())))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,  ", " :\t")]))
    text = json.dumps(row, separators=separators, ensure_ascii=draw(st.booleans()))
    return text.encode()


@PROPERTY
@given(lines=st.lists(valid_ish_rows() | messy_lines(), max_size=10))
def test_reader_agrees_with_json_loads(tmp_path: Path, lines: list[bytes]) -> None:
    data = b"\n".join(line.replace(b"\n", b" ") for line in lines)
    result = audit_bytes(tmp_path, data, "-o", "jsonl", "--on-error", "skip")
    assert result.exit_code == 0
    got = {record["line"]: record["accepted"] for record in map(orjson.loads, result.stdout_bytes.splitlines())}
    expected = {
        number: accepted
        for number, line in enumerate(data.split(b"\n"), start=1)
        if (accepted := oracle(line)) is not None
    }
    assert got == expected


def test_the_one_known_difference_from_json_loads(tmp_path: Path) -> None:
    """orjson reads an integer beyond 64 bits as a double, and one beyond a double's range not at all;
    Python's json keeps any integer. Such a line is reported, never misread."""
    line = json.dumps({**FIRST_EXAMPLE, "id": 10**400}).encode()
    assert oracle(line) == 1
    result = audit_bytes(tmp_path, line + b"\n")
    assert result.exit_code == 2
    assert ":1: number at column 74 is too large for a double" in result.stderr


# --- real pipes, signals and failed writes -----------------------------------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 9 MB of JSONL: more than a pipe buffer and more than one 4 MiB block."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    result = invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "8", "--seed", "1", "-o", str(path))
    assert result.exit_code == 0
    return path


def shell(command: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1", "SPECACCEPT": sys.executable}
    return subprocess.run(["sh", "-c", command], capture_output=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize(
    ("options", "first"),
    [
        ("-o jsonl", b'{"source":'),
        ("-o csv", b"source,line,k,accepted,emitted"),
        ("--max-rows 5000", b"Runs"),
        ("-o markdown --group-by id", b"### Acceptance"),
    ],
)
def test_head_ends_the_pipeline_quietly(big_log: Path, options: str, first: bytes) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli audit {big_log} {options} | head -1; echo "status $?"')
    # `sh -c 'a | head'` reports head's status; so ask for ours through PIPESTATUS-free means:
    lines = result.stdout.splitlines()
    assert lines[0].startswith(first)
    assert len(lines) == 2
    assert result.stderr == b""
    ours = shell(f'("$SPECACCEPT" -m specaccept_cli audit {big_log} {options}; echo "ours $?" >&2) | head -1')
    assert ours.stderr == b"ours 0\n"


def test_sigint_mid_stream_exits_130_with_one_line(big_log: Path) -> None:
    data = big_log.read_bytes()[: 5 << 20]  # one whole 4 MiB block, then the reader waits for more
    data = data[: data.rfind(b"\n") + 1]
    command = [sys.executable, "-m", "specaccept_cli", "audit", "-", "-o", "jsonl"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(command, **pipes) as process:  # type: ignore[call-overload]
        stdin, stdout, stderr = process.stdin, process.stdout, process.stderr

        def feed() -> None:
            try:
                stdin.write(data)
                stdin.flush()
            except BrokenPipeError:
                pass

        writer = threading.Thread(target=feed)
        writer.start()
        try:
            first = stdout.readline()  # results are streaming: the command is mid-input
            assert first.startswith(b'{"source":"<stdin>","line":1,')
            process.send_signal(signal.SIGINT)
            rest = stdout.read()  # drain, so a flush on the way out cannot block
            status = process.wait(timeout=60)
        finally:
            process.kill()
            writer.join()
        assert status == 130
        assert stderr.read() == b"specaccept: interrupted\n"
    # Records before the interruption are whole lines; only the very last may be cut.
    *whole, _last = (first + rest).split(b"\n")
    assert all(orjson.loads(line)["source"] == "<stdin>" for line in whole)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
def test_full_disk_is_an_error_not_a_crash(big_log: Path, output: str) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli audit {big_log} -o {output} > /dev/full')
    assert result.returncode == 2
    assert result.stderr == b"specaccept: cannot write output: No space left on device\n"


@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
def test_closed_stdout_is_an_error_not_a_crash(output: str) -> None:
    seed = Path(__file__).parent / "corpus" / "q_zero.jsonl"
    result = shell(f'"$SPECACCEPT" -m specaccept_cli audit {seed} -o {output} --on-error skip >&-')
    assert result.returncode == 2
    assert result.stderr == b"specaccept: cannot write output: stdout is closed\n"


# --- hostile text -----------------------------------------------------------------------------------

HOSTILE = "::error file=x::pwned\x1b[31m[bold]red[/bold]\r\n::warning::two\u202e"


def _no_live_text(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    for line in text.splitlines():
        assert not line.lstrip().startswith("::"), line


@pytest.mark.parametrize("output", ["table", "json", "jsonl", "csv", "markdown"])
def test_hostile_strings_from_data_are_defused_everywhere(tmp_path: Path, output: str) -> None:
    directory = tmp_path / "::error::dir"
    directory.mkdir()
    path = write_jsonl(
        directory / "::warning::\x1b[2Jlog.jsonl",
        [
            {**FIRST_EXAMPLE, "id": HOSTILE},
            {HOSTILE: 1, "q": [0.5], "r": [0.1]},  # missing p: the message lists this key
        ],
    )
    for source in (str(path), os.path.relpath(path)):
        result = invoke("audit", source, "-o", output, "--id-field", "id", "--group-by", "id", "--on-error", "skip")
        assert result.exit_code == 0
        _no_live_text(result.stdout)
        _no_live_text(result.stderr)
        assert "Skipped 1 bad row" in result.stderr
        assert "\\x1b" in result.stderr  # made visible, not dropped
        if output == "jsonl":  # JSON keeps the exact value: escaping decodes back to it
            assert orjson.loads(result.stdout.splitlines()[0])["id"] == HOSTILE
        if output == "table":
            assert "[bold]red[/bold]" not in result.stdout or "\\x1b" in result.stdout


def test_hostile_text_in_a_fail_mode_error_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{HOSTILE: 1, "q": [0.5], "r": [0.1]}])
    result = invoke("audit", str(path))
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    _no_live_text(result.stderr)
    assert "::error file=x::pwned\\x1b[31m[bold]red[/bold]\\x0d\\x0a::warning::two\\u202e" in line


def test_hostile_id_in_csv_is_one_line_per_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{**FIRST_EXAMPLE, "id": "::error::a\nb"}, {**FIRST_EXAMPLE, "id": "c"}])
    result = invoke("audit", str(path), "-o", "csv", "--id-field", "id")
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert lines[1].endswith(",\\x3a:error::a\\x0ab") and lines[2].endswith(",c")


def test_parquet_quarantine_writes_json_rows(tmp_path: Path) -> None:
    corpus = Path(__file__).parent / "corpus"
    quarantine = tmp_path / "bad.jsonl"
    result = invoke(
        "audit", str(corpus / "nan_value.parquet"), "-o", "json", "--on-error", "skip", "--quarantine", str(quarantine)
    )
    assert result.exit_code == 0
    assert quarantine.read_bytes() == b'{"p": [0.5, NaN], "q": [0.5, 0.5], "r": [0.1, 0.1]}\n'


def test_quarantine_holds_the_raw_lines_exactly(tmp_path: Path) -> None:
    corpus = Path(__file__).parent / "corpus"
    names = ["invalid_utf8.jsonl", "nan.jsonl", "q_zero.jsonl", "truncated.jsonl.gz"]
    quarantine = tmp_path / "bad.jsonl"
    args = [str(corpus / name) for name in names]
    result = invoke("audit", *args, "-o", "json", "--on-error", "skip", "--quarantine", str(quarantine))
    assert result.exit_code == 0
    raw = [(corpus / name).read_bytes().split(b"\n")[2] for name in names[:3]]
    assert quarantine.read_bytes() == b"".join(line + b"\n" for line in raw)  # a broken source has no line
    assert orjson.loads(result.stdout)["skipped_rows"] == 3


def test_quarantine_is_written_even_when_empty_and_not_left_half_done(tmp_path: Path) -> None:
    quarantine = tmp_path / "bad.jsonl"
    good = write_jsonl(tmp_path / "good.jsonl", [FIRST_EXAMPLE])
    assert invoke("audit", str(good), "--on-error", "skip", "--quarantine", str(quarantine)).exit_code == 0
    assert quarantine.read_bytes() == b""
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".specaccept-")] == []


@pytest.mark.parametrize("option", [["--max-errors", "3"], ["--quarantine", "q.jsonl"]])
def test_skip_only_options_need_skip(option: list[str]) -> None:
    result = invoke("audit", "-", *option, input=b"")
    assert result.exit_code == 2
    assert f"{option[0]} applies to --on-error skip" in result.stderr


@pytest.mark.parametrize(("limit", "status"), [("0", 1), ("1", 1), ("2", 0)])
def test_max_errors_is_a_gate(tmp_path: Path, limit: str, status: int) -> None:
    corpus = Path(__file__).parent / "corpus"
    args = [str(corpus / "nan.jsonl"), str(corpus / "q_zero.jsonl"), "-o", "json", "--on-error", "skip"]
    result = invoke("audit", *args, "--max-errors", limit)
    assert result.exit_code == status
    assert orjson.loads(result.stdout)["skipped_rows"] == 2  # the output is complete either way
    if status:
        assert result.stderr.splitlines()[-1] == f"specaccept: skipped 2 bad rows: more than --max-errors {limit}"


def test_many_errors_keep_the_first_twenty(tmp_path: Path) -> None:
    rows = b"".join(b'{"p": [0.5], "q": [0], "r": [0.%d]}\n' % i for i in range(25))
    path = tmp_path / "many.jsonl"
    path.write_bytes(rows + orjson.dumps(FIRST_EXAMPLE) + b"\n")
    result = invoke("audit", str(path), "-o", "json", "--on-error", "skip")
    summary = orjson.loads(result.stdout)
    assert (summary["runs"], summary["skipped_rows"]) == (1, 25)
    assert [error["line"] for error in summary["errors"]] == list(range(1, 21))
    assert "… and 5 more" in result.stderr


def test_markdown_report_lists_skipped_input() -> None:
    corpus = Path(__file__).parent / "corpus"
    result = invoke("audit", str(corpus / "q_zero.jsonl"), "-o", "markdown", "--on-error", "skip")
    assert result.exit_code == 0
    assert "| skipped rows | 1 | bad rows left out (--on-error skip) |" in result.stdout
    assert "### Skipped input" in result.stdout
    assert (
        f"| {corpus / 'q_zero.jsonl'}:3 | q\\[1\\] = 0.0 is zero: a drafted token always has q > 0 |" in result.stdout
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "command",
    [
        "check --p 0.5 --q 0.5 --r 0.1",
        "check --p 0.5 --q 0.5 --r 0.1 --explain",
        "simulate --runs 10 --alpha 0.5 --k 3",
        "expect --alpha 0.8 --k 1-8",
    ],
)
def test_every_command_reports_a_full_disk(command: str) -> None:
    result = shell(f'"$SPECACCEPT" -m specaccept_cli {command} > /dev/full')
    assert result.returncode == 2
    assert result.stderr == b"specaccept: cannot write output: No space left on device\n"
    closed = shell(f'"$SPECACCEPT" -m specaccept_cli {command} >&-')
    assert closed.returncode == 2
    assert closed.stderr == b"specaccept: cannot write output: stdout is closed\n"


@pytest.fixture(scope="module")
def parquet_bytes() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"p": [[0.5, 0.2]] * 50, "q": [[0.5, 0.4]] * 50, "r": [[0.1, 0.9]] * 50, "id": list(range(50))})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


@PROPERTY
@given(
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.none() | st.integers(0, 10**6),
)
def test_damaged_parquet_is_an_input_error_never_a_crash(
    tmp_path: Path, parquet_bytes: bytes, flips: list[tuple[int, int]], cut: int | None
) -> None:
    """Random bytes overwritten (and maybe the file cut short): pyarrow's many exceptions become one line."""
    data = bytearray(parquet_bytes)
    for position, value in flips:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % len(data)]
    path = tmp_path / "damaged.parquet"
    path.write_bytes(bytes(data))
    for mode in ("fail", "skip"):
        result = invoke("audit", str(path), "-o", "json", "--on-error", mode, "--id-field", "id")
        assert result.exit_code in (0, 2)
        if result.exit_code == 2:
            assert result.stderr.startswith(f"specaccept: {path}") and len(result.stderr.splitlines()) == 1
        else:
            assert orjson.loads(result.stdout)["schema"] == "specaccept.summary/1"


def test_greedy_parquet_rows_are_quarantined_too(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "greedy.parquet"
    pq.write_table(pa.table({"d": [[1, 2], [3, 4]], "t": [[1, 2, 5], [3]]}), path)
    quarantine = tmp_path / "bad.jsonl"
    greedy = ["--draft-tokens-field", "d", "--target-tokens-field", "t"]
    result = invoke("audit", str(path), *greedy, "-o", "json", "--on-error", "skip", "--quarantine", str(quarantine))
    summary = orjson.loads(result.stdout)
    assert (summary["runs"], summary["skipped_rows"]) == (1, 1)
    assert summary["errors"][0]["line"] == 2
    assert quarantine.read_bytes() == b'{"d": [3, 4], "t": [3]}\n'


def test_zstd_starting_with_a_skippable_frame(tmp_path: Path) -> None:
    """pzstd writes a skippable frame first; its magic is not the frame magic, and it must still be zstd."""
    import struct

    import zstandard

    row = orjson.dumps(FIRST_EXAMPLE) + b"\n"
    skippable = struct.pack("<II", 0x184D2A50, 4) + b"size"
    frame = zstandard.ZstdCompressor().compress(row)
    path = tmp_path / "logs.jsonl.zst"
    path.write_bytes(skippable + frame + skippable + frame)
    summary = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert summary["runs"] == 2 and summary["accepted_tokens"] == 2
    path.write_bytes((skippable + frame)[:-3])
    result = invoke("audit", str(path), "-o", "json")
    assert result.exit_code == 2
    assert "compressed stream is truncated or corrupt after 0 lines (zstd stream ended inside a frame)" in result.stderr
