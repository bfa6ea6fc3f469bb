"""Inputs -> batches: files, directories of Parquet shards and stdin, compressed or not.

Compression is recognised by magic bytes, not names, so `zcat`-free pipes work:
`cat logs.jsonl.gz | specaccept audit -`.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol, cast

import orjson
from msgspec import Struct, field
from msgspec.structs import replace

from specaccept_cli.errors import InputError, OnError
from specaccept_cli.read.formats import (
    OWN,
    PARQUET_MAGIC,
    TEXT_DRIVERS,
    InputFormat,
    Kind,
    by_name,
    kind_of,
    known_lines,
    looks_like_json,
    recognise,
    sniff_order,
    table,
)
from specaccept_cli.read.jsonl import ChunkReader, read_jsonl
from specaccept_cli.read.storage import RemoteObject, Storage, is_url
from specaccept_cli.rule.batch import FieldSpec, RunBatch
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES
from specaccept_cli.text import shown_name

# A format's name, as the table of formats (`read.formats`) spells it; "auto": by extension, then by content.
SourceFormat = str
Format = str

STDIN = "-"
PARQUET_SUFFIXES = {suffix for entry in OWN if entry.driver == "columns" for suffix in entry.suffixes}
DIRECTORY_JSONL_SUFFIXES = {".jsonl", ".ndjson"}  # not .json: a folder of saved summaries is no log
COMPRESSED_SUFFIXES = {".gz", ".bz2", ".xz", ".zst", ".zstd"}
SNIFF_BYTES = 1 << 20  # server output is looked at this far for a metrics line before it is taken for JSONL
MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    # zstd skippable frames (0x184D2A50-5F, little-endian): pzstd starts its output with one.
    **{bytes([0x50 + low]) + b"\x2a\x4d\x18": "zstd" for low in range(16)},
}


class Source(Struct):
    """One input as the user named it, with a way to ask how far reading has got (for progress)."""

    name: str  # as shown in messages and per-run output: the path, the URL, or "<stdin>"
    path: Path | None  # None for stdin and for objects in storage
    size: int | None  # bytes on disk, when known
    remote: RemoteObject | None = None  # an object in storage (s3://, gs://)
    # Parquet: read only row groups [start, end) (a distributed task's share); rows keep the file's numbers.
    row_groups: tuple[int, int] | None = None

    @property
    def is_stdin(self) -> bool:
        return self.path is None and self.remote is None

    @property
    def can_reopen(self) -> bool:
        """A file or an object, which can be opened (or fetched) again; stdin and a pipe given as a path cannot."""
        return self.remote is not None or (self.path is not None and self.path.is_file())


def sniff_compression(head: bytes) -> str | None:
    for magic, kind in MAGIC.items():
        if head.startswith(magic):
            return kind
    return None


class ZstdFrames:
    """zstd frames one after another, decoded as they arrive (`read1`).

    zstandard's own stream reader ends quietly when the input stops inside a frame;
    here that is an EOFError, like gzip, bz2 and xz, so a cut-off copy is never
    mistaken for a complete log.
    """

    def __init__(self, raw: BinaryIO, decompressor: Any) -> None:
        self.raw = raw
        self.decompressor = decompressor
        self.frame: Any = None  # the decompressobj of the frame being decoded
        self.decoded = b""

    def read1(self, size: int = -1) -> bytes:
        while not self.decoded:
            chunk = self.raw.read(1 << 17)
            if not chunk:
                if self.frame is not None:
                    raise EOFError("zstd stream ended inside a frame")
                return b""
            out = []
            while chunk:
                if self.frame is None:
                    self.frame = self.decompressor.decompressobj()
                out.append(self.frame.decompress(chunk))
                chunk = b""
                if self.frame.eof:
                    chunk = self.frame.unused_data
                    self.frame = None
            self.decoded = b"".join(out)
        size = len(self.decoded) if size < 0 else size
        piece, self.decoded = self.decoded[:size], self.decoded[size:]
        return piece

    def close(self) -> None:
        pass  # the caller closes the raw file


class Replayed:
    """A stream whose first bytes were read ahead, to tell its format: they are served again first.

    A compressed source is decompressed once: what was looked at is not read (or fetched) a second time.
    The stream is a ChunkReader, which raises only when nothing more decoded: such an error waits for
    the reader's next call, after the bytes before it, where the reader would have met it.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.head = b""
        self.error: BaseException | None = None

    def _more(self, size: int) -> bytes:
        """Up to `size` more bytes of the stream (-1: the rest); b"" and the error kept, when it fails."""
        try:
            return self.stream.read(size)
        except Exception as exc:  # the decompressor's own error types
            self.error = exc
            return b""

    def peek(self, size: int) -> bytes:
        """The first `size` bytes not yet read, without consuming them."""
        if len(self.head) < size and self.error is None:
            self.head += self._more(size - len(self.head))
        return self.head[:size]

    def peek_line(self, start: int, limit: int) -> bytes | None:
        """The line that begins `start` bytes ahead (up to `limit` bytes), without consuming it; None past the end.

        Reads only what the stream has given (`read1` where it can): a followed stream whose writer is
        slow is not waited on for a whole block, only for the line.
        """
        more = getattr(self.stream, "read1", None) or self.stream.read
        while self.head.find(b"\n", start) < 0 and len(self.head) < start + limit and self.error is None:
            piece = b""
            try:
                piece = more(start + limit - len(self.head))
            except Exception as exc:  # the decompressor's own error types: raised where the reader meets them
                self.error = exc
            if not piece:
                break
            self.head += piece
        if len(self.head) <= start:
            return None
        end = self.head.find(b"\n", start)
        return self.head[start : end if end >= 0 else start + limit]

    @property
    def hands_out_lines(self) -> bool:
        """Whether the stream is a followed one, which hands out what it has as it comes."""
        return bool(getattr(self.stream, "hands_out_lines", False))

    def read1(self, size: int = -1) -> bytes:
        """What was read ahead, else at most one read of the stream (`ChunkReader` reads so)."""
        if self.head:
            data = self.head if size < 0 else self.head[:size]
            self.head = self.head[len(data) :]
            return data
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        more = getattr(self.stream, "read1", None) or self.stream.read
        piece: bytes = more(size)
        return piece

    def read(self, size: int = -1) -> bytes:
        if not self.head:
            if self.error is not None:
                error, self.error = self.error, None
                raise error
            return self.stream.read(size)
        data = self.head if size < 0 else self.head[:size]
        self.head = self.head[len(data) :]
        if getattr(self.stream, "hands_out_lines", False):  # a followed stream: what was seen now, not after more
            return data
        if (size < 0 or len(data) < size) and self.error is None:  # the rest of the request from the stream
            data += self._more(size - len(data) if size >= 0 else -1)
        return data

    def close(self) -> None:
        self.stream.close()


