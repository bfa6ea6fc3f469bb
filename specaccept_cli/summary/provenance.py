"""Where a summary came from: its inputs, the settings that change its numbers, the version and the time.

A saved summary is evidence (a baseline, a shard of a nightly benchmark). Counters alone cannot tell
that two files are the same shard twice, or that one shard read `--p-field spec.p` and another `p`:
their sum would look as good as any. So every summary the command line writes carries a `provenance`
object, and `merge` refuses what cannot be added honestly (`merged_provenance`).

An input is recorded by name, size and a digest of a sample of its content (the size, the first and
the last 64 KiB): enough to recognise the same file under another name or on another machine, at the
cost of reading 128 KiB. A digest of every byte would cost more than the audit itself (sha256 runs at
about 280 MB/s here, the audit at about 220 MB/s on two cores); a file of up to 128 KiB is digested whole.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Sequence
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.evaluate import Plan

SAMPLE_BYTES = 64 * 1024


class InputRecord(Struct, frozen=True):
    """One input as recorded in a summary: `size` and `sample_sha256` are None when unknown (stdin, a pipe)."""

    name: str
    size: int | None = None
    sample_sha256: str | None = None

    @property
    def identity(self) -> tuple[int, str] | None:
        """What makes two records the same file: its size and content sample, whatever its name."""
        if not self.size or self.sample_sha256 is None:  # unknown, or empty: no runs to count twice
            return None
        return self.size, self.sample_sha256

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.size, "sample_sha256": self.sample_sha256}

    @classmethod
    def from_dict(cls, data: object) -> InputRecord:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError("an input of 'provenance' is not an object with a 'name'")
        size, digest = data.get("bytes"), data.get("sample_sha256")
        if size is not None and (type(size) is not int or size < 0):
            raise ValueError("an input's 'bytes' is not a size")
        if digest is not None and not isinstance(digest, str):
            raise ValueError("an input's 'sample_sha256' is not a string")
        return cls(data["name"], size, digest)


def describe_input(name: str, path: str | os.PathLike[str] | None, size: int | None = None) -> InputRecord:
    """The record of one input; a path that is not a regular file (stdin, a pipe) has no size or digest.

    An object in storage (no local path) is recorded with the `size` its listing gave, and no digest:
    reading its head and tail would be two more requests.
    """
    if path is None:
        return InputRecord(name, size)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: opening a named pipe waits for a writer
            return InputRecord(name)
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            digest = hashlib.sha256(str(size).encode() + b"\n")
            digest.update(handle.read(SAMPLE_BYTES))
            if size > 2 * SAMPLE_BYTES:
                handle.seek(size - SAMPLE_BYTES)
            digest.update(handle.read())  # the rest: the last SAMPLE_BYTES, or all of a small file
    except OSError:  # gone or unreadable since it was read: recorded by name only
        return InputRecord(name)
    return InputRecord(name, size, digest.hexdigest())


def reading_settings(
    fields: FieldSpec, plan: Plan, on_error: str = "fail", max_line_bytes: int | None = None
) -> dict[str, Any]:
    """The options that change a summary's numbers, by name: shards that differ in one cannot be added.

    Options that change only speed or how the result is shown (jobs, the output form, a cost
    ratio asked of the summary) are left out. The line limit changes the numbers only when long
    lines are skipped rather than fatal, and the sampler's significance only when the sampler is tested.
    """
    settings: dict[str, Any] = {
        "p_field": fields.p,
        "q_field": fields.q,
        "r_field": fields.r,
        "draft_tokens_field": fields.draft_tokens,
        "target_tokens_field": fields.target_tokens,
        "group_by": plan.group_by,
        "cluster_field": plan.cluster_field,
        "reported_field": plan.reported_field,
        "check_sampler": plan.check_sampler,
        "on_error": on_error,
    }
    if plan.check_sampler:
        settings["sampler_significance"] = plan.sampler_significance
    if plan.windows is not None:  # what was asked: a width of None is the automatic one
        settings["window_time_field"] = plan.windows.time_field
        settings["window_width"] = plan.windows.width
    if on_error == "skip":
        settings["max_line_bytes"] = max_line_bytes
    return settings


def _version() -> str:
    from specaccept_cli.version import __version__  # not importlib.metadata: 12 ms of start-up for the same string

    return __version__


def _now() -> str:
    """UTC now, to the second; `SOURCE_DATE_EPOCH` (the reproducible-builds convention) pins it."""
    pinned = os.environ.get("SOURCE_DATE_EPOCH", "")
    seconds = int(pinned) if pinned.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class Provenance(Struct, frozen=True):
    """What a summary was made of. `settings` is None for a merge of files that recorded none."""

    inputs: tuple[InputRecord, ...]
    settings: dict[str, Any] | None
    version: str
    created: str
    merged_from: tuple[str, ...] = ()

    @classmethod
    def now(cls, inputs: Sequence[InputRecord], settings: dict[str, Any] | None) -> Provenance:
        return cls(tuple(inputs), settings, _version(), _now())

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "specaccept": self.version,
            "created": self.created,
            "inputs": [item.to_dict() for item in self.inputs],
            "settings": self.settings,
        }
        if self.merged_from:
            data["merged_from"] = list(self.merged_from)
        return data

    @classmethod
    def from_dict(cls, data: object) -> Provenance:
        """Raises ValueError when `data` is not a provenance object."""
        if not isinstance(data, dict):
            raise ValueError("'provenance' is not an object")
        inputs, settings, merged_from = data.get("inputs", []), data.get("settings"), data.get("merged_from", [])
        if not isinstance(inputs, list) or not isinstance(merged_from, list):
            raise ValueError("'provenance' holds a malformed 'inputs' or 'merged_from' list")
        if settings is not None and not isinstance(settings, dict):
            raise ValueError("'provenance' 'settings' is not an object")
        return cls(
            tuple(InputRecord.from_dict(item) for item in inputs),
            settings,
            str(data.get("specaccept", "unknown")),
            str(data.get("created", "unknown")),
            tuple(str(name) for name in merged_from),
        )


class ProvenanceConflict(ValueError):
    """Summaries that cannot be added honestly; `source` is the one found in conflict with an earlier one."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(message)
        self.source = source


