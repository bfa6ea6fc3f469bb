"""Scraping Prometheus endpoints (`specaccept watch`): one GET per endpoint and period, with the standard library.

urllib is enough for a GET with headers and a timeout every few seconds, so `watch` adds no dependency.
A failure is a reason in words (the status, the timeout, the refused connection), never a traceback,
and never the request's headers (they may hold a token) nor the URL's user and password: `shown_url`
is the only form of a URL that leaves this module.
"""

from __future__ import annotations

import http.client
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from msgspec import Struct

MAX_SCRAPE_BYTES = 64 << 20  # a /metrics page larger than this is refused, not held in memory


class ScrapeError(Exception):
    """One scrape that failed, with the reason (no header, no credential)."""


def shown_url(url: str) -> str:
    """The URL without user and password, as every message shows it (even a URL that does not parse)."""
    scheme, slashes, rest = url.partition("://")
    if not slashes:
        return url
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    netloc = rest[:end]
    if "@" not in netloc:
        return url
    return f"{scheme}://{netloc.rpartition('@')[2]}{rest[end:]}"


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


def fetch(url: str, headers: Mapping[str, str], timeout: float) -> bytes:
    """The body of one GET; ScrapeError on anything but a 200 with a body that fits."""
    request = urllib.request.Request(url, headers=dict(headers), method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read(MAX_SCRAPE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise ScrapeError(f"timed out after {timeout:g}s") from None
        raise ScrapeError(f"cannot connect: {getattr(reason, 'strerror', None) or reason}") from None
    except TimeoutError:
        raise ScrapeError(f"timed out after {timeout:g}s") from None
    except http.client.HTTPException as exc:  # a peer that is not HTTP, or breaks it: a failure, never fatal
        raise ScrapeError(http_failure(exc)) from None
    except (OSError, ValueError) as exc:  # a reset connection, a malformed reply
        raise ScrapeError(f"failed: {getattr(exc, 'strerror', None) or exc.__class__.__name__}") from None
    if len(body) > MAX_SCRAPE_BYTES:
        raise ScrapeError(f"answered more than {MAX_SCRAPE_BYTES >> 20} MiB")
    return body


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
) -> bytes:
    """`fetch`, retried with backoff within `budget` seconds; `wait(seconds)` returns True to give up (a stop)."""
    started = clock()
    delay = retry.backoff
    for attempt in range(1, retry.attempts + 1):
        try:
            return fetch(url, headers, timeout)
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
