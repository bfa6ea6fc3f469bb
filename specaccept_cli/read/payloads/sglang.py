"""SGLang's per-request acceptance: `meta_info`, the OpenAI endpoints' `sglext`, and `speculative_decoding_stats`.

Sources:
- `meta_info` of a finished request (python/sglang/srt/managers/tokenizer_manager.py fills it; no opt-in):
  `spec_verify_ct` (verify passes S), `spec_accept_rate` (A / D), `spec_accept_length` (completion tokens /
  S: it counts the prefill token and truncation, so it is not 1 + A / S and is not checked), and the
  accepted / proposed / histogram counts under three generations of names: `spec_accept_token_num`,
  `spec_draft_token_num`, `spec_accept_histogram` (<= 0.5.10); `spec_accepted_drafts`,
  `spec_proposed_drafts` (0.5.11, renamed in sgl-project/sglang#23530, which also fixed the server-level
  rate that was (accepted + bonus) / (steps x (k + 1))); `spec_num_correct_drafts`,
  `spec_num_proposed_drafts`, `spec_correct_drafts_histogram` (>= 0.5.12). H[n] = passes that accepted
  exactly n drafts. The proposed count is S x the configured width, nominal: under n-gram drafting it
  overstates the drafted tokens, so a histogram with it is exact only if every draft had full width.
- the OpenAI endpoints' `sglext.spec_tokens_details` (sgl-project/sglang#33518, request field
  `return_spec_tokens_details`; built by `spec_tokens_details_from_meta_info` in
  python/sglang/srt/entrypoints/openai/utils.py, which fills an absent field with 0 or [], so a 0 proposed
  count with S > 0, an empty histogram or a 0.0 rate beside accepted drafts means "not reported").
- `speculative_decoding_stats` with ordered `verify_lengths` / `accept_lengths` (open PR
  sgl-project/sglang#34814, `--speculative-decoding-stats detailed`; in `meta_info` for /generate, in
  `sglext` for the OpenAI endpoints). The PR is not merged and its text does not say whether
  `verify_lengths` count the verified root token or `accept_lengths` the bonus token: the arrays are read
  only when the request's own counters pin both conventions, and are otherwise reported as drift.
"""

from __future__ import annotations

import math
from typing import Any

from specaccept_cli.read.formats import InputFormat, Kind
from specaccept_cli.read.payloads.fields import Drift, count, counts, first_count, histogram, payload_sniff, printed
from specaccept_cli.rule.requests import BadRecord, RequestRecord

ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
HISTOGRAMS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
# Every spec_* key SGLang is known to write (tokenizer_manager.py, openai/utils.py); others are drift.
KNOWN_SPEC = frozenset(
    {
        "spec_verify_ct",
        "spec_accept_rate",
        "spec_accept_length",
        "spec_cap_length",
        "spec_block_accept_length",
        "spec_cap_lens_histogram",
        *ACCEPTED,
        *PROPOSED,
        *HISTOGRAMS,
    }
)
STATS_KNOWN = frozenset({"verify_lengths", "accept_lengths"})
MARKERS = (b'"spec_verify_ct"', b'"spec_tokens_details"', b'"verify_lengths"')


def records(obj: object, drift: Drift) -> list[RequestRecord | BadRecord | None]:
    """The SGLang records of one JSON value: a /generate response, a batch, an OpenAI response, a bare meta_info."""
    out: list[RequestRecord | BadRecord | None] = []
    if isinstance(obj, list):
        for item in obj:
            out.extend(records(item, drift))
        return out
    if not isinstance(obj, dict):
        return out
    sglext = obj.get("sglext") if isinstance(obj.get("sglext"), dict) else None
    if sglext is not None and (
        isinstance(sglext.get("spec_tokens_details"), dict) or "speculative_decoding_stats" in sglext
    ):
        details = sglext.get("spec_tokens_details")
        out.append(
            _record(
                details if isinstance(details, dict) else {},
                sglext.get("speculative_decoding_stats"),
                obj,
                "sglang-sglext",
                drift,
            )
        )
        return out
    if isinstance(obj.get("meta_info"), dict):
        meta = obj["meta_info"]
        if "spec_verify_ct" in meta or "speculative_decoding_stats" in meta:
            out.append(_record(meta, meta.get("speculative_decoding_stats"), obj, "sglang-meta-info", drift))
        return out
    if isinstance(obj.get("choices"), list):
        for choice in obj["choices"]:
            out.extend(records(choice, drift))
        return out
    if "spec_verify_ct" in obj:
        out.append(_record(obj, obj.get("speculative_decoding_stats"), obj, "sglang-meta-info", drift))
    return out


