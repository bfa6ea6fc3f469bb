"""vLLM: its "SpecDecoding metrics" log lines and its Prometheus spec-decode counters.

Both come from vllm/v1/spec_decode/metrics.py (`SpecDecodingLogging` prints the lines,
`SpecDecodingProm` exposes the counters); each layout is cited next to its regex.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from fractions import Fraction

from msgspec import Struct, field

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.exposition import LabelKey, PrometheusScrape, label_text, sample_int
from specaccept_cli.read.engines.lines import NUM, LineReader, line_error, make_interval
from specaccept_cli.read.engines.llamacpp import rounded_counters, rounded_scrape_interval
from specaccept_cli.read.engines.recovery import (
    Inconsistent,
    Recovery,
    fits,
    from_exact_positions,
    recover_counts,
)
from specaccept_cli.read.engines.repeats import VllmRepeats
from specaccept_cli.read.engines.vllm_lines import VLLM_V0_MARKER, VllmV0Lines, vllm_prefix
from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.rule.intervals import ONE_SCRAPE, EngineInterval, LineTally, count_too_large

# ---------------------------------------------------------------------------------------------
# Log lines

# vLLM v1, vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log() (checked at vllm-project/vllm
# commits 016a8587 and ee4ceaae): "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted
# throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d
# tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%" with rates
# ", ".join(f"{p:.3f}"), p = accepted_per_pos / num_drafts; mean length = 1 + accepted / num_drafts.
VLLM_FULL = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: " + NUM + r", "
    r"Accepted throughput: " + NUM + r" tokens/s, "
    r"Drafted throughput: " + NUM + r" tokens/s, "
    r"Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: ((?:\d+\.\d+|nan)(?:, (?:\d+\.\d+|nan))*), "
    r"Avg Draft acceptance rate: " + NUM + r"%"
)
# vLLM v1 intermediate (same file, mid-2025 versions, found by exact-string search): "SpecDecoding
# metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f, Accepted: %d tokens,
# Drafted: %d tokens, Per-position acceptance rate: %s".
VLLM_PERPOS = re.compile(
    r"SpecDecoding metrics: Draft acceptance rate: " + NUM + r"%, "
    r"Mean acceptance length: " + NUM + r", "
    r"Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: ((?:\d+\.\d+|nan)(?:, (?:\d+\.\d+|nan))*)\s*$"
)
# vLLM v1 first version (same file, early 2025; SpecDecodingStats had only num_draft_tokens and
# num_accepted_tokens): "SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens,
# Drafted: %d tokens".
VLLM_BASIC = re.compile(
    r"SpecDecoding metrics: Draft acceptance rate: " + NUM + r"%, Accepted: (\d+) tokens, Drafted: (\d+) tokens\s*$"
)
VLLM_MARKER = "SpecDecoding metrics"
# The figures of one line: (fmt, printed, rate %, accepted, drafted, mean length, per-position rates).
_Figures = tuple[str, dict[str, str], str, str, str, str | None, list[str] | None]


def _vllm_figures(text: str) -> _Figures | None:
    """The figures of a "SpecDecoding metrics" line as printed, in whichever layout it has; None for none."""
    full = VLLM_FULL.search(text)
    if full is not None:
        mean, acc_tp, draft_tp, acc, drafted, rate_text, pct = full.groups()
        printed = {
            "Mean acceptance length": mean,
            "Accepted throughput": acc_tp,
            "Drafted throughput": draft_tp,
            "Accepted": acc,
            "Drafted": drafted,
            "Per-position acceptance rate": rate_text,
            "Avg Draft acceptance rate": pct + "%",
        }
        return "vllm-log-v1-full", printed, pct, acc, drafted, mean, rate_text.split(", ")
    if (perpos := VLLM_PERPOS.search(text)) is not None:
        pct, mean, acc, drafted, rate_text = perpos.groups()
        printed = {
            "Draft acceptance rate": pct + "%",
            "Mean acceptance length": mean,
            "Accepted": acc,
            "Drafted": drafted,
            "Per-position acceptance rate": rate_text,
        }
        return "vllm-log-v1-perpos", printed, pct, acc, drafted, mean, rate_text.split(", ")
    if (basic := VLLM_BASIC.search(text)) is not None:
        pct, acc, drafted = basic.groups()
        printed = {"Draft acceptance rate": pct + "%", "Accepted": acc, "Drafted": drafted}
        return "vllm-log-v1-basic", printed, pct, acc, drafted, None, None
    return None


def vllm_line(
    source: str, number: int, text: str, *, k: int | None, assume_full_drafts: bool
) -> EngineInterval | InputError:
    """The interval of one "SpecDecoding metrics" line, or the error that says why it does not add up."""
    labels, timestamp, plain = vllm_prefix(text)
    figures = _vllm_figures(plain)
    if figures is None:
        return line_error(
            source,
            number,
            text,
            "a vLLM 'SpecDecoding metrics' line in no known layout (vllm/v1/spec_decode/metrics.py)",
        )
    fmt, printed, pct, acc, drafted, mean, rates = figures
    for name, figure in (("Accepted", acc), ("Drafted", drafted)):
        if (why := count_too_large(figure)) is not None:
            return line_error(source, number, text, f"bad vLLM line: {name}: {why}")
    accepted, draft_tokens = int(acc), int(drafted)
    problems = []
    if draft_tokens > 0 and not fits(pct, Fraction(100 * accepted, draft_tokens)):
        problems.append(f"acceptance rate {pct}% is not {accepted}/{draft_tokens}")
    if rates is not None and draft_tokens > 0 and any(r == "nan" for r in rates):
        problems.append("nan per-position rate with drafted tokens")
    if problems:
        return line_error(source, number, text, "inconsistent vLLM line: " + "; ".join(problems))
    try:
        if draft_tokens == 0 and rates is not None:
            if any(r not in ("nan", "0.000") for r in rates):
                raise Inconsistent("per-position rates without drafted tokens")
            k_printed: int | None = len(rates)
            rates = None  # printed as nan when there were no drafts
        else:
            k_printed = None
        rec = recover_counts(
            accepted,
            draft_tokens,
            rates=rates,
            mean_length=mean if draft_tokens else None,
            k=k_printed if k_printed is not None else (k if rates is None else len(rates)),
            assume_full_drafts=assume_full_drafts,
        )
    except Inconsistent as exc:
        return line_error(source, number, text, f"inconsistent vLLM line: {exc}")
    return make_interval(
        ("vllm", fmt, source, number, timestamp, labels, printed),
        draft_tokens=draft_tokens,
        accepted=accepted,
        **rec.fields(),
    )


# Prometheus counters

# vLLM's counters (vllm/v1/spec_decode/metrics.py, SpecDecodingProm) are prometheus_client Counters
# named "vllm:spec_decode_num_drafts", "..._num_draft_tokens", "..._num_accepted_tokens" and
# "..._num_accepted_tokens_per_pos" (label "position" = str(pos) for pos in range(num_spec_tokens),
# so 0-based) and are exposed with the "_total" suffix; the first v1 version had only the draft and
# accepted token counters.
VLLM_COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total": "per_pos",
}
# llama.cpp's server copies vLLM's schema (ggml-org/llama.cpp#26389, merged; tools/server/README.md's
# metrics table): "llamacpp:spec_decode_num_draft_tokens", "..._num_accepted_tokens", "..._num_drafts" and
# "..._num_accepted_tokens_per_pos{position="N"}", absent before the first speculative request. The PR's
# table names them without the "_total" suffix and a later comment (#23328) with it: both are read. Its
# positions are taken 0-based like vLLM's; a series whose positions run 1..k is shifted (the first
# position is always present once any draft was accepted). llama.cpp's own source for the label's base was
# not found in the sources searched.
LLAMACPP_COUNTERS = {
    f"llamacpp:spec_decode_num_{name}{suffix}": role
    for name, role in (
        ("drafts", "drafts"),
        ("draft_tokens", "draft_tokens"),
        ("accepted_tokens", "accepted"),
        ("accepted_tokens_per_pos", "per_pos"),
    )
    for suffix in ("_total", "")
}
# LMDeploy copies vLLM v1's schema under its own prefix: lmdeploy/metrics/loggers.py PrometheusStatLogger
# (InternLM/lmdeploy, read 2026-12) declares prometheus_client Counters "lmdeploy:spec_decode_num_drafts_total",
# "..._num_draft_tokens_total", "..._num_accepted_tokens_total" and "..._num_accepted_tokens_per_pos_total"
# (label "position" = str(pos), 0-based, from enumerate(num_accepted_tokens_per_pos)), each increased by the
# interval's counts in record_specdecode(): read exactly like vLLM v1's. Its gauges
# "lmdeploy:spec_decode_mean_accept_rate" / "..._mean_accept_length" are the counters' running ratios.
LMDEPLOY_COUNTERS = {name.replace("vllm:", "lmdeploy:", 1): role for name, role in VLLM_COUNTERS.items()}
COUNTERS = (
    {name: ("vllm", role) for name, role in VLLM_COUNTERS.items()}
    | {name: ("llama.cpp", role) for name, role in LLAMACPP_COUNTERS.items()}
    | {name: ("lmdeploy", role) for name, role in LMDEPLOY_COUNTERS.items()}
)
ENGINE_NAMES = {"vllm": "vLLM", "llama.cpp": "llama.cpp", "lmdeploy": "LMDeploy"}
SCRAPE_FORMATS = {"vllm": "vllm-prometheus", "llama.cpp": "llamacpp-prometheus", "lmdeploy": "lmdeploy-prometheus"}
# vLLM v0's gauges beside counters of the same names as v1's (vllm/engine/metrics.py Metrics, read at
# vllm-project/vllm commit f0afa0c2): PrometheusStatLogger.log() does counter.inc(spec_decode_metrics.
# accepted_tokens) each log interval, and those figures are the workers' running totals since the start
# (vllm/spec_decode/metrics.py), so the counters hold sums of running totals: no difference of two scrapes
# is a count. The gauges (and "vllm:spec_decode_num_emitted_tokens_total") exist only in v0.
VLLM_V0_SERIES = (
    "vllm:spec_decode_draft_acceptance_rate",
    "vllm:spec_decode_efficiency",
    "vllm:spec_decode_num_emitted_tokens_total",
)
VLLM_V0_REFUSAL = (
    "vLLM v0 spec-decode counters (vllm/engine/metrics.py; the gauges vllm:spec_decode_draft_acceptance_rate and "
    "vllm:spec_decode_efficiency say v0): each log interval adds the workers' running totals to them, so no "
    "difference of scrapes is a count; audit the server's 'Speculative metrics' log lines instead"
)


class _VllmCounters(Struct):
    """One vLLM engine's counters as printed: values, per-position values, their names and lines."""

    labels: dict[str, str]
    engine: str = "vllm"
    values: dict[str, str] = field(default_factory=dict)  # counter -> printed value
    per_pos: dict[int, str] = field(default_factory=dict)  # 0-based position -> printed value
    names: dict[str, str] = field(default_factory=dict)  # role -> the counter's name as exposed
    lines: dict[str, int] = field(default_factory=dict)  # the printed name of each value -> its line

    def per_pos_name(self, pos: int) -> str:
        base = self.names.get("per_pos", "vllm:spec_decode_num_accepted_tokens_per_pos_total")
        return f'{base}{{position="{pos}"}}'

    def named(self) -> list[tuple[str, str]]:
        """(printed name, value) of every counter of the series in the order of their lines, per position last."""
        named = sorted(
            ((self.names.get(role, role), value) for role, value in self.values.items()),
            key=lambda item: self.lines.get(item[0], 0),
        )
        return named + [(self.per_pos_name(pos), value) for pos, value in sorted(self.per_pos.items())]


