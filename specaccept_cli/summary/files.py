"""The machine format in one place: writing a summary object, reading it back (baselines, shards), merging.

A summary file is the `-o json` / `--summary-out` object: the estimates, then `groups`,
then `state`, which holds the additive counters. A file alone is therefore enough to
compare with (the standard errors derive from the joint (k, a) histogram) and to
merge: the merged object is `summary_from_object` of each, added, and written again
with `summary_object`, so every derived key is recomputed from the summed state
rather than averaged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec
import numpy as np
import orjson

from specaccept_cli.errors import MAX_KEPT_ERRORS, InputError, Reason, SkippedRow, Why
from specaccept_cli.rule.registry import DEFAULT_RULE
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH
from specaccept_cli.rule.vectorized import THRESHOLD_SCALE
from specaccept_cli.summary.advice import advice_of
from specaccept_cli.summary.clusters import ClusterTally
from specaccept_cli.summary.engine import EngineTally
from specaccept_cli.summary.estimates import Estimates, estimate
from specaccept_cli.summary.provenance import Provenance, ProvenanceConflict, merged_provenance
from specaccept_cli.summary.rule_figures import RuleFigures, rule_figures
from specaccept_cli.summary.rules import RuleTally
from specaccept_cli.summary.server import ReportedTally, SamplerTally
from specaccept_cli.summary.state import Summary, shown_groups
from specaccept_cli.summary.tokens import TokenTally
from specaccept_cli.summary.windows import Drift, WindowTally, design_effect, drift_test, window_estimates
from specaccept_cli.text import json_controls_escaped

SCHEMA = "specaccept.summary/2"
# /2 (this version): figures over the whole input when some requests or intervals give totals only: `alpha` is
# null unless identified, `alpha_bounds`, `alpha_bounds_ci`, `identification` and the unit counts beside it,
# `runs` null when only bounded (`runs_bounds`). The state is the same but for the bounded units' rows, so /1
# files are read too.
READABLE_SCHEMAS = frozenset({"specaccept.summary/1", SCHEMA})
GROUPS_KEY = "groups"
INT64_MAX = 2**63 - 1


def summary_object(
    summary: Summary,
    cost_ratio: float | None = None,
    numbers: Estimates | None = None,
    provenance: Provenance | None = None,
    max_groups: int = 0,
    drift: Drift | Literal["test"] | None = "test",
    group_numbers: Mapping[str, Estimates] | None = None,
    groups_as_bytes: bool = False,
) -> dict[str, Any]:
    """The machine format: derived keys, then `groups` when grouped, `provenance` when known, `state` (always last).

    `cost_ratio` is a question, not data: it adds `cost_ratio`, `speedup` and `optimal_k`
    (to every group too) and is not part of the state. `numbers` are the summary's estimates
    when the caller has them already, and `group_numbers` its groups' (by key; the view estimated
    them: with many groups, estimating is most of the work). `max_groups` > 0 writes only that many
    groups, the largest, and the rest summed as `other_groups` (with `groups_total`): such an object
    is complete for comparisons but cannot be merged group by group. `drift` is the drift test's result
    when the caller has it already ("test": run it here). `groups_as_bytes` (for an object that is only
    written) holds each group's object as its compact JSON (`json_bytes` writes it so in any case), made
    and dropped one group at a time: a million group objects are never held at once.
    """
    numbers = numbers or estimate(summary)
    # Block and tree runs' figures (each an estimate of its own): made once, for `outside_alpha` and the advice.
    figures = () if summary.rules is None else rule_figures(summary.rules, summary.clusters is not None)
    nonzero = np.argwhere(summary.counts)
    joint = [[int(k), int(a), int(summary.counts[k, a])] for k, a in nonzero]
    interval = numbers.alpha_ci
    check = numbers.iid_check
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "runs": numbers.runs,
        "drafted_tokens": numbers.drafted_tokens,
        "accepted_tokens": numbers.accepted_tokens,
        "examined_tokens": numbers.examined_tokens,
        "alpha": numbers.alpha,
        "alpha_ci": None if interval is None else list(interval),
        "expected_alpha": numbers.expected_alpha,
        "acceptance_rate": numbers.acceptance_rate,
        "mean_accepted": numbers.mean_accepted,
        "tokens_per_pass": numbers.tokens_per_pass,
        "tokens_per_pass_predicted": numbers.tokens_per_pass_predicted,
        "iid_check": None if check is None else _plain(msgspec.to_builtins(check)),
        "per_position": [_plain(msgspec.to_builtins(row)) for row in numbers.per_position],
        "accepted_histogram": numbers.accepted_histogram,
        "conventions": numbers.conventions,
        "skipped_rows": summary.skipped_rows,
        "skipped_sources": summary.skipped_sources,
        "errors": [error.to_dict() for error in summary.errors],
        "alpha_ci_method": numbers.interval_method,
        "clustering": numbers.clustering.to_dict(),
        "cluster_field": numbers.cluster_field,
        "clusters": numbers.clusters,
        "degrees_of_freedom": numbers.degrees_of_freedom,
        "alpha_degrees_of_freedom": numbers.alpha_degrees_of_freedom,
        "tokens_per_pass_degrees_of_freedom": numbers.tokens_per_pass_degrees_of_freedom,
        "tokens_per_pass_ci": None if numbers.tokens_per_pass_ci is None else list(numbers.tokens_per_pass_ci),
        "expected_alpha_drafted": numbers.expected_alpha_drafted,
        "draft_length_histogram": {str(k): runs for k, runs in enumerate(numbers.runs_by_k)},
        "fingerprints": [item.to_dict() for item in numbers.fingerprints],
        **numbers.identification_keys(),
    }
    if numbers.identified is not None and numbers.identified.runs_bounds is not None:
        data["runs"] = None
    if cost_ratio is not None:
        data["cost_ratio"] = cost_ratio
        data["speedup"] = numbers.speedup(cost_ratio)
        data["optimal_k"] = numbers.optimal_k(cost_ratio)
        if figures:  # block and tree runs: advice by their own model
            data["rule_advice"] = {rule.name: advice_of(rule, cost_ratio).to_dict() for rule in figures}
    state: dict[str, Any] = {
        "joint_counts": joint,
        "passing_tokens": summary.passing_tokens,
        "threshold_sum_fixed": summary.threshold_sum_fixed,
        "sampled_tokens": summary.sampled_tokens,
        "threshold_scale": THRESHOLD_SCALE,
        "skipped_rows": summary.skipped_rows,
        "skipped_sources": summary.skipped_sources,
    }
    if summary.examined_threshold_sum_fixed is not None:
        state["examined_threshold_sum_fixed"] = summary.examined_threshold_sum_fixed
    if summary.one_hot_draft_tokens is not None:
        state["one_hot_draft_tokens"] = summary.one_hot_draft_tokens
    if summary.clusters is not None:
        state["clusters"] = summary.clusters.to_dict()
    if summary.tokens is not None:
        state["tokens"] = summary.tokens.to_dict()
    if summary.rules is not None:  # written only when a run is not `standard`: such files stay as they were
        state["rules"] = summary.rules.to_dict()
        data |= _rule_keys(summary, figures)
    elif summary.engine is None and summary.runs:  # logged runs of one rule, saved without a tally
        data |= _one_rule(summary)
    if summary.reported is not None:
        data |= summary.reported.summary_keys()
        state["reported"] = summary.reported.to_dict()
    if summary.sampler is not None:
        data |= summary.sampler.summary_keys()
        state["sampler"] = summary.sampler.to_dict()
    if summary.windows is not None:
        data |= windows_keys(summary.windows, summary.clusters, drift)
        state["windows"] = summary.windows.to_dict()
    if summary.engine is not None:
        data["engine"] = engine_keys(summary.engine, numbers)
        state["engine"] = summary.engine.to_dict()
    if summary.groups is not None:
        shown, other = shown_groups(summary, max_groups)
        data["group_by"] = summary.group_by
        known = group_numbers or {}
        data["groups"] = {
            key: _group_object(summary_object(group, cost_ratio, known.get(key)), groups_as_bytes)
            for key, group in shown
        }
        if other is not None:
            data["groups_total"] = len(shown) + other[0]
            data["other_groups"] = summary_object(other[1], cost_ratio)
    if provenance is not None:
        data["provenance"] = provenance.to_dict()
    data["state"] = state
    return data


def _group_object(data: dict[str, Any], as_bytes: bool) -> dict[str, Any] | orjson.Fragment:
    return orjson.Fragment(orjson.dumps(data)) if as_bytes else data


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """Tuples (intervals, degrees of freedom) as lists, as JSON gives them back: a merged object equals a read one."""
    return {
        key: list(value) if isinstance(value, tuple) else _plain(value) if isinstance(value, dict) else value
        for key, value in data.items()
    }


def windows_keys(
    tally: WindowTally, clusters: ClusterTally | None = None, drift: Drift | Literal["test"] | None = "test"
) -> dict[str, Any]:
    """The keys windows add to the summary object: how they were cut, each window's numbers, the drift test."""
    if isinstance(drift, str):
        drift = drift_test(tally, clusters)
    effect = design_effect(tally, clusters)
    return {
        "windows_by": {
            "unit": tally.unit,
            "time_field": tally.time_field,
            "width": tally.width,
            "requested_width": tally.requested,
            # Runs windows describe one order of runs: merged summaries are appended, not interleaved.
            "order": "time" if tally.unit == "seconds" else "input",
            # Each window's interval is over its runs, times sqrt(design_effect): an approximation (see windows.py).
            "design_effect": effect,
            "interval": "over runs" if clusters is None else "over runs, widened by the design effect of the clusters",
        },
        "windows": [window.to_dict() for window in window_estimates(tally, clusters)],
        "drift": None if drift is None else drift.to_dict(),
    }


