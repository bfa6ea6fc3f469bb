"""`ChunkReader`: what `read(size)` gives, read so that a signal between two reads of the source is handled."""

from __future__ import annotations

import io
import os
import signal
import threading
from pathlib import Path

import pytest

from specaccept_cli.read.jsonl import ChunkReader
from specaccept_cli.read.sources import Replayed


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_read_chunk_gives_what_read_gives(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * 1000
    path = tmp_path / "data"
    path.write_bytes(data)
    with open(path, "rb") as mine, open(path, "rb") as theirs:
        chunks = ChunkReader(mine)
        while True:
            chunk = chunks.read(size)
            assert chunk == theirs.read(size)
            if not chunk:
                break
    assert ChunkReader(io.BytesIO(data)).read(10**7) == data  # one call for all, fewer bytes only at the end


def test_read_chunk_collects_a_pipe_until_size_or_its_end() -> None:
    """A pipe hands out what its writer wrote so far: pieces are joined up to `size`, as read() does."""
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as reader:

        def write() -> None:
            with open(write_end, "wb", buffering=0) as writer:
                for _ in range(5):
                    writer.write(b"x" * 1000)

        writer_thread = threading.Thread(target=write)
        writer_thread.start()
        chunks = ChunkReader(reader)
        assert chunks.read(3500) == b"x" * 3500
        writer_thread.join()
        assert chunks.read(3500) == b"x" * 1500  # the rest, then the end


class _Trickle(io.RawIOBase):
    """A source whose reads each return one piece; the first one is followed at once by a signal."""

    def __init__(self) -> None:
        self.reads = 0

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads == 1:
            os.kill(os.getpid(), signal.SIGUSR1)  # delivered now; Python's handler runs at its next chance
        return b"y" * 10


class _Ended(Exception):
    pass


def _raise(signum: int, frame: object) -> None:
    raise _Ended


def test_a_signal_between_two_reads_ends_the_read_before_the_next_one() -> None:
    """The handler runs between reads (in Python), not after a loop in C waits for the whole size."""
    previous = signal.signal(signal.SIGUSR1, _raise)
    try:
        source = _Trickle()
        with pytest.raises(_Ended):
            ChunkReader(source).read(1000)  # type: ignore[arg-type]
        assert source.reads == 1
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_replayed_read1_serves_the_read_ahead_bytes_first() -> None:
    stream = Replayed(io.BufferedReader(io.BytesIO(b"0123456789abcdef")))  # type: ignore[arg-type]
    assert stream.peek(4) == b"0123"
    assert stream.read1(2) == b"01"
    assert stream.read1(100) == b"23"  # what was read ahead, and no more: one read at a time
    assert ChunkReader(stream).read(100) == b"456789abcdef"  # type: ignore[arg-type]


class _Failing(io.RawIOBase):
    """Two pieces, then the error a truncated gzip raises."""

    def __init__(self) -> None:
        self.pieces = [b"ab", b"cd"]

    def read1(self, size: int = -1) -> bytes:
        if not self.pieces:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        return self.pieces.pop(0)


def test_a_failure_part_way_comes_after_the_bytes_before_it() -> None:
    chunks = ChunkReader(_Failing())  # type: ignore[arg-type]
    assert chunks.read(100) == b"abcd"
    with pytest.raises(EOFError):
        chunks.read(100)
