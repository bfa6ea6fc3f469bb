"""Scraping Prometheus endpoints (`specaccept watch`): one GET per endpoint and period, with the standard library.

http.client is enough for a GET with headers every few seconds, so `watch` adds no dependency. What a
server can do to a scrape is bounded here: the whole scrape (connecting, the headers, the body, every
redirect) has one deadline, `timeout`, kept by a watchdog that shuts the socket down when it passes or
when the watch stops (a server sending one byte a second never resets a per-read timeout); redirects
are followed to http and https only, at most `MAX_REDIRECTS`, a loop is one failure, and the request's
headers (they may hold a token) go to the first host and scheme only, as curl does; a body shorter than
its Content-Length, or larger than `MAX_SCRAPE_BYTES` (after gzip decoding too) is refused. A failure
is a reason in words (the status and the server's reason phrase with its control characters escaped,
the timeout, the refused connection), never a traceback, and never the request's headers (they may
hold a token) nor the URL's user, password or query values: `shown_url` is the only form of a URL
that leaves this module.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Mapping

from msgspec import Struct

from specaccept_cli.text import visible

MAX_SCRAPE_BYTES = 64 << 20  # a /metrics page larger than this is refused, not held in memory
MAX_REDIRECTS = 5
READ_PIECE = 1 << 16
REDACTED = "***"


class ScrapeError(Exception):
    """One scrape that failed, with the reason (no header, no credential)."""


def shown_url(url: str) -> str:
    """The URL without user and password, and with every query value redacted, as every message shows it
    (even a URL that does not parse). A query value may be a token (`/metrics?token=...`): the names stay."""
    try:
        parts = urllib.parse.urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:  # `http://[::1` and the like: cut the user and password out of the text itself
        scheme, slashes, rest = url.partition("://")
        if not slashes:
            return url
        end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
        netloc = rest[:end]
        return url if "@" not in netloc else f"{scheme}://{netloc.rpartition('@')[2]}{rest[end:]}"
    query = parts.query
    if query:
        query = "&".join(
            (name + "=" + REDACTED) if sep else name
            for name, sep, _ in (item.partition("=") for item in query.split("&"))
        )
    if username is None and password is None and query == parts.query:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, query, parts.fragment))


def check_url(url: str) -> str | None:
    """Why `url` cannot be scraped (not http or https, no host, a port that is no port, a user and
    password, which urllib would take for part of the host), or None. Never the password itself."""
    shown = shown_url(url)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError for `:abc` or `:99999`
    except ValueError as exc:  # `http://[::1`: "Invalid IPv6 URL"
        return f"{shown}: not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{shown}: not an http:// or https:// URL"
    if not parts.hostname:
        return f"{shown}: no host"
    if port == 0:
        return f"{shown}: port 0 is no port"
    if parts.username is not None or parts.password is not None:
        return (
            f"{shown}: a user and password in the URL are not supported;"
            " send them as a header: --header 'Authorization=Basic BASE64'"
        )
    return None


class _Deadline:
    """Shuts a connection's socket down when the scrape's time is up or the watch stops."""

    def __init__(self, seconds: float, stop: threading.Event | None) -> None:
        self.end = time.monotonic() + seconds
        self.stop = stop
        self.done = threading.Event()
        self.expired = False
        self.connection: http.client.HTTPConnection | None = None
        self.thread = threading.Thread(target=self._watch, name="specaccept-scrape-deadline", daemon=True)
        self.thread.start()

    def left(self) -> float:
        return max(0.01, self.end - time.monotonic())

    def _watch(self) -> None:
        while not self.done.is_set():
            remaining = self.end - time.monotonic()
            if remaining <= 0 or (self.stop is not None and self.stop.is_set()):
                self.expired = remaining <= 0
                self._cut()
                return
            self.done.wait(min(remaining, 0.1))

    def _cut(self) -> None:
        connection = self.connection
        sock = None if connection is None else connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.done.set()


def fetch(url: str, headers: Mapping[str, str], timeout: float, stop: threading.Event | None = None) -> bytes:
    """The body of one GET, within `timeout` seconds in all; ScrapeError on anything but a whole 200 that fits."""
    deadline = _Deadline(timeout, stop)
    try:
        return _fetch(url, headers, timeout, deadline)
    except ScrapeError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if deadline.expired or isinstance(exc, TimeoutError):
            raise ScrapeError(f"timed out after {timeout:g}s") from None
        if stop is not None and stop.is_set():
            raise ScrapeError("stopped") from None
        raise ScrapeError(_failure(exc)) from None
    finally:
        deadline.close()
        if deadline.connection is not None:
            deadline.connection.close()


def _failure(exc: BaseException) -> str:
    if isinstance(exc, http.client.IncompleteRead) and exc.expected is not None:  # shorter than its length
        return f"page cut short: {len(exc.partial):,} of {len(exc.partial) + exc.expected:,} bytes arrived"
    if isinstance(exc, ConnectionRefusedError):
        return "cannot connect: Connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot connect: {visible(exc.strerror or str(exc))}"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, http.client.HTTPException):  # a peer that is not HTTP, or breaks it: a failure, never fatal
        return http_failure(exc)
    return f"failed: {visible(getattr(exc, 'strerror', None) or exc.__class__.__name__)}"


def _fetch(url: str, headers: Mapping[str, str], timeout: float, deadline: _Deadline) -> bytes:
    seen = [url]
    origin = urllib.parse.urlsplit(url)[:2]
    while True:
        parts = urllib.parse.urlsplit(url)
        if parts[:2] != origin:  # a redirect to another host or scheme gets none of the --header values (a token)
            headers = {}
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(parts.hostname or "", parts.port, timeout=deadline.left())
        deadline.connection = connection
        connection.connect()
        if deadline.expired:
            raise TimeoutError
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_headers = {"Accept-Encoding": "gzip", **dict(headers)}
        connection.request("GET", target, headers=request_headers)
        response = connection.getresponse()
        if response.status in (301, 302, 303, 307, 308):
            location = response.getheader("Location")
            response.close()
            if not location:
                raise ScrapeError(f"HTTP {response.status} redirect without a Location")
            following = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(following).scheme not in ("http", "https"):
                raise ScrapeError(f"redirected to {visible(shown_url(following))}: only http and https are followed")
            if following in seen:
                raise ScrapeError("redirect loop")
            if len(seen) > MAX_REDIRECTS:
                raise ScrapeError(f"more than {MAX_REDIRECTS} redirects")
            seen.append(following)
            connection.close()
            url = following
            continue
        if response.status != 200:
            raise ScrapeError(f"HTTP {response.status} {_reason(response.reason or '')}".rstrip())
        body = _body(response)
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding == "gzip":
            return _gunzip(body)
        if encoding not in ("identity", ""):
            raise ScrapeError(f"answered in Content-Encoding {visible(encoding)[:40]!r}, which is not read")
        return body


def _reason(phrase: str) -> str:
    """The server's reason phrase as text (http.client reads it as Latin-1; servers write UTF-8), escaped, cut."""
    with contextlib.suppress(UnicodeError):  # not UTF-8: shown as Latin-1, escaped all the same
        phrase = phrase.encode("latin-1").decode("utf-8")
    return visible(phrase[:200])


