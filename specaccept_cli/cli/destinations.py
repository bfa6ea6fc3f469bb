"""Where an output goes, and how every byte of it gets there: the one writer behind every output.

A path given for an output is one of four things, and each is written its own way:

- a regular file, or a name with no file yet: written to a temporary file beside it, flushed to the
  disk, then renamed over it, so a reader sees the old file or the new one, never half of one. A
  symlink is followed: its target is replaced and the link stays a link. A write killed mid-way
  (kill -9) leaves its temporary file behind; the next write into that folder removes such files,
  only ours and only once no live process holds them (`remove_leftovers`);
- a descriptor link (`/dev/stdout`, `/dev/fd/3`, `/proc/self/fd/3`): written into that descriptor,
  where the shell pointed it; renaming over it would replace whatever file it reaches (`> out.json`);
- anything else that is not a regular file (`/dev/null`, a terminal, a FIFO, a device node):
  opened and written straight into, never created, truncated or replaced;
- a directory, or a path whose folder is missing: an error before any work.

An output that is the same file as an input (the same device and inode, or the same resolved path
for a file not made yet) is refused before anything is read: writing it would destroy the input.

Writes loop until every byte is written: a raw stream (`PYTHONUNBUFFERED=1` makes stdout one)
may take part of a write, and a full disk is then reported by the next write, not lost.
Standard library only: `specaccept check` loads this module too.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Literal

from specaccept_cli.errors import UsageError

Kind = Literal["new", "regular", "descriptor", "special", "directory"]

# /proc/self/fd, /proc/<pid>/fd, /proc/<pid>/task/<tid>/fd, after resolving their folder.
_DESCRIPTOR_FOLDER = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd")
_MAX_LINKS = 40  # as the kernel's own limit on a chain of symlinks


class Target:
    """What an output path is, found once before any work (see the module's docstring)."""

    __slots__ = ("descriptor", "kind", "path", "real")

    def __init__(self, path: str, kind: Kind, real: str, descriptor: int | None = None) -> None:
        self.path = path  # as the user gave it: named in messages
        self.kind = kind
        self.real = real  # symlinks resolved: the file that is replaced (new, regular)
        self.descriptor = descriptor  # for a descriptor link

    def identity(self) -> tuple[int, int] | str | None:
        """Device and inode of the file this output would overwrite, its resolved path when it does not
        exist yet, None when writing it cannot destroy a file (a device, a FIFO)."""
        if self.kind == "new":
            return self.real
        try:
            if self.kind == "descriptor":
                assert self.descriptor is not None
                info = os.fstat(self.descriptor)
            elif self.kind == "regular":
                info = os.stat(self.real)
            else:
                return None
        except OSError:
            return None
        return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


def target(path: str) -> Target:
    """Classify `path` as an output: see the module's docstring."""
    descriptor = _descriptor_link(path)
    if descriptor is not None:
        return Target(path, "descriptor", path, descriptor)
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError:
        return Target(path, "new", real)
    if stat.S_ISREG(info.st_mode):
        return Target(path, "regular", real)
    if stat.S_ISDIR(info.st_mode):
        return Target(path, "directory", real)
    return Target(path, "special", real)


def _descriptor_link(path: str) -> int | None:
    """The descriptor of this process that `path` names through /proc (`/dev/stdout`, `/dev/fd/N`), if any.

    Followed one link at a time: `/dev/stdout` -> `/proc/self/fd/1` -> (the file that fd 1 is). Fully
    resolved, the path would name that file, and replacing it would pull it from under the shell's
    redirection.
    """
    current = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        folder, name = os.path.split(current)
        real_folder = os.path.realpath(folder)
        found = _DESCRIPTOR_FOLDER.fullmatch(real_folder)
        if found is not None and name.isdigit():
            return int(name) if int(found.group(1)) == os.getpid() else None
        try:
            link = os.readlink(current)
        except OSError:  # not a link (or not there): the end of the chain
            return None
        current = os.path.normpath(os.path.join(real_folder, link))
    return None


def unwritable(output: Target) -> str | None:
    """Why `output` cannot be written, found without writing any data (None: it can be).

    The probe is the write itself minus the data: a temporary file made and removed beside a file;
    a device or FIFO is asked through its permissions (opening a FIFO would wait for a reader, and
    some devices act when opened); a descriptor must be open for writing.
    """
    if output.kind == "directory":
        return "is a directory"
    if output.kind == "descriptor":
        assert output.descriptor is not None
        try:
            import fcntl

            flags = fcntl.fcntl(output.descriptor, fcntl.F_GETFL)
        except OSError:
            return "descriptor is not open"
        except ImportError:  # pragma: no cover - POSIX has fcntl
            return None
        return None if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) else "descriptor is not open for writing"
    if output.kind == "special":
        return None if os.access(output.real, os.W_OK) else os.strerror(errno.EACCES)
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=os.path.dirname(output.real), prefix=".specaccept-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