def engine_keys(engine: EngineTally, numbers: Estimates) -> dict[str, Any]:
    """What a summary read from engine metrics rests on: exact intervals, bounded ones, lines read."""
    bounds = numbers.identified.alpha_bounds if numbers.identified is not None else None
    return engine.to_dict() | {"alpha_bounds_all_intervals": None if bounds is None else list(bounds)}


class NotASummary(ValueError):
    """An object that is no summary this version reads (another object, another schema), not a damaged one."""


def summary_from_object(data: dict[str, Any]) -> Summary:
    """Rebuild the additive state from a `summary_object` object (a saved summary or baseline).

    Raises ValueError when the object is not a specaccept summary this version can read.
    """
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        if not isinstance(data, dict):
            raise NotASummary(f"not a {SCHEMA} object (a JSON {type(data).__name__})")
        raise NotASummary(f"not a {SCHEMA} object (schema: {data.get('schema')!r})")
    try:
        if "state" not in data:
            raise ValueError("missing key 'state' (the counters every estimate derives from)")
        state = data["state"]
        if state.get("threshold_scale", THRESHOLD_SCALE) != THRESHOLD_SCALE:
            raise ValueError("threshold_scale differs from this version's")
        joint = [
            (_whole(k, "joint_counts"), _whole(a, "joint_counts"), _whole(n, "joint_counts"))
            for k, a, n in state["joint_counts"]
        ]
        if any(a > k for k, a, _ in joint):
            raise ValueError("joint_counts holds an impossible (k, accepted, runs) triple")
        size = max((k for k, _, _ in joint), default=0) + 1
        counts = np.zeros((size, size), dtype=np.int64)
        for k, a, n in joint:
            counts[k, a] += n
        skipped_rows = _whole(state.get("skipped_rows", 0), "skipped_rows")
        skipped_sources = _whole(state.get("skipped_sources", 0), "skipped_sources")
        errors = tuple(
            SkippedRow(
                str(item["source"]),
                None if item["line"] is None else _whole(item["line"], "errors.line"),
                str(item["message"]),
            )
            for item in data.get("errors", [])[:MAX_KEPT_ERRORS]
        )
        groups = None
        group_by = data.get("group_by")
        if "groups" in data:
            if not isinstance(group_by, str) or not isinstance(data["groups"], dict):
                raise ValueError("'groups' needs a 'group_by' field path and an object of summaries")
            groups = {str(key): summary_from_object(group) for key, group in data["groups"].items()}
            if any(group.groups is not None for group in groups.values()):
                raise ValueError("a group holds groups of its own")
        elif group_by is not None:
            raise ValueError("'group_by' without 'groups'")
        examined_sum = state.get("examined_threshold_sum_fixed")  # None: a file from before this sum
        if examined_sum is not None:
            examined_sum = _whole(examined_sum, "examined_threshold_sum_fixed")
        clusters = ClusterTally.from_dict(state["clusters"]) if "clusters" in state else None
        if clusters is not None:
            _check_clusters(clusters, counts)
        rules = RuleTally.from_dict(state["rules"]) if "rules" in state else None  # absent: standard only
        fields = {tally.field for tally in (rules.clusters.values() if rules is not None else ())}
        if fields and (clusters is None or fields != {clusters.field}):
            raise ValueError("rules: per-request sums by a field the summary is not clustered by")
        return Summary(
            counts=counts,
            passing_tokens=_whole(state["passing_tokens"], "passing_tokens"),
            threshold_sum_fixed=_whole(state["threshold_sum_fixed"], "threshold_sum_fixed"),
            sampled_tokens=_whole(state["sampled_tokens"], "sampled_tokens"),
            reported=ReportedTally.from_dict(state["reported"]) if "reported" in state else None,
            sampler=SamplerTally.from_dict(state["sampler"]) if "sampler" in state else None,
            engine=EngineTally.from_dict(state["engine"]) if "engine" in state else None,
            group_by=group_by,
            groups=groups,
            skipped_rows=skipped_rows,
            skipped_sources=skipped_sources,
            errors=errors,
            examined_threshold_sum_fixed=examined_sum,
            clusters=clusters,
            windows=WindowTally.from_dict(state["windows"]) if "windows" in state else None,
            one_hot_draft_tokens=_whole_or_none(state.get("one_hot_draft_tokens")),
            tokens=TokenTally.from_dict(state["tokens"]) if "tokens" in state else None,
            rules=rules,
        )
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"summary state is incomplete or malformed ({exc!r})") from None