def _body(response: http.client.HTTPResponse) -> bytes:
    pieces: list[bytes] = []
    size = 0
    while True:
        piece = response.read(READ_PIECE)
        if not piece:
            break
        size += len(piece)
        if size > MAX_SCRAPE_BYTES:
            raise ScrapeError(f"answered more than {MAX_SCRAPE_BYTES >> 20} MiB")
        pieces.append(piece)
    if response.length:  # the connection closed before the Content-Length it announced
        raise ScrapeError(f"page cut short: {size:,} of {size + response.length:,} bytes arrived")
    return b"".join(pieces)


def _gunzip(body: bytes) -> bytes:
    """A gzip page decoded, within the same bound as a plain one; damage is a refusal in words."""
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        text = decoder.decompress(body, MAX_SCRAPE_BYTES + 1)
    except zlib.error:
        raise ScrapeError("a gzip page that does not decode") from None
    if len(text) > MAX_SCRAPE_BYTES:
        raise ScrapeError(f"answered more than {MAX_SCRAPE_BYTES >> 20} MiB (after gzip decoding)")
    if not decoder.eof:
        raise ScrapeError("a gzip page cut short")
    return text


def http_failure(exc: http.client.HTTPException) -> str:
    """A broken HTTP reply in words: the reply's own text (a status line, a header) is never shown."""
    if isinstance(exc, http.client.LineTooLong):
        return "not a valid HTTP reply (a status or header line over 64 KiB)"
    if isinstance(exc, http.client.BadStatusLine):
        return "not an HTTP reply (no HTTP status line)"
    if isinstance(exc, http.client.IncompleteRead):
        return f"reply cut short ({len(exc.partial):,} bytes of it read)"
    if isinstance(exc, http.client.InvalidURL):
        return "not a URL http.client can connect to"
    if "headers" in str(exc):
        return "not a valid HTTP reply (more than 100 headers)"
    return f"not a valid HTTP reply ({exc.__class__.__name__})"


class Retry(Struct, frozen=True):
    """Attempts per scrape and the wait before each retry: `backoff`, doubling."""

    attempts: int = 3
    backoff: float = 0.5


def fetch_with_retries(
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    retry: Retry,
    wait: Callable[[float], bool],
    clock: Callable[[], float] = time.monotonic,
    budget: float | None = None,
    stop: threading.Event | None = None,
) -> bytes:
    """`fetch`, retried with backoff within `budget` seconds; `wait(seconds)` returns True to give up (a stop)."""
    started = clock()
    delay = retry.backoff
    for attempt in range(1, retry.attempts + 1):
        try:
            return fetch(url, headers, timeout, stop)
        except ScrapeError as error:
            last = error
        if attempt == retry.attempts:
            break
        if budget is not None and clock() - started + delay + timeout > budget:
            break
        if wait(delay):
            break
        delay *= 2
    raise last