# --- inputs and outputs that are the same file ---------------------------------------------------


def input_identities(paths: Sequence[str], stdin: bool = False) -> dict[tuple[int, int] | str, str]:
    """Device and inode (and resolved path) of each local input that exists, naming it as given.

    `stdin`: the input read as `-`, when it is a file (`< logs.jsonl`).
    """
    found: dict[tuple[int, int] | str, str] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            if stat.S_ISREG(info.st_mode):
                found.setdefault((info.st_dev, info.st_ino), path)
        found.setdefault(os.path.realpath(path), path)
    if stdin:
        with contextlib.suppress(OSError, ValueError):
            info = os.fstat(0)
            if stat.S_ISREG(info.st_mode):
                found.setdefault((info.st_dev, info.st_ino), "stdin")
    return found


def refuse_same_files(
    outputs: Sequence[tuple[str, str]], inputs: dict[tuple[int, int] | str, str], stdout: bool = True
) -> None:
    """A UsageError when an output (`(what, path)` pairs) is an input or another output.

    With `stdout`, stdout is an output too: `>> logs.jsonl` while reading logs.jsonl would grow the
    input as it is read (`> logs.jsonl` has emptied it before the command even starts). Two
    descriptors of one file (`--summary-out /dev/stdout > out.json`) share its offset: one follows
    the other, neither overwrites it.
    """
    taken: dict[tuple[int, int] | str, tuple[str, bool]] = {}
    named = [(what, target(path)) for what, path in outputs]
    if stdout:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            named.append(("stdout", Target("stdout", "descriptor", "stdout", sys.stdout.fileno())))
    for what, output in named:
        identity = output.identity()
        if identity is None:
            continue
        shown = what if output.path == "stdout" else f"{what} {output.path}"
        if identity in inputs:
            raise UsageError(f"{shown} is the input {inputs[identity]}: writing it would destroy the input")
        shared = output.kind == "descriptor"
        if identity in taken and not (shared and taken[identity][1]):
            raise UsageError(f"{shown} is the same file as {taken[identity][0]}: one would overwrite the other")
        taken.setdefault(identity, (shown, shared))


def abandon_stdout() -> None:
    """Point fd 1 at /dev/null, so that later writes and the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout to redirect
        pass


# --- writing -------------------------------------------------------------------------------------


def write_all(raw: IO[bytes] | io.RawIOBase, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of `data`: a raw stream may take part of it (a nearly full disk, a pipe)."""
    view = memoryview(data).cast("B")
    while view:
        written = raw.write(view)
        if written is None:  # a non-blocking descriptor that is full: wait until it takes more
            import select

            select.select([], [raw.fileno()], [])
            continue
        view = view[written:]


class WholeWrites(io.RawIOBase):
    """A binary stream whose `write` takes everything, under the text layer of stdout and stderr.

    Python's text layer ignores how much its binary stream took, and neither a raw stream
    (`PYTHONUNBUFFERED=1`) nor a BufferedWriter handed more than its buffer holds promises to take
    it all: on a nearly full disk the rest was lost and the command exited 0. Here the rest is
    written, and the disk's refusal is an OSError at once. Buffering stays the stream's own.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self.stream = stream

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        write_all(self.stream, view)
        return view.nbytes

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def name(self) -> object:
        return getattr(self.stream, "name", None)

    def close(self) -> None:
        """Flushed, never closed: the descriptor is the interpreter's (`sys.__stdout__` holds it too)."""
        if not self.closed:
            with contextlib.suppress(OSError, ValueError):
                self.stream.flush()
        super().close()


