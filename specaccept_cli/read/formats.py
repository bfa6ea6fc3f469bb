"""The one table of input formats: every `--format` choice, every sniff, every reader and the docs derive from it.

Each entry says what a format is (`Kind`: runs, engine intervals, requests or a saved summary), the
suffixes that name it, how one line (or one document's first bytes) is recognised as its own, how
its reader is driven, whether its input can be cut into ranges for workers, and the engine file and
versions its reader follows. The project's own formats are declared here; each engine module
declares its own entries next to its reader (`FORMATS` in `read/engines/*.py`, `read/payloads/*.py`),
and `ENTRY_MODULES` lists those modules. Adding a format is one module and its entries, then one line
here: nothing else names it (see docs/architecture.md).

Detection, in auto, is in `read.sources`; the kind is dispatched once, by `pipeline`. Precedence among
sniffs is explicit, never an accident of order: an entry that `refines` another (its lines also hold
the other's markers) is tried before it.
"""

from __future__ import annotations

import enum
import functools
import importlib
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from msgspec import Struct


class Kind(enum.Enum):
    """What a format's reader hands on: the one branch every dispatch takes."""

    RUNS = "runs"  # (p, q, r) rows: the scalar rule recomputes each run
    INTERVALS = "engine intervals"  # metrics lines, scrapes and server totals: counters over an interval
    REQUESTS = "requests"  # per-request payloads: each request's counts, the request the cluster
    SUMMARY = "saved summary"  # this tool's own saved summary: an input of diff, merge and report, not of audit


# How the reader is driven over a text:
# - "log-lines": metrics lines among ordinary log lines, anywhere in the text; one file holds one engine's
# - "json-lines": one JSON document a line, other lines ignored
# - "document": the whole text is one document (read at its end)
# - "scrape": Prometheus text exposition, one or several scrapes
# - "payloads": per-request payloads in JSON lines or SSE `data:` lines
# - "rows", "columns", "saved": the project's own JSONL rows, Parquet files and saved summaries
Driver = Literal["log-lines", "json-lines", "document", "scrape", "payloads", "rows", "columns", "saved"]


class InputFormat(Struct, frozen=True):
    """One row of the table."""

    name: str  # the `--format` choice
    kind: Kind
    engine: str  # who writes it, as users name it ("vLLM"); "specaccept" for the project's own formats
    follows: str  # the engine file (and versions) the reader follows, or the project's schema
    driver: Driver
    # A line (a JSON line, an SSE event or a log line) or a document's first bytes that is this format's own.
    # Cheap markers first: a line that holds none of `markers` is never handed to `sniff`.
    sniff: Callable[[bytes], bool] | None = None
    markers: tuple[bytes, ...] = ()
    suffixes: tuple[str, ...] = ()  # file name suffixes (lower case, before any compression suffix)
    file_names: tuple[str, ...] = ()  # whole file names that name it (AIPerf's export)
    # The reader, by driver: "log-lines": (source, k, assume_full_drafts, tally, keep_duplicates=) -> a
    # `read.engines.lines.LineReader` (line(number, text), flush(), finish(), and `context` for the ordinary
    # lines it asks for); "json-lines": (raw, source, number, k, assume_full_drafts) -> items; "document":
    # (lines, source, k, tally) -> items; "scrape": (lines, source, tally) -> items; "payloads": (parsed JSON
    # value, drift) -> records. The project's own formats are read by `read.sources`.
    reader: Callable[..., Any] | None = None
    splittable: bool = False  # whether one input can be cut into byte ranges or row groups for workers
    refines: str | None = None  # the format whose markers this one's lines also hold: tried before it
    takes_lists: bool = False  # payloads: the reader takes a JSON array itself (else each element is tried)

    def sniffs(self, line: bytes) -> bool:
        """Whether `line` is this format's own (its markers, then its sniff)."""
        if self.sniff is None:
            return False
        if self.markers and not any(marker in line for marker in self.markers):
            return False
        return self.sniff(line)


# The modules that declare entries, in the order the table lists them.
ENTRY_MODULES = (
    "specaccept_cli.read.engines.vllm",
    "specaccept_cli.read.engines.sglang",
    "specaccept_cli.read.engines.llamacpp",
    "specaccept_cli.read.engines.prometheus",
    "specaccept_cli.read.engines.tensorrt_llm",
    "specaccept_cli.read.engines.aiperf",
    "specaccept_cli.read.payloads.aiperf",
    "specaccept_cli.read.payloads.vllm",
    "specaccept_cli.read.payloads.tensorrt_llm",
    "specaccept_cli.read.payloads.sglang",
    "specaccept_cli.read.payloads.llamacpp",
    "specaccept_cli.read.payloads.mlx_vlm",
)

PARQUET_MAGIC = b"PAR1"
_JSON_START = re.compile(rb"\s*(?:\{|\[\s*[\[\]{\"])")


def looks_like_json(text: str | bytes) -> bool:
    """A JSON object or array, not a log line such as SGLang's `[2025-03-05 10:21:05 TP0] ...`."""
    head = text[:64].encode("utf-8", errors="replace") if isinstance(text, str) else text[:64]
    return _JSON_START.match(head) is not None


def json_line_without_runs(line: bytes) -> bool:
    """A JSON line that is an engine's document, not a logged (p, q, r) run that happens to hold its keys."""
    return looks_like_json(line) and b'"p":' not in line


def _is_summary(head: bytes) -> bool:
    return re.match(rb'^\s*\{\s*"schema"\s*:\s*"specaccept\.summary/', head) is not None


