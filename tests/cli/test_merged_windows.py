"""What `merge` keeps byte for byte when summaries carry windows of runs (the default), as docs/ci.md states it.

Windows of time are epoch-aligned and merge exactly in any order (tests/cli/test_windows.py). Windows of runs
describe one sequence: `merge` appends each shard's windows after the previous shard's, while one audit of the
same inputs keeps counting windows across the boundary. So after a merge every key is what one audit of all the
inputs prints, but for `provenance`, and but for the windows (`windows`, `state.windows`, and `drift`, which is
computed from them) unless every shard but the last holds a whole number of windows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.helpers import invoke, simulated_rows, write_jsonl

WINDOW_KEYS = {"windows", "drift"}


def _merged_and_whole(tmp_path: Path, sizes: tuple[int, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(merge of the shards' summaries, one audit of the shards in the same order), both without provenance."""
    rows = simulated_rows(sum(sizes), seed=5)
    shards, summaries, start = [], [], 0
    for index, size in enumerate(sizes):
        shard = write_jsonl(tmp_path / f"shard-{index}.jsonl", rows[start : start + size])
        saved = tmp_path / f"shard-{index}.json"
        result = invoke("audit", str(shard), "-q", "-o", "json", "--summary-out", str(saved))
        assert result.exit_code == 0, result.stderr
        shards.append(str(shard))
        summaries.append(str(saved))
        start += size
    merged = invoke("merge", *summaries)
    whole = invoke("audit", *shards, "-q", "-o", "json")
    assert merged.exit_code == 0 and whole.exit_code == 0, merged.stderr + whole.stderr
    merged_object, whole_object = orjson.loads(merged.stdout_bytes), orjson.loads(whole.stdout_bytes)
    del merged_object["provenance"], whole_object["provenance"]
    return merged_object, whole_object


def test_merged_run_windows_are_cut_at_a_shard_boundary_inside_a_window(tmp_path: Path) -> None:
    merged, whole = _merged_and_whole(tmp_path, (300, 300))
    assert whole["windows_by"] == merged["windows_by"]
    assert whole["windows_by"]["unit"] == "runs" and whole["windows_by"]["width"] == 16
    # 300 runs are 18 windows of 16 and one of 12: the merged summary starts the second shard at run 300 ...
    assert [(w["start"], w["end"]) for w in merged["windows"][18:20]] == [(288, 300), (300, 316)]
    # ... where one audit of both files goes on counting from where the first file left off.
    assert [(w["start"], w["end"]) for w in whole["windows"][18:20]] == [(288, 304), (304, 320)]
    differ = {key for key in whole if merged.get(key) != whole[key]}
    assert differ <= WINDOW_KEYS | {"state"} and "windows" in differ
    merged_state, whole_state = dict(merged["state"]), dict(whole["state"])
    assert merged_state.pop("windows") != whole_state.pop("windows")
    assert merged_state == whole_state  # every counter but the windows' is the same
    for key in set(whole) - WINDOW_KEYS - {"state"}:  # every estimate, interval and check too
        assert merged[key] == whole[key], key


def test_merged_run_windows_are_exact_when_each_shard_but_the_last_fills_whole_windows(tmp_path: Path) -> None:
    # 256 runs are 16 windows of the merged width (16 runs): the boundary falls between two windows.
    merged, whole = _merged_and_whole(tmp_path, (256, 300))
    assert merged["windows_by"]["width"] == 16
    assert orjson.dumps(merged) == orjson.dumps(whole)  # byte for byte, windows and drift included
