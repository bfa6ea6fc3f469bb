"""Saved summaries: --summary-out, diff's file handling, merge (property-tested against the whole)."""

from __future__ import annotations

import json
import tempfile
from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.summary.files import merge_summaries
from tests.conftest import FIRST_EXAMPLE, invoke, write_jsonl
from tests.test_gates import HAND_ROWS, save, simulated


@pytest.fixture
def hand_log(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)


# --- --summary-out ---------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["table", "json", "markdown", "jsonl", "csv"])
def test_summary_out_in_every_mode(hand_log: Path, tmp_path: Path, output: str) -> None:
    target = tmp_path / "out" / "summary.json"
    target.parent.mkdir()
    result = invoke("audit", str(hand_log), "-o", output, "--summary-out", str(target))
    assert result.exit_code == 0, result.stderr
    expected = orjson.loads(invoke("audit", str(hand_log), "-o", "json").stdout)
    assert orjson.loads(target.read_bytes()) == expected
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]  # no temporary file left behind


def test_summary_out_replaces_and_gzips(hand_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "summary.json.gz"
    target.write_bytes(b"old")
    assert invoke("audit", str(hand_log), "-o", "json", "--summary-out", str(target)).exit_code == 0
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    assert invoke("diff", str(target), str(target)).exit_code == 0  # baselines may be gzip-compressed


def test_summary_out_to_a_missing_directory_is_one_line(hand_log: Path, tmp_path: Path) -> None:
    result = invoke("audit", str(hand_log), "--summary-out", str(tmp_path / "no" / "such.json"))
    assert result.exit_code == 2
    assert result.stderr.startswith("specaccept: cannot write ")
    assert len(result.stderr.splitlines()) == 1


def test_a_summary_file_alone_is_a_baseline(hand_log: Path, tmp_path: Path) -> None:
    """Only the saved state is needed: strip every derived key and the comparison is the same."""
    full = tmp_path / "full.json"
    invoke("audit", str(hand_log), "--summary-out", str(full))
    data = orjson.loads(full.read_bytes())
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps({"schema": data["schema"], "state": data["state"]}))
    current = save(simulated(50, 0.7, seed=1), tmp_path / "current.json")
    a = orjson.loads(invoke("diff", str(full), str(current), "-o", "json").stdout)
    b = orjson.loads(invoke("diff", str(bare), str(current), "-o", "json").stdout)
    assert a["metrics"] == b["metrics"]
    assert a["metrics"][0]["baseline_standard_error"] is not None


