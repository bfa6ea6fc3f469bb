"""The payload study: per-request payloads with short drafts, bounds and intervals against seeded truths.

Each log is `tests.payloads.requests(seed, count, k, steps, spread, ragged)`: request i has alpha_i ~
Beta(7 s, 3 s) (s = `spread`, smaller: more between-request variation), n_i ~ U{5..60} verify steps, and
each step drafts k tokens or, with probability `ragged`, a length uniform in 1..k-1 (an n-gram drafter).
The log is written in one engine's shape that does not pin every step down, read by the front door with
the defaults (`summarise`, a real file), and compared with two truths, both exact:

- the log's own (realised) figures, summed over the generator's steps: runs, accepted, drafted,
  examined, the accepted-length histogram; alpha = accepted / examined. The whole-input figures must equal
  them (integers equal, rates to 1e-12 relative) and the bounds must hold the log's alpha in every log:
  it is the value the bounds partially identify.
- the process's: what alpha = sum A_i / sum E_i over requests tends to as requests grow, E[a] / E[e]
  per step (n_i is independent of the rest), in closed form from the Beta's moments
  E[alpha^j] = prod_{m<j} (a + m) / (a + b + m): a step of draft length d accepts sum_{j=1..d} alpha^j in
  expectation and examines sum_{j=0..d-1} alpha^j. The bounds' 95% interval (Imbens and Manski 2004)
  must cover it in >= 95% of logs; a log's bounds need not (they are over this log's requests).

Shapes: vLLM's `summary` payload without the histogram by draft length (a request that drafted short is
bounded, one that did not is exact: drafted = steps x k proves it), AIPerf records without per-step arrays
(the same), llama.cpp's `timings` (totals only: every request bounded, and its steps too).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specaccept_cli.pipeline import summarise
from specaccept_cli.summary.estimates import Estimates, estimate
from tests import payloads as sim

Writer = Callable[[sim.Request], dict[str, Any]]
SHAPES: dict[str, tuple[str, Writer]] = {
    "vllm-summary": ("vLLM summary, no by-length histograms", sim.vllm_summary_only),
    "aiperf": ("AIPerf records, no per-step arrays", lambda request: sim.aiperf_record(request, per_step=False)),
    "llamacpp": ("llama.cpp timings, totals only", sim.llamacpp_completion),
}
STEPS = (5, 60)
RELATIVE = 1e-12


@dataclass(frozen=True)
class PayloadCase:
    """One row of the payload table: an engine's shape, requests per log, share of short drafts, spread, k."""

    shape: str
    requests: int
    ragged: float
    k: int = 4
    spread: float = 2.0


@dataclass(frozen=True)
class LogTruth:
    """A log's figures summed over the generator's steps (exact integers)."""

    runs: int
    accepted: int
    drafted: int
    examined: int
    histogram: tuple[int, ...]
    bounded: int  # requests that drafted short somewhere (bounded in the vLLM and AIPerf shapes)

    @property
    def alpha(self) -> float:
        return self.accepted / self.examined

    @property
    def tokens_per_pass(self) -> float:
        return 1 + self.accepted / self.runs

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted


@dataclass(frozen=True)
class ProcessTruth:
    """The generating process's figures per verify step (expectations, closed form)."""

    alpha: float
    tokens_per_pass: float
    acceptance_rate: float


def log_truth(batch: list[sim.Request]) -> LogTruth:
    histogram = [0] * (max(r.k for r in batch) + 1)
    for request in batch:
        for a in request.accepted:
            histogram[a] += 1
    while len(histogram) > 1 and histogram[-1] == 0:
        histogram.pop()
    return LogTruth(
        runs=sum(r.steps for r in batch),
        accepted=sum(sum(r.accepted) for r in batch),
        drafted=sum(sum(r.drafted) for r in batch),
        examined=sum(r.examined for r in batch),
        histogram=tuple(histogram),
        bounded=sum(any(d < r.k for d in r.drafted) for r in batch),
    )


def process_truth(case: PayloadCase) -> ProcessTruth:
    """E[a] / E[e], 1 + E[a] and E[a] / E[d] per step, over alpha ~ Beta(7 s, 3 s) and the draft lengths."""
    a, b = 7 * case.spread, 3 * case.spread
    moments = [1.0]  # E[alpha^j]
    for m in range(case.k):
        moments.append(moments[-1] * (a + m) / (a + b + m))
    lengths = {case.k: 1.0} if case.k == 1 else {case.k: 1.0 - case.ragged}
    for d in range(1, case.k):
        lengths[d] = lengths.get(d, 0.0) + case.ragged / (case.k - 1)
    accepted = sum(p * sum(moments[1 : d + 1]) for d, p in lengths.items())
    examined = sum(p * sum(moments[:d]) for d, p in lengths.items())
    drafted = sum(p * d for d, p in lengths.items())
    return ProcessTruth(accepted / examined, 1 + accepted, accepted / drafted)


