"""Object storage: `s3://`, `gs://` and `file://` inputs through `pyarrow.fs`, which pyarrow already ships.

A URL names one object or a prefix; a prefix (Hive-style `key=value/` folders included) stands
for every Parquet and JSONL object under it, sorted by key, markers such as `_SUCCESS` left out.
Options (`--storage-option KEY=VALUE`) and credentials travel in a `Storage`, a small picklable
value that a worker process turns into a file system of its own; its text form never shows a
value, so a secret given as an option cannot reach a message or a log. Credentials otherwise
come where the cloud's own tools look: the `AWS_*` variables (`AWS_ENDPOINT_URL` included, so an
S3-compatible store needs no flag), `~/.aws/`, instance metadata, Google's default credentials.

Every storage call (setting up the file system, a listing, an open, one read of at most 8 MiB) has a
deadline, `--storage-option timeout=SECONDS` (default `REMOTE_TIMEOUT_SECONDS`), and the clients' own
retries are bounded within it (S3: three attempts; GCS: `retry_time_limit`, which is 15 minutes
unless set). pyarrow's C++ cannot be interrupted, and Python runs signal handlers only in the main
thread between steps of Python code: so each call runs on a daemon thread while the calling thread
waits on it in short steps, where a signal (Ctrl-C, SIGTERM, SIGHUP) ends the run as it does anywhere
else, and where the deadline is kept. A call past its deadline is abandoned (its thread ends with the
process) and is an error naming the URL.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any, BinaryIO, cast

from msgspec import Struct

from specaccept_cli.errors import InputError, UsageError

SCHEMES = ("s3", "gs", "gcs", "file")
# Object names a prefix stands for (the local rule for directories is Parquet only: a folder of
# local files is named file by file just as easily; a bucket prefix is the unit logs are kept in).
OBJECT_SUFFIXES = (".parquet", ".pq", ".parq", ".jsonl", ".ndjson", ".json", ".gz", ".bz2", ".xz", ".zst", ".zstd")
# Read-ahead for remote objects: each read of the raw file is one ranged GET, so a large buffer
# keeps the number of requests low without holding much memory.
REMOTE_BUFFER_BYTES = 8 << 20
REMOTE_TIMEOUT_SECONDS = 60.0  # one storage call, retries included (a read is at most REMOTE_BUFFER_BYTES)
WAIT_STEP_SECONDS = 0.1  # how often a waiting caller looks up (a signal is handled between two looks)

# --storage-option KEY -> (file system argument, how its text becomes a value), per scheme.
_BOOLEAN = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _boolean(text: str) -> bool:
    try:
        return _BOOLEAN[text.strip().lower()]
    except KeyError:
        raise UsageError(f"not a yes/no value: {text!r} (use true or false)") from None


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"not a number of seconds: {text!r}") from None


_S3_OPTIONS: dict[str, tuple[str, Any]] = {
    "endpoint": ("endpoint_override", str),
    "endpoint_url": ("endpoint_override", str),
    "endpoint_override": ("endpoint_override", str),
    "region": ("region", str),
    "anonymous": ("anonymous", _boolean),
    "scheme": ("scheme", str),
    "access_key": ("access_key", str),
    "secret_key": ("secret_key", str),
    "session_token": ("session_token", str),
    "role_arn": ("role_arn", str),
    "connect_timeout": ("connect_timeout", _seconds),
    "request_timeout": ("request_timeout", _seconds),
    "force_virtual_addressing": ("force_virtual_addressing", _boolean),
    "timeout": ("timeout", _seconds),
}
_GCS_OPTIONS: dict[str, tuple[str, Any]] = {
    "endpoint": ("endpoint_override", str),
    "endpoint_override": ("endpoint_override", str),
    "anonymous": ("anonymous", _boolean),
    "scheme": ("scheme", str),
    "project_id": ("project_id", str),
    "access_token": ("access_token", str),
    "timeout": ("timeout", _seconds),
}
STORAGE_OPTIONS = sorted({*_S3_OPTIONS, *_GCS_OPTIONS})


# Query parameters that carry credentials in pyarrow's and the clouds' URI forms, and in presigned
# URLs (AWS's and Google's signature parameters).
_SECRET_PARAMETERS = (
    "access_key",
    "secret_key",
    "session_token",
    "access_token",
    "token",
    "password",
    "x-amz-security-token",
    "x-amz-credential",
    "x-amz-signature",
    "x-goog-credential",
    "x-goog-signature",
    "signature",
    "sig",
    "api_key",
    "key",
)
# Storage options whose values are never shown (see `redacted`).
_SECRET_OPTIONS = {"access_key", "secret_key", "session_token", "access_token"}
_ENDPOINT_OPTIONS = {"endpoint", "endpoint_url", "endpoint_override"}
# A bucket's name (S3 and GCS): what may stand between `scheme://` and the first `/`.
_BUCKET = re.compile(r"[a-z0-9._-]+")
# `scheme://`, then an authority that is no bucket name (`KEY:SECRET`, a token, a secret holding a `/`),
# up to the first `@` before a blank: the part of a URL that may be a secret.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)(?=[^/\s]*[^a-z0-9._\-/\s])[^\s@]*@")
# A secret query value ends at the next parameter, a blank, a quote or a `: ` that separates a message.
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:"
    + "|".join(re.escape(name) for name in _SECRET_PARAMETERS)
    + r")=)(?:[^&#\s`'\"]*?)(?=[&#\s`'\"]|:(?:\s|$)|$)"
)

# Values given as secrets (`--storage-option secret_key=...`, the user and query of an endpoint) in this
# process: a client library may quote them in an error, and no line specaccept prints may show them.
_NEVER_SHOWN: set[str] = set()


def _never_show(key: str, value: str) -> None:
    """Remember the secret parts of a storage option's value (see `_NEVER_SHOWN`)."""
    if key in _SECRET_OPTIONS:
        parts = [value]
    elif key in _ENDPOINT_OPTIONS:
        rest = value.partition("://")[2] or value
        authority, _, after = rest.partition("/")
        userinfo = authority.rpartition("@")[0]
        query = (after if "?" in after else authority).partition("?")[2]
        parts = [userinfo, *userinfo.split(":"), query, *(item.partition("=")[2] for item in query.split("&"))]
    else:
        return
    _NEVER_SHOWN.update(part for part in parts if len(part) >= 4)


