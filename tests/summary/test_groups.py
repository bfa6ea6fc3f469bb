"""Per-group state as columns (summary/groups.py, `Groups` in summary/state.py): the same numbers as one
Summary per group, without making one per group; `--max-groups` and its "other" row."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.pipeline import summarise
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.summary import groups as group_columns
from specaccept_cli.summary import state
from specaccept_cli.summary.evaluate import Plan, add_up, split_by_group
from specaccept_cli.summary.state import Groups, Summary, add_groups, shown_groups
from tests.helpers import invoke, write_jsonl


def _batch_groups(seed: int, runs: int, n_keys: int) -> tuple[Groups, dict[str, Summary]]:
    """A batch's groups as columns, and the reference: one Summary per key, added run by run."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 9, size=runs)
    offsets = np.zeros(runs + 1, dtype=np.int64)
    np.cumsum(k, out=offsets[1:])
    n = int(offsets[-1])
    p, q, r = rng.random(n), 1.0 - rng.random(n), rng.random(n)
    outcome = accept_prefix_batch(offsets, p, q, r, per_run=True)
    labels = [f"key-{int(i)}" for i in rng.integers(0, n_keys, size=runs)]
    reference: dict[str, Summary] = {}
    for run, label in enumerate(labels):
        low, high = int(offsets[run]), int(offsets[run + 1])
        one = Summary.of_outcome(accept_prefix_batch(np.array([0, high - low]), p[low:high], q[low:high], r[low:high]))
        add_groups(reference, {label: one})
    return split_by_group(outcome, labels), reference


@given(
    parts=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 60), st.integers(1, 30)), max_size=6),
    compact_at=st.sampled_from([1, 7, 1 << 16]),
)
def test_columns_added_up_are_the_summaries_of_each_group(parts: list[tuple[int, int, int]], compact_at: int) -> None:
    """However the parts are cut and however often the cells are compacted, each group is exact."""
    original = group_columns.COMPACT_AT
    group_columns.COMPACT_AT = compact_at
    try:
        expected: dict[str, Summary] = {}
        batches = []
        for seed, runs, n_keys in parts:
            columns, reference = _batch_groups(seed, runs, n_keys)
            add_groups(expected, reference)
            batches.append(columns)
        from specaccept_cli.summary.evaluate import Evaluated

        total = add_up([Evaluated(Summary(), 0, groups) for groups in batches], group_by="key")
        folded = sum(batches[1:], batches[0]) if batches else Groups.of({})
    finally:
        group_columns.COMPACT_AT = original
    assert total.groups is not None
    assert list(total.groups) == list(expected)  # keys in order of first appearance
    assert dict(total.groups.items()) == expected
    assert dict(folded.items()) == expected


