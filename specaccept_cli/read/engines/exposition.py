"""The Prometheus text exposition format: a file of one or several scrapes -> `PrometheusScrape`s.

Engine-neutral: which samples are spec-decoding series (`vllm:spec_decode*`, `sglang:spec_*`) is
all it knows of the engines; what the samples mean is read in `vllm` and `sglang`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping

from msgspec import Struct, field

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.lines import decode_line
from specaccept_cli.rule.intervals import LineTally

# Text exposition format 0.0.4: `name{label="value",...} value [timestamp_ms]`; label values escape
# backslash, double quote and newline.
PROM_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?[ \t]+(?P<value>\S+)(?:[ \t]+(?P<ts>-?\d+))?[ \t]*$"
)
PROM_QUOTED_NAME = re.compile(r'^\{\s*"([^"\\]*)"')
PROM_TIMESTAMP_COMMENT = re.compile(r"^#\s*(?:timestamp|scrape(?:d)?(?: at)?)\s*[:=]?\s*(?P<ts>\S.*?)\s*$", re.I)

LabelKey = tuple[tuple[str, str], ...]


class PrometheusScrape(Struct):
    """One scrape: its first line, its time stamp if any, and its samples by (name, labels)."""

    line: int
    timestamp: str | None = None
    samples: dict[tuple[str, LabelKey], str] = field(default_factory=dict)
    sample_lines: dict[tuple[str, LabelKey], int] = field(default_factory=dict)  # where each sample was read


def _parse_labels(text: str) -> LabelKey | None:
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t,":
            i += 1
        if i >= n:
            break
        name = re.match(r"[a-zA-Z_][a-zA-Z0-9_]*", text[i:])
        if name is None:
            return None
        i += name.end()
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != "=":
            return None
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != '"':
            return None
        i += 1
        value: list[str] = []
        while True:
            if i >= n:
                return None
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                nxt = text[i + 1]
                value.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value.append(ch)
            i += 1
        out.append((name.group(0), "".join(value)))
    return tuple(out)


def _interesting(name: str) -> bool:
    return name.startswith(
        ("vllm:spec_decode", "sglang:spec_", "llamacpp:spec_decode", "lmdeploy:spec_decode", "tgi_request_skipped")
    )


def read_prometheus_scrapes(
    lines: Iterable[str | bytes], source: str, tally: LineTally | None = None
) -> Iterator[PrometheusScrape | InputError]:
    """Split a file into scrapes and yield them (and bad spec-decoding sample lines).

    A new scrape starts at a `# timestamp ...` comment, at a blank line after samples, when a
    series already seen in the current scrape appears again, or when the sample time stamp changes.
    """
    tally = tally if tally is not None else LineTally()
    current: PrometheusScrape | None = None
    sample_ts: str | None = None
    for number, raw in enumerate(lines, start=1):
        tally.lines += 1
        text = decode_line(raw)
        stripped = text.strip()
        if not stripped:
            if current is not None and current.samples:
                yield current
                current = None
            tally.ignored += 1
            continue
        if stripped.startswith("#"):
            stamp = PROM_TIMESTAMP_COMMENT.match(stripped)
            if stamp is not None:
                if current is not None and current.samples:
                    yield current
                current = PrometheusScrape(line=number, timestamp=stamp.group("ts"))
                sample_ts = None
            tally.ignored += 1
            continue
        match = PROM_SAMPLE.match(stripped)
        labels = None if match is None or match.group("labels") is None else _parse_labels(match.group("labels"))
        if match is None or (match.group("labels") is not None and labels is None):
            # A line that starts with `{` has no legacy name: a binary or gzip body read as text, or a
            # Prometheus 3 UTF-8 sample whose quoted name leads the braces (`{"name", label="v"} 1`).
            head = stripped.split("{", 1)[0].split(None, 1)
            quoted = PROM_QUOTED_NAME.match(stripped) if not head else None
            name = head[0] if head else quoted.group(1) if quoted else ""
            if _interesting(name):
                tally.bad += 1
                yield InputError(source, number, "a Prometheus sample line that does not parse", raw=text.encode())
            else:
                tally.ignored += 1
            continue
        name = match.group("name")
        if not _interesting(name):
            tally.ignored += 1
            continue
        key = (name, tuple(sorted(labels or ())))
        ts = match.group("ts")
        if current is not None and (key in current.samples or (ts is not None and sample_ts not in (None, ts))):
            yield current
            current = None
        if current is None:
            current = PrometheusScrape(line=number)
            sample_ts = None
        if ts is not None:
            sample_ts = ts
            if current.timestamp is None:
                current.timestamp = ts
        current.samples[key] = match.group("value")
        current.sample_lines[key] = number
        tally.metrics += 1
    if current is not None and current.samples:
        yield current


def label_text(labels: Mapping[str, str]) -> str:
    if not labels:
        return "{}"
    return "{" + ",".join(f"{k}={v!r}" for k, v in sorted(labels.items())) + "}"


def sample_float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def sample_int(value: str) -> int | None:
    number = sample_float(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)