def _rule_keys(summary: Summary, figures: Sequence[RuleFigures]) -> dict[str, Any]:
    """The rules the summary's runs were recomputed by (`rules`: runs per rule), and the runs left out of the
    counts and alpha (`outside_alpha`: block and tree rules, each with its accepted-length histogram, tokens
    per pass with its interval and the per-depth conditional rates with theirs: `figures`, `RuleFigures`)."""
    assert summary.rules is not None
    outside = {rule.name: rule.to_dict() for rule in figures}
    return {"rules": summary.rules.runs_by_rule(summary.runs), "outside_alpha": outside}


def _one_rule(summary: Summary) -> dict[str, Any]:
    """The rule of logged runs that keep no tally: `standard` where every drafted token had its (p, q, r),
    `argmax` where none had (token ids: a summary saved before token-id runs were tallied); none otherwise."""
    if summary.sampled_tokens == summary.drafted_tokens:
        return {"rules": {DEFAULT_RULE: summary.runs}}
    if not summary.sampled_tokens:
        return {"rules": {"argmax": summary.runs}}
    return {}


def _whole(value: object, key: str) -> int:
    """A counter as written by `summary_object`: a JSON integer from 0 to 2**63-1, nothing else.

    A hand-edited file may hold `" 375 "`, `"4"`, `4.0` or a number beyond 64 bits (which JSON
    readers give back as a float): each is refused, saying which it is, rather than coerced.
    """
    if type(value) is int:
        if not 0 <= value <= INT64_MAX:
            raise ValueError(f"counters out of range: {key} holds {value}, outside 0 to 2**63-1")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or not value.is_integer():
            raise ValueError(f"{key} holds {value!r}, not a whole number")
        if not 0 <= value <= INT64_MAX:
            raise ValueError(f"counters out of range: {key} holds {value:.6g}, outside 0 to 2**63-1")
        raise ValueError(f"{key} holds {value!r}, a decimal number where a whole number belongs")
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise ValueError(f"{key} holds the string {shown!r} where a whole number belongs")
    what = {bool: "a boolean", type(None): "null", list: "an array", dict: "an object"}.get(type(value), "a value")
    raise ValueError(f"{key} holds {what} where a whole number belongs")