def _vllm_series(scrape: PrometheusScrape) -> dict[LabelKey, _VllmCounters]:
    out: dict[LabelKey, _VllmCounters] = {}
    for (name, labels), value in scrape.samples.items():
        found = COUNTERS.get(name)
        if found is None:
            continue
        engine, role = found
        label_map = dict(labels)
        position = label_map.pop("position", None)
        key = (("", engine), *sorted(label_map.items()))
        series = out.setdefault(key, _VllmCounters(labels=label_map, engine=engine))
        series.names[role] = name
        if role == "per_pos":
            if position is None or not position.isdigit():
                continue
            series.per_pos[int(position)] = value
            series.lines[series.per_pos_name(int(position))] = scrape.sample_lines.get((name, labels), scrape.line)
        else:
            series.values[role] = value
            series.lines[name] = scrape.sample_lines.get((name, labels), scrape.line)
    for series in out.values():
        if series.engine == "llama.cpp" and series.per_pos and min(series.per_pos) == 1:
            lines = {pos: series.lines.pop(series.per_pos_name(pos), scrape.line) for pos in series.per_pos}
            series.per_pos = {pos - 1: value for pos, value in series.per_pos.items()}
            series.lines.update({series.per_pos_name(pos - 1): line for pos, line in lines.items()})
    return out


