"""Server output in, intervals out: which engine wrote a file (sniffing), and the line loop that
hands each metrics line to its engine's reader (`vllm`, `sglang`, `llamacpp`) or Prometheus
scrapes to `prometheus`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.aiperf import AIPERF_AGGREGATE_MARKERS, AiperfAggregate
from specaccept_cli.read.engines.lines import decode_line, line_error
from specaccept_cli.read.engines.llamacpp import LlamaLines, is_llama_line
from specaccept_cli.read.engines.prometheus import parse_prometheus_scrapes
from specaccept_cli.read.engines.repeats import VllmRepeats
from specaccept_cli.read.engines.sglang import (
    SGLANG_MARKER,
    SGLANG_REQUEST_MARKER,
    sglang_line,
    sglang_request_intervals,
)
from specaccept_cli.read.engines.tensorrt_llm import TRTLLM_STATS_MARKER, trtllm_stats_line
from specaccept_cli.read.engines.vllm import VLLM_MARKER, VLLM_V0_MARKER, VllmV0Lines, vllm_line
from specaccept_cli.rule.intervals import EngineInterval, LineTally

FORMATS = (
    "vllm-log",
    "sglang-log",
    "sglang-requests",
    "llamacpp-log",
    "prometheus",
    "trtllm-iteration-stats",
    "aiperf-aggregate",
)

# The speculative series of each engine's /metrics (vllm, sglang, llamacpp, lmdeploy; TGI's, to refuse it).
_SCRAPE_SERIES = (
    "vllm:spec_decode",
    "sglang:spec_",
    "llamacpp:spec_decode",
    "lmdeploy:spec_decode",
    "tgi_request_skipped_tokens",
)
_SCRAPE_TYPES = ("vllm:", "sglang:", "llamacpp:spec_decode", "lmdeploy:spec_decode", "tgi_request_skipped_tokens")
_ENGINE_OF = {"vllm-log": "vLLM", "sglang-log": "SGLang", "llamacpp-log": "llama.cpp"}
_JSON_START = re.compile(r"\s*(?:\{|\[\s*[\[\]{\"])")


def looks_like_json(text: str | bytes) -> bool:
    """A JSON object or array, not a log line such as SGLang's `[2025-03-05 10:21:05 TP0] ...`."""
    head = text[:64].decode("utf-8", errors="replace") if isinstance(text, bytes) else text[:64]
    return _JSON_START.match(head) is not None