# --- diff: files that are not summaries ------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file or directory"),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[3, 0, 1e30]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "not a usable summary",
        ),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[3, 0, 1]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 1000000000000000000000000000, "sampled_tokens": 0}}',
            "counters out of range",
        ),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[3, 0, 4611686018427387904], '
            b'[3, 0, 4611686018427387904]], "passing_tokens": 0, "threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "not a usable summary: overflow",
        ),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[100000, 0, 1]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "implausible draft length 100000",
        ),
        (b"{not json", "not a JSON summary"),
        (b"[1, 2]", "not a specaccept.summary/1 object (a JSON list)"),
        (b'{"schema": "other/1"}', "not a specaccept.summary/1 object (schema: 'other/1')"),
        (b'{"schema": "specaccept.summary/1", "state": {}}', "summary state is incomplete"),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[2, 3, 1]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "impossible",
        ),
    ],
)
@pytest.mark.parametrize("side", ["baseline", "current"])
def test_diff_rejects_what_is_not_a_summary(tmp_path: Path, content: bytes | None, message: str, side: str) -> None:
    good = save(simulated(20, 0.7, seed=1), tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_bytes(content)
    args = [str(bad), str(good)] if side == "baseline" else [str(good), str(bad)]
    for command in (["diff", *args], ["merge", str(good), str(bad)]):
        result = invoke(*command)
        assert result.exit_code == 2
        assert result.stderr.startswith(f"specaccept: {bad}: ")
        assert message in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_audit_with_a_bad_baseline_fails_before_reading_logs(tmp_path: Path) -> None:
    result = invoke("audit", str(tmp_path / "never-read.jsonl"), "--baseline", str(tmp_path / "missing.json"))
    assert result.exit_code == 2
    assert "missing.json: cannot read" in result.stderr


def test_diff_outputs(tmp_path: Path) -> None:
    a = save(simulated(2000, 0.8, seed=1), tmp_path / "a.json")
    b = save(simulated(2000, 0.8, seed=2), tmp_path / "b.json")
    table = invoke("diff", str(a), str(b))
    assert table.exit_code == 0
    assert "Baseline comparison" in table.stdout and "tokens per pass" in table.stdout
    markdown = invoke("diff", str(a), str(b), "-o", "markdown").stdout
    assert markdown.startswith("### Baseline comparison\n\n| metric | baseline | current | change | z | p | verdict |")
    data = orjson.loads(invoke("diff", str(a), str(b), "-o", "json", "--max-drop", "0").stdout)
    assert data["schema"] == "specaccept.comparison/1"
    assert data["max_drop"] == 0.0 and data["significance"] == 0.01
    assert data["baseline_file"] == str(a)


# --- merge -----------------------------------------------------------------------------------


def _cut(rows: list[bytes], cuts: list[int]) -> list[list[bytes]]:
    bounds = [0, *sorted(cuts), len(rows)]
    return [rows[start:end] for start, end in pairwise(bounds)]


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 1000),
    runs=st.integers(0, 120),
    cuts=st.lists(st.integers(0, 120), max_size=5),
    compressed=st.booleans(),
)
def test_merge_of_parts_is_exactly_the_summary_of_the_whole(
    seed: int, runs: int, cuts: list[int], compressed: bool
) -> None:
    log = invoke("simulate", "--runs", str(runs), "--alpha", "0.7", "--k", "0-6", "--seed", str(seed)).stdout_bytes
    rows = log.splitlines(keepends=True)
    parts = _cut(rows, [min(cut, runs) for cut in cuts])
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        whole_bytes = invoke("audit", "-", "-o", "json", input=log).stdout_bytes
        whole = orjson.loads(whole_bytes)
        shards = []
        for index, part in enumerate(parts):
            path = root / f"part-{index}.jsonl"
            path.write_bytes(b"".join(part))
            summary = root / (f"part-{index}.json" + (".gz" if compressed else ""))
            assert invoke("audit", str(path), "-o", "csv", "--summary-out", str(summary)).exit_code == 0
            shards.append(str(summary))
        merged = invoke("merge", *shards)
        assert merged.exit_code == 0, merged.stderr
        assert orjson.loads(merged.stdout) == whole
        assert merged.stdout_bytes == whole_bytes  # byte for byte, key order included
        out = root / "all.json"
        assert invoke("merge", *shards, "-o", str(out)).exit_code == 0
        assert orjson.loads(out.read_bytes()) == whole


def _hand(rows: list[dict[str, list[float]]], tmp: Path, name: str) -> dict[str, object]:
    path = write_jsonl(tmp / f"{name}.jsonl", rows)
    result: dict[str, object] = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    return result


ALL_KEPT = {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99]}
FIRST_REJECTED = {"p": [0.1], "q": [0.9], "r": [0.5]}


def test_merge_groups_value_by_value(tmp_path: Path) -> None:
    """Hand-made grouped summaries ({value: summary}) merge group by group; totals still add."""
    a, b, c = (
        _hand([FIRST_EXAMPLE], tmp_path, "a"),
        _hand([ALL_KEPT], tmp_path, "b"),
        _hand([FIRST_REJECTED], tmp_path, "c"),
    )
    ab = _hand([FIRST_EXAMPLE, ALL_KEPT], tmp_path, "ab")
    abc = _hand([FIRST_EXAMPLE, ALL_KEPT, FIRST_REJECTED], tmp_path, "abc")
    ac = _hand([FIRST_EXAMPLE, FIRST_REJECTED], tmp_path, "ac")
    shard_1 = {**ab, "group_by": "draft", "groups": {"draft-a": a, "draft-b": b}}
    shard_2 = {**c, "group_by": "draft", "groups": {"draft-a": c}}
    merged = merge_summaries([("1.json", shard_1), ("2.json", shard_2)])
    assert {key: value for key, value in merged.items() if key not in ("groups", "group_by")} == abc
    assert merged["group_by"] == "draft"
    assert merged["groups"] == {"draft-a": ac, "draft-b": b}
    assert merged["alpha"] == 3 / 5  # (1 + 2 + 0) / (2 + 2 + 1)

    # Through the command too, from files.
    paths = []
    for name, shard in (("1.json", shard_1), ("2.json", shard_2)):
        (tmp_path / name).write_bytes(orjson.dumps(shard))
        paths.append(str(tmp_path / name))
    assert orjson.loads(invoke("merge", *paths).stdout) == merged


