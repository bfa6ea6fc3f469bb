"""Streams that never end: stdin or a FIFO read as the bytes arrive, and a file followed as `tail -F` does.

A followed stream hands out whole lines only. The reader of a block (`read.jsonl.iter_text_blocks`)
asks for up to half a MiB and would otherwise wait for it to fill; here a read returns as soon as one
line is complete, so a line written to the pipe is counted within one poll. When the stream is stopped
(`stop` set: a signal, the end of a follow), bytes of a line not yet ended are not handed out as a
line (they are a line still being written, not a bad one): they are counted in `unfinished_bytes`.
At a real end of file the last line is handed out as it is, ended or not, as a plain read would.

A followed file survives rotation (the path now names another file: the old one is read to its end
first, then the new one from its start) and truncation (the file shrank below what was read: it is
read again from its start), as `tail -F` does; each is counted in `events`. Unlike `tail -F`, it also
sees a file truncated and written again past the read position between two looks (`copytruncate` on a
busy log: same file, and no smaller than what was read): the last bytes read before the read position
are kept (`FINGERPRINT_BYTES`) and compared with what the file holds there after every read and at
every quiet look; when they differ, the file was rewritten, and it is read again from its start.
"""

from __future__ import annotations

import os
import select
import stat as stat_mode
import threading
from collections.abc import Callable
from pathlib import Path

from msgspec import Struct, field

from specaccept_cli.errors import InputError

POLL_SECONDS = 0.1  # how often a quiet stream or file is looked at again (and `stop` checked)
READ_BYTES = 1 << 16
HOLD_BYTES = (64 << 20) + 1  # a line is held until it ends, up to this (the readers' longest line, and one)
# The bytes just before the read position, kept to tell a file rewritten in place from one that grew: a few
# lines of a log, whose time stamps and counts make a rewritten file differ from the old one there.
FINGERPRINT_BYTES = 4096


class FollowEvents(Struct):
    """What happened to a followed file: told in the view, counted in the final summary's notes."""

    rotations: int = 0
    truncations: int = 0
    notes: list[str] = field(default_factory=list)