@dataclass
class PayloadOutcome:
    """Counts over the logs of one case."""

    logs: int = 0
    bounded_logs: int = 0  # logs with a bounded request: alpha only bounded
    requests_bounded: int = 0
    exact_equal: int = 0  # logs whose every whole-input exact figure equals the log's truth
    exact_failures: list[str] = field(default_factory=list)
    bounds_hold: int = 0  # logs whose alpha bounds (or exact alpha) hold the log's alpha
    bounds_hold_process: int = 0  # ... hold the process's alpha (not a target: the bounds are this log's)
    intervals: int = 0
    covers_process: int = 0  # intervals (the bounds' 95%, or alpha's own when exact) covering the process alpha
    covers_log: int = 0
    width: float = 0.0  # summed widths of the bounds
    interval_width: float = 0.0
    tokens_intervals: int = 0  # tokens per pass: its interval (steps exact) or its bounds' interval
    tokens_covered: int = 0

    def share(self, count: int, of: int | None = None) -> float:
        return count / max(1, self.logs if of is None else of)


def _close(value: float | None, truth: float) -> bool:
    return value is not None and math.isclose(value, truth, rel_tol=RELATIVE, abs_tol=0.0)


def exact_mismatches(numbers: Estimates, truth: LogTruth, shape: str) -> list[str]:
    """What of the whole-input figures differs from the log's truth (empty: all equal)."""
    wrong = []
    if numbers.accepted_tokens != truth.accepted:
        wrong.append(f"accepted {numbers.accepted_tokens} != {truth.accepted}")
    if numbers.drafted_tokens != truth.drafted:
        wrong.append(f"drafted {numbers.drafted_tokens} != {truth.drafted}")
    if not _close(numbers.acceptance_rate, truth.acceptance_rate):
        wrong.append(f"accepted/drafted {numbers.acceptance_rate} != {truth.acceptance_rate}")
    identified = numbers.identified
    if shape == "llamacpp":  # no steps written: runs and tokens per pass bounded, no histogram
        runs = identified.runs_bounds if identified is not None else None
        if runs is None or not runs[0] <= truth.runs <= runs[1]:
            wrong.append(f"runs bounds {runs} do not hold {truth.runs}")
        tokens = identified.tokens_per_pass_bounds if identified is not None else None
        if tokens is None or not tokens[0] <= truth.tokens_per_pass <= tokens[1]:
            wrong.append(f"tokens per pass bounds {tokens} do not hold {truth.tokens_per_pass}")
        return wrong
    if numbers.runs != truth.runs:
        wrong.append(f"runs {numbers.runs} != {truth.runs}")
    if not _close(numbers.tokens_per_pass, truth.tokens_per_pass):
        wrong.append(f"tokens per pass {numbers.tokens_per_pass} != {truth.tokens_per_pass}")
    histogram = [numbers.accepted_histogram.get(str(a), 0) for a in range(len(numbers.accepted_histogram))]
    while len(histogram) > 1 and histogram[-1] == 0:
        histogram.pop()
    if tuple(histogram) != truth.histogram:
        wrong.append(f"histogram {histogram} != {list(truth.histogram)}")
    return wrong


def alpha_bounds(numbers: Estimates) -> tuple[tuple[float, float], tuple[float, float] | None] | None:
    """(bounds, 95% interval) of alpha: the bounds and their interval, or the exact alpha and its interval."""
    if numbers.alpha is not None:
        return (numbers.alpha, numbers.alpha), numbers.alpha_ci
    identified = numbers.identified
    if identified is None or identified.alpha_bounds is None:
        return None
    return identified.alpha_bounds, identified.alpha_bounds_ci


def tokens_interval(numbers: Estimates) -> tuple[float, float] | None:
    if numbers.tokens_per_pass_ci is not None:
        return numbers.tokens_per_pass_ci
    return None if numbers.identified is None else numbers.identified.tokens_per_pass_bounds_ci


def summarise_log(batch: list[sim.Request], shape: str, directory: Path, name: str = "payloads.jsonl") -> Estimates:
    """The log written in `shape` to a real file and read by the front door with the defaults."""
    path = directory / name
    path.write_bytes(sim.jsonl([SHAPES[shape][1](request) for request in batch]))
    try:
        return estimate(summarise([str(path)]))
    finally:
        path.unlink()