def _whole_or_none(value: object) -> int | None:
    """A count a file from before it was kept lacks (None: unknown in any total)."""
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError("one_hot_draft_tokens is not a whole number")
    return value


def _check_clusters(clusters: ClusterTally, counts: np.ndarray[Any, np.dtype[np.int64]]) -> None:
    """The per-cluster sums must add up to the joint histogram's runs, accepted and examined tokens."""
    whole = Summary(counts=counts)
    sums = clusters.sums
    if (
        int(sums.runs.sum()) != whole.runs
        or int(sums.kept.sum(dtype=np.int64)) != whole.accepted_tokens
        or int(sums.reached.sum(dtype=np.int64)) != whole.examined_tokens
        or int(sums.drafts.sum(dtype=np.int64)) != whole.drafted_tokens
    ):
        raise ValueError("clusters do not add up to the joint counts (runs, drafted, accepted, examined)")


def json_bytes(data: object) -> bytes:
    """The machine format's bytes: indented, keys in the order written, each group's object on one line of
    its own, a final newline.

    A group's object is written compact (`"key": {"schema": ..., "state": {...}}` on one line): indented,
    the spaces at its depth were almost half of a file of many groups (3.6 KB a group instead of 2.0 KB),
    and a reader who wants them indented has `jq`. Group keys and messages come from data: C1 controls and
    bidi overrides are escaped too (same values).
    """
    if isinstance(data, dict) and isinstance(data.get(GROUPS_KEY), dict):
        groups = {key: _group_object(group, isinstance(group, dict)) for key, group in data[GROUPS_KEY].items()}
        data = {**data, GROUPS_KEY: groups}
    return json_controls_escaped(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))


