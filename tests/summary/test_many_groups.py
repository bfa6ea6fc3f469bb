"""A summary of every group (`--max-groups 0`) is one the tool reads back: `merge`, `diff` and `--baseline`
take what `audit` wrote, however many groups it holds. The bound on JSON values scales with the file's
bytes (here made small, so a few thousand groups stand for the 140,000 of `benchmarks/bench_groups.py`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from specaccept_cli.summary import files
from tests.helpers import invoke

GROUPS = 2_000


def _log(path: Path, first: int, stride: int) -> Path:
    with path.open("wb") as out:
        for index in range(first, 2 * GROUPS, stride):
            k = 1 + index % 4
            row = {"p": [0.55] * k, "q": [0.6] * k, "r": [(index * 7 + j * 13) % 10 / 10 for j in range(k)]}
            out.write(orjson.dumps({**row, "g": f"req-{index % GROUPS:05d}"}) + b"\n")
    return path


def test_a_summary_of_every_group_is_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 2,000 groups hold about 200,000 JSON values: over a bound of 50,000, as 140,000 groups were over 10 million.
    monkeypatch.setattr(files, "MAX_SUMMARY_VALUES", 50_000)
    log = _log(tmp_path / "log.jsonl", 0, 1)
    grouped = ("--group-by", "g", "--max-groups", "0")
    whole = tmp_path / "whole.json"
    written = invoke("audit", str(log), *grouped, "--summary-out", str(whole), "-o", "markdown")
    assert written.exit_code == 0, written.stderr
    raw = whole.read_bytes()
    assert raw.count(b",") > 50_000  # more values than the fixed bound allowed
    same = invoke("diff", str(whole), str(whole), "-o", "json")
    assert same.exit_code == 0, same.stderr
    assert orjson.loads(same.stdout)["metrics"]  # a comparison was made
    data = orjson.loads(raw)
    assert len(data["groups"]) == GROUPS
    group_lines = [line for line in raw.splitlines() if line.startswith(b'    "req-')]
    assert len(group_lines) == GROUPS  # each group's object on a line of its own
    assert orjson.loads(group_lines[0].split(b": ", 1)[1].rstrip(b",")) == data["groups"]["req-00000"]

    baseline = invoke("audit", str(log), *grouped, "--baseline", str(whole), "-o", "markdown")
    assert baseline.exit_code == 0, baseline.stderr

    shards = []
    for first in (0, 1):
        shard = _log(tmp_path / f"shard{first}.jsonl", first, 2)
        saved = tmp_path / f"shard{first}.json"
        result = invoke("audit", str(shard), *grouped, "--summary-out", str(saved), "-o", "markdown")
        assert result.exit_code == 0, result.stderr
        shards.append(str(saved))
    merged = invoke("merge", *shards)
    assert merged.exit_code == 0, merged.stderr
    merged_groups = orjson.loads(merged.stdout)["groups"]
    assert {key: group["state"] for key, group in merged_groups.items()} == {
        key: group["state"] for key, group in data["groups"].items()
    }


def test_a_file_denser_in_values_than_a_summary_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "MAX_SUMMARY_VALUES", 1_000)
    dense = tmp_path / "dense.json"
    dense.write_bytes(b"[" + b"0," * 5_000 + b"0]")  # 2 bytes a value: no summary is so dense
    result = invoke("diff", str(dense), str(dense))
    assert result.exit_code == 2
    assert "holds more than 1,000 JSON values: more than a summary holds" in result.stderr
    sparse = tmp_path / "sparse.json"
    sparse.write_bytes(b"[" + b"0,            " * 5_000 + b"0]")  # 14 bytes a value: counted, then read
    result = invoke("diff", str(sparse), str(sparse))
    assert result.exit_code == 2 and "not a specaccept.summary/2 object (a JSON list)" in result.stderr