def redacted(text: str) -> str:
    """`text` with whatever looks like credentials in a URL (`s3://KEY:SECRET@bucket`, `?secret_key=`)
    and every secret given as a storage option replaced by `***`: every line specaccept prints goes
    through here."""
    for secret in sorted(_NEVER_SHOWN, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    if "://" not in text:
        return text
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


def refuse_credentials(url: str) -> None:
    """A URL that carries credentials is refused before it is used, with the credentials redacted.

    pyarrow would reject `s3://KEY:SECRET@bucket/...` with a message quoting the secret; a secret
    belongs in the environment (`AWS_*`), the cloud's own files, or --storage-option, never printed.
    A secret may hold a `/` (AWS secret keys do): then the `@` that ends it comes after a first
    "bucket" that is no bucket name (`s3://KEY:wJal/rXU@bucket/...`).
    """
    scheme, _, rest = url.partition("://")
    authority = rest.split("/", 1)[0]
    query = rest.partition("?")[2]
    in_query = any(part.partition("=")[0].lower() in _SECRET_PARAMETERS for part in query.split("&") if "=" in part)
    userinfo = "@" in authority or ("@" in rest and authority != "" and not _BUCKET.fullmatch(authority))
    if userinfo or in_query:
        shown = f"{scheme}://***@{rest.split('@', 1)[1]}" if userinfo else url
        raise UsageError(
            f"{redacted(shown)}: a URL must not carry credentials (give them in the environment, such as "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, in the cloud's own files, or with --storage-option)"
        )
    if ":" in authority:
        raise UsageError(
            f"{scheme}://***{rest[len(authority) :]}: a bucket name cannot hold ':' (credentials go in the "
            "environment or --storage-option, an endpoint in --storage-option endpoint=...)"
        )


def is_url(item: str) -> bool:
    """True for an input that names object storage (or a `file://` URL), not a local path."""
    scheme, separator, _ = item.partition("://")
    return bool(separator) and scheme.lower() in SCHEMES


def parse_storage_options(pairs: tuple[str, ...] | list[str]) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` texts -> (key, value) pairs, keys checked (the values are checked where they are used)."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not separator or not key:
            raise UsageError(f"a storage option takes KEY=VALUE, not {pair.partition('=')[0]!r}")
        if key not in STORAGE_OPTIONS:
            raise UsageError(f"unknown storage option {key!r} (known: {', '.join(STORAGE_OPTIONS)})")
        _never_show(key, value)
        options[key] = value
    return tuple(options.items())


class Storage(Struct, frozen=True):
    """How to reach object storage: options for the file systems, as plain picklable pairs.

    `repr` lists the option names only: values may be secrets.
    """

    options: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"Storage(options={[key for key, _ in self.options]})"

    def filesystem(self, url: str) -> tuple[Any, str]:
        """The pyarrow file system for `url` and the object's path inside it (one per process and options)."""
        refuse_credentials(url)
        scheme, _, rest = url.partition("://")
        scheme = scheme.lower()
        if scheme == "file":
            return _filesystem("file", ()), rest
        options = self.options
        return _call(url, lambda: _filesystem(scheme, options), self.timeout), rest.rstrip("/")

    @property
    def timeout(self) -> float:
        """The deadline of one storage call, in seconds."""
        for key, value in self.options:
            if key == "timeout":
                seconds = _seconds(value)
                if not 0 < seconds < 1e6:
                    raise UsageError(f"storage option timeout must be a number of seconds above 0, not {value!r}")
                return seconds
        return REMOTE_TIMEOUT_SECONDS

    def expand(self, url: str) -> list[RemoteObject]:
        """The objects a URL names: itself, or the Parquet and JSONL objects under a prefix (sorted by key)."""
        import pyarrow.fs as pafs

        filesystem, path = self.filesystem(url)
        info = _call(url, lambda: filesystem.get_file_info(path), self.timeout)
        if info.type == pafs.FileType.File:
            return [RemoteObject(url, self, info.size)]
        if info.type != pafs.FileType.Directory:
            raise InputError(url, None, "no such object or prefix")
        selector = pafs.FileSelector(path, recursive=True)
        listed = _call(url, lambda: filesystem.get_file_info(selector), self.timeout)
        base = url.rstrip("/")
        found = sorted(
            (item.path, item.size)
            for item in listed
            if item.type == pafs.FileType.File and _is_log_object(item.path[len(path) :])
        )
        if not found:
            raise InputError(url, None, "prefix holds no Parquet or JSONL objects")
        return [RemoteObject(base + item[len(path) :], self, size) for item, size in found]


def _is_log_object(relative: str) -> bool:
    """A data object under a prefix: a Parquet or JSONL name, no part of its key hidden (`_SUCCESS`, `.crc`)."""
    parts = PurePosixPath(relative.lstrip("/")).parts
    if not parts or any(part.startswith(("_", ".")) for part in parts):
        return False
    return parts[-1].lower().endswith(OBJECT_SUFFIXES)


class RemoteObject(Struct, frozen=True):
    """One object in storage: where it is, how to reach it, its size when the listing told it."""

    url: str
    storage: Storage
    size: int | None = None

    def open_random(self) -> Any:
        """A seekable pyarrow file (every read a ranged request), for Parquet and byte ranges."""
        filesystem, path = self.storage.filesystem(self.url)
        file = _call(self.url, lambda: filesystem.open_input_file(path), self.storage.timeout)
        return _Bounded(file, self.storage.timeout) if self.url.lower().partition("://")[0] != "file" else file

    def open_stream(self) -> BinaryIO:
        """The object's bytes, buffered so that its first bytes can be peeked (compression, format)."""
        return cast(BinaryIO, io.BufferedReader(_GrowingReads(self.open_random()), REMOTE_BUFFER_BYTES))


class _Bounded:
    """A remote pyarrow file whose reads each have the storage's deadline and give way to signals.

    It stands in for the pyarrow file everywhere (Parquet reads it through `read`, `seek`, `tell`, `size`).
    """

    def __init__(self, file: Any, timeout: float) -> None:
        self.file = file
        self.timeout = timeout

    def read(self, size: int = -1) -> bytes:
        data: bytes = bounded(lambda: self.file.read(size), self.timeout, "object storage read")
        return data

    def read_at(self, nbytes: int, offset: int) -> bytes:
        data: bytes = bounded(lambda: self.file.read_at(nbytes, offset), self.timeout, "object storage read")
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)

    def __enter__(self) -> _Bounded:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.file.close()


def bounded(action: Callable[[], Any], seconds: float, what: str) -> Any:
    """`action()` run on a daemon thread, waited on in steps: its result or its exception, within `seconds`.

    The wait is Python code, so a signal's handler runs during it (a KeyboardInterrupt, a stop) however
    long the C++ call inside blocks; past `seconds` it is abandoned: a TimeoutError.
    """
    from specaccept_cli.threads import signals_stay_with_main

    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, action()))
        except BaseException as exc:  # handed to the waiting thread, raised there
            outcome.append((False, exc))
        done.set()

    with signals_stay_with_main():
        threading.Thread(target=run, name="specaccept-storage-call", daemon=True).start()
    end = _monotonic() + seconds
    while not done.wait(min(WAIT_STEP_SECONDS, max(0.0, end - _monotonic()))):
        if _monotonic() >= end:
            raise TimeoutError(errno.ETIMEDOUT, f"{what} had no answer within {seconds:g}s (storage option timeout)")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _monotonic() -> float:
    import time

    return time.monotonic()


class _GrowingReads(io.RawIOBase):
    """A remote file read in requests that start small and double up to the buffer's size.

    Looking at an object's first bytes (its format, its compression) then costs one small request,
    not a whole read-ahead buffer: a Parquet object is read by its footer afterwards, not as a stream.
    """

    FIRST_BYTES = 1 << 16

    def __init__(self, file: Any) -> None:
        self.file = file
        self.limit = self.FIRST_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        size = min(len(view), self.limit)
        self.limit = min(self.limit * 2, REMOTE_BUFFER_BYTES)
        data = _read(self.file, size)
        view[: len(data)] = data
        return len(data)

    def tell(self) -> int:
        return int(self.file.tell())

    def close(self) -> None:
        self.file.close()
        super().close()


def _read(file: Any, size: int) -> bytes:
    """`size` bytes of a remote file; a failed request is an OSError with an errno, like a local disk's.

    The object deleted or replaced mid-read, the connection lost: readers then report a read error
    of the storage, never a truncated or corrupt stream (pyarrow's own errors carry no errno).
    """
    try:
        data: bytes = file.read(size)
    except TimeoutError as exc:
        raise OSError(errno.ETIMEDOUT, exc.strerror or str(exc)) from None
    except OSError as exc:
        raise OSError(errno.EIO, f"object storage read failed: {_first_line(exc)}") from None
    return data


class _SeekableObject:
    """A remote file read by byte ranges (`open_seekable`), its failed requests made read errors (`_read`)."""

    def __init__(self, file: Any) -> None:
        self.file = file

    def read(self, size: int = -1) -> bytes:
        return _read(self.file, size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self.file.seek(offset, whence))

    def tell(self) -> int:
        return int(self.file.tell())

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> _SeekableObject:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_seekable(location: str | os.PathLike[str] | RemoteObject) -> BinaryIO:
    """A local file or an object, unbuffered and seekable: for reading byte ranges of it."""
    if isinstance(location, RemoteObject):
        return cast(BinaryIO, _SeekableObject(location.open_random()))
    return open(location, "rb", buffering=0)


def _call(url: str, action: Any, timeout: float = REMOTE_TIMEOUT_SECONDS) -> Any:
    """A storage call within its deadline, its failures turned into one line naming the URL (never the credentials)."""
    try:
        return bounded(action, timeout, "the storage")
    except TimeoutError as exc:
        raise InputError(url, None, exc.strerror or str(exc)) from None
    except UsageError:
        raise
    except FileNotFoundError:
        raise InputError(url, None, "no such object") from None
    except PermissionError as exc:
        raise InputError(url, None, f"access denied ({_first_line(exc)})") from None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(url, None, f"cannot read: {redacted(_first_line(exc))}") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _environment_endpoint(scheme: str) -> str | None:
    """The S3 endpoint from the environment, as the AWS tools read it (pyarrow itself does not)."""
    if scheme != "s3":
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


@functools.lru_cache(maxsize=16)
def _filesystem(scheme: str, options: tuple[tuple[str, str], ...]) -> Any:
    """One file system per scheme and options in each process: connections and credentials are reused."""
    import pyarrow.fs as pafs

    if scheme == "file":
        return pafs.LocalFileSystem()
    table = _S3_OPTIONS if scheme == "s3" else _GCS_OPTIONS
    arguments: dict[str, Any] = {}
    timeout = REMOTE_TIMEOUT_SECONDS
    for key, value in options:
        if key not in table:
            raise UsageError(f"storage option {key!r} does not apply to {scheme}://")
        name, convert = table[key]
        _never_show(key, value)
        if name == "timeout":
            timeout = convert(value)
            continue
        arguments[name] = convert(value)
    if scheme == "s3":
        arguments.setdefault("retry_strategy", pafs.AwsStandardS3RetryStrategy(max_attempts=3))
        arguments.setdefault("connect_timeout", min(timeout, 10.0))
        arguments.setdefault("request_timeout", timeout)
    else:
        from datetime import timedelta

        arguments["retry_time_limit"] = timedelta(seconds=max(1.0, min(timeout, 30.0)))
    endpoint = arguments.get("endpoint_override") or _environment_endpoint(scheme)
    if endpoint is not None:
        arguments.update(_split_endpoint(endpoint, arguments.get("scheme")))
    try:
        if scheme == "s3":
            return pafs.S3FileSystem(**arguments)
        return pafs.GcsFileSystem(**arguments)
    except (TypeError, ValueError, OSError) as exc:
        raise UsageError(f"cannot set up {scheme}:// storage: {_first_line(exc)}") from None


# What an endpoint may be: [scheme://]host[:port][/]; a host is a name, an IPv4 or a bracketed IPv6 address.
_ENDPOINT = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?/?")


def _split_endpoint(endpoint: str, scheme: str | None) -> Mapping[str, str]:
    """`http://host:port` -> endpoint_override "host:port" and scheme "http" (pyarrow wants them apart).

    Anything more (a user and password, a path, a query such as a presigned token) is refused: the S3
    client would quote it in its errors, or resolve the user as a host name.
    """
    if not _ENDPOINT.fullmatch(endpoint):
        _never_show("endpoint", endpoint)
        given, separator, rest = endpoint.partition("://")
        host = rest.rpartition("@")[2] if separator else endpoint.rpartition("@")[2]
        host = re.split(r"[/?#]", host, maxsplit=1)[0]
        shown = f"{given}://{host}" if separator else host
        raise UsageError(
            f"storage option endpoint takes [http[s]://]HOST[:PORT] and nothing more (no user, password, path or "
            f"query): {redacted(shown)}... is refused; credentials go in the environment or in --storage-option"
        )
    given, separator, rest = endpoint.partition("://")
    if separator:
        return {"endpoint_override": rest.rstrip("/"), "scheme": scheme or given.lower()}
    return {"endpoint_override": endpoint.rstrip("/"), **({"scheme": scheme} if scheme else {})}
