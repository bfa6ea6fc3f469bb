"""Per-request acceptance payloads that servers write today, read line by line into `RequestRecord`s.

Recognised by content: JSON lines (a response, a batch of responses, a bare payload) and SSE
`data:` lines of a stream (`data: [DONE]` and other SSE fields are skipped). Each engine's reader
(cited in its module) returns records with the figures as written; each record's identities are
checked (`RequestRecord.check`): a record that breaks one is a bad line (`InputError` with the
line), named after a known engine counting bug when it matches one. Fields a known payload carries
that no reader knows are collected as drift and reported once, never guessed at.

Pure: the standard library, numpy, orjson and `specaccept_cli.errors` only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import orjson
from msgspec import Struct, field

from specaccept_cli.errors import InputError
from specaccept_cli.read.formats import InputFormat, Kind, by_name, sniff_order
from specaccept_cli.read.payloads.fields import Drift, frame
from specaccept_cli.rule.requests import BadRecord, RequestRecord

__all__ = ["PayloadParse", "RequestRecord", "looks_like_payload", "parse_payloads", "sniff_payload"]


@functools.cache
def _readers(fmt: str) -> tuple[InputFormat, ...]:
    """The entries a line is read by: the one named, or (auto) every payload format, a refining one first."""
    if fmt != "auto":
        return (by_name(fmt),)
    return tuple(entry for entry in sniff_order(("payloads",)) if entry.kind is Kind.REQUESTS)


class PayloadTally(Struct):
    """Counts of what a payload log held: lines, requests read, null payloads, other lines, bad ones."""

    lines: int = 0
    records: int = 0  # requests read
    null_payloads: int = 0  # payloads written as null (vLLM for n > 1, speculative decoding off)
    ignored: int = 0  # lines that hold no payload
    bad: int = 0
    drift: Drift = field(default_factory=Drift)


BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark before the first line, as the (p, q, r) reader allows


def _cut_short(raw: bytes) -> str | None:
    """Why a line that holds no payload marker is a damaged payload line, or None (another line, ignored).

    A JSON line or SSE `data:` event that does not parse was cut (a capture stopped mid-event, a crashed
    writer): its payload, which comes last in a response, may be what was cut off.
    """
    text = frame(raw)
    if text is None or text[:1] not in (b"{", b"["):  # an empty or non-JSON SSE event (a keep-alive) is no payload
        return None
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        what = "an SSE data: event" if raw.lstrip().startswith(b"data:") else "a JSON line"
        return f"{what} cut short or not JSON, its request's payload lost ({exc})"
    return None


def looks_like_payload(raw: bytes, fmt: str = "auto") -> bool:
    """A line that holds one of the payloads (by its markers), before parsing it."""
    text = frame(raw)
    if text is None:
        return False
    return any(marker in text for entry in _readers(fmt) for marker in entry.markers)


def sniff_payload(lines: Iterable[bytes], limit: int = 1000) -> str | None:
    """The payload format of the first payload line among the first `limit`, or None."""
    entries = _readers("auto")
    for number, raw in enumerate(lines):
        if number >= limit:
            break
        line = raw.removeprefix(BOM) if number == 0 else raw
        for entry in entries:
            if entry.sniffs(line):
                return entry.name
    return None


def records_of(value: object, fmt: str, drift: Drift) -> list[RequestRecord | BadRecord | None]:
    """Every payload of one parsed JSON value, by the named reader or (auto) the first that finds any."""
    entries = _readers(fmt)
    values = value if isinstance(value, list) and not (fmt != "auto" and entries[0].takes_lists) else [value]
    out: list[RequestRecord | BadRecord | None] = []
    for item in values:
        for entry in entries:
            if not entry.takes_lists and not isinstance(item, dict):
                continue
            assert entry.reader is not None
            found: list[RequestRecord | BadRecord | None] = entry.reader(item, drift)
            if found:
                out.extend(found)
                break
    return out


class PayloadParse:
    """Iterate for (line, RequestRecord) and InputError in input order; `tally` fills as it goes."""

    def __init__(self, lines: Iterable[bytes], source: str, fmt: str = "auto") -> None:
        if fmt != "auto" and fmt not in {entry.name for entry in _readers("auto")}:
            raise ValueError(f"unknown payload format {fmt!r}")
        self.lines, self.source, self.fmt = lines, source, fmt
        self.tally = PayloadTally()

    def __iter__(self) -> Iterator[tuple[int, RequestRecord] | InputError]:
        tally = self.tally
        for number, raw in enumerate(self.lines, start=1):
            tally.lines += 1
            if number == 1:
                raw = raw.removeprefix(BOM)
            if not looks_like_payload(raw, self.fmt):
                cut = _cut_short(raw)
                if cut is None:
                    tally.ignored += 1
                else:  # a request whose payload would have followed is lost: said, never an ignored line
                    tally.bad += 1
                    yield InputError(self.source, number, cut, raw=raw)
                continue
            text = frame(raw)
            assert text is not None
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                tally.bad += 1
                yield InputError(self.source, number, f"a payload line that is not JSON ({exc})", raw=raw)
                continue
            found = records_of(value, self.fmt, tally.drift)
            if not found:
                tally.ignored += 1
                continue
            for item in found:
                if item is None:
                    tally.null_payloads += 1
                elif isinstance(item, BadRecord):
                    tally.bad += 1
                    yield InputError(self.source, number, f"bad per-request payload: {item}", raw=raw)
                else:
                    tally.records += 1
                    yield number, item


def parse_payloads(lines: Iterable[bytes], source: str, fmt: str = "auto") -> PayloadParse:
    """Records (and bad payload lines as `InputError`) from per-request payloads, in input order."""
    return PayloadParse(lines, source, fmt)