def test_merge_refuses_to_mix_grouped_and_plain_summaries(tmp_path: Path) -> None:
    a = _hand([FIRST_EXAMPLE], tmp_path, "a")
    (tmp_path / "grouped.json").write_bytes(orjson.dumps({**a, "group_by": "g", "groups": {"x": a}}))
    (tmp_path / "plain.json").write_bytes(orjson.dumps(a))
    result = invoke("merge", str(tmp_path / "grouped.json"), str(tmp_path / "plain.json"))
    assert result.exit_code == 2
    assert "plain.json: has no 'groups'" in result.stderr
    (tmp_path / "broken.json").write_bytes(orjson.dumps({**a, "group_by": "g", "groups": {"x": [1]}}))
    result = invoke("merge", str(tmp_path / "broken.json"))
    assert result.exit_code == 2
    assert "broken.json: not a usable summary: not a specaccept.summary/1 object (a JSON list)" in result.stderr
    (tmp_path / "other.json").write_bytes(orjson.dumps({**a, "group_by": "h", "groups": {"x": a}}))
    result = invoke("merge", str(tmp_path / "grouped.json"), str(tmp_path / "other.json"))
    assert result.exit_code == 2
    assert "other.json: cannot add summaries grouped by different fields ('g', 'h')" in result.stderr


def test_merge_needs_at_least_one_file() -> None:
    assert invoke("merge").exit_code == 2


# --- whatever is in the file: exit 0, 1 or 2, never a traceback ------------------------------

_json_scalars = st.none() | st.booleans() | st.integers(-3, 12) | st.floats(allow_nan=False) | st.text(max_size=3)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
_states = st.fixed_dictionaries(
    {},
    optional={
        "joint_counts": st.lists(
            st.lists(st.integers(-2, 12) | st.sampled_from([10**30, 1e30, 2**63, 10**5]) | _json_scalars, max_size=4),
            max_size=5,
        )
        | _json_values,
        "passing_tokens": st.integers(-5, 50) | st.just(2**63 - 1) | _json_values,
        "threshold_sum_fixed": st.integers(-5, 10**12) | st.sampled_from([2**63 - 1, 10**30]) | _json_values,
        "threshold_scale": _json_values,
        "sampled_tokens": st.integers(-5, 50) | _json_values,
        "reported": _json_values
        | st.fixed_dictionaries(
            {"runs": st.integers(0, 5), "mismatches": st.integers(0, 5), "unexplained": st.integers(0, 5)},
            optional={"explains": _json_values, "examples": _json_values},
        ),
        "sampler": _json_values
        | st.fixed_dictionaries(
            {"significance": _json_values, "r_histogram_bins": st.just(4096) | _json_values},
            optional={"r_histogram": _json_values, "examined_tokens": _json_values},
        ),
    },
)


@settings(max_examples=150, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=40),
        st.builds(lambda v: json.dumps(v).encode(), _json_values),
        st.builds(lambda s: json.dumps({"schema": "specaccept.summary/1", "state": s}).encode(), _states),
    )
)
def test_any_summary_file_gives_0_1_or_2(body: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzz.json"
        path.write_bytes(body)
        good = save(simulated(30, 0.7, seed=1), Path(directory) / "good.json")
        commands = (["diff", str(good), str(path)], ["diff", str(path), str(good)], ["merge", str(path), str(path)])
        for args in commands:
            result = invoke(*args)  # catch_exceptions=False: a traceback fails the test
            assert result.exit_code in (0, 1, 2)
            if result.exit_code == 2:
                assert len(result.stderr.splitlines()) == 1 or result.stderr.startswith("Usage:")


def test_merge_refuses_counters_that_would_overflow(tmp_path: Path) -> None:
    big = 2**60  # 4 x 2^60 tokens fit in int64; twice that does not
    state = {"joint_counts": [[3, 3, big]], "passing_tokens": 0, "threshold_sum_fixed": 0, "sampled_tokens": 0}
    path = tmp_path / "big.json"
    path.write_bytes(orjson.dumps({"schema": "specaccept.summary/1", "state": state}))
    assert invoke("merge", str(path)).exit_code == 0
    result = invoke("merge", str(path), str(path))
    assert result.exit_code == 2
    assert "(merged so far): counters out of range" in result.stderr
