"""The additive state: parts add up to the whole, skipped counters, groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import MAX_KEPT_ERRORS
from specaccept_cli.pipeline import summarise
from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.files import json_bytes, summary_from_object, summary_object
from specaccept_cli.summary.state import Summary, group_key
from tests.helpers import (
    MODEL_ROWS,
    kept_errors,
    outcome_summary,
    summarised,
    write_jsonl,
)


def split(arrays: tuple[np.ndarray, ...], cut: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    offsets, p, q, r = arrays
    token_cut = int(offsets[cut])
    left = (offsets[: cut + 1], p[:token_cut], q[:token_cut], r[:token_cut])
    right = (offsets[cut:] - token_cut, p[token_cut:], q[token_cut:], r[token_cut:])
    return left, right


@given(st.integers(0, 10_000), st.integers(0, 300), st.data())
def test_summary_of_parts_adds_up_to_the_whole(seed: int, runs: int, data: st.DataObject) -> None:
    whole, (arrays,) = outcome_summary(seed, runs)
    cut = data.draw(st.integers(0, runs))
    left, right = split(arrays, cut)
    parts = Summary.of_outcome(accept_prefix_batch(*left)) + Summary.of_outcome(accept_prefix_batch(*right))
    assert parts == whole
    assert summary_object(parts) == summary_object(whole)
    assert Summary() + whole == whole


def test_skipped_state_adds_and_merge_keeps_the_first_twenty_in_order() -> None:
    a = Summary(skipped_rows=15, errors=kept_errors("a", 15))
    b = Summary(skipped_rows=30, skipped_sources=1, errors=kept_errors("b", 20))
    merged = a + b
    assert merged.skipped_rows == 45 and merged.skipped_sources == 1
    assert merged.errors == kept_errors("a", 15) + kept_errors("b", 5)
    assert len((b + a).errors) == MAX_KEPT_ERRORS and (b + a).errors[0].source == "b"


def test_group_keys_are_strings_or_compact_json() -> None:
    assert group_key("model-a") == "model-a"
    assert group_key(3) == "3"
    assert group_key(1.5) == "1.5"
    assert group_key(True) == "true"
    assert group_key(None) == "null"
    assert group_key([1, "x"]) == '[1,"x"]'
    assert group_key({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_grouped_summaries_merge_key_by_key_and_round_trip(tmp_path: Path) -> None:
    rows = MODEL_ROWS * 4 + [{"p": [0.3], "q": [0.9], "r": [0.1], "model": "c"}]
    whole = summarise_rows(tmp_path / "whole.jsonl", rows)
    left = summarise_rows(tmp_path / "left.jsonl", rows[:5])
    right = summarise_rows(tmp_path / "right.jsonl", rows[5:])
    assert left + right == whole
    assert left.groups is not None and "c" not in left.groups
    assert summary_from_object(orjson.loads(orjson.dumps(summary_object(whole)))) == whole
    assert Summary() + whole == whole
    with pytest.raises(ValueError, match="without groups"):
        _ = whole + summary_from_object(summary_object(Summary.of_outcome(accept_prefix_batch(*one_run()))))
    other = Summary(group_by="other", groups={})
    with pytest.raises(ValueError, match="different fields"):
        _ = whole + other


def one_run() -> tuple[np.ndarray, ...]:
    return np.array([0, 1], dtype=np.int64), np.array([0.5]), np.array([0.5]), np.array([0.1])


def summarise_rows(path: Path, rows: list[dict[str, object]]) -> Summary:
    from specaccept_cli.rule.batch import FieldSpec

    write_jsonl(path, rows)
    return summarise([str(path)], FieldSpec(extras=("model",)), Plan(group_by="model"))


@given(st.integers(0, 10_000), st.integers(0, 200), st.integers(1, 6))
def test_groups_of_a_batch_are_the_summaries_of_their_runs(seed: int, runs: int, n_keys: int) -> None:
    from specaccept_cli.summary.evaluate import split_by_group

    rng = np.random.default_rng(seed)
    k = rng.integers(0, 9, size=runs)
    offsets = np.zeros(runs + 1, dtype=np.int64)
    np.cumsum(k, out=offsets[1:])
    n = int(offsets[-1])
    batch = RunBatch(
        source="x",
        lines=np.arange(1, runs + 1),
        offsets=offsets,
        p=rng.random(n),
        q=1.0 - rng.random(n),
        r=rng.random(n),
    )
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r, per_run=True)
    labels = [[None, 1, "a", True, "1", [2]][int(i)] for i in rng.integers(0, n_keys, size=runs)]
    groups = split_by_group(outcome, labels)
    for key, group in groups.items():
        members = batch.select(np.array([group_key(label) == key for label in labels], dtype=bool))
        assert group == Summary.of_outcome(accept_prefix_batch(members.offsets, members.p, members.q, members.r))
    total = sum(groups.values(), Summary())
    assert total == Summary.of_outcome(outcome)


def test_saved_grouped_summaries_merge_to_the_whole(tmp_path: Path) -> None:
    rows = MODEL_ROWS * 3 + [{"p": [0.3], "q": [0.9], "r": [0.1], "model": "c"}]
    saved = []
    for name, part in (("left", rows[:4]), ("right", rows[4:]), ("whole", rows)):
        saved.append(orjson.loads(json_bytes(summary_object(summarised(part, tmp_path, name, group_by="model")))))
    left, right, whole = (summary_from_object(data) for data in saved)
    assert left + right == whole
    assert summary_object(left + right) == saved[2]