def sniff_engine_format(lines: Iterable[str | bytes], limit: int = 10_000) -> str | None:
    """The engine format of the first metrics line among the first `limit` lines, or None."""
    for n, raw in enumerate(lines):
        if n >= limit:
            break
        text = decode_line(raw)
        if any(marker in text for marker in AIPERF_AGGREGATE_MARKERS):  # one pretty-printed JSON document
            return "aiperf-aggregate"
        if looks_like_json(text):
            if SGLANG_REQUEST_MARKER in text and '"p":' not in text:  # responses, not logged (p, q, r) runs
                return "sglang-requests"
            if TRTLLM_STATS_MARKER in text and '"p":' not in text:  # trtllm-serve GET /metrics, captured
                return "trtllm-iteration-stats"
            continue
        if VLLM_MARKER in text or VLLM_V0_MARKER in text:
            return "vllm-log"
        if SGLANG_MARKER in text and "Decode batch" in text:
            return "sglang-log"
        if is_llama_line(text):
            return "llamacpp-log"
        stripped = text.lstrip()
        if stripped.startswith(_SCRAPE_SERIES) or (
            stripped.startswith("# TYPE ") and any(f" {series}" in stripped for series in _SCRAPE_TYPES)
        ):
            return "prometheus"
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
        if fmt != "auto" and fmt not in FORMATS:
            raise ValueError(f"unknown engine format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
        self.lines = lines
        self.source = source
        self.fmt = fmt
        self.k = k
        self.assume_full_drafts = assume_full_drafts
        self.keep_duplicates = keep_duplicates
        self.tally = LineTally()
        self.detected: str | None = None if fmt == "auto" else fmt

    def __iter__(self) -> Iterator[EngineInterval | InputError]:
        if self.fmt == "prometheus":
            yield from parse_prometheus_scrapes(self.lines, self.source, tally=self.tally)
            return
        if self.fmt == "sglang-requests":
            yield from self._requests()
            return
        if self.fmt == "trtllm-iteration-stats":
            yield from self._trtllm()
            return
        if self.fmt == "aiperf-aggregate":
            document = AiperfAggregate(self.source, self.k)
            for raw in self.lines:
                self.tally.lines += 1
                document.add(raw)
            yield from map(self._count, document.finish())
            return
        llama = LlamaLines(self.source, self.k, self.tally)
        vllm_v0 = VllmV0Lines(self.source)
        repeats = None if self.keep_duplicates else VllmRepeats()
        for number, raw in enumerate(self.lines, start=1):
            self.tally.lines += 1
            text = decode_line(raw)
            kind = self._kind(text)
            if kind == "llamacpp-log":
                yield from map(self._count, llama.line(number, text))
                continue
            yield from map(self._count, llama.flush())
            if kind is None:
                self.tally.ignored += 1
                if repeats is not None and self.detected in (None, "vllm-log"):
                    repeats.context(text)
            elif kind.startswith("foreign "):  # a recognised line is never dropped silently
                other = _ENGINE_OF[kind.removeprefix("foreign ")]
                yield self._count(
                    line_error(
                        self.source,
                        number,
                        text,
                        f"a metrics line of {other} in {self.detected} output: one file holds one engine's metrics "
                        "(split it to read both)",
                    )
                )
            elif kind == "vllm-log" and VLLM_V0_MARKER in text and VLLM_MARKER not in text:
                yield self._count(vllm_v0.line(number, text))
            elif kind == "vllm-log" and repeats is not None and repeats.repeated(text):
                self.tally.duplicates += 1
            elif kind == "vllm-log":
                yield self._count(
                    vllm_line(self.source, number, text, k=self.k, assume_full_drafts=self.assume_full_drafts)
                )
            elif kind == "sglang-log":
                yield self._count(sglang_line(self.source, number, text, k=self.k))
        yield from map(self._count, llama.finish())

    def _requests(self) -> Iterator[EngineInterval | InputError]:
        """SGLang responses, one JSON line each: every finished request is an interval."""
        for number, raw in enumerate(self.lines, start=1):
            self.tally.lines += 1
            found = sglang_request_intervals(raw, self.source, number, k=self.k)
            if not found:
                self.tally.ignored += 1
            for item in found:
                yield self._count(item)

    def _trtllm(self) -> Iterator[EngineInterval | InputError]:
        """TensorRT-LLM /metrics captures, one JSON document a line: every iteration that drafted is an interval."""
        for number, raw in enumerate(self.lines, start=1):
            self.tally.lines += 1
            found = trtllm_stats_line(raw, self.source, number, k=self.k, assume_full_drafts=self.assume_full_drafts)
            if not found:
                self.tally.ignored += 1
            for item in found:
                yield self._count(item)

    def _count(self, item: EngineInterval | InputError) -> EngineInterval | InputError:
        if isinstance(item, InputError):
            self.tally.bad += 1
        else:
            self.tally.metrics += 1
        return item

    def _kind(self, text: str) -> str | None:
        if VLLM_MARKER in text or VLLM_V0_MARKER in text:
            kind = "vllm-log"
        elif SGLANG_MARKER in text and "Decode batch" in text:
            kind = "sglang-log"
        elif is_llama_line(text):
            kind = "llamacpp-log"
        else:
            return None
        if self.detected is None:
            self.detected = kind
        return kind if kind == self.detected else f"foreign {kind}"


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
