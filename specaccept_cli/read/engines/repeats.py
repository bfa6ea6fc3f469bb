"""vLLM v1 metrics lines delivered twice: a log shipper's at-least-once delivery repeats lines exactly,
and counting both would double the intervals' runs and narrow every interval by sqrt(2).
"""

from __future__ import annotations

import re
from collections import deque

from specaccept_cli.read.engines.vllm_lines import vllm_prefix

# vLLM v1's stats loop (vllm/v1/metrics/loggers.py, LoggingStatLogger.log) prints "Engine %03d: Avg prompt
# throughput: ..." and then, through the same log function, the engine's "SpecDecoding metrics" line, which
# names no engine: with data parallelism one front-end process logs one such pair per engine.
VLLM_ENGINE_LINE = re.compile(r"\bEngines? (\d{3}(?:-\d{3})?): ")
REPEAT_WINDOW = 1024  # the metrics lines (and processes) remembered to tell a repeat: bounded memory


class VllmRepeats:
    """A vLLM v1 metrics line repeated exactly, time stamp and process included: a log shipper's duplicate
    (at-least-once delivery sends a batch again), dropped and counted rather than counted twice.

    A line is one interval of one engine (vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log: the
    interval's accepted and drafted counts, per-position rates and mean length over its drafts, throughputs
    over its elapsed time) under the logger's time stamp to the second and process tag. Two real intervals
    print the same line only if one process printed the same counts and throughputs twice within one
    second: one engine logs once per stats interval (VLLM_LOG_STATS_INTERVAL, 10 s by default), so that
    takes an interval set below a second or a second engine of the same process (data parallelism). Each
    line is therefore keyed by the engine whose "Engine NNN:" stats line last came from its process, so
    two engines' equal lines are both counted; a line without the logger's time stamp is never taken for
    a repeat. Only the last REPEAT_WINDOW metrics lines (and processes) are remembered, so
    memory stays flat: a repeat further back is counted as a line of its own.
    """

    def __init__(self, window: int = REPEAT_WINDOW) -> None:
        self.window = window
        self.recent: deque[tuple[str | None, str]] = deque()
        self.seen: set[tuple[str | None, str]] = set()
        self.engine_of: dict[tuple[str, str], str] = {}  # (process, pid) -> its last "Engine NNN" tag

    def context(self, text: str) -> None:
        """An ordinary line: an "Engine NNN:" stats line says which engine its process's next metrics line is."""
        found = VLLM_ENGINE_LINE.search(text) if "Engine" in text else None
        if found is None:
            return
        labels, _, _ = vllm_prefix(text)
        key = (labels.get("process", ""), labels.get("pid", ""))
        self.engine_of.pop(key, None)
        self.engine_of[key] = found.group(1)
        if len(self.engine_of) > self.window:
            del self.engine_of[next(iter(self.engine_of))]

    def repeated(self, text: str) -> bool:
        """Whether this metrics line repeats one of the last REPEAT_WINDOW exactly (then it is not counted)."""
        labels, timestamp, _ = vllm_prefix(text)
        if timestamp is None:
            return False
        key = (self.engine_of.get((labels.get("process", ""), labels.get("pid", ""))), text)
        if key in self.seen:
            return True
        self.seen.add(key)
        self.recent.append(key)
        if len(self.recent) > self.window:
            self.seen.discard(self.recent.popleft())
        return False
