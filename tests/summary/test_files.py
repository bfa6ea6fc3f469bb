"""The machine format: `summary_object`/`summary_from_object` round trips, validation, and merge."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import SkippedRow
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.summary.files import json_bytes, merge_summaries, summary_from_object, summary_object
from specaccept_cli.summary.state import Summary
from tests.helpers import (
    FIRST_EXAMPLE,
    invoke,
    kept_errors,
    outcome_summary,
    summary_json,
    without_provenance,
)


def test_round_trip_through_dict() -> None:
    whole, _ = outcome_summary(7, 500)
    assert summary_from_object(summary_object(whole)) == whole
    assert summary_from_object(summary_object(Summary())) == Summary()


def test_from_dict_rejects_other_objects() -> None:
    import pytest

    with pytest.raises(ValueError, match="schema"):
        summary_from_object({"schema": "other/1"})
    with pytest.raises(ValueError, match="incomplete"):
        summary_from_object({"schema": "specaccept.summary/1", "state": {}})
    bad = summary_object(Summary())
    bad["state"]["joint_counts"] = [[2, 3, 1]]
    with pytest.raises(ValueError, match="impossible"):
        summary_from_object(bad)


def test_skipped_state_survives_to_dict_and_from_dict() -> None:
    summary = Summary(skipped_rows=3, skipped_sources=1, errors=(SkippedRow("x.gz", None, "cut"), *kept_errors("y", 2)))
    data = orjson.loads(orjson.dumps(summary_object(summary)))
    assert data["skipped_rows"] == 3 and data["skipped_sources"] == 1
    assert data["errors"][0] == {"source": "x.gz", "line": None, "message": "cut"}
    assert summary_from_object(data) == summary
    assert summary_from_object(data) + summary_from_object(data) == summary + summary


def test_an_older_summary_without_skipped_keys_still_loads() -> None:
    data = summary_object(Summary())
    del data["skipped_rows"], data["errors"], data["state"]["skipped_rows"], data["state"]["skipped_sources"]
    assert summary_from_object(data) == Summary()


@pytest.mark.parametrize(
    "broken",
    [{"skipped_rows": -1}, {"skipped_rows": "many"}],
)
def test_malformed_skipped_state_is_rejected(broken: dict[str, object]) -> None:
    data = summary_object(Summary())
    data["state"].update(broken)
    with pytest.raises(ValueError):
        summary_from_object(data)


def test_malformed_errors_are_rejected() -> None:
    data = summary_object(Summary())
    data["errors"] = [{"source": "x"}]
    with pytest.raises(ValueError):
        summary_from_object(data)


def test_from_dict_rejects_malformed_groups() -> None:
    data = summary_object(Summary(group_by="m", groups={"x": Summary()}))
    data["groups"]["x"]["groups"] = {}
    data["groups"]["x"]["group_by"] = "m"
    with pytest.raises(ValueError, match="groups of its own"):
        summary_from_object(data)
    data = summary_object(Summary())
    data["groups"] = []
    with pytest.raises(ValueError, match="group_by"):
        summary_from_object(data)


@given(seed=st.integers(0, 1000), runs=st.integers(0, 120), cuts=st.lists(st.integers(0, 120), max_size=5))
def test_merge_of_parts_is_exactly_the_summary_of_the_whole(seed: int, runs: int, cuts: list[int]) -> None:
    whole, (arrays,) = outcome_summary(seed, runs)
    bounds = [0, *sorted(min(cut, runs) for cut in cuts), runs]
    parts = []
    offsets, p, q, r = arrays
    for start, end in pairwise(bounds):
        low, high = int(offsets[start]), int(offsets[end])
        part = (offsets[start : end + 1] - low, p[low:high], q[low:high], r[low:high])
        parts.append(Summary.of_outcome(accept_prefix_batch(*part)))
    whole_bytes = json_bytes(summary_object(whole))
    objects = [
        (f"part-{index}.json", orjson.loads(json_bytes(summary_object(part)))) for index, part in enumerate(parts)
    ]
    merged = merge_summaries(objects)
    assert merged.pop("provenance")["merged_from"] == [name for name, _ in objects]  # and nothing else to say
    assert merged == orjson.loads(whole_bytes)
    assert json_bytes(merged) == whole_bytes  # byte for byte, key order included


ALL_KEPT = {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99]}


FIRST_REJECTED = {"p": [0.1], "q": [0.9], "r": [0.5]}


def test_merge_groups_value_by_value(tmp_path: Path) -> None:
    """Hand-made grouped summaries ({value: summary}) merge group by group; totals still add."""
    a, b, c = (
        summary_json([FIRST_EXAMPLE], tmp_path, "a"),
        summary_json([ALL_KEPT], tmp_path, "b"),
        summary_json([FIRST_REJECTED], tmp_path, "c"),
    )
    ab = summary_json([FIRST_EXAMPLE, ALL_KEPT], tmp_path, "ab")
    abc = summary_json([FIRST_EXAMPLE, ALL_KEPT, FIRST_REJECTED], tmp_path, "abc")
    ac = summary_json([FIRST_EXAMPLE, FIRST_REJECTED], tmp_path, "ac")
    shard_1 = {**ab, "group_by": "draft", "groups": {"draft-a": a, "draft-b": b}}
    shard_2 = {**c, "group_by": "draft", "groups": {"draft-a": c}}
    merged = merge_summaries([("1.json", shard_1), ("2.json", shard_2)])
    del merged["provenance"]
    assert {key: value for key, value in merged.items() if key not in ("groups", "group_by")} == abc
    assert merged["group_by"] == "draft"
    # groups do not split the token tally (whole-input evidence for the impossible-log checks): theirs is not kept
    for whole in (ac, b):
        del whole["state"]["tokens"]
    assert merged["groups"] == {"draft-a": ac, "draft-b": b}
    assert merged["alpha"] == 3 / 5  # (1 + 2 + 0) / (2 + 2 + 1)

    # Through the command too, from files.
    paths = []
    for name, shard in (("1.json", shard_1), ("2.json", shard_2)):
        (tmp_path / name).write_bytes(orjson.dumps(shard))
        paths.append(str(tmp_path / name))
    assert orjson.loads(without_provenance(invoke("merge", *paths).stdout_bytes)) == merged


def test_merge_refuses_counters_that_would_overflow(tmp_path: Path) -> None:
    big = 2**60  # 4 x 2^60 tokens fit in int64; twice that does not
    state = {"joint_counts": [[3, 3, big]], "passing_tokens": 0, "threshold_sum_fixed": 0, "sampled_tokens": 0}
    path = tmp_path / "big.json"
    path.write_bytes(orjson.dumps({"schema": "specaccept.summary/1", "state": state}))
    assert invoke("merge", str(path)).exit_code == 0
    copy = tmp_path / "copy.json"  # the same file twice is refused before any counting
    copy.write_bytes(path.read_bytes())
    result = invoke("merge", str(path), str(copy))
    assert result.exit_code == 2
    assert "(merged so far): counters out of range" in result.stderr