def prometheus_intervals(
    before: PrometheusScrape | None, after: PrometheusScrape, source: str
) -> Iterator[EngineInterval | InputError]:
    """vLLM intervals between two scrapes (or since the counters started, with `before` None), series by series.

    Made one at a time as they are read: a scrape of 500,000 series does not hold 500,000 intervals.

    A counter that went down between the scrapes is a reset (the server restarted): as Prometheus's
    `increase()` does, the interval counts from the restart, and its notes say so (the counts between
    the first scrape and the restart are lost).
    """
    old = _vllm_series(before) if before is not None else {}
    for key, series in _vllm_series(after).items():
        prev = old.get(key)
        who = ENGINE_NAMES[series.engine]
        if before is not None and prev is None:
            yield InputError(
                source, after.line, f"{who} series {label_text(series.labels)} is not in the earlier scrape"
            )
            continue
        unusable = _unusable(series, prev)
        if unusable is not None:
            line, why = unusable
            yield InputError(source, line, f"{who} counter {why} ({label_text(series.labels)})")
            continue
        ints, positions, resets = _differences(series, prev)
        if ints is None or positions is None:
            problem = "are not positions 0..k-1" if ints is not None else "is not a whole number"
            yield InputError(source, after.line, f"{who} counter {label_text(series.labels)} {problem}")
            continue
        notes = []
        if resets:  # like Prometheus's increase(): after a restart the counters count from zero again
            ints, positions, _ = _differences(series, None)
            assert ints is not None and positions is not None
            notes.append(
                f"counter reset between the scrapes (lines {before.line if before else '?'} and {after.line}): "
                + ", ".join(resets)
                + "; counted since the restart, so what ran between the earlier scrape and the restart is lost"
            )
        if "accepted" not in ints or "draft_tokens" not in ints:
            yield InputError(source, after.line, f"{who} scrape without accepted and draft token counters")
            continue
        accepted, draft_tokens = ints["accepted"], ints["draft_tokens"]
        drafts = ints.get("drafts")
        printed = {series.names[role]: value for role, value in series.values.items()}
        for pos in sorted(series.per_pos):
            printed[series.per_pos_name(pos)] = series.per_pos[pos]
        bounded = None if resets else _llama_bounded(series, prev, ints, positions, printed, (source, after, before))
        accepted = ints["accepted"]
        if bounded is not None:  # llama.cpp's counters of 10^6 and more print with 6 significant digits: bounds
            yield bounded
            continue
        problems = []
        if positions and sum(positions) != accepted:
            problems.append(f"per-position counts sum to {sum(positions)}, not accepted {accepted}")
        if positions and any(a < b for a, b in itertools.pairwise(positions)):
            problems.append("per-position counts increase with the position")
        if positions and drafts is not None and positions[0] > drafts:
            problems.append(f"{positions[0]} drafts accepted position 1 out of {drafts} drafts")
        if problems:
            yield InputError(source, after.line, f"inconsistent {who} counters: " + "; ".join(problems))
            continue
        try:
            if drafts is not None and positions:
                rec = from_exact_positions(accepted, draft_tokens, drafts, positions)
            else:
                rec = recover_counts(accepted, draft_tokens, drafts=drafts, assume_full_drafts=False)
        except Inconsistent as exc:
            yield InputError(source, after.line, f"inconsistent {who} counters: {exc}")
            continue
        if before is None:
            rec.notes.append(ONE_SCRAPE)
        rec.notes.extend(notes)
        yield _scrape_interval(series, source, after, printed, draft_tokens, accepted, rec)


