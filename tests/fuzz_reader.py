"""Fuzz target over the JSONL reader: `make fuzz` (hypothesis), or atheris when it is installed.

`check_reader(data, block_bytes, max_line_bytes)` reads `data` the way `audit` does, but with tiny
blocks and line limits so block boundaries and overlong lines are hit all the time, and checks:
- no exception escapes but InputError for the source as a whole (a compressed stream that is corrupt);
- every non-blank line is accounted for exactly once: a run or an error, in line order;
- every run kept is valid (0 <= p <= 1, 0 < q <= 1, 0 <= r <= 1, finite) and every error names a line.

    make fuzz                                  # FUZZ_EXAMPLES=200000 make fuzz for a longer run
    .venv/bin/python -m tests.fuzz_reader --atheris   # coverage-guided, after `pip install atheris`
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import sys

import numpy as np

from specaccept_cli.errors import InputError
from specaccept_cli.read.jsonl import iter_text_blocks, parse_block
from specaccept_cli.read.sources import MAGIC, decompress
from specaccept_cli.rule.batch import FieldSpec

SOURCE = "fuzz.jsonl"


def counted_lines(data: bytes, max_line_bytes: int) -> list[int]:
    """Numbers of the lines the reader must account for: not empty and not all ASCII whitespace, or too long.

    The first line's byte order mark is not part of it: a first line holding only one (and spaces) is blank.
    """
    numbers = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if len(line) > max_line_bytes:
            numbers.append(number)
            continue
        if number == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if line and not line.isspace():
            numbers.append(number)
    return numbers


def read_lines(data: bytes, block_bytes: int, max_line_bytes: int) -> tuple[list[int], InputError | None]:
    """The lines accounted for (runs and bad rows, in order), and the error that ended the source if any."""
    stream = decompress(io.BufferedReader(io.BytesIO(data)), SOURCE)  # type: ignore[arg-type]
    seen: list[int] = []
    try:
        for first_line, count, lines in iter_text_blocks(stream, SOURCE, block_bytes, max_line_bytes):
            batch, errors = parse_block(lines, first_line, SOURCE, FieldSpec(), max_line_bytes)
            for error in errors:
                assert error.source == SOURCE and error.line is not None and error.message
                assert first_line <= error.line < first_line + count
            assert bool(np.all((batch.p >= 0) & (batch.p <= 1) & (batch.q > 0) & (batch.q <= 1)))
            assert bool(np.all((batch.r >= 0) & (batch.r <= 1)))
            assert batch.offsets[0] == 0 and batch.offsets[-1] == batch.p.shape[0]
            seen += sorted([*batch.lines.tolist(), *(error.line for error in errors if error.line is not None)])
    except InputError as error:
        assert error.line is None and error.source == SOURCE
        return seen, error
    return seen, None


def check_reader(data: bytes, block_bytes: int = 64, max_line_bytes: int = 48) -> None:
    """Plain input: every counted line exactly once; only data with a compression magic can fail whole."""
    seen, error = read_lines(data, block_bytes, max_line_bytes)
    if error is not None:
        assert data.startswith(tuple(MAGIC)), error
        return
    assert seen == counted_lines(data, max_line_bytes), (seen, data)


def check_compressed(plain: bytes, kind: str, cut: int, block_bytes: int = 64, max_line_bytes: int = 48) -> None:
    """Compressed, possibly cut short: the lines read are exactly the first ones of the plain text,
    all of them when the stream is whole, and a cut stream is an error naming how many were read."""
    packed = COMPRESS[kind](plain)
    whole = cut >= len(packed)
    if not packed[:cut].startswith(tuple(MAGIC)):
        return  # cut inside the magic bytes: plain data now, check_reader's business
    seen, error = read_lines(packed[:cut], block_bytes, max_line_bytes)
    expected = counted_lines(plain, max_line_bytes)
    if whole:
        assert error is None and seen == expected
        return
    assert seen == expected[: len(seen)]
    if error is not None:
        assert "after" in error.message and "line" in error.message


def _zstd(data: bytes) -> bytes:
    import zstandard

    return bytes(zstandard.ZstdCompressor().compress(data))


COMPRESS = {
    "gzip": lambda data: gzip.compress(data, mtime=0),
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zstd": _zstd,
}


def main() -> None:
    if "--atheris" in sys.argv:
        import atheris  # type: ignore[import-not-found]

        atheris.instrument_all()  # coverage of specaccept_cli (and numpy's Python parts) guides the search
        atheris.Setup([arg for arg in sys.argv if arg != "--atheris"], check_reader)
        atheris.Fuzz()
        return
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    examples = int(os.environ.get("FUZZ_EXAMPLES", "20000"))
    lines = st.lists(
        st.sampled_from(
            [b'{"p": [0.5], "q": [0.5], "r": [0.1]}', b'{"p": [], "q": [], "r": []}', b"", b"  ", b"{", b"\xff"]
        )
        | st.binary(max_size=80),
        max_size=20,
    ).map(b"\n".join)

    magic = st.sampled_from(list(MAGIC))
    plain = st.binary(max_size=600) | lines | st.tuples(magic, st.binary(max_size=200)).map(b"".join)
    options = {"block": st.integers(1, 200), "limit": st.integers(1, 120)}

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=plain, **options)
    def fuzz_plain(data: bytes, block: int, limit: int) -> None:
        check_reader(data, block, limit)

    @settings(max_examples=max(1, examples // 4), deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=lines, kind=st.sampled_from(list(COMPRESS)), cut=st.integers(0, 2000), **options)
    def fuzz_compressed(data: bytes, kind: str, cut: int, block: int, limit: int) -> None:
        check_compressed(data, kind, cut, block, limit)

    fuzz_plain()
    fuzz_compressed()
    print(f"fuzz: {examples} plain and {max(1, examples // 4)} compressed inputs, no failure")


if __name__ == "__main__":
    main()