def _record(
    meta: dict[str, Any], stats: object, root: dict[str, Any], fmt: str, drift: Drift
) -> RequestRecord | BadRecord | None:
    spec_keys = {name: meta[name] for name in meta if str(name).startswith("spec_")}
    defaults = fmt == "sglang-sglext"  # spec_tokens_details_from_meta_info fills absent fields with 0 / []
    try:
        verify = count(meta, "spec_verify_ct")
        found = first_count(meta, ACCEPTED)
        accepted = None if found is None else found[1]
        found = first_count(meta, PROPOSED)
        proposed = None if found is None else found[1]
        if defaults and proposed == 0 and verify:
            proposed = None
        hist_name = next((name for name in HISTOGRAMS if meta.get(name) is not None), None)
        hist = None if hist_name is None else histogram(meta[hist_name], hist_name)
        if defaults and hist == ():
            hist = None
        totals = _totals(meta, verify, accepted, proposed, hist)
        drift.note(f"SGLang {fmt}", _not_repeats(spec_keys, totals), KNOWN_SPEC)
        rates = {}
        rate = meta.get("spec_accept_rate")
        if rate is not None and not (defaults and rate == 0 and accepted):
            rates["acceptance_rate"] = printed(rate, "spec_accept_rate")
        k, notes = None, []
        if proposed is not None and verify and proposed % verify == 0:
            k, tree = chain_width(proposed // verify, hist)
            notes.append(
                tree
                if tree is not None
                else f"proposed drafts = {verify} passes x {k}: nominal, so exact only if every draft had {k} tokens"
            )
        per_acc = per_ver = None
        if stats is not None:
            per_acc, per_ver = _steps(stats, verify, accepted, proposed, drift, fmt, totals)
            if per_acc is not None:
                k = None  # the ragged widths are the truth; the nominal width is not a bound
                proposed = sum(per_ver or ())
        if verify == 0 and not per_acc:
            return None  # no verify pass: nothing speculative to read
        completion = count(meta, "completion_tokens")
        if completion is None and isinstance(root.get("usage"), dict):
            completion = count(root["usage"], "completion_tokens")
        request = meta.get("id", root.get("id"))
        record = RequestRecord(
            engine="sglang",
            fmt=fmt,
            request_id=None if request is None else str(request),
            k=k,
            steps=verify,
            accepted=accepted,
            drafted=proposed,
            histogram=hist,
            per_step_accepted=per_acc,
            per_step_drafted=per_ver,
            completion_tokens=completion,
            labels={"engine": "sglang", **({"model": root["model"]} if isinstance(root.get("model"), str) else {})},
            printed=rates,
            drafted_nominal=per_acc is None,
            notes=tuple(notes) if per_acc is None else (),
        )
        return record.check()
    except BadRecord as exc:
        return exc


def chain_width(width: int, hist: tuple[int, ...] | None) -> tuple[int | None, str | None]:
    """The draft length k that proposed / passes = `width` proves, or None and why it may be a tree's nodes.

    SGLang counts proposed drafts as passes x (speculative_num_draft_tokens - 1)
    (scheduler_metrics_mixin.py draft_per_round; the request counters alike). For a chain that is k; for an
    EAGLE tree (speculative_eagle_topk > 1) it is the tree's nodes, more than its depth, and a tree read as a
    chain of that width makes every pass that stopped at the tree's depth a rejection. Only a pass that
    accepted `width` drafts proves a chain that long (a tree of `width` nodes and topk > 1 is never that deep).
    """
    top = max((a for a, n in enumerate(hist or ()) if n), default=0)
    if hist is not None and top == width:
        return width, None
    if hist is None:
        return None, (
            f"proposed drafts are {width} per pass: SGLang counts a chain's k and an EAGLE tree's nodes (topk > 1: "
            "passes x (speculative_num_draft_tokens - 1)) the same way, and without a histogram nothing tells them "
            "apart, so examined tokens are bounded without a draft length"
        )
    return None, (
        f"proposed drafts are {width} per pass, but no pass accepted more than {top}: SGLang counts an EAGLE tree's "
        f"nodes (topk > 1: passes x (speculative_num_draft_tokens - 1)) the same way as a chain's k, so this is "
        f"not read as a chain of {width}: examined tokens are bounded over chains {max(top, 1)} to {width} deep "
        "(a chain that never accepted all its drafts reads the same)"
    )


def _totals(
    meta: dict[str, Any], verify: int | None, accepted: int | None, proposed: int | None, hist: tuple[int, ...] | None
) -> list[object]:
    """The request's totals as read, and the rates and lengths they give: a field of another name that repeats
    one of them exactly (a summary block restating the counters) adds nothing, so it is no unknown field."""
    values: list[object] = [value for value in (verify, accepted, proposed) if value is not None]
    values += [meta[name] for name in ("spec_accept_rate", "spec_accept_length") if meta.get(name) is not None]
    if hist is not None:
        values.append(list(hist))
    if accepted is not None and proposed:
        values.append(accepted / proposed)
    if accepted is not None and verify:
        values += [accepted / verify, 1 + accepted / verify]
    return values


def _repeats(value: object, totals: list[object]) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return any(
            isinstance(total, int | float) and math.isclose(value, total, rel_tol=1e-9, abs_tol=0.0) for total in totals
        )
    return isinstance(value, list) and any(value == total for total in totals if isinstance(total, list))


def _not_repeats(fields: dict[str, Any], totals: list[object]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if not _repeats(value, totals)}


def _steps(
    stats: object,
    verify: int | None,
    accepted: int | None,
    proposed: int | None,
    drift: Drift,
    fmt: str,
    totals: list[object],
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """Per-step (accepted, drafted) from `accept_lengths` / `verify_lengths`, when the counters pin the conventions."""
    if not isinstance(stats, dict):
        raise BadRecord("speculative_decoding_stats is not an object")
    drift.note(f"SGLang {fmt} speculative_decoding_stats", _not_repeats(stats, totals), STATS_KNOWN)
    if stats.get("accept_lengths") is None or stats.get("verify_lengths") is None:
        return None, None
    acc = counts(stats["accept_lengths"], "accept_lengths")
    ver = counts(stats["verify_lengths"], "verify_lengths")
    if len(acc) != len(ver):
        raise BadRecord(f"accept_lengths has {len(acc)} steps, verify_lengths {len(ver)}")
    steps = len(acc)
    if verify is not None and steps != verify:
        raise BadRecord(f"{steps} per-step lengths, not the spec_verify_ct {verify}")
    unresolved = "SGLang speculative_decoding_stats (sgl-project/sglang#34814)"
    if accepted is None:
        drift.unknown.setdefault(unresolved, set()).add(
            "accept_lengths (no accepted count to tell whether they hold the bonus token)"
        )
        return None, None
    if sum(acc) == accepted:
        drafts_accepted = acc
    elif sum(acc) == accepted + steps and all(a >= 1 for a in acc):
        drafts_accepted = tuple(a - 1 for a in acc)
    else:
        raise BadRecord(
            f"accept_lengths sum to {sum(acc)}: neither the {accepted} accepted drafts nor with a bonus per step"
        )
    if proposed is not None and sum(ver) == proposed:
        drafted = ver
    elif proposed is not None and sum(ver) == proposed + steps and all(v >= 1 for v in ver):
        drafted = tuple(v - 1 for v in ver)
    elif any(a == v for a, v in zip(drafts_accepted, ver)) and all(a <= v for a, v in zip(drafts_accepted, ver)):
        drafted = ver  # a step accepted all it verified: the lengths cannot include the root token
    else:
        drift.unknown.setdefault(unresolved, set()).add("verify_lengths (whether they count the verified root token)")
        return None, None
    return drafts_accepted, drafted


FORMATS = (
    InputFormat(
        "sglang-payload",
        Kind.REQUESTS,
        "SGLang",
        "python/sglang/srt/managers/tokenizer_manager.py, a response's `meta_info`",
        "payloads",
        sniff=payload_sniff(records, takes_lists=True),
        markers=MARKERS,
        reader=records,
        takes_lists=True,
    ),
)
