"""What the engine line readers share: a printed number's pattern, a raw line decoded, a bad line as an error,
and an `EngineInterval` from a line's head."""

from __future__ import annotations

from typing import Any

from specaccept_cli.errors import InputError
from specaccept_cli.rule.intervals import EngineInterval

# A printed number, as the engines' format strings print it (nan and inf included).
NUM = r"(-?(?:\d+(?:\.\d*)?|nan|inf))"


def decode_line(raw: str | bytes) -> str:
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    return text.rstrip("\r\n")


def line_error(source: str, number: int, text: str, message: str) -> InputError:
    """A metrics line that does not parse or add up, with the line itself kept for the error policy."""
    return InputError(source, number, message, raw=text.encode("utf-8", errors="replace"))


def make_interval(
    head: tuple[str, str, str, int, str | None, dict[str, str], dict[str, str]], **counts: Any
) -> EngineInterval:
    """An interval from (engine, fmt, source, line, timestamp, labels, printed) and what its line recovers."""
    engine, fmt, source, line, timestamp, labels, printed = head
    return EngineInterval(
        engine=engine, fmt=fmt, source=source, line=line, timestamp=timestamp, labels=labels, printed=printed, **counts
    )
