"""Reading counts out of a JSON payload: whole numbers or an error, never a guess; fields not known are drift."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from msgspec import Struct, field

from specaccept_cli.rule.intervals import count_too_large
from specaccept_cli.rule.requests import BadRecord
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH


def count(obj: Mapping[str, Any], name: str) -> int | None:
    """`obj[name]` as a whole non-negative count; None when absent or null; BadRecord when it is not a count."""
    value = obj.get(name)
    if value is None:
        return None
    if type(value) in (int, float) and value >= 0:
        too_large = count_too_large(value)
        if too_large is not None:  # as the engine-log readers say it: no server counts that far
            raise BadRecord(f"{name} = {too_large}")
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    raise BadRecord(f"{name} = {value!r} is not a whole count")


def first_count(obj: Mapping[str, Any], names: Iterable[str]) -> tuple[str, int] | None:
    """The first of `names` present (not null), as a count."""
    for name in names:
        found = count(obj, name)
        if found is not None:
            return name, found
    return None


def counts(value: object, name: str) -> tuple[int, ...]:
    """A JSON list of whole non-negative counts."""
    if not isinstance(value, list):
        raise BadRecord(f"{name} is not a list of counts")
    out = []
    for item in value:
        if type(item) in (int, float) and item >= 0 and count_too_large(item) is not None:
            raise BadRecord(f"{name} holds {count_too_large(item)}")
        if type(item) is float and item.is_integer():
            item = int(item)
        if type(item) is not int or item < 0:
            raise BadRecord(f"{name} holds {item!r}, not a whole count")
        out.append(item)
    return tuple(out)


def sparse_histogram(value: object, name: str) -> tuple[int, ...]:
    """A sparse {accepted: steps} map (JSON keys are strings) as a dense histogram."""
    if not isinstance(value, dict):
        raise BadRecord(f"{name} is not a map of accepted count to steps")
    dense: dict[int, int] = {}
    for key, steps in value.items():
        try:
            accepted = int(key)
        except (TypeError, ValueError):
            raise BadRecord(f"{name} has the key {key!r}, not an accepted count") from None
        if accepted < 0 or str(accepted) != str(key).strip():
            raise BadRecord(f"{name} has the key {key!r}, not an accepted count")
        if accepted > MAX_DRAFT_LENGTH:  # before the dense histogram: a key of 1e9 made 1e9 zeros (3.5 GB)
            shown = key if len(key) <= 40 else key[:40] + "..."
            raise BadRecord(f"{name} has the key {shown!r}: more accepted tokens than any draft ({MAX_DRAFT_LENGTH})")
        (steps_count,) = counts([steps], name)
        dense[accepted] = dense.get(accepted, 0) + steps_count
    size = max(dense, default=-1) + 1
    return tuple(dense.get(accepted, 0) for accepted in range(size))


def histogram(value: object, name: str) -> tuple[int, ...]:
    """Dense (a list) or sparse (a map): both shapes circulate under the same name."""
    return sparse_histogram(value, name) if isinstance(value, dict) else counts(value, name)


def printed(value: object, name: str) -> str:
    """A printed rate kept as text, to be checked against the counts at its own precision."""
    if type(value) in (int, float):
        return repr(value)
    raise BadRecord(f"{name} = {value!r} is not a number")


# The printed rates of vLLM's payload shape (and AIPerf's, which copies it): the rate's role -> its field.
VLLM_RATES = {"acceptance_rate": "draft_acceptance_rate", "mean_acceptance_length": "mean_acceptance_length"}


def printed_rates(payload: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, str]:
    """The printed rates a payload carries (role -> text, see `printed`), for each role whose field is not null."""
    return {role: printed(payload[name], name) for role, name in fields.items() if payload.get(name) is not None}


class Drift(Struct):
    """Fields a known payload carries that this reader does not know: reported once per shape, never guessed."""

    unknown: dict[str, set[str]] = field(default_factory=dict)  # shape -> field names

    def note(self, shape: str, obj: Mapping[str, Any], known: frozenset[str]) -> None:
        extra = {str(name) for name in obj if name not in known}
        if extra:
            self.unknown.setdefault(shape, set()).update(extra)

    def messages(self) -> list[str]:
        return [
            f"{shape} carries fields this reader does not know, not read: {', '.join(sorted(names))}"
            for shape, names in sorted(self.unknown.items())
        ]


def usage_tokens(root: dict[str, Any]) -> int | None:
    """The response's `usage.completion_tokens`, when there."""
    usage = root.get("usage")
    if isinstance(usage, dict) and type(usage.get("completion_tokens")) is int:
        return int(usage["completion_tokens"])
    return None


def created(root: dict[str, Any]) -> float | None:
    """The response's `created` (Unix seconds), when there."""
    created = root.get("created")
    return float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None


def labels_of(root: dict[str, Any], engine: str) -> dict[str, str]:
    """What --group-by can split requests by: the engine, and the model the response names."""
    labels = {"engine": engine}
    if isinstance(root.get("model"), str):
        labels["model"] = root["model"]
    return labels


def frame(raw: bytes) -> bytes | None:
    """The JSON text of a line: the line itself, or an SSE `data:` field's value; None for anything else."""
    text = raw.strip()
    if text.startswith(b"data:"):
        text = text[5:].strip()
        return None if text == b"[DONE]" else text
    return text if text[:1] in (b"{", b"[") else None


def payload_sniff(records: Callable[[Any, Drift], list[Any]], takes_lists: bool = False) -> Callable[[bytes], bool]:
    """A payload format's sniff: a JSON or SSE line (holding its markers) in which its reader finds a payload.

    A line cut short is its own too: its reader then says what is wrong with it.
    """

    def sniff(line: bytes) -> bool:
        text = frame(line)
        if text is None:
            return False
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return True
        items = value if isinstance(value, list) and not takes_lists else [value]
        return any(records(item, Drift()) for item in items if takes_lists or isinstance(item, dict))

    return sniff