def decompress(raw: BinaryIO, source: str) -> BinaryIO:
    """Wrap a buffered binary stream in the decompressor its first bytes call for."""
    head = raw.peek(6)[:6] if isinstance(raw, io.BufferedReader) else b""
    kind = sniff_compression(head)
    stream: object
    if kind == "gzip":
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    elif kind == "bz2":
        stream = bz2.BZ2File(raw, mode="rb")
    elif kind == "xz":
        stream = lzma.LZMAFile(raw, mode="rb")  # noqa: SIM115 - returned open; read_source closes the file
    elif kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise InputError(
                source, None, "is zstd-compressed; install the extra: pip install 'specaccept[zstd]'"
            ) from None
        stream = ZstdFrames(raw, zstandard.ZstdDecompressor())
    else:
        return raw
    return cast(BinaryIO, ChunkReader(cast(BinaryIO, stream)))  # keeps what decoded before damage


def _is_shard(path: Path, directory: Path) -> bool:
    """A Parquet or JSONL file (plain or compressed) of a directory given as input, not hidden: a capture's
    parts (`part-00001.jsonl`, ...) but never one being written (`.part-*.tmp`) or what a hidden folder holds."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes[-1:] and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes.pop()
    if not suffixes or suffixes[-1] not in PARQUET_SUFFIXES | DIRECTORY_JSONL_SUFFIXES:
        return False
    if any(part.startswith(".") for part in path.relative_to(directory).parts):
        return False
    # A link to nothing is a shard that cannot be read: listed, so that opening it says so (never skipped unsaid).
    return path.is_file() or (path.is_symlink() and not path.exists())


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:  # a dangling link: opening it reports it
        return None


def expand_inputs(inputs: Sequence[str | Source], storage: Storage | None = None) -> list[Source]:
    """Resolve the command line's inputs; a directory stands for its Parquet and JSONL shards (sorted, recursive),
    a storage prefix for its Parquet and JSONL objects (`read.storage`); a `Source` stands for itself."""
    sources: list[Source] = []
    for item in inputs:
        if isinstance(item, Source):
            sources.append(item)
            continue
        if item == STDIN:
            sources.append(Source("<stdin>", None, None))
            continue
        if is_url(item):
            objects = (storage or Storage()).expand(item)
            sources += [Source(remote.url, None, remote.size, remote) for remote in objects]
            continue
        path = Path(item)
        if path.is_dir():
            shards = sorted(shard for shard in path.rglob("*") if _is_shard(shard, path))
            if not shards:
                raise InputError(item, None, "directory holds no .parquet or .jsonl files")
            sources += [Source(shown_name(str(shard)), shard, _size(shard)) for shard in shards]
        elif path.exists():
            sources.append(Source(shown_name(item), path, path.stat().st_size))
        else:
            raise InputError(item, None, "no such file or directory")
    return sources


SCAN = "<scan>"  # detect_format's answer for a text with no known line in its first SNIFF_BYTES: look on


def detect_format(source: Source, head: bytes, requested: Format, sample: Callable[[int], bytes]) -> SourceFormat:
    """The format asked for; in auto, by name (suffix, or a whole file name), then by content.

    Content (`read.formats` says what each format's lines look like): PAR1 magic is Parquet; JSON lines or
    SSE `data:` lines holding a per-request payload within the first SNIFF_BYTES (a first line of 70 KB of
    response text included) are that engine's payloads; an engine's JSON documents are that engine's; text
    whose first byte is not `{` and which holds an engine's metrics line (or a Prometheus scrape) within its
    first SNIFF_BYTES is that engine's output. Text none of whose first lines is JSON and which holds no known
    line yet is SCAN: the caller looks on through the whole stream (`find_known_line`). Anything else is read
    as JSONL, whose reader then names what is wrong with it. `sample(n)` gives the first n bytes of the
    source's text (decompressed), without consuming them.
    """
    if requested != "auto":
        return requested
    named = source.path if source.path is not None else PurePosixPath(source.remote.url) if source.remote else None
    suffixes = [suffix.lower() for suffix in named.suffixes] if named is not None else []
    if suffixes[-1:] and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes.pop()  # logs.jsonl.gz is JSONL, metrics.prom.gz a scrape
    suffix = suffixes[-1] if suffixes else ""
    by_suffix = [entry for entry in table() if suffix and suffix in entry.suffixes]
    if by_suffix and by_suffix[0].driver != "rows":  # Parquet, a scrape: the name decides
        return by_suffix[0].name
    if not by_suffix and head.startswith(PARQUET_MAGIC):
        return "parquet"
    found: SourceFormat | None = _sniff_payload(sample(SNIFF_BYTES)) or _sniff_json_engine(sample(1 << 16), named)
    if found is None and not by_suffix:
        found = _sniff_engine(sample(SNIFF_BYTES))
    if found is None:
        _refuse_what_is_no_input(source, sample(1 << 12), suffix)
        if not by_suffix and _is_text(sample(SNIFF_BYTES)):
            return SCAN
    return found or "jsonl"


def _is_text(sample: bytes) -> bool:
    """Text that is not JSON lines: its first line is not JSON, nor are most of its first lines.

    A server's start-up output may hold a line that looks like JSON (a configuration printed as a dict);
    JSON lines with a stray first line (a header) are JSONL, whose reader names that line.
    """
    lines = [line for line in sample.removeprefix(b"\xef\xbb\xbf").split(b"\n") if line.strip()]
    if not lines:
        return False  # an empty input is read (and told) as one
    if len(sample) >= SNIFF_BYTES and not sample.endswith(b"\n"):
        lines.pop()  # may be cut mid-line
    if not lines or looks_like_json(lines[0]):
        return False
    return 2 * sum(1 for line in lines if looks_like_json(line)) < len(lines)


SCAN_BLOCK = 1 << 16


class Skipped:
    """A text whose first lines, none of a known format, were read and dropped on the way to its first known one.

    They are served again as empty lines (then the block that holds the known line, whole), so that every
    reader numbers and counts lines as in the text itself, while memory holds a count, not the lines: what
    the readers counted as ordinary lines, they count again.
    """

    def __init__(self, blank_lines: int, head: bytes, stream: BinaryIO) -> None:
        self.blank_lines, self.head, self.stream = blank_lines, head, stream
        self.hands_out_lines = bool(getattr(stream, "hands_out_lines", False))

    def _served(self, size: int) -> bytes | None:
        if self.blank_lines:
            count = self.blank_lines if size < 0 else max(1, min(size, self.blank_lines, SCAN_BLOCK * 8))
            self.blank_lines -= count
            return b"\n" * count
        if self.head:
            data = self.head if size < 0 else self.head[: max(size, 1)]
            self.head = self.head[len(data) :]
            return data
        return None

    def read1(self, size: int = -1) -> bytes:
        served = self._served(size)
        if served is not None:
            return served
        more = getattr(self.stream, "read1", None) or self.stream.read
        piece: bytes = more(size)
        return piece

    def read(self, size: int = -1) -> bytes:
        served = self._served(size)
        if served is None:
            return self.stream.read(size)
        if size < 0:
            return served + (self.read(-1) if self.blank_lines or self.head else self.stream.read())
        return served

    def tell(self) -> int:
        return int(self.stream.tell())

    def close(self) -> None:
        self.stream.close()


def _marker_pattern(entries: tuple[InputFormat, ...]) -> re.Pattern[bytes]:
    markers = sorted({marker for entry in entries for marker in entry.markers}, key=len, reverse=True)
    return re.compile(b"|".join(re.escape(marker) for marker in markers))


def find_known_line(
    name: str,
    stream: BinaryIO,
    announce: Callable[[str], None] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[SourceFormat, BinaryIO]:
    """The format of a text's first known line, wherever it stands, and the text to read on (`Skipped`).

    The text is read once, in blocks; only the block that holds the known line is kept (its earlier lines are
    the context a reader may use: vLLM's "Engine NNN:" line), so memory stays flat however far it stands.
    Lines are looked at only where one of the formats' markers appears (one regular expression a block).
    A followed stream is waited on (`announce` is told once what for); a text that ends with no known line
    is an InputError that says how many lines it held and what was looked for.
    """
    entries = sniff_order(TEXT_DRIVERS)
    pattern = _marker_pattern(entries)
    more = stream.read if getattr(stream, "hands_out_lines", False) else getattr(stream, "read1", None) or stream.read
    lines, pending, long_line, announced = 0, b"", False, False
    while True:
        try:
            chunk = more(SCAN_BLOCK)
        except InputError:
            raise
        except Exception as exc:  # the decompressor's own errors: a damaged or cut-off copy
            raise InputError(name, lines + 1, f"cannot be read on: {exc}") from None
        if not chunk:
            break
        buffer, pending = pending + chunk, b""
        position = 0
        while (match := pattern.search(buffer, position)) is not None:
            start = buffer.rfind(b"\n", 0, match.start()) + 1
            end = buffer.find(b"\n", match.start())
            if end < 0:
                break  # the line goes on in the next block
            if not (long_line and buffer.find(b"\n") >= end):  # not the tail of an overlong line
                found = recognise(buffer[start:end].removesuffix(b"\r"), entries)
                if found is not None:  # the block's lines before it are kept (the context a reader may use)
                    keep = buffer.find(b"\n") + 1 if long_line else 0  # not an overlong line's tail
                    lines += buffer.count(b"\n", 0, keep)
                    return found.name, cast(BinaryIO, Skipped(lines, buffer[keep:], stream))
            position = end + 1
        cut = buffer.rfind(b"\n") + 1
        if cut:
            lines += buffer.count(b"\n", 0, cut)
            long_line = False
        pending = buffer[cut:]
        if len(pending) > max_line_bytes:  # an overlong line: no reader takes it, and it is not kept
            pending, long_line = b"", True
        if announce is not None and not announced:
            announced = True
            announce(f"{name}: waiting for a line of {known_lines()} (or name the format with --format)")
    if pending and not long_line:
        found = recognise(pending, entries)
        if found is not None:
            return found.name, cast(BinaryIO, Skipped(lines, pending, stream))
    if pending or long_line:
        lines += 1
    raise InputError(
        name,
        None,
        f"no line of a known format among its {lines:,} line{'' if lines == 1 else 's'} "
        f"(looked for {known_lines()}); "
        "name its format with --format",
    )


INPUT_FORMATS = "JSONL rows of (p, q, r), Parquet, an engine's server log or payloads, or a Prometheus scrape"
_CSV_HEADER = re.compile(rb"^[\w .\-\"']+(,[\w .\-\"']*)+\r?$")


def _refuse_what_is_no_input(source: Source, sample: bytes, suffix: str) -> None:
    """The two files most often given by mistake, which the JSONL reader would call invalid JSON at column 1:
    CSV (the tool's own `-o csv` included) and a saved summary."""
    if by_name("summary").sniffs(sample):
        raise InputError(
            source.name,
            None,
            "this is a saved summary (--summary-out, -o json), not a log: compare a log with it through --baseline, "
            "two summaries with `specaccept diff`, add them with `specaccept merge`, or draw it with "
            "`specaccept report --summary`",
        )
    sample = sample.removeprefix(b"\xef\xbb\xbf")
    first = sample.split(b"\n", 1)[0]
    if suffix == ".csv" and first.lstrip()[:1] not in (b"{", b"["):
        raise InputError(source.name, None, f"CSV is not an input (-o csv is an output only): give {INPUT_FORMATS}")
    if _CSV_HEADER.match(first) and b"\n" in sample:
        second = sample.split(b"\n", 2)[1].rstrip(b"\r")
        if second.count(b",") == first.count(b",") and second[:1] not in (b"{", b"["):
            shown = first.decode("utf-8", "replace").strip()[:80]
            raise InputError(
                source.name,
                None,
                f"this looks like CSV (its first line is {shown!r}): CSV is not an input (-o csv is an output only): "
                f"give {INPUT_FORMATS}",
            )


# Compressed stdin, once decompressed to tell its format (a server log, payloads or JSONL): stdin is one stream,
# read on from where the last reader stopped, and so is its text; kept with stdin itself, so an id is never reused.
_STDIN_TEXT: dict[int, tuple[BinaryIO, str | None, Replayed]] = {}


class _TextSample:
    """The first bytes of a source's text, read ahead once: peeked from a plain stream, or decompressed.

    A compressed file or object is decompressed here once; `text_stream` then serves what was read ahead
    again, followed by the rest, so nothing is read (or fetched from object storage) twice.
    """

    def __init__(self, source: Source, raw: BinaryIO, compression: str | None) -> None:
        self.source, self.raw, self.compression = source, raw, compression
        self.read_ahead: Replayed | None = None

    def __call__(self, size: int) -> bytes:
        if self.compression is None:
            return self.raw.peek(size)[:size] if isinstance(self.raw, io.BufferedReader) else b""
        if not self.source.can_reopen and not self.source.is_stdin:
            # A compressed pipe given as a path: opened again, it would start where the last look stopped;
            # --format names an engine format.
            return b""
        if self.read_ahead is None:
            try:
                self.read_ahead = Replayed(decompress(self.raw, self.source.name))
            except InputError:  # zstd without its extra: the reader says so, where the error policy applies
                return b""
            if self.source.is_stdin:  # every later open of stdin goes on from this decompressed stream
                _STDIN_TEXT[id(self.raw)] = (self.raw, self.compression, self.read_ahead)
        return self.read_ahead.peek(size)

    def text_stream(self) -> BinaryIO | None:
        """The decompressed stream, when reading ahead made it."""
        return None if self.read_ahead is None else cast(BinaryIO, self.read_ahead)


def _sniff_payload(sample: bytes) -> SourceFormat | None:
    """A per-request payload among the sample's lines (its markers first: (p, q, r) rows never hold them)."""
    entries = [entry for entry in table() if entry.kind is Kind.REQUESTS]
    if not any(marker in sample for entry in entries for marker in entry.markers):
        return None
    from specaccept_cli.read.payloads import sniff_payload

    lines = sample.split(b"\n")
    if len(lines) > 1:
        lines.pop()  # may be cut mid-line
    return sniff_payload(lines, limit=len(lines))


def _sniff_json_engine(sample: bytes, named: PurePosixPath | Path | None = None) -> SourceFormat | None:
    """Engine output written as JSON documents that are not per-request payloads: an export known by its keys
    or its file name (AIPerf's), JSON lines of an engine's documents (TensorRT-LLM's /metrics)."""
    for entry in table():
        if entry.driver == "document" and (
            entry.sniffs(sample) or (named is not None and named.name in entry.file_names)
        ):
            return entry.name
    if not any(marker in sample for entry in table() if entry.driver == "json-lines" for marker in entry.markers):
        return None
    return _sniff_engine(sample)


def _sniff_engine(sample: bytes) -> SourceFormat | None:
    stripped = sample.lstrip()
    first = stripped[: stripped.find(b"\n")]
    json_markers = [marker for entry in table() if entry.driver == "json-lines" for marker in entry.markers]
    if not stripped or (stripped[:1] == b"{" and not any(marker in first for marker in json_markers)):
        return None  # JSONL rows, not an engine's JSON lines: the common case decides here
    from specaccept_cli.read.engines import sniff_engine_format

    lines = sample.split(b"\n")
    if len(lines) > 1:
        lines.pop()  # may be cut mid-line
    return sniff_engine_format(lines, limit=len(lines))


def _open_binary(source: Source) -> BinaryIO:
    if source.remote is not None:
        return source.remote.open_stream()
    if source.path is None:
        if sys.stdin is None:
            raise InputError(source.name, None, "stdin is closed")
        return sys.stdin.buffer
    try:
        return open(source.path, "rb", buffering=1 << 20)
    except OSError as exc:
        why = f"cannot open: {exc.strerror or exc}"
        with contextlib.suppress(OSError):
            if not source.path.exists():  # a dangling link names what it points to
                why += f" (a symlink to {str(source.path.readlink())!r}, which is not there)"
        raise InputError(source.name, None, why) from None


class OpenSource(Struct, frozen=True):
    """A source opened once for every reader: its raw bytes, its first bytes (peeked, not consumed) and format.

    `regular_file` is true for a file that can be read again by byte range (not stdin, not a pipe given
    as a path, not compressed): the parallel reader cuts such a file into ranges.
    """

    source: Source
    raw: BinaryIO
    head: bytes
    format: SourceFormat
    compression: str | None
    text: BinaryIO | None = None  # the decompressed stream, when telling the format made it (read once)

    @property
    def kind(self) -> Kind:
        """What the format's reader hands on: runs, engine intervals, requests (`read.formats.Kind`)."""
        return kind_of(self.format)

    @property
    def regular_file(self) -> bool:
        path = self.source.path
        return path is not None and path.is_file() and self.compression is None

    def jsonl_stream(self) -> BinaryIO:
        """The decompressed byte stream of a text source (JSONL or server output)."""
        return self.text if self.text is not None else decompress(self.raw, self.source.name)

    def position(self) -> Callable[[], int] | None:
        """How many raw bytes have been read, for progress; None for stdin (size unknown)."""
        return None if self.source.is_stdin else self.raw.tell


@contextlib.contextmanager
def open_source(source: Source, requested: Format = "auto") -> Iterator[OpenSource]:
    """Open a source, look at its first bytes without consuming them, and close it afterwards (not stdin)."""
    raw = _open_binary(source)
    try:
        try:
            head = raw.peek(8)[:8] if isinstance(raw, io.BufferedReader) else b""
        except OSError as exc:
            raise InputError(source.name, None, f"cannot read: {exc.strerror or exc}") from None
        shared = _STDIN_TEXT.get(id(raw)) if source.is_stdin else None
        if shared is not None and shared[0] is raw:  # compressed stdin, decompressed by an earlier look
            _, compression, text = shared
            found = detect_format(source, head, requested, text.peek)
            stream: BinaryIO | None = cast(BinaryIO, text)
        else:
            compression = sniff_compression(head)
            sample = _TextSample(source, raw, compression)
            found = detect_format(source, head, requested, sample)
            stream = sample.text_stream()
        if found == SCAN:  # a text with no known line yet: read on to its first (the lines before are counted)
            if stream is None and compression is not None:
                stream = decompress(raw, source.name)
            found, stream = find_known_line(source.name, stream if stream is not None else raw)
        yield OpenSource(source, raw, head, found, compression, stream)
    finally:
        if not source.is_stdin:
            raw.close()


class ProgressHook(Protocol):
    """Told when a source starts and, after every batch, how many runs it held and how far the source is read."""

    def start_source(self, source: Source) -> None: ...

    def advance(self, runs: int, position: int | None) -> None: ...


class Reading(Struct, frozen=True):
    """How rows are read from any source: where the fields live, which format, how long a line may be."""

    fields: FieldSpec = field(default_factory=FieldSpec)
    input_format: Format = "auto"  # auto: by extension, then by content (PAR1 magic means Parquet)
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES


def read_source(
    source: Source, reading: Reading, on_error: OnError, progress: ProgressHook | None = None
) -> Iterator[RunBatch]:
    """Every valid run of one source, in batches, in input order."""
    if progress is not None:
        progress.start_source(source)
    with open_source(source, reading.input_format) as opened:
        yield from read_opened(opened, reading, on_error, progress)


def read_opened(
    opened: OpenSource, reading: Reading, on_error: OnError, progress: ProgressHook | None = None
) -> Iterator[RunBatch]:
    """Every valid run of a source already opened, in batches, in input order."""
    if opened.format == "parquet":
        yield from _read_parquet(opened.source, opened.raw, reading.fields, on_error, progress)
        return
    if opened.kind is not Kind.RUNS:
        raise InputError(opened.source.name, None, f"is {opened.format} output: intervals, not runs (use summarise)")
    name, max_line_bytes = opened.source.name, reading.max_line_bytes
    batches = read_jsonl(opened.jsonl_stream(), name, reading.fields, on_error, max_line_bytes)
    yield from _track(batches, progress, opened.position())


def _read_parquet(
    source: Source, raw: BinaryIO, fields: FieldSpec, on_error: OnError, progress: ProgressHook | None
) -> Iterator[RunBatch]:
    from specaccept_cli.read.parquet import read_parquet_file

    if source.can_reopen:
        with contextlib.ExitStack() as stack:
            file: Any = source.path
            if source.remote is not None:
                file = stack.enter_context(source.remote.open_random())
            parquet = read_parquet_file(file, source.name, fields, on_error, source.row_groups)
            yield from _track(parquet, progress, None, source.size)
        return
    # Parquet needs to seek: stdin, or a pipe given as a path (`<(cat x.parquet)`), is spooled to disk,
    # not memory, from the stream already opened (its first bytes were peeked, not consumed).
    with tempfile.NamedTemporaryFile(suffix=".parquet") as spool:
        chunks = ChunkReader(raw)  # not copyfileobj: a signal in the middle of the copy must end it
        while chunk := chunks.read(1 << 20):
            spool.write(chunk)
        spool.flush()
        yield from _track(read_parquet_file(Path(spool.name), source.name, fields, on_error), progress)


def _track(
    batches: Iterator[RunBatch],
    progress: ProgressHook | None,
    position: Callable[[], int] | None = None,
    size: int | None = None,
) -> Iterator[RunBatch]:
    """Report progress after each batch: bytes read when the stream can tell, else runs only."""
    for batch in batches:
        if progress is not None:
            progress.advance(len(batch), position() if position is not None else None)
        yield batch
    if progress is not None and size is not None:
        progress.advance(0, size)


def read_all(
    inputs: list[str], reading: Reading, on_error: OnError, progress: ProgressHook | None = None
) -> Iterator[RunBatch]:
    """Every valid run of every input, in order (the read stage alone; `summarise` runs the whole pipeline)."""
    for source in expand_inputs(inputs):
        yield from read_source(source, reading, on_error, progress)


FIRST_ROW_BYTES = 1 << 20  # the first MiB holds the first row of any sane log


def read_ahead_first_row(opened: OpenSource, limit: int = FIRST_ROW_BYTES) -> tuple[OpenSource, object]:
    """The first row of a JSONL source (None when there is none, or it is not JSON), and the source to read on.

    The bytes looked at are read ahead once (`Replayed`) and served again to the reader: a followed
    or piped stdin, seen only once, loses nothing, and no source is opened twice. Blank lines before
    the first row are skipped. Never an error: the reader reports what is wrong with the source.
    """
    stream = opened.text if isinstance(opened.text, Replayed) else Replayed(opened.jsonl_stream())
    ahead = replace(opened, text=cast(BinaryIO, stream))
    seen = 0
    while seen < limit:
        line = stream.peek_line(seen, limit)
        if line is None:
            return ahead, None
        if line.strip():
            try:
                return ahead, orjson.loads(line.removeprefix(b"\xef\xbb\xbf") if seen == 0 else line)
            except orjson.JSONDecodeError:
                return ahead, None
        seen += len(line) + 1
    return ahead, None


def first_row_fields(source: Source, requested: Format = "auto", limit: int = 1 << 20) -> list[str]:
    """Top-level field names of a file's first row (Parquet: its columns), to suggest options; [] when unknown.

    Only for files (stdin cannot be read twice), and never an error: a source that cannot be
    probed has no suggestions, and the audit itself reports what is wrong with it.
    """
    if source.path is None:
        return []
    try:
        with open_source(source, requested) as opened:
            if opened.format == "parquet":
                import pyarrow.parquet as pq

                return list(pq.read_schema(source.path).names)
            head = opened.jsonl_stream().read(limit)  # the first MiB holds the first row of any sane log
            for line in head.split(b"\n")[:-1] if len(head) == limit else head.split(b"\n"):
                if line.strip():
                    row = orjson.loads(line)
                    return [str(key) for key in row] if isinstance(row, dict) else []
    except Exception:  # a damaged or unreadable source (zlib.error, LZMAError, ...): the audit reports it
        return []
    return []
