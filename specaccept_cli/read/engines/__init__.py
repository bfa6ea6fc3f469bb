"""Read what serving engines already write: metrics log lines, responses and Prometheus scrapes.

Pure: imports only numpy, orjson, the standard library and `specaccept_cli.errors`. Every format
is checked against the engine's own source, cited next to its regex. The output is a stream of
`EngineInterval`s (or `InputError`s for lines that look like metrics but do not parse or do not
add up); each interval carries the figures as the engine printed them and what they recover.

One module per engine and per concern:

- `intervals`: the result (`EngineInterval`, `LineTally`) and its one-line description.
- `recovery`: shared by every engine: rounded rates and totals -> exact (k, a) counts, or bounds.
- `vllm`, `sglang`, `llamacpp`: each engine's layouts (log lines, responses, counters or gauges).
- `exposition`: the Prometheus text format -> scrapes; `prometheus`: scrapes -> intervals.
- `logs`: which engine wrote a file (sniffing) and the line loop over server output.
- `repeats`: vLLM metrics lines delivered twice (a log shipper's duplicates), told and dropped.
"""

from specaccept_cli.read.engines.exposition import PrometheusScrape, read_prometheus_scrapes
from specaccept_cli.read.engines.logs import (
    EngineLogParse,
    looks_like_json,
    parse_engine_log,
    sniff_engine_format,
)
from specaccept_cli.read.engines.prometheus import ScrapeSeries, parse_prometheus_scrapes
from specaccept_cli.read.engines.recovery import recover_counts
from specaccept_cli.read.engines.sglang import sglang_request_intervals
from specaccept_cli.read.engines.vllm import prometheus_intervals
from specaccept_cli.rule.intervals import EngineInterval, LineTally, describe_interval

__all__ = [
    "EngineInterval",
    "EngineLogParse",
    "LineTally",
    "PrometheusScrape",
    "ScrapeSeries",
    "describe_interval",
    "looks_like_json",
    "parse_engine_log",
    "parse_prometheus_scrapes",
    "prometheus_intervals",
    "read_prometheus_scrapes",
    "recover_counts",
    "sglang_request_intervals",
    "sniff_engine_format",
]
