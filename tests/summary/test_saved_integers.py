"""Every integer a saved summary holds is range-checked on reading: a value beyond 64 bits (or 1e308 where a
whole number belongs) is one clear line and exit 2 from `merge`, `diff` and `--baseline`, never a TypeError
from writing it back."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.summary.files import json_bytes, merge_summaries, summary_of
from tests.helpers import invoke

OUT_OF_RANGE: list[object] = [2**64, 2**63, -(2**63) - 1, 2**200, 1e308, -1e308]
Path_ = tuple[str | int, ...]


@pytest.fixture(scope="module")
def rich_summary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A summary with every part that holds integers: groups, clusters, windows of time, reported counts
    (with kept mismatches), the sampler's tally, token tallies, kept errors and provenance."""
    directory = tmp_path_factory.mktemp("rich")
    generator = random.Random(4)
    lines = []
    for index in range(240):
        k = generator.randint(1, 4)
        row = {
            "p": [generator.uniform(0.1, 1) for _ in range(k)],
            "q": [generator.uniform(0.1, 1) for _ in range(k)],
            "r": [generator.random() for _ in range(k)],
            "reported": generator.randint(0, k),
            "model": "ab"[index % 2],
            "ts": 1_700_000_000 + index,
            "request": index // 3,
        }
        lines.append(orjson.dumps(row))
    lines.append(b'{"p": "not a list"}')
    log = directory / "rich.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    path = directory / "rich.json"
    result = invoke(
        "audit",
        str(log),
        *("--reported-field", "reported", "--group-by", "model", "--time-field", "ts"),
        *("--cluster-field", "request", "--check-sampler", "--on-error", "skip"),
        *("--summary-out", str(path), "-o", "json"),
    )
    assert result.exit_code == 0, result.stderr
    return path


def _integers(value: object, path: Path_) -> Iterator[Path_]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _integers(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _integers(item, (*path, index))


def saved_integers(data: dict[str, Any]) -> list[Path_]:
    """Where a summary holds integers that reading it takes in: its state, each group's, errors, provenance."""
    paths = [path for key in ("state", "errors", "provenance") for path in _integers(data.get(key), (key,))]
    for key, group in data["groups"].items():
        paths += _integers(group["state"], ("groups", key, "state"))
    return paths


def _with(data: dict[str, Any], path: Path_, value: object) -> dict[str, Any]:
    changed = copy.deepcopy(data)
    place: Any = changed
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return changed


def test_the_summary_holds_every_kind_of_integer(rich_summary: Path) -> None:
    data = orjson.loads(rich_summary.read_bytes())
    shapes = {tuple("#" if isinstance(key, int) else key for key in path) for path in saved_integers(data)}
    for part in ("examples", "pairs", "alone", "sampler", "clusters", "windows", "tokens", "joint_counts"):
        assert any(part in shape for shape in shapes), part
    assert ("errors", "#", "line") in shapes and ("provenance", "inputs", "#", "bytes") in shapes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_integer_out_of_range_is_refused_in_one_line(rich_summary: Path, data: st.DataObject) -> None:
    original = orjson.loads(rich_summary.read_bytes())
    path = data.draw(st.sampled_from(saved_integers(original)))
    changed = _with(original, path, data.draw(st.sampled_from(OUT_OF_RANGE)))
    with pytest.raises(InputError) as caught:
        summary_of(changed, "x.json")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("x.json: ")
    other = copy.deepcopy(original)
    other.pop("provenance")  # not the same input twice: merge would refuse that first
    with pytest.raises(InputError):
        json_bytes(merge_summaries([("x.json", changed), ("y.json", other)]))


@pytest.mark.parametrize("key", ["line", "k", "reported", "recomputed"])
@pytest.mark.parametrize("literal", [str(2**64), "1e308"])
def test_a_kept_mismatch_out_of_range_is_one_line_in_every_command(
    rich_summary: Path, tmp_path: Path, key: str, literal: str
) -> None:
    data = orjson.loads(rich_summary.read_bytes())
    assert data["state"]["reported"]["examples"], "the summary keeps mismatches"
    data["state"]["reported"]["examples"][0][key] = 987_654_321_987  # a placeholder no summary holds
    data.pop("provenance")
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps(data).replace(b"987654321987", literal.encode()))  # as an edited file holds it
    log = rich_summary.with_suffix(".jsonl")
    for args in (
        ("merge", str(bad), str(rich_summary)),
        ("diff", str(bad), str(rich_summary)),
        ("audit", str(log), "--baseline", str(bad), "--reported-field", "reported"),
    ):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0], lines
        assert f"reported example's {key} holds" in lines[0] or "out of range" in lines[0], lines