def run_payload_case(case: PayloadCase, logs: int, seed: int = 0) -> PayloadOutcome:
    process = process_truth(case)
    outcome = PayloadOutcome()
    with tempfile.TemporaryDirectory(prefix="specaccept-payload-study-") as directory:
        for index in range(logs):
            batch = sim.requests(seed * 1_000_003 + index, case.requests, case.k, STEPS, case.spread, case.ragged)
            truth = log_truth(batch)
            numbers = summarise_log(batch, case.shape, Path(directory))
            outcome.logs += 1
            bounded = numbers.identified is not None and numbers.identified.bounded_units > 0
            outcome.bounded_logs += bounded
            outcome.requests_bounded += 0 if numbers.identified is None else numbers.identified.bounded_units
            wrong = exact_mismatches(numbers, truth, case.shape)
            outcome.exact_equal += not wrong
            if wrong and len(outcome.exact_failures) < 5:
                outcome.exact_failures.append(f"log {index}: " + "; ".join(wrong))
            found = alpha_bounds(numbers)
            if found is None:
                continue
            (low, high), interval = found
            outcome.bounds_hold += low <= truth.alpha <= high
            outcome.bounds_hold_process += low <= process.alpha <= high
            outcome.width += high - low
            if interval is not None:
                outcome.intervals += 1
                outcome.covers_process += interval[0] <= process.alpha <= interval[1]
                outcome.covers_log += interval[0] <= truth.alpha <= interval[1]
                outcome.interval_width += interval[1] - interval[0]
            tokens = tokens_interval(numbers)
            if tokens is not None:
                outcome.tokens_intervals += 1
                outcome.tokens_covered += tokens[0] <= process.tokens_per_pass <= tokens[1]
    return outcome


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


@dataclass(frozen=True)
class PayloadProfile:
    """Cases and logs per case: `small_logs` for logs of at most 20 requests (where intervals are tested
    hardest), `logs` for the rest."""

    cases: tuple[PayloadCase, ...]
    small_logs: int
    logs: int

    def logs_of(self, case: PayloadCase) -> int:
        return self.small_logs if case.requests <= 20 else self.logs


def _grid() -> tuple[PayloadCase, ...]:
    main = tuple(
        PayloadCase("aiperf", requests, ragged) for requests in (6, 20, 100, 300) for ragged in (0.02, 0.1, 0.3)
    )
    k_and_spread = (
        *(PayloadCase("aiperf", requests, ragged, k) for k in (2, 8) for requests in (6, 20) for ragged in (0.02, 0.3)),
        *(PayloadCase("aiperf", requests, 0.02, 4, 0.5) for requests in (6, 20, 100)),
    )
    shapes = (
        *(PayloadCase("vllm-summary", requests, 0.1) for requests in (6, 20, 300)),
        *(PayloadCase("llamacpp", requests, 0.1) for requests in (6, 20, 100, 300)),
    )
    return main + k_and_spread + shapes


PAYLOAD_DEEP = PayloadProfile(_grid(), small_logs=1000, logs=300)
PAYLOAD_FAST = PayloadProfile(  # what tests/study/test_study.py runs in `make test`
    (PayloadCase("vllm-summary", 20, 0.1), PayloadCase("aiperf", 6, 0.3, k=8), PayloadCase("llamacpp", 20, 0.1)),
    small_logs=60,
    logs=60,
)


def payload_table(profile: PayloadProfile, seed: int = 0) -> str:
    """The payload study as markdown: one row per case."""
    lines = [
        "| shape | requests | logs | short drafts | spread | k | bounded requests | exact figures equal | "
        "bounds hold the log's alpha | 95% interval covers the process alpha | tokens/pass 95% covers | "
        "mean width: bounds / interval |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for case in profile.cases:
        logs = profile.logs_of(case)
        outcome = run_payload_case(case, logs, seed)
        lines.append(
            f"| {SHAPES[case.shape][0]} | {case.requests:,} | {logs:,} | {case.ragged:g} | {case.spread:g} | "
            f"{case.k} | "
            f"{_percent(outcome.requests_bounded / (outcome.logs * case.requests))} | "
            f"{_percent(outcome.share(outcome.exact_equal))} | {_percent(outcome.share(outcome.bounds_hold))} | "
            f"{_percent(outcome.share(outcome.covers_process, outcome.intervals))} | "
            f"{_percent(outcome.share(outcome.tokens_covered, outcome.tokens_intervals))} | "
            f"{outcome.width / outcome.logs:.4f} / {outcome.interval_width / max(1, outcome.intervals):.4f} |"
        )
    return "\n".join(lines)
