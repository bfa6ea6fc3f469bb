"""Server output in, intervals out: which engine wrote a file (sniffing), and the line loop that
hands each metrics line to its engine's reader. Both go by the table of formats (`read.formats`):
each engine module's entries say how its lines are recognised and read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.lines import decode_line, line_error
from specaccept_cli.read.formats import Kind, by_name, looks_like_json, names, recognise, sniff_order
from specaccept_cli.rule.intervals import EngineInterval, LineTally

__all__ = ["EngineLogParse", "looks_like_json", "parse_engine_log", "sniff_engine_format"]


def _interval_formats() -> tuple[str, ...]:
    return names(Kind.INTERVALS)


def sniff_engine_format(lines: Iterable[str | bytes], limit: int = 10_000) -> str | None:
    """The engine format of the first metrics line among the first `limit` lines, or None."""
    entries = tuple(entry for entry in sniff_order() if entry.kind is Kind.INTERVALS)
    for n, raw in enumerate(lines):
        if n >= limit:
            break
        data = raw if isinstance(raw, bytes) else raw.encode("utf-8", errors="replace")
        found = recognise(data, entries)
        if found is not None:
            return found.name
    return None


class EngineLogParse:
    """Iterate to get `EngineInterval | InputError` in input order; `tally` fills as you go."""

    def __init__(
        self,
        lines: Iterable[str | bytes],
        source: str,
        fmt: str = "auto",
        *,
        k: int | None = None,
        assume_full_drafts: bool = True,
        keep_duplicates: bool = False,
    ) -> None:
        if fmt != "auto" and fmt not in _interval_formats():
            known = ", ".join(_interval_formats())
            raise ValueError(f"unknown engine format {fmt!r}; expected auto or one of {known}")
        self.lines = lines
        self.source = source
        self.fmt = fmt
        self.k = k
        self.assume_full_drafts = assume_full_drafts
        self.keep_duplicates = keep_duplicates
        self.tally = LineTally()
        self.detected: str | None = None if fmt == "auto" else fmt

    def __iter__(self) -> Iterator[EngineInterval | InputError]:
        entry = None if self.fmt == "auto" else by_name(self.fmt)
        if entry is not None and entry.driver == "scrape":
            assert entry.reader is not None
            yield from entry.reader(self.lines, self.source, self.tally)
        elif entry is not None and entry.driver == "json-lines":
            assert entry.reader is not None
            for number, raw in enumerate(self.lines, start=1):
                self.tally.lines += 1
                found = entry.reader(raw, self.source, number, self.k, self.assume_full_drafts)
                if not found:
                    self.tally.ignored += 1
                for item in found:
                    yield self._count(item)
        elif entry is not None and entry.driver == "document":
            assert entry.reader is not None
            yield from map(self._count, entry.reader(self.lines, self.source, self.k, self.tally))
        else:
            yield from self._log_lines()

    def _log_lines(self) -> Iterator[EngineInterval | InputError]:
        """Metrics lines among ordinary ones: the first decides the engine (auto); another engine's is a bad line.

        Each engine's reader sees its own metrics lines and, while its engine may be the file's, the ordinary
        lines it asks for (`context`: vLLM's "Engine NNN:" lines, which say whose metrics line comes next).
        """
        entries = sniff_order(("log-lines",))  # every engine's: another engine's line is a bad line, never ignored
        readers: dict[str, Any] = {}
        for entry in entries:
            assert entry.reader is not None
            readers[entry.name] = entry.reader(
                self.source, self.k, self.assume_full_drafts, self.tally, keep_duplicates=self.keep_duplicates
            )
        context = {name: reader.context for name, reader in readers.items() if getattr(reader, "context", None)}
        for number, raw in enumerate(self.lines, start=1):
            self.tally.lines += 1
            data = raw if isinstance(raw, bytes) else raw.encode("utf-8", errors="replace")
            found = next((entry for entry in entries if entry.sniffs(data)), None)
            for name, reader in readers.items():
                if found is None or name != found.name:
                    yield from map(self._count, reader.flush())
            if found is None:
                self.tally.ignored += 1
                for name, told in context.items():
                    if self.detected in (None, name):
                        told(decode_line(raw))
                continue
            text = decode_line(raw)
            if self.detected is None:
                self.detected = found.name
            if found.name != self.detected:  # a recognised line is never dropped silently
                yield self._count(
                    line_error(
                        self.source,
                        number,
                        text,
                        f"a metrics line of {found.engine} in {self.detected} output: one file holds one engine's "
                        "metrics (split it to read both)",
                    )
                )
                continue
            yield from map(self._count, readers[found.name].line(number, text))
        for reader in readers.values():
            yield from map(self._count, reader.finish())

    def _count(self, item: EngineInterval | InputError) -> EngineInterval | InputError:
        if isinstance(item, InputError):
            self.tally.bad += 1
        else:
            self.tally.metrics += 1
        return item


def parse_engine_log(
    lines: Iterable[str | bytes],
    source: str,
    fmt: str = "auto",
    *,
    k: int | None = None,
    assume_full_drafts: bool = True,
    keep_duplicates: bool = False,
) -> EngineLogParse:
    """Intervals (and bad metrics lines as `InputError`) from server output, in input order.

    Iterate the result; its `tally` counts metrics lines, ignored ordinary lines and bad lines.
    With fmt="auto" the first metrics line decides the engine; a metrics line of another engine
    is then a bad line (one file holds one engine's output), never dropped silently. `k` is the draft
    length from the server's configuration when the lines do not carry it (SGLang, old vLLM, llama.cpp,
    TensorRT-LLM, AIPerf's aggregate); it tightens the bounds. A vLLM v1 metrics line that repeats a recent one
    exactly is a log shipper's duplicate (`repeats.VllmRepeats`): counted in `tally.duplicates`, not read, unless
    `keep_duplicates`.
    """
    return EngineLogParse(
        lines, source, fmt, k=k, assume_full_drafts=assume_full_drafts, keep_duplicates=keep_duplicates
    )
