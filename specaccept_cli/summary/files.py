"""Saved summaries: reading them back (baselines, shards) and merging them.

A summary file is the `-o json` / `--summary-out` object. Its `state` holds the
additive counters, so a file alone is enough to compare with (the standard errors
derive from the joint (k, a) histogram) and to merge: the merged object is
`Summary.from_dict` of each, added, and written again with `to_dict`, so every
derived key (estimates, intervals, histograms) is recomputed from the summed state
rather than averaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from specaccept_cli.errors import InputError
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH
from specaccept_cli.summary.state import SCHEMA, Summary
from specaccept_cli.text import json_controls_escaped

GROUPS_KEY = "groups"


def json_bytes(data: object) -> bytes:
    """The machine format's bytes: indented, keys in the order written, a final newline.

    Group keys and messages come from data: C1 controls and bidi overrides are escaped too (same values).
    """
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
        import gzip

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(path, None, f"corrupt gzip stream ({exc})") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(path, None, f"not a JSON summary ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, None, f"not a {SCHEMA} object (a JSON {type(data).__name__})")
    summary_of(data, path)  # validate now, so the error names this file
    return data


# The state is a dense (k + 1) x (k + 1) matrix: a corrupt or hostile file must not make it huge.


def summary_of(data: dict[str, Any], source: str) -> Summary:
    """`Summary.from_dict`, with its complaints turned into an InputError naming `source`."""
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
            summary = Summary.from_dict(data)
    except (ValueError, ArithmeticError, MemoryError) as exc:  # ArithmeticError: a count beyond int64
        raise InputError(source, None, f"not a usable summary: {exc}") from None
    _check_range(summary, source)
    return summary


INT64_MAX = 2**63 - 1


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
    ):
        raise InputError(source, None, "counters out of range (negative, or too large for 64-bit sums)")


def merge_summaries(objects: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The summary of all inputs, from (source name, summary object) pairs.

    Counters add; everything else is recomputed from the sum. Summaries with `groups`
    merge value by value (`Summary.__add__`). Either every object has groups or none
    does, and likewise the server audits (reported counts, sampler tally): otherwise a
    merged part would silently cover only some of the runs of the merged total.
    """
    if not objects:
        raise ValueError("nothing to merge")
    total = Summary()
    first_source = objects[0][0]
    for index, (source, data) in enumerate(objects):
        summary = summary_of(data, source)
        if index:  # every shard summarised the same way, or a merged part covers only some runs
            for part, what in (
                ("groups", f"'{GROUPS_KEY}'"),
                ("reported", "reported counts"),
                ("sampler", "sampler tally"),
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
    return total.to_dict()
