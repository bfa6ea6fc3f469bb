"""Scraping Prometheus endpoints (`specaccept watch`): one GET per endpoint and period, with the standard library.

urllib is enough for a GET with headers and a timeout every few seconds, so `watch` adds no dependency.
A failure is a reason in words (the status, the timeout, the refused connection), never a traceback,
and never the request's headers (they may hold a token) nor the URL's user and password: `shown_url`
is the only form of a URL that leaves this module.
"""

from __future__ import annotations

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
    """The URL without user and password, as every message shows it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def check_url(url: str) -> str | None:
    """Why `url` cannot be scraped (not http or https, no host), or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"{shown_url(url)}: not an http:// or https:// URL"
    if not parts.hostname:
        return f"{shown_url(url)}: no host"
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
    except (OSError, ValueError) as exc:  # a reset connection, a malformed reply
        raise ScrapeError(f"failed: {getattr(exc, 'strerror', None) or exc.__class__.__name__}") from None
    if len(body) > MAX_SCRAPE_BYTES:
        raise ScrapeError(f"answered more than {MAX_SCRAPE_BYTES >> 20} MiB")
    return body


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