def whole_writes_on_standard_streams() -> None:
    """Put `WholeWrites` under the text layers of stdout and stderr (see its docstring)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        binary = getattr(stream, "buffer", None)
        if not isinstance(stream, io.TextIOWrapper) or not isinstance(binary, (io.FileIO, io.BufferedWriter)):
            continue
        stream.flush()
        wrapped = io.TextIOWrapper(
            WholeWrites(binary),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=stream.write_through,
        )
        setattr(sys, name, wrapped)


@contextlib.contextmanager
def opened(output: Target) -> Iterator[IO[bytes]]:
    """A binary file for `output`; a regular file appears (or changes) only when the block ends well."""
    if output.kind == "descriptor":
        assert output.descriptor is not None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()  # what is already printed comes first (`--summary-out /dev/stdout`)
        with os.fdopen(os.dup(output.descriptor), "wb") as raw:
            yield raw
        return
    if output.kind == "special":
        flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        with os.fdopen(os.open(output.real, flags), "wb") as raw:
            yield raw
        return
    if output.kind == "directory":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), output.path)
    with _replacing(output.real) as raw:
        yield raw


@contextlib.contextmanager
def _replacing(path: str) -> Iterator[IO[bytes]]:
    """A temporary file beside `path`, synced and renamed over it at the end (removed on any exception).

    A file that is replaced keeps its permissions (a private file stays private); a new one gets
    the permissions of any new file (0666 less the umask; mkstemp's own are 0600).
    """
    import tempfile

    directory = os.path.dirname(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    remove_leftovers(directory)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".specaccept-", suffix=".tmp")
    held = _hold(fd)  # while this process lives and writes, the file is not a leftover
    try:
        os.chmod(temporary, mode)
        with os.fdopen(fd, "wb") as raw:
            yield raw
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    finally:
        if held is not None:
            os.close(held)
    _sync_folder(directory)


# The temporary file `_replacing` makes (tempfile.mkstemp's 8 characters between our prefix and suffix).
_LEFTOVER = re.compile(r"\.specaccept-[a-z0-9_]{8}\.tmp")
LEFTOVER_SECONDS = 60.0  # untouched this long, and no writer holds it: what a killed write left behind


def _hold(fd: int) -> int | None:
    """A lock on the temporary file, on a descriptor of its own that stays open until the rename is done
    (the kernel drops it when the process dies, kill -9 included): how a later write tells a live writer
    from a dead one."""
    try:
        import fcntl

        held = os.dup(fd)
    except (ImportError, OSError):  # pragma: no cover - POSIX has fcntl
        return None
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(held)
        return None
    return held


def remove_leftovers(directory: str) -> int:
    """Remove the temporary files that writes of ours killed mid-way (kill -9, a power cut) left in `directory`;
    how many. The target was never touched by them (it is replaced only by a rename at the end).

    Only files that are ours for certain go: a regular file named as `_replacing` names them, of this
    user, untouched for LEFTOVER_SECONDS, whose lock no process holds (a live writer holds it until its
    rename). Anything else, a user's file of a similar name included, is left alone.
    """
    try:
        entries = os.scandir(directory or ".")
    except OSError:
        return 0
    removed = 0
    with entries:  # one entry at a time: a folder of a million files costs no memory
        for entry in entries:
            if _LEFTOVER.fullmatch(entry.name) and _leftover(entry):
                removed += 1
    return removed


def _leftover(entry: os.DirEntry[str]) -> bool:
    """Remove `entry` if it is a write of ours that no live process holds (see `remove_leftovers`)."""
    try:
        import fcntl

        info = entry.stat(follow_symlinks=False)
    except (ImportError, OSError):
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        return False
    if time.time() - info.st_mtime < LEFTOVER_SECONDS:
        return False
    try:
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # refused while its writer lives
        if os.fstat(fd).st_ino != info.st_ino:
            return False
        os.unlink(entry.path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _sync_folder(directory: str) -> None:
    """Make the rename itself durable; a file system that cannot sync a folder has nothing to add."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_to(path: str, write: Callable[[IO[bytes]], object]) -> None:
    """`write(handle)` into the output at `path`; a `.gz` name is gzip-compressed (as summaries may be)."""
    with opened(target(path)) as raw:
        if path.endswith(".gz"):
            import gzip

            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
                write(packed)  # type: ignore[arg-type]
        else:
            write(raw)
