"""What the engine line readers share: a printed number's pattern, a raw line decoded, a bad line as an error,
an `EngineInterval` from a line's head, and `LineReader`, the shape of a log-line format's reader."""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


class LineReader:
    """One engine's metrics lines in a log, one at a time (`line`); a stateless reader is its line function.

    `context`, when given, is told the ordinary lines of a log that may be its engine's (what a line means
    may hang on the lines before it).
    """

    def __init__(
        self,
        line: Callable[[int, str], Iterable[EngineInterval | InputError]],
        context: Callable[[str], None] | None = None,
    ) -> None:
        self.line = line
        self.context = context

    def flush(self) -> Iterable[EngineInterval | InputError]:
        """What waits on the next metrics line of this engine, when an ordinary line comes first."""
        return ()

    def finish(self) -> Iterable[EngineInterval | InputError]:
        return ()