# The project's own formats. JSONL is what any other JSON text is read as (its reader names what is wrong).
OWN: tuple[InputFormat, ...] = (
    InputFormat(
        "jsonl",
        Kind.RUNS,
        "specaccept",
        "JSON lines of (p, q, r) runs (docs/input.md)",
        "rows",
        suffixes=(".jsonl", ".ndjson", ".json"),
        splittable=True,
    ),
    InputFormat(
        "parquet",
        Kind.RUNS,
        "specaccept",
        "Parquet columns of (p, q, r) runs (docs/input.md)",
        "columns",
        sniff=lambda head: head.startswith(PARQUET_MAGIC),
        markers=(PARQUET_MAGIC,),
        suffixes=(".parquet", ".pq", ".parq"),
        splittable=True,
    ),
    InputFormat(
        "summary",
        Kind.SUMMARY,
        "specaccept",
        'the saved summary, "schema": "specaccept.summary/1" (summary/files.py)',
        "saved",
        sniff=_is_summary,
        markers=(b'"schema"',),
    ),
)

_TABLE: tuple[InputFormat, ...] | None = None


def table() -> tuple[InputFormat, ...]:
    """Every format: the project's own, then each engine module's entries (imported on first use)."""
    global _TABLE
    if _TABLE is None:
        entries = list(OWN)
        for module in ENTRY_MODULES:
            entries.extend(importlib.import_module(module).FORMATS)
        _TABLE = _checked(entries)
    return _TABLE


def _checked(entries: Sequence[InputFormat]) -> tuple[InputFormat, ...]:
    names = [entry.name for entry in entries]
    if len(set(names)) != len(names):
        raise RuntimeError(f"a format is declared twice: {sorted(name for name in names if names.count(name) > 1)}")
    for entry in entries:
        if entry.refines is not None and entry.refines not in names:
            raise RuntimeError(f"{entry.name} refines {entry.refines}, which is no format")
    return tuple(entries)


def by_name(name: str) -> InputFormat:
    return _named()[name]


@functools.cache
def _named() -> dict[str, InputFormat]:
    return {entry.name: entry for entry in table()}


def of_driver(driver: Driver) -> InputFormat:
    """The one format a driver reads (the scrape's, which `watch` reads from an endpoint)."""
    (entry,) = (entry for entry in table() if entry.driver == driver)
    return entry


def names(kind: Kind | None = None) -> tuple[str, ...]:
    """The format names (of one kind), in table order."""
    return tuple(entry.name for entry in table() if kind is None or entry.kind is kind)


def choices() -> tuple[str, ...]:
    """`--format`'s choices: auto, then every format an audit reads (a saved summary is not one)."""
    return ("auto", *(entry.name for entry in table() if entry.kind is not Kind.SUMMARY))


def kind_of(name: str) -> Kind:
    return by_name(name).kind


def sniff_order(driver: Sequence[Driver] | None = None) -> tuple[InputFormat, ...]:
    """Entries with a sniff, an entry that refines another before it, else in table order."""
    return _sniff_order(None if driver is None else tuple(driver))


@functools.cache
def _sniff_order(driver: tuple[Driver, ...] | None) -> tuple[InputFormat, ...]:
    found = [entry for entry in table() if entry.sniff is not None and (driver is None or entry.driver in driver)]
    ordered: list[InputFormat] = []
    for entry in found:
        refiners = [other for other in found if other.refines == entry.name and other not in ordered]
        ordered.extend(refiners)
        if entry not in ordered:
            ordered.append(entry)
    return tuple(ordered)


def line_format(line: bytes, drivers: Sequence[Driver]) -> InputFormat | None:
    """The format whose own line this is, among the formats of those drivers."""
    for entry in sniff_order(drivers):
        if entry.sniffs(line):
            return entry
    return None


def recognise(line: bytes, entries: Sequence[InputFormat]) -> InputFormat | None:
    """The entry whose own line this is: a document's key anywhere, a JSON line's keys, a log or scrape line
    (never a JSON line), a payload's JSON or SSE line."""
    json_line = looks_like_json(line)
    for entry in entries:
        if entry.driver == "json-lines" and not json_line:
            continue
        if entry.driver in ("log-lines", "scrape") and json_line:
            continue
        if entry.sniffs(line):
            return entry
    return None


def known_lines() -> str:
    """The formats a text is searched for, as a message names them."""
    return ", ".join(entry.name for entry in sniff_order(TEXT_DRIVERS))


# What a line anywhere in a text can be: a metrics log line, a scrape line, a payload's JSON or SSE line, or an
# engine's JSON line.
TEXT_DRIVERS: tuple[Driver, ...] = ("log-lines", "scrape", "payloads", "json-lines")


def markdown_table() -> str:
    """The table as docs/input.md shows it (generated: `scripts/format_table.py`, checked by a test)."""
    rows = [
        "| `--format` | kind | engine | suffixes | recognised by | split across workers | follows |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in table():
        how = {
            "log-lines": "a metrics line anywhere in the text",
            "json-lines": "a JSON line holding its keys",
            "document": "its keys (or its file name)",
            "scrape": "a speculative series anywhere in the text",
            "payloads": "a JSON or SSE `data:` line holding a payload",
            "rows": "JSON text that is none of the others",
            "columns": "`PAR1` magic",
            "saved": 'its first key, `"schema"`',
        }[entry.driver]
        suffixes = ", ".join(f"`{suffix}`" for suffix in (*entry.suffixes, *entry.file_names)) or "-"
        split = "yes" if entry.splittable else "no"
        rows.append(
            f"| `{entry.name}` | {entry.kind.value} | {entry.engine} | {suffixes} | {how} | {split} | {entry.follows} |"
        )
    return "\n".join(rows) + "\n"