def _llama_bounded(
    series: _VllmCounters,
    prev: _VllmCounters | None,
    ints: dict[str, int],
    positions: list[int],
    printed: dict[str, str],
    scrapes: tuple[str, PrometheusScrape, PrometheusScrape | None],
) -> EngineInterval | InputError | None:
    """A llama.cpp interval whose counters were printed rounded (see `llamacpp.stringstream_bounds`), or None."""
    if series.engine != "llama.cpp":
        return None
    rounded = rounded_counters(series.values, prev.values if prev is not None else None, ints, positions)
    if not rounded:
        return None
    source, after, before = scrapes
    where = (series.engine, "llamacpp-prometheus", source, after.line, after.timestamp, dict(series.labels), printed)
    return rounded_scrape_interval(where, rounded, ints, positions, before is None)


def _scrape_interval(
    series: _VllmCounters,
    source: str,
    after: PrometheusScrape,
    printed: dict[str, str],
    draft_tokens: int,
    accepted: int,
    rec: Recovery,
) -> EngineInterval:
    """The interval a series' counters give between two scrapes, as the engine that exposes them."""
    where = (
        series.engine,
        SCRAPE_FORMATS[series.engine],
        source,
        after.line,
        after.timestamp,
        dict(series.labels),
        printed,
    )
    return make_interval(where, draft_tokens=draft_tokens, accepted=accepted, **rec.fields())


