"""Group keys: one spelling per value, so null and "null", 1 and "1", true and "true", NaN and Infinity
stay apart, in every view, on several processes and through `merge`."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.summary.state import group_key
from tests.helpers import invoke, invoke_env, run_process

# Values that fell together before: each pair shared one key.
TRICKY: list[object] = [None, "null", 1, "1", True, "true", False, "false", 1.5, "1.5", "llama", '"llama"', ""]
TRICKY_KEYS = ["null", '"null"', "1", '"1"', "true", '"true"', "false", '"false"', "1.5", '"1.5"', "llama"]
TRICKY_KEYS += ['"\\"llama\\""', ""]

strings = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["null", "true", "NaN", "Infinity", "-Infinity", " 1", "[1]", '"x"', "{}", "1e3", "-0"]),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), strings)
values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(strings, inner, max_size=3))
)


def _identity(value: object) -> object:
    """A value with its type: True and 1, 1 and 1.0, 0.0 and -0.0, and NaN and NaN told apart as JSON does."""
    if isinstance(value, list):
        return ("list", tuple(_identity(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((key, _identity(item)) for key, item in value.items())))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def _read_key(key: str) -> object:
    """The value a key spells (the inverse the docs describe): JSON when it reads as JSON, else the string."""
    try:
        return json.loads(key)
    except ValueError:
        return key


@given(values)
def test_a_key_spells_its_value_and_no_other(value: object) -> None:
    """Reading a key back gives the value it was made of, type and all: two values never share a key."""
    key = group_key(value)
    assert _identity(_read_key(key)) == _identity(value)
    if isinstance(value, str) and not key.startswith('"'):
        assert key == value  # a string is shown as itself unless it would read as another value


def test_the_pairs_that_fell_together_are_apart() -> None:
    assert [group_key(value) for value in TRICKY] == TRICKY_KEYS
    keys = [group_key(value) for value in (math.nan, math.inf, -math.inf, "NaN", "Infinity", [math.nan], [None])]
    assert keys == ["NaN", "Infinity", "-Infinity", '"NaN"', '"Infinity"', "[NaN]", "[null]"]


def _tricky_rows(repeat: int) -> list[bytes]:
    lines = []
    for index in range(repeat * len(TRICKY)):
        value = TRICKY[index % len(TRICKY)]
        row = {"p": [0.5, 0.4], "q": [0.6, 0.5], "r": [0.1, 0.9 if index % 3 else 0.2], "m": value, "i": index}
        lines.append(orjson.dumps(row))
    return lines


def test_every_view_and_every_way_of_reading_gives_the_same_keys(tmp_path: Path) -> None:
    lines = _tricky_rows(12_000)  # 156,000 rows, 8.4 MB: several 2 MiB ranges with --jobs 2
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"\n".join(lines) + b"\n")
    half = len(lines) // 2
    shards = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    shards[0].write_bytes(b"\n".join(lines[:half]) + b"\n")
    shards[1].write_bytes(b"\n".join(lines[half:]) + b"\n")
    args = ("--group-by", "m", "--max-groups", "0")

    one = orjson.loads(run_process("audit", str(whole), *args, "-o", "json").stdout)
    assert sorted(one["groups"]) == sorted(TRICKY_KEYS)
    assert {key: group["runs"] for key, group in one["groups"].items()} == dict.fromkeys(TRICKY_KEYS, 12_000)
    parallel = run_process("audit", str(whole), *args, "-o", "json", "--jobs", "2")
    assert parallel.returncode == 0 and orjson.loads(parallel.stdout)["groups"] == one["groups"]
    for shard in shards:
        saved = invoke("audit", str(shard), *args, "--summary-out", f"{shard}.json", "-o", "json")
        assert saved.exit_code == 0, saved.stderr
    merged = invoke("merge", f"{shards[0]}.json", f"{shards[1]}.json")
    assert merged.exit_code == 0, merged.stderr
    merged_groups = orjson.loads(merged.stdout)["groups"]
    assert {key: group["runs"] for key, group in merged_groups.items()} == dict.fromkeys(TRICKY_KEYS, 12_000)

    table = invoke_env({"COLUMNS": "200"}, "audit", str(whole), *args)
    assert table.exit_code == 0, table.stderr
    cells = {line.split("│")[1].strip() for line in table.stdout.splitlines() if line.count("│") > 3}
    assert set(TRICKY_KEYS) - {""} <= cells

    report = tmp_path / "report.html"
    drawn = invoke("report", str(whole), *args, "-o", str(report))
    assert drawn.exit_code == 0, drawn.stderr
    text = html.unescape(report.read_text())
    for key in ('"null"', '"1"', '"true"', '"\\"llama\\""'):
        assert f">{key}<" in text


def test_parquet_nan_and_infinity_are_their_own_groups(tmp_path: Path) -> None:
    values = [math.nan, math.inf, -math.inf, None, 1.0]
    table = pa.table(
        {"p": [[0.5]] * 5, "q": [[0.6]] * 5, "r": [[0.1]] * 5, "m": pa.array(values, pa.float64()), "s": ["NaN"] * 5}
    )
    path = tmp_path / "m.parquet"
    pq.write_table(table, path)
    result = invoke("audit", str(path), "--group-by", "m", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert sorted(orjson.loads(result.stdout)["groups"]) == sorted(["NaN", "Infinity", "-Infinity", "null", "1.0"])
    as_text = invoke("audit", str(path), "--group-by", "s", "-o", "json")
    assert list(orjson.loads(as_text.stdout)["groups"]) == ['"NaN"']