def read_summary_file(path: str) -> dict[str, Any]:
    """The JSON object of a summary file, checked to be a summary this version can read.

    Raises InputError naming the file when it is missing, not JSON, or not a summary.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":  # `--summary-out x.json.gz` writes gzip
        raw = _gunzipped(raw, path)
    if raw.count(b",") + 1 > most_values(len(raw)):  # a comma between every two values
        raise _too_many_values(path, len(raw))
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, None, f"not a JSON summary ({exc})", why=Why(Reason.NOT_A_SUMMARY)) from None
    del raw  # a file of many groups is hundreds of MB: not held while it is checked
    if not isinstance(data, dict):
        why = Why(Reason.NOT_A_SUMMARY)
        raise InputError(path, None, f"not a {SCHEMA} object (a JSON {type(data).__name__})", why=why)
    summary_of(data, path)  # validate now, so the error names this file
    return data


# What a compressed summary may expand to: the larger of this and MAX_SUMMARY_RATIO times its compressed size.
# A summary's indented JSON compresses about 28 to 1 (200,000 clusters: 67 MB in 2.4 MB of gzip), while gzip
# expands up to about 1,000 to 1: 4 MB of it make 4 GiB of spaces, which must not be decompressed into memory.
MAX_SUMMARY_BYTES = 256 << 20
MAX_SUMMARY_RATIO = 64
# What it may parse to: each JSON value becomes a Python object of 30 to 60 bytes, so 256 MiB of `0,0,0,...`
# parsed to 5.4 GB, and orjson, short of memory under `ulimit -v`, crashed the process without a word. The
# values are counted by their commas before parsing. A summary holds some thousands, or a few million (a
# million clusters in the lists of files from before their columns were encoded: 5 million), and one per
# 20 to 38 bytes of the file; one group holds about 100 (140,000 groups: 14 million). So the bound scales
# with what the file holds: 10 million values (about 600 MB parsed), or one per BYTES_PER_VALUE bytes of a
# larger file, whose parsed form then stays within about 4 times the bytes read (which are in memory too).
MAX_SUMMARY_VALUES = 10_000_000
BYTES_PER_VALUE = 12


def most_values(size: int) -> int:
    """The most JSON values a summary of `size` bytes may hold."""
    return max(MAX_SUMMARY_VALUES, size // BYTES_PER_VALUE)


def _too_many_values(path: str, size: int) -> InputError:
    limit = most_values(size)
    return InputError(path, None, f"holds more than {limit:,} JSON values: more than a summary holds")


def _gunzipped(raw: bytes, path: str) -> bytes:
    """The decompressed bytes of a gzip summary, refused beyond the bound above rather than grown into memory."""
    import gzip
    import io

    limit = max(MAX_SUMMARY_BYTES, MAX_SUMMARY_RATIO * len(raw))
    pieces: list[bytes] = []
    size = commas = 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            while piece := stream.read(1 << 20):
                size += len(piece)
                commas += piece.count(b",")
                if commas + 1 > most_values(size):  # counted as it decompresses: never held whole
                    raise _too_many_values(path, size)
                if size > limit:
                    raise InputError(
                        path,
                        None,
                        f"decompresses to more than {limit:,} bytes from {len(raw):,}: too large for a summary",
                    )
                pieces.append(piece)
    except (OSError, EOFError) as exc:
        raise InputError(path, None, f"corrupt gzip stream ({exc})") from None
    return b"".join(pieces)


# The state is a dense (k + 1) x (k + 1) matrix: a corrupt or hostile file must not make it huge.


# Strings a state holds by design (field paths, engine names, examples): every other string in a state
# stands where a count belongs, and a count written as one (`" 50 "`) is refused, not coerced by int().
_TEXT_KEYS = frozenset({"unit", "time_field", "columns", "field", "encoding", "engines", "formats", "examples"})
_TEXT_KEYS |= {"schema_drift", "keys", "runs", "drafts", "reached", "kept"}  # cluster columns: base64 text
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _check_state_values(value: object, path: str, text: bool = False) -> None:
    """Every value of a saved state that a count can be: no count written as a string (`text`: strings
    are this key's by design), and every integer a count, a size or a time since 1970, from 0 to 2**63-1.
    A number beyond 64 bits is refused wherever it stands (JSON readers give 10**30 back as 1e+30, which
    int() then turns into a 100-bit int; 2**64 as an int no JSON writer here can write back)."""
    if isinstance(value, dict):
        for key, item in value.items():
            is_text = key in _TEXT_KEYS and isinstance(item, (str, list))
            _check_state_values(item, f"{path}.{key}" if path else str(key), text or is_text)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_state_values(item, f"{path}[{index}]" if isinstance(item, dict) else path, text)
    elif isinstance(value, str) and not text and _NUMBER_TEXT.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise ValueError(f"{path} holds the string {shown!r} where a whole number belongs")
    elif isinstance(value, float) and not abs(value) < 2**63:  # nan and inf too
        raise ValueError(f"counters out of range: {path} holds {value:.6g}, outside 0 to 2**63-1")
    elif type(value) is int and not 0 <= value <= INT64_MAX:
        raise ValueError(f"counters out of range: {path} holds {_shown_int(value)}, outside 0 to 2**63-1")


def _shown_int(value: int) -> str:
    """An integer for a message: whole up to 24 digits, else its head and its length (2**4000 has 1,205)."""
    digits = str(value)  # Python refuses str() beyond 4,300 digits; orjson gives back none that long
    return digits if len(digits) <= 24 else f"{digits[:8]}... ({len(digits.lstrip('-')):,} digits)"


def _check_integers(value: object, path: str) -> None:
    """Every integer outside the state (kept errors' lines, provenance) within 64 bits, either sign: what
    the machine format can write back."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_integers(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_integers(item, f"{path}[{index}]")
    elif type(value) is int and not -(2**63) <= value <= INT64_MAX:
        raise ValueError(f"out of range: {path} holds {_shown_int(value)}, beyond 64 bits")
    elif type(value) is float and not abs(value) < 2.0**63:  # a count or size written as 1e308: no setting is
        raise ValueError(f"out of range: {path} holds {value!r}, beyond 64 bits")


def _check_states(data: dict[str, Any], path: str) -> None:
    """`_check_state_values` over the state of a summary object and of each of its groups."""
    if isinstance(data.get("state"), dict):
        _check_state_values(data["state"], path.rstrip("."))
    for key in ("errors", "provenance"):
        _check_integers(data.get(key), f"{path}{key}")
    for key, group in (data.get("groups") or {}).items() if isinstance(data.get("groups"), dict) else ():
        if isinstance(group, dict):
            _check_states(group, f"{path}groups[{str(key)[:40]!r}].")
    if isinstance(data.get("other_groups"), dict):
        _check_states(data["other_groups"], f"{path}other_groups.")


def summary_of(data: dict[str, Any], source: str) -> Summary:
    """`summary_from_object`, with its complaints turned into an InputError naming `source`."""
    try:
        _check_states(data, "")
    except ValueError as exc:
        raise InputError(source, None, f"not a usable summary: {exc}") from None
    provenance_of(data, source)  # what the file says it was made of is read as merge reads it: a size is a size
    state = data.get("state")
    joint = state.get("joint_counts") if isinstance(state, dict) else None
    if isinstance(joint, list):
        for triple in joint:
            k = triple[0] if isinstance(triple, list) and triple else None
            if isinstance(k, (int, float)) and k > MAX_DRAFT_LENGTH:
                raise InputError(
                    source, None, f"implausible draft length {k} in joint_counts (over {MAX_DRAFT_LENGTH})"
                )
    try:
        with np.errstate(over="raise"):  # repeated triples whose counts add beyond int64
            summary = summary_from_object(data)
    except (ValueError, ArithmeticError, MemoryError) as exc:  # ArithmeticError: a count beyond int64
        why = Why(Reason.NOT_A_SUMMARY) if isinstance(exc, NotASummary) else None
        raise InputError(source, None, f"not a usable summary: {exc}", why=why) from None
    _check_range(summary, source)
    return summary


def _check_range(summary: Summary, source: str) -> None:
    """Counters that fit the int64 arithmetic of the estimates (a wrapped sum turns negative silently)."""
    counts = summary.counts
    runs = sum(int(n) for n in counts.ravel())  # Python ints: this sum cannot wrap
    if (
        bool((counts < 0).any())
        or runs * (summary.max_k + 1) > INT64_MAX
        or not 0 <= summary.passing_tokens <= INT64_MAX
        or not 0 <= summary.threshold_sum_fixed <= INT64_MAX
        or not 0 <= summary.sampled_tokens <= INT64_MAX
        or not 0 <= (summary.examined_threshold_sum_fixed or 0) <= INT64_MAX
    ):
        raise InputError(source, None, "counters out of range (negative, or too large for 64-bit sums)")


def merge_summaries(objects: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The summary object of all inputs, from (source name, summary object) pairs (see `merged_summary`)."""
    total, provenance = merged_summary(objects)
    return summary_object(total, provenance=provenance)


def merged_summary(objects: Sequence[tuple[str, dict[str, Any]]]) -> tuple[Summary, Provenance | None]:
    """The summary of all inputs, and the provenance of the merged object, from (source name, summary
    object) pairs.

    Counters add; everything else is recomputed from the sum. Summaries with `groups`
    merge value by value (`Summary.__add__`). Either every object has groups or none
    does, and likewise the server audits (reported counts, sampler tally): otherwise a
    merged part would silently cover only some of the runs of the merged total. Objects
    that hold the same input, or were made with different settings, are refused too
    (`merged_provenance`); the merged object records all their inputs (the provenance returned).
    """
    if not objects:
        raise ValueError("nothing to merge")
    try:
        provenance = merged_provenance([(source, provenance_of(data, source)) for source, data in objects])
    except ProvenanceConflict as exc:
        raise InputError(exc.source, None, str(exc)) from None
    total = Summary()
    first_source = objects[0][0]
    for index, (source, data) in enumerate(objects):
        if "other_groups" in data:
            raise InputError(
                source,
                None,
                f"holds only the {len(data.get('groups') or {}):,} largest of its {data.get('groups_total')} groups"
                " (--max-groups): the others cannot be merged group by group; write it with --max-groups 0",
            )
        summary = summary_of(data, source)
        if index:  # every shard summarised the same way, or a merged part covers only some runs
            for part, what in (
                ("groups", f"'{GROUPS_KEY}'"),
                ("reported", "reported counts"),
                ("sampler", "sampler tally"),
                ("clusters", "cluster tally (--cluster-field)"),
                ("windows", "windows"),
            ):
                if (getattr(summary, part) is None) != (getattr(total, part) is None):
                    has, lacks = (
                        (source, first_source) if getattr(summary, part) is not None else (first_source, source)
                    )
                    raise InputError(lacks, None, f"has no {what} while {has} has: summarise every shard the same way")
        try:
            total = total + summary
        except ValueError as exc:  # grouped by different fields
            raise InputError(source, None, str(exc)) from None
        _check_range(total, f"{source} (merged so far)")
    return total, provenance


def provenance_of(data: dict[str, Any], source: str) -> Provenance | None:
    """The `provenance` of a summary object (None for a file written before summaries recorded it)."""
    if "provenance" not in data:
        return None
    try:
        _check_integers(data["provenance"], "provenance")
        return Provenance.from_dict(data["provenance"])
    except ValueError as exc:
        raise InputError(source, None, f"not a usable summary: {exc}") from None
