"""`find_known_line`: a text read on to its first known line, wherever it stands, the lines before it counted."""

from __future__ import annotations

import io

import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.read.sources import SCAN_BLOCK, find_known_line

VLLM = (
    b"INFO 11-30 13:00:10 [loggers.py:123] SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: "
    b"1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 10 tokens, Drafted: 20 tokens\n"
)
OTHER = b"INFO:     10.0.0.7:52344 - POST /v1/completions 200 OK\n"


def _same_lines(rest: bytes, original: bytes) -> bool:
    """`rest` holds the original's lines, in place, each either kept or served again as an empty line, and
    keeps no more than two blocks of them (memory stays flat)."""
    kept, lines = rest.split(b"\n"), original.split(b"\n")
    return (
        len(kept) == len(lines)
        and all(line in (b"", whole) for line, whole in zip(kept, lines, strict=True))
        and len(rest) - rest.count(b"\n") <= 2 * SCAN_BLOCK + len(VLLM) + len(OTHER)
    )


def _read_on(data: bytes, max_line_bytes: int = 1 << 20) -> tuple[str, bytes]:
    found, stream = find_known_line("log", io.BufferedReader(io.BytesIO(data)), max_line_bytes=max_line_bytes)  # type: ignore[arg-type]
    rest = b""
    while piece := stream.read1(1000):
        rest += piece
    return found, rest


@pytest.mark.parametrize("before", [0, 1, 1000, SCAN_BLOCK // len(OTHER), 5 * SCAN_BLOCK // len(OTHER) + 3])
def test_the_lines_before_are_served_again_as_empty_lines(before: int) -> None:
    text = OTHER * before + VLLM + OTHER
    found, rest = _read_on(text)
    assert found == "vllm-log"
    assert rest.endswith(VLLM + OTHER) and _same_lines(rest, text)  # the same line numbers, few lines kept


def test_a_known_line_cut_by_a_block_boundary_is_found_whole() -> None:
    for shift in range(0, len(VLLM), 7):
        lead = b"x" * (SCAN_BLOCK - 40 + shift) + b"\n"
        found, rest = _read_on(lead + VLLM)
        assert found == "vllm-log" and rest.endswith(VLLM) and _same_lines(rest, lead + VLLM)


def test_an_overlong_line_is_counted_and_not_kept_and_a_marker_in_its_tail_is_not_a_line() -> None:
    overlong = b"y" * (3 * SCAN_BLOCK) + VLLM  # one line: the marker stands in the tail of an overlong line
    found, rest = _read_on(overlong + OTHER + VLLM, max_line_bytes=SCAN_BLOCK)
    assert found == "vllm-log" and rest in (b"\n\n" + VLLM, b"\n" + OTHER + VLLM)  # never the overlong tail


def test_a_last_line_without_its_newline_and_crlf_lines() -> None:
    text = OTHER.replace(b"\n", b"\r\n") * 3 + VLLM.rstrip(b"\n")
    found, rest = _read_on(text)
    assert found == "vllm-log" and rest.endswith(VLLM.rstrip(b"\n")) and _same_lines(rest, text)


def test_markers_in_an_ordinary_line_are_not_enough() -> None:
    with pytest.raises(InputError) as raised:
        _read_on(b'the docs say "draft_n" and # TYPE are markers\n' * 4)
    assert raised.value.message.startswith("no line of a known format among its 4 lines (looked for vllm-log")