def merged_provenance(parts: Sequence[tuple[str, Provenance | None]]) -> Provenance:
    """The provenance of a merge of (summary name, its provenance or None for an older file) pairs.

    Raises ProvenanceConflict when two parts hold the same input (its runs would count twice) or
    were made with different settings (the sum would mix two ways of reading). Older files that
    recorded nothing are taken on trust: nothing can be checked about them.
    """
    seen: dict[tuple[int, str], tuple[str, str]] = {}
    settings: dict[str, Any] | None = None
    settings_source = ""
    inputs: list[InputRecord] = []
    for source, provenance in parts:
        if provenance is None:
            continue
        for item in provenance.inputs:
            identity = item.identity
            if identity is None:
                continue
            if identity in seen:
                earlier, earlier_name = seen[identity]
                same = f"{item.name!r}" if item.name == earlier_name else f"{item.name!r} (= {earlier_name!r})"
                if earlier == source:
                    message = f"lists input {same} twice (same size and content): its runs count twice"
                else:
                    message = (
                        f"holds input {same} as {earlier} does (same size and content): its runs would count twice"
                    )
                raise ProvenanceConflict(source, message)
            seen[identity] = (source, item.name)
        inputs.extend(provenance.inputs)
        if provenance.settings is None:
            continue
        if settings is None:
            settings, settings_source = provenance.settings, source
            continue
        differing = [
            key
            for key in sorted(settings.keys() | provenance.settings.keys())
            if settings.get(key) != provenance.settings.get(key)
        ]
        if differing:
            what = "; ".join(
                f"{key} {provenance.settings.get(key)!r} here, {settings.get(key)!r} in {settings_source}"
                for key in differing
            )
            raise ProvenanceConflict(
                source, f"made with different settings ({what}): summarise every shard the same way"
            )
    return replace(Provenance.now(inputs, settings), merged_from=tuple(name for name, _ in parts))