def test_no_summary_is_made_per_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 distinct ids: the state is a few arrays; Summaries are made per batch, not per group."""
    rows = [{"id": f"request-{index}", "p": [0.9, 0.5], "q": [0.6, 0.6], "r": [0.5, 0.7]} for index in range(20_000)]
    path = write_jsonl(tmp_path / "ids.jsonl", rows)
    made = 0
    post_init = Summary.__post_init__

    def counting(self: Summary) -> None:
        nonlocal made
        made += 1
        post_init(self)

    monkeypatch.setattr(Summary, "__post_init__", counting)
    summary = summarise([str(path)], FieldSpec(extras=("id",)), Plan(group_by="id"))
    assert made < 500
    assert summary.groups is not None and len(summary.groups) == 20_000
    assert summary.groups["request-17"].runs == 1 and summary.groups["request-17"].accepted_tokens == 2


def test_extras_the_columns_do_not_hold_are_kept_per_group() -> None:
    """A Summary field the columns know nothing of (a tally kept per group) survives columns and adding."""
    plain = Summary(counts=np.array([[0, 0], [3, 4]], dtype=np.int64), passing_tokens=5, sampled_tokens=7)
    odd = Summary(counts=np.array([[2]], dtype=np.int64), skipped_rows=3, errors=())
    groups = Groups.of({"plain": plain, "odd": odd})
    assert set(groups.extras) == {"odd"}
    assert groups["plain"] == plain and groups["odd"] == odd
    doubled = groups + groups
    assert doubled["odd"].skipped_rows == 6 and doubled["plain"] == plain + plain


def test_groups_cross_a_process_boundary_as_arrays() -> None:
    groups, reference = _batch_groups(3, 500, 50)
    assert "key-1" in groups and "index" in vars(groups.columns)  # the lookup is built...
    copied = pickle.loads(pickle.dumps(groups))
    assert vars(copied.columns) == {}  # ...and not sent
    assert dict(copied.items()) == reference
    assert repr(copied).startswith("Groups(50 groups: 'key-")


def test_the_largest_groups_and_the_rest_add_up_to_the_whole() -> None:
    groups, reference = _batch_groups(5, 2000, 300)
    whole = sum(reference.values(), Summary())
    summary = Summary(counts=whole.counts, group_by="key", groups=groups)
    shown, other = shown_groups(summary, 10)
    by_size = sorted(reference.items(), key=lambda item: (-item[1].runs, item[0]))
    assert shown == by_size[:10]
    assert other is not None and other[0] == len(reference) - 10
    assert sum((group for _, group in shown), other[1]) == whole
    everything, nothing = shown_groups(summary, 0)
    assert nothing is None and everything == by_size
    assert state.Groups.of(groups) is groups


def _ids_log(tmp_path: Path) -> Path:
    rows = [{"id": index % 7, "p": [0.9, 0.5], "q": [0.6, 0.6], "r": [0.1 * (index % 9), 0.7]} for index in range(700)]
    rows += [{"id": f"rare-{index}", "p": [0.5], "q": [0.6], "r": [0.3]} for index in range(5)]
    return write_jsonl(tmp_path / "ids.jsonl", rows)


def test_max_groups_writes_the_largest_and_the_rest_as_other(tmp_path: Path) -> None:
    path = _ids_log(tmp_path)
    data = orjson.loads(invoke("audit", str(path), "--group-by", "id", "--max-groups", "3", "-o", "json").stdout)
    assert list(data["groups"]) == ["0", "1", "2"]  # 100 runs each; ties by key
    assert data["groups_total"] == 12
    assert data["other_groups"]["runs"] == 705 - 300
    assert list(data)[-2:] == ["provenance", "state"]
    full = orjson.loads(invoke("audit", str(path), "--group-by", "id", "--max-groups", "0", "-o", "json").stdout)
    assert len(full["groups"]) == 12 and "other_groups" not in full
    assert sum(group["runs"] for group in full["groups"].values()) == 705
    default = orjson.loads(invoke("audit", str(path), "--group-by", "id", "-o", "json").stdout)
    assert default["groups"] == full["groups"]  # fewer than the default 1,000: all of them
    table = invoke("audit", str(path), "--group-by", "id", "--max-groups", "3", "--max-rows", "0").stdout
    other_row = next(line for line in table.splitlines() if "other (9 groups)" in line)
    assert other_row.split("│")[2].strip() == "405"  # its runs


def test_merge_refuses_summaries_that_hold_only_their_largest_groups(tmp_path: Path) -> None:
    path = _ids_log(tmp_path)
    cut, whole = tmp_path / "cut.json", tmp_path / "whole.json"
    invoke("audit", str(path), "--group-by", "id", "--max-groups", "3", "--summary-out", str(cut), "-o", "csv")
    result = invoke("merge", str(cut))
    assert result.exit_code == 2
    assert f"{cut}: holds only the 3 largest of its 12 groups (--max-groups)" in result.stderr
    invoke("audit", str(path), "--group-by", "id", "--max-groups", "0", "--summary-out", str(whole), "-o", "csv")
    assert invoke("merge", str(whole)).exit_code == 0
    assert invoke("diff", str(whole), str(cut)).exit_code == 0  # a comparison needs only the whole


def test_when_every_group_ties_the_cut_goes_by_key() -> None:
    """A request id per run: every group has one run, and the shown ones are the first keys as text."""
    one_run = Summary(counts=np.array([[0, 0], [1, 0]], dtype=np.int64))
    keys = [f"id-{value}" for value in (7, 3, 11, 1, 5, 2, 10)]
    groups = Groups.of(dict.fromkeys(keys, one_run) | {"big": one_run + one_run})
    assert [key for key, _ in groups.largest(4)] == ["big", "id-1", "id-10", "id-11"]
    assert [key for key, _ in groups.largest(0)] == ["big", *sorted(keys)]