class FollowedStream:
    """A binary stream over a file descriptor (stdin, a FIFO) or a followed file, handing out whole lines.

    `read(size)` blocks until a line is complete, the stream ends, or `stop` is set (then b""). A line is
    handed out whole, even when longer than `size`, up to `hold` bytes (a longer one is handed out in
    pieces: the reader refuses it as too long), so that a stop in the middle of a long line leaves the
    whole of it unread and counted, never its first pieces read as a line.

    A path that names a FIFO (or a socket, a terminal) is read as the descriptor it opens; the writer
    closing it is the end of the stream, once something was read (before, it is a writer not there yet).
    """

    hands_out_lines = True  # a read returns as soon as a line is whole: a read-ahead over it must not wait for more

    def __init__(
        self,
        name: str,
        stop: threading.Event,
        *,
        fd: int | None = None,
        path: Path | None = None,
        poll: float = POLL_SECONDS,
        hold: int = HOLD_BYTES,
    ) -> None:
        if (fd is None) == (path is None):
            raise ValueError("follow either a file descriptor or a path")
        self.name = name
        self.stop = stop
        self.poll = poll
        self.hold = max(hold, 1)
        self.path = path
        self.pipe = False  # a followed path that opened a FIFO or another stream: read as a descriptor
        self.fd = fd
        self.owned = False  # a descriptor this stream opened (a followed path), closed with it
        self.position = 0  # bytes read from the file open now (for truncation)
        self.fingerprint = b""  # the last bytes read before `position` (up to FINGERPRINT_BYTES)
        self.inode: tuple[int, int] | None = None
        self.buffer = bytearray()
        self.eof = False
        self.unfinished_bytes = 0
        self.bytes_read = 0
        self.events = FollowEvents()
        # Told once, when the stream has shown no line of a known format yet and is waited on (the CLI sets
        # it on a terminal only: into a pipe, nothing but records is written).
        self.announce: Callable[[str], None] | None = None
        if path is not None:
            self._open_path(wait=False)

    # --- the reader's side ---------------------------------------------------------------

    def read(self, size: int = -1) -> bytes:
        limit = READ_BYTES * 8 if size is None or size < 0 else max(size, 1)
        while True:
            cut = self.buffer.rfind(b"\n", 0, limit)
            if cut >= 0:
                return self._take(cut + 1)
            cut = self.buffer.find(b"\n", limit)
            if cut >= 0:  # a line longer than `size`, whole
                return self._take(cut + 1)
            if len(self.buffer) >= self.hold:  # a line longer than any reader takes: hand it out in pieces
                return self._take(len(self.buffer))
            if self.stop.is_set():  # first: a writer that closes after the stop did not finish its line
                self.unfinished_bytes += len(self.buffer)
                self.buffer.clear()
                return b""
            if self.eof:
                return self._take(len(self.buffer))
            self._fill()

    def peek(self, size: int) -> bytes:
        """The first `size` bytes not yet handed out (fewer at the end, or when stopped), without consuming them."""
        while len(self.buffer) < size and not self.eof and not self.stop.is_set():
            if b"\n" in self.buffer:  # a whole first line is enough to tell a format
                break
            self._fill()
        return bytes(self.buffer[:size])

    def tell(self) -> int:
        """Bytes read so far, across rotations (for progress)."""
        return self.bytes_read

    def close(self) -> None:
        if self.owned and self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _take(self, count: int) -> bytes:
        out = bytes(self.buffer[:count])
        del self.buffer[:count]
        return out

    # --- filling the buffer ---------------------------------------------------------------

    def _fill(self) -> None:
        if self.path is not None and not self.pipe:
            self._fill_file()
            return
        assert self.fd is not None
        try:
            ready, _, _ = select.select([self.fd], [], [], self.poll)
        except (OSError, ValueError):
            ready = [self.fd]  # not selectable (a regular file on stdin): read it plainly
        if not ready:
            return
        data = self._os_read()
        if data is None:  # a non-blocking descriptor with nothing yet
            self._sleep()
        elif data:
            self.buffer += data
        elif self.pipe and not self.bytes_read:  # a FIFO no writer has opened yet
            self._sleep()
        else:
            self.eof = True

    def _os_read(self) -> bytes | None:
        assert self.fd is not None
        try:
            data = os.read(self.fd, READ_BYTES)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise InputError(self.name, None, f"read error after {self.bytes_read} bytes ({exc.strerror})") from None
        self.bytes_read += len(data)
        self.position += len(data)
        return data

    def _fill_file(self) -> None:
        if self.fd is None and not self._open_path(wait=True):  # the path was gone: wait for it to come back
            return
        data = self._os_read()
        if data:
            if not self._rewritten(data):
                self.buffer += data
                kept = data if len(data) >= FINGERPRINT_BYTES else self.fingerprint + data
                self.fingerprint = kept[-FINGERPRINT_BYTES:]
            return
        if data is None:
            self._sleep()
            return
        # At the end of what is there: rotated, truncated, or only quiet?
        assert self.path is not None
        try:
            now = self.path.stat()
        except FileNotFoundError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self.inode:
            self._rotated(now is None)
            return
        if now.st_size < self.position:
            self._read_again("truncated")
            return
        if self._rewritten(b""):
            return
        self._sleep()

    def _rewritten(self, data: bytes) -> bool:
        """Whether the file was truncated and written again past the read position (`copytruncate` on a busy
        log); if so, it is read again from its start, and True means `data` (just read) came from the new
        file and is dropped (read again from the start with the rest); False keeps it (the old file's)."""
        assert self.fd is not None
        kept = self.fingerprint
        start = self.position - len(data)  # where `data` was read from
        if not kept or start < len(kept):
            return False
        try:
            there = os.pread(self.fd, len(kept), start - len(kept))
        except OSError:
            return False
        if there == kept:
            return False
        # Rewritten. `data` is the new file's if the file holds it now where it was read, else the old one's
        # (the rewrite came between the read and this look): then it is kept, as the old file's last bytes.
        try:
            new = bool(data) and os.pread(self.fd, len(data), start) == data
        except OSError:
            new = False
        if new:
            self.bytes_read -= len(data)
        else:
            self.buffer += data
        self._read_again("truncated and written again past the read position")
        return True

    def _read_again(self, what: str) -> None:
        """The file open now is read again from its start; a line it left unfinished ends with it."""
        assert self.fd is not None
        os.lseek(self.fd, 0, os.SEEK_SET)
        self.position, self.fingerprint = 0, b""
        if self.buffer and not self.buffer.endswith(b"\n"):
            self.buffer += b"\n"  # the old content's last line ended with it, never joined to the new first line
        self.events.truncations += 1
        self.events.notes.append(f"{self.name}: {what}; read again from its start")

    def _rotated(self, gone: bool) -> None:
        """The path names another file now (or none): the old one was read to its end; move to the new one."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.buffer and not self.buffer.endswith(b"\n"):
            self.buffer += b"\n"  # the old file's last line ended with the file
        self.events.rotations += 1
        self.events.notes.append(f"{self.name}: {'removed' if gone else 'rotated'}; following the new file")
        self._open_path(wait=True)

    def _open_path(self, wait: bool) -> bool:
        assert self.path is not None
        try:
            # Without blocking: a FIFO opens at once (not when a writer comes), and is waited on with the poll.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            if not wait:
                raise InputError(self.name, None, "no such file or directory") from None
            self._sleep()
            return False
        except OSError as exc:
            raise InputError(self.name, None, f"cannot open: {exc.strerror or exc}") from None
        stat = os.fstat(fd)
        if stat_mode.S_ISDIR(stat.st_mode):
            os.close(fd)
            raise InputError(self.name, None, f"is a directory now (after {self.bytes_read} bytes read)")
        self.fd, self.owned, self.position, self.fingerprint = fd, True, 0, b""
        self.inode = (stat.st_dev, stat.st_ino)
        self.pipe = not stat_mode.S_ISREG(stat.st_mode)
        return True

    def _sleep(self) -> None:
        self.stop.wait(self.poll)
