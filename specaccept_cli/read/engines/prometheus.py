"""Prometheus scrapes as a series: consecutive vLLM scrapes give the intervals between them, SGLang
gauges one bound-only interval per scrape. The format itself is read in `exposition`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.exposition import PrometheusScrape, read_prometheus_scrapes
from specaccept_cli.read.engines.sglang import sglang_gauges
from specaccept_cli.read.engines.vllm import COUNTERS, VLLM_V0_REFUSAL, VLLM_V0_SERIES, prometheus_intervals
from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.rule.intervals import EngineInterval, LineTally


class ScrapeSeries:
    """Scrapes from one or several files, in order, as one series: each consecutive pair of vLLM
    scrapes gives the interval between them; a series of one scrape gives the counts since the
    counters started (the server's start, or its last restart). SGLang gauges: one bound-only
    interval per scrape. `audit before.prom after.prom` is a series of two."""

    def __init__(self) -> None:
        self.previous: PrometheusScrape | None = None
        self.previous_source = ""
        self.previous_tally = LineTally()
        self.vllm_scrapes = 0

    def add(self, lines: Iterable[str | bytes], source: str, tally: LineTally) -> Iterator[EngineInterval | InputError]:
        """The intervals that the scrapes of `lines` close, in order."""
        for item in read_prometheus_scrapes(lines, source, tally):
            if isinstance(item, InputError):
                yield item
                continue
            yield from self._scrape(item, source, tally)

    def add_page(
        self, lines: Iterable[str | bytes], source: str, tally: LineTally
    ) -> list[EngineInterval | InputError] | InputError:
        """One page of a server's /metrics (`watch`): one scrape whatever its blank lines, its intervals.

        A page is refused whole (an InputError returned, the series left as it was) when a line is bad or
        a series appears twice in it: a server cannot serve one counter at two values at one moment, and
        counting both would count the same runs twice.
        """
        page: PrometheusScrape | None = None
        for item in read_prometheus_scrapes(lines, source, tally):
            if isinstance(item, InputError):
                return item
            if page is None:
                page = item
                continue
            for key, value in item.samples.items():
                if key in page.samples:
                    name, labels = key
                    shown = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else "")
                    line = item.sample_lines.get(key)
                    return InputError(source, line, f"series {shown[:200]} appears twice in one page")
                page.samples[key] = value
                page.sample_lines[key] = item.sample_lines[key]
        if page is None:
            return []
        return list(self._scrape(page, source, tally))

    def _scrape(self, item: PrometheusScrape, source: str, tally: LineTally) -> Iterator[EngineInterval | InputError]:
        yield from sglang_gauges(item, source)
        refusal = _unreadable(item)
        if refusal is not None:
            tally.bad += 1
            yield InputError(source, item.line, refusal)
            return
        if not any(name in COUNTERS for name, _ in item.samples):
            return
        self.vllm_scrapes += 1
        if self.previous is not None:
            yield from _tallied(prometheus_intervals(self.previous, item, source), tally)
        self.previous, self.previous_source, self.previous_tally = item, source, tally

    def finish(self) -> Iterator[EngineInterval | InputError]:
        """A lone vLLM scrape: the counts since the counters started."""
        if self.vllm_scrapes == 1 and self.previous is not None:
            yield from _tallied(prometheus_intervals(None, self.previous, self.previous_source), self.previous_tally)


# Hugging Face text-generation-inference, router/src/infer/mod.rs (send_responses): metrics::histogram!(
# "tgi_request_skipped_tokens").record((n - 1) as f64) for every generation sent, n the tokens of the step,
# so the prefill step records 0 too; router/src/server.rs sets its buckets to 0..=speculate in some versions
# and leaves them at the exporter's defaults (or commented out) in others. Drafted tokens are not exposed.
TGI_SKIPPED = "tgi_request_skipped_tokens"
TGI_REFUSAL = (
    "TGI's tgi_request_skipped_tokens histogram (router/src/infer/mod.rs) holds the speculated tokens accepted "
    "per step (n - 1), the prefill step's 0 included, and no drafted count: no acceptance counts can be read "
    "from it, and none are guessed"
)


def _unreadable(scrape: PrometheusScrape) -> str | None:
    """Why a scrape's speculative series cannot be read (a known engine whose counters are no counts), or None."""
    names = {name for name, _ in scrape.samples}
    if any(name in names for name in VLLM_V0_SERIES):
        return VLLM_V0_REFUSAL
    if any(name.startswith(TGI_SKIPPED) for name in names) and not any(name in COUNTERS for name in names):
        return TGI_REFUSAL
    return None


def parse_prometheus_scrapes(
    lines: Iterable[str | bytes], source: str, *, tally: LineTally | None = None
) -> Iterator[EngineInterval | InputError]:
    """Intervals from a file of one or several scrapes (see `ScrapeSeries`)."""
    series = ScrapeSeries()
    yield from series.add(lines, source, tally if tally is not None else LineTally())
    yield from series.finish()


def _tallied(items: Iterable[EngineInterval | InputError], tally: LineTally) -> Iterator[EngineInterval | InputError]:
    for out in items:
        if isinstance(out, InputError):
            tally.bad += 1
        elif any(note.startswith("counter reset") for note in out.notes):
            tally.resets += 1
        yield out


# The speculative series of each engine's /metrics (vllm, sglang, llamacpp, lmdeploy; TGI's, to refuse it).
_SCRAPE_SERIES = (
    b"vllm:spec_decode",
    b"sglang:spec_",
    b"llamacpp:spec_decode",
    b"lmdeploy:spec_decode",
    b"tgi_request_skipped_tokens",
)
_SCRAPE_TYPES = (b"vllm:", b"sglang:", b"llamacpp:spec_decode", b"lmdeploy:spec_decode", b"tgi_request_skipped_tokens")


def is_scrape_line(line: bytes) -> bool:
    """A sample or a `# TYPE` line of a speculative series."""
    stripped = line.lstrip()
    return stripped.startswith(_SCRAPE_SERIES) or (
        stripped.startswith(b"# TYPE ") and any(b" " + series in stripped for series in _SCRAPE_TYPES)
    )


FORMATS = (
    InputFormat(
        "prometheus",
        Kind.INTERVALS,
        "vLLM, SGLang, llama.cpp, LMDeploy",
        "each engine's /metrics (vllm/v1/spec_decode/metrics.py `SpecDecodingProm`, "
        "sglang/srt/metrics/collector.py, tools/server/server-context.cpp)",
        "scrape",
        sniff=is_scrape_line,
        markers=(*_SCRAPE_SERIES, b"# TYPE "),
        suffixes=(".prom",),
        reader=lambda lines, source, tally: parse_prometheus_scrapes(lines, source, tally=tally),
    ),
)
