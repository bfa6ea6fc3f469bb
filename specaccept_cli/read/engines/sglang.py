"""SGLang: its "Decode batch" log lines, the per-request `meta_info` of its responses, and its
Prometheus gauges. Each layout is cited next to its regex or field names.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import orjson

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines.exposition import LabelKey, PrometheusScrape, sample_float, sample_int
from specaccept_cli.read.engines.lines import NUM, LineReader, decode_line, line_error, make_interval
from specaccept_cli.read.engines.recovery import (
    MAX_DRAFT_LENGTH,
    Inconsistent,
    alpha_bounds_from_mean,
    alpha_range,
    from_exact_positions,
    half_ulp,
    recover_counts,
)
from specaccept_cli.read.formats import InputFormat, Kind, json_line_without_runs
from specaccept_cli.rule.intervals import EngineInterval, count_too_large

# ---------------------------------------------------------------------------------------------
# Log lines

# SGLang, python/sglang/srt/managers/scheduler_metrics_mixin.py (and scheduler.py before the
# mixin) log_decode_stats(): msg = "Decode batch. #running-req: %d, #token: %d, token usage: %.2f, "
# then "accept len: {spec_accept_length:.2f}, " (older) or "accept len: {:.2f}, accept rate:
# {:.2f}, " (newer), then "cuda graph: ..., gen throughput (token/s): %.2f, #queue-req: %d".
# accept len = accepted tokens (drafts + the bonus token) / forward passes. The "accept rate"
# denominator changed between versions (forward_ct x (num_steps + 1), x num_draft_tokens, or pure
# drafts / (forward_ct x (num_draft_tokens - 1))), so it is kept as printed and not used. With
# SGLANG_LOG_FORWARD_ITERS=1 (python/sglang/srt/environ.py; scheduler_metrics_mixin.py report_decode_stats(),
# read 2026-12) the batch's forward iteration follows: f"Decode batch{iter_msg}, ..." with iter_msg
# f" [{batch_iter}]", so "Decode batch [1234], #running-req: ...". Under EAGLE with topk > 1 the mixin's
# draft_per_round is speculative_num_draft_tokens - 1, the tree's nodes, not its depth: 'accept rate' is
# then accepted / nodes, one more reason it is not used.
SGLANG_DECODE = re.compile(
    r"Decode batch(?: \[\d+\])?[.,].*?accept len: " + NUM + r", (?:accept rate: " + NUM + r", )?"
)
SGLANG_MARKER = "accept len"
SGLANG_PREFIX = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z]+\d+)*)\]")


def sglang_line(source: str, number: int, text: str, *, k: int | None) -> EngineInterval | InputError:
    """The bounds one "Decode batch" line gives (a mean accepted length, no counts), or why it does not parse."""
    match = SGLANG_DECODE.search(text)
    if match is None:
        return line_error(
            source,
            number,
            text,
            "an SGLang decode line with 'accept len' in no known layout (scheduler_metrics_mixin.py)",
        )
    length, rate = match.group(1), match.group(2)
    try:
        centre = Fraction(length)
    except (ValueError, ZeroDivisionError):
        return line_error(source, number, text, f"accept len {length!r} is not a number")
    half = half_ulp(length)
    if centre + half < 1:
        return line_error(source, number, text, f"accept len {length} below 1 (it counts the bonus token)")
    labels: dict[str, str] = {}
    timestamp = None
    prefix = SGLANG_PREFIX.match(text)
    if prefix is not None:
        timestamp = prefix.group("ts")
        for rank in prefix.group("ranks").split():
            name = re.match(r"[A-Z]+", rank)
            if name is not None:
                labels[name.group(0).lower()] = rank[name.end() :]
    printed = {"accept len": length}
    if rate is not None:
        printed["accept rate"] = rate
    tpp_low = float(max(Fraction(1), centre - half))
    tpp_high = float(centre + half)
    if k is not None:
        tpp_high = min(tpp_high, k + 1.0)
        if tpp_low > tpp_high:
            return line_error(source, number, text, f"accept len {length} exceeds k + 1 = {k + 1}")
    m_low, m_high = tpp_low - 1, tpp_high - 1
    notes = [
        "SGLang logs only the mean accepted length per pass (rounded to 2 decimals), not counts: "
        "no histogram; alpha is bounded"
    ]
    if rate is not None:
        notes.append("'accept rate' is kept as printed: its denominator differs between SGLang versions")
    return make_interval(
        (
            "sglang",
            "sglang-log-rate" if rate is not None else "sglang-log",
            source,
            number,
            timestamp,
            labels,
            printed,
        ),
        k=k,
        tokens_per_pass_bounds=(tpp_low, tpp_high),
        alpha_bounds=alpha_bounds_from_mean(m_low, m_high, k),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# Responses, per request

# SGLang per request: the response's meta_info (python/sglang/srt/managers/tokenizer_manager.py fills
# it when a request finishes): "spec_verify_ct" (target verify passes), "spec_accept_token_num" /
# "spec_draft_token_num" (accepted and drafted tokens; "spec_num_correct_drafts" /
# "spec_num_proposed_drafts" in later versions), "spec_accept_rate" (accepted / drafted),
# "spec_accept_length" (completion tokens / verify passes) and "spec_accept_histogram" (H[n] = verify
# passes that accepted exactly n draft tokens; "spec_correct_drafts_histogram" later). Read from JSON
# lines holding a /generate response, an OpenAI-style response whose choices carry meta_info, a list
# of either (a batch), or the bare meta_info.
SGLANG_REQUEST_MARKER = '"spec_verify_ct"'
_SGLANG_ACCEPTED = ("spec_accept_token_num", "spec_num_correct_drafts", "spec_accepted_drafts")
_SGLANG_DRAFTED = ("spec_draft_token_num", "spec_num_proposed_drafts", "spec_proposed_drafts")
_SGLANG_HISTOGRAM = ("spec_accept_histogram", "spec_correct_drafts_histogram")


def _meta_infos(record: object) -> list[dict[str, Any]]:
    """The meta_info objects of a JSON record that carry speculative counts."""
    if isinstance(record, list):
        return [meta for item in record for meta in _meta_infos(item)]
    if not isinstance(record, dict):
        return []
    if isinstance(record.get("meta_info"), dict):
        return _meta_infos(record["meta_info"])
    if isinstance(record.get("choices"), list):
        return [meta for choice in record["choices"] for meta in _meta_infos(choice)]
    return [record] if "spec_verify_ct" in record else []


def _count_field(meta: dict[str, Any], names: tuple[str, ...]) -> tuple[str, int | None] | str:
    """The first of `names` present, as a whole non-negative count; an error message if it is not one."""
    for name in names:
        if name in meta:
            value = meta[name]
            if type(value) in (int, float) and (why := count_too_large(value)) is not None:
                return f"{name} = {why}"  # JSON readers give integers beyond 64 bits back as floats
            if type(value) is not int or value < 0:
                if type(value) is float and value.is_integer() and value >= 0:
                    return name, int(value)
                return f"{name} = {value!r} is not a whole count"
            return name, value
    return "", None


def sglang_request_intervals(
    raw: str | bytes, source: str, number: int, *, k: int | None = None
) -> list[EngineInterval | InputError]:
    """The intervals (one per finished request) of one JSON line of SGLang responses; [] for other lines."""
    text = decode_line(raw)
    if SGLANG_REQUEST_MARKER not in text:
        return []
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return [InputError(source, number, f"an SGLang response that is not JSON ({exc})", raw=text.encode())]
    out: list[EngineInterval | InputError] = []
    for meta in _meta_infos(record):
        item = _sglang_request(meta, source, number, k)
        out.append(InputError(source, number, item, raw=text.encode()) if isinstance(item, str) else item)
    return out


def _chain_k(k: int | None, width: int | None, top: int, has_hist: bool) -> tuple[int | None, tuple[str, ...]]:
    """The draft length to read a request with, and why. drafted = passes x (speculative_num_draft_tokens - 1)
    is an EAGLE tree's nodes under topk > 1, not a depth: only a pass that accepted `width` drafts proves a
    chain that long (as payloads/sglang.py chain_width)."""
    if k is not None or width is None:
        return k, ()
    if has_hist and top == width:
        return width, (f"every verify pass taken to have drafted k = {width} tokens (drafted = k x passes)",)
    return None, (
        f"drafted = {width} per pass, but no pass accepted more than {top}: a chain's k or an EAGLE tree's "
        "nodes (topk > 1), not read as a chain",
    )


def _sglang_request(meta: dict[str, Any], source: str, number: int, k: int | None) -> EngineInterval | str:
    fields: dict[str, int | None] = {}
    printed: dict[str, str] = {}
    for role, names in (("verify", ("spec_verify_ct",)), ("accepted", _SGLANG_ACCEPTED), ("drafted", _SGLANG_DRAFTED)):
        found = _count_field(meta, names)
        if isinstance(found, str):
            return found
        name, value = found
        fields[role] = value
        if value is not None:
            printed[name] = str(value)
    verify, accepted, drafted = fields["verify"], fields["accepted"], fields["drafted"]
    assert verify is not None  # the marker field is always there
    hist_name = next((name for name in _SGLANG_HISTOGRAM if name in meta), None)
    hist: list[int] | None = None
    if hist_name is not None:
        values = meta[hist_name]
        if not isinstance(values, list) or any(type(n) is not int or n < 0 for n in values):
            return f"{hist_name} is not a list of whole counts"
        if (why := next(filter(None, map(count_too_large, values)), None)) is not None:
            return f"{hist_name} holds {why}"
        hist = values
        printed[hist_name] = str(values)
        if sum(hist) != verify:
            return f"{hist_name} sums to {sum(hist)} verify passes, not spec_verify_ct {verify}"
        from_hist = sum(a * n for a, n in enumerate(hist))
        if accepted is not None and accepted != from_hist:
            return f"{hist_name} accepts {from_hist} tokens, not the {accepted} counted"
        accepted = from_hist
    for name in ("spec_accept_rate", "spec_accept_length"):
        if name in meta:
            printed[name] = str(meta[name])
    labels = {"id": str(meta["id"])} if "id" in meta else {}
    head = ("sglang", "sglang-request", source, number, None, labels, printed)
    if accepted is None:
        return make_interval(head, drafts=verify, k=k, notes=("no accepted-token count in this meta_info",))
    width = drafted // verify if drafted is not None and verify and drafted % verify == 0 else None
    top = max((a for a, n in enumerate(hist or ()) if n), default=0)
    k, notes = _chain_k(k, width, top, hist is not None)
    if drafted is None and k is not None:
        drafted = verify * k
    if hist is not None and k is not None:
        if len(hist) - 1 > k:
            return f"{hist_name} has {len(hist) - 1} accepted tokens in a pass of at most k = {k}"
        chain = [sum(hist[a:]) for a in range(1, k + 1)]  # passes that accepted at least i tokens
        assert drafted is not None
        try:
            rec = from_exact_positions(accepted, drafted, verify, chain)
        except Inconsistent as exc:
            return f"inconsistent SGLang counts: {exc}"
        rec.notes.extend(notes)
        return make_interval(head, draft_tokens=drafted, accepted=accepted, **rec.fields())
    if hist is not None:  # k unknown: passes at the top bin may have run out of draft rather than been rejected
        top = max(1, top)
        cap = max(top, width) if width is not None else None
        low = sum(min(a + 1, top) * n for a, n in enumerate(hist))
        high = sum((a + 1 if cap is None else min(a + 1, cap)) * n for a, n in enumerate(hist))
        return make_interval(
            head,
            drafts=verify,
            accepted=accepted,
            per_position=tuple(sum(hist[a:]) for a in range(1, top + 1)),
            accepted_hist=tuple(hist),
            examined_bounds=(low, high),
            alpha_bounds=alpha_range(accepted, (low - accepted, high - accepted)),
            tokens_per_pass=1 + accepted / verify if verify else None,
            notes=(*notes, "the draft length is unknown: give the server's draft length to make this request exact"),
        )
    if drafted is None:
        return make_interval(
            head, drafts=verify, accepted=accepted, tokens_per_pass=1 + accepted / verify if verify else None
        )
    try:
        rec = recover_counts(accepted, drafted, drafts=verify, k=k, assume_full_drafts=False)
    except Inconsistent as exc:
        return f"inconsistent SGLang counts: {exc}"
    return make_interval(head, draft_tokens=drafted, accepted=accepted, **rec.fields())


# ---------------------------------------------------------------------------------------------
# Prometheus gauges

# SGLang, python/sglang/srt/metrics/collector.py SchedulerMetricsCollector: Gauges (multiprocess
# "mostrecent") "sglang:spec_accept_length" (accepted drafts + bonus per forward, of the last log
# interval), "sglang:spec_accept_rate", and in newer versions "sglang:spec_num_steps",
# "sglang:spec_num_draft_tokens". Gauges of the last interval, not counters: no differences.
SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:spec_num_steps")


def sglang_gauges(scrape: PrometheusScrape, source: str) -> list[EngineInterval | InputError]:
    groups: dict[LabelKey, dict[str, str]] = {}
    for (name, labels), value in scrape.samples.items():
        if name in SGLANG_GAUGES or name == "sglang:spec_num_draft_tokens":
            groups.setdefault(labels, {})[name] = value
    out: list[EngineInterval | InputError] = []
    for labels, values in groups.items():
        length = values.get("sglang:spec_accept_length")
        if length is None:
            continue
        tpp = sample_float(length)
        if tpp is None or not math.isfinite(tpp):
            out.append(InputError(source, scrape.line, f"sglang:spec_accept_length {length!r} is not a number"))
            continue
        steps = values.get("sglang:spec_num_steps")
        k = sample_int(steps) if steps is not None else None
        if steps is not None and (why := count_too_large(steps)) is not None:
            out.append(InputError(source, scrape.line, f"sglang:spec_num_steps {why}"))
            continue
        if tpp - 1 > (k if k is not None else MAX_DRAFT_LENGTH):
            # At most every drafted token and the bonus one per forward pass: a larger mean is no acceptance.
            most = f"spec_num_steps {steps} + 1" if k is not None else f"{MAX_DRAFT_LENGTH + 1} (the longest draft)"
            out.append(InputError(source, scrape.line, f"sglang:spec_accept_length {length} is more than {most}"))
            continue
        printed = {name.split(":", 1)[1]: value for name, value in values.items()}
        notes = ["SGLang exposes gauges of its last log interval, not counters: no counts, no histogram; alpha bounded"]
        if tpp < 1:
            # 0 before any decode batch was logged
            out.append(
                make_interval(
                    ("sglang", "sglang-prometheus", source, scrape.line, scrape.timestamp, dict(labels), printed),
                    k=k,
                    notes=("no speculative decode logged yet (accept length below 1)",),
                )
            )
            continue
        m = tpp - 1
        out.append(
            make_interval(
                ("sglang", "sglang-prometheus", source, scrape.line, scrape.timestamp, dict(labels), printed),
                k=k,
                tokens_per_pass=tpp,
                tokens_per_pass_bounds=(tpp, tpp),
                alpha_bounds=alpha_bounds_from_mean(m, m, k),
                notes=tuple(notes),
            )
        )
    return out


def _log_lines(
    source: str, k: int | None, assume_full_drafts: bool, tally: object, keep_duplicates: bool = False
) -> LineReader:
    return LineReader(lambda number, text: [sglang_line(source, number, text, k=k)])


def _request_line(
    raw: str | bytes, source: str, number: int, k: int | None, assume_full_drafts: bool
) -> list[EngineInterval | InputError]:
    del assume_full_drafts
    return sglang_request_intervals(raw, source, number, k=k)


FORMATS = (
    InputFormat(
        "sglang-log",
        Kind.INTERVALS,
        "SGLang",
        "python/sglang/srt/managers/scheduler_metrics_mixin.py, the decode log line",
        "log-lines",
        sniff=lambda line: b"Decode batch" in line,
        markers=(SGLANG_MARKER.encode(),),
        reader=_log_lines,
    ),
    InputFormat(
        "sglang-requests",
        Kind.INTERVALS,
        "SGLang",
        "python/sglang/srt/managers/tokenizer_manager.py, the response's `meta_info`",
        "json-lines",
        sniff=json_line_without_runs,  # responses, not logged (p, q, r) runs
        markers=(SGLANG_REQUEST_MARKER.encode(),),
        reader=_request_line,
    ),
)