def _unusable(series: _VllmCounters, prev: _VllmCounters | None) -> tuple[int, str] | None:
    """The line and the problem of the first counter value that is no count (NaN, 2.5, 1.7e308), in the
    earlier scrape first: the error names the line that holds it, not the scrape that closes the interval."""
    wanted = {name for name, _ in series.named()}  # the earlier scrape's values that the differences use
    for counters in (prev, series) if prev is not None else (series,):
        for name, value in counters.named():
            if name not in wanted:
                continue
            why = count_too_large(value)
            if why is None and sample_int(value) is None:
                why = f"{value} is not a whole number"
            if why is not None:
                return counters.lines[name], f"{name} = {why}"
    return None


def _differences(
    series: _VllmCounters, prev: _VllmCounters | None
) -> tuple[dict[str, int] | None, list[int] | None, list[str]]:
    """Counter differences (totals, per position) and the counters that went down; None where a
    value is not a whole number (totals) or the positions are not 0..k-1 (per position)."""
    ints: dict[str, int] = {}
    resets: list[str] = []
    for role in ("drafts", "draft_tokens", "accepted"):
        if role not in series.values:
            continue
        change = _increase(series.values[role], "0" if prev is None else prev.values.get(role, "0"), role, resets)
        if change is None:
            return None, [], resets
        ints[role] = change
    if series.per_pos and sorted(series.per_pos) != list(range(len(series.per_pos))):
        return ints, None, resets
    positions: list[int] = []
    for pos in range(len(series.per_pos)):
        then = "0" if prev is None else prev.per_pos.get(pos, "0")
        change = _increase(series.per_pos[pos], then, f'accepted_per_pos{{position="{pos}"}}', resets)
        if change is None:
            return None, [], resets
        positions.append(change)
    return ints, positions, resets


def _increase(now_text: str, then_text: str, name: str, resets: list[str]) -> int | None:
    """now - then of one counter, with `name` noted in `resets` when it went down; None when either value is
    not a whole number."""
    now, then = sample_int(now_text), sample_int(then_text)
    if now is None or then is None:
        return None
    if now < then:
        resets.append(f"{name} {then} -> {now}")
    return now - then


def _log_lines(
    source: str, k: int | None, assume_full_drafts: bool, tally: LineTally, keep_duplicates: bool = False
) -> LineReader:
    v0 = VllmV0Lines(source)  # v0's running totals; v1's lines each hold their interval
    repeats = None if keep_duplicates else VllmRepeats()  # a log shipper's duplicates, dropped and counted

    def line(number: int, text: str) -> list[EngineInterval | InputError]:
        if VLLM_V0_MARKER in text and VLLM_MARKER not in text:
            return [v0.line(number, text)]
        if repeats is not None and repeats.repeated(text):
            tally.duplicates += 1
            return []
        return [vllm_line(source, number, text, k=k, assume_full_drafts=assume_full_drafts)]

    return LineReader(line, None if repeats is None else repeats.context)


FORMATS = (
    InputFormat(
        "vllm-log",
        Kind.INTERVALS,
        "vLLM",
        "vllm/v1/spec_decode/metrics.py `SpecDecodingLogging` (v1); vllm/engine/metrics.py (v0, v0.4 to v0.10)",
        "log-lines",
        sniff=lambda line: True,  # the markers are the line's own
        markers=(VLLM_MARKER.encode(), VLLM_V0_MARKER.encode()),
        reader=_log_lines,
    ),
)
