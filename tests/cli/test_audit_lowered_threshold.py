"""Reported counts that follow tree-target-cdf with a threshold below 1 (SGLang's speculative_accept_threshold_acc
or _single lowered, one child per level: `coin <= p / threshold_acc or p >= threshold_single`) are named so, with
the interval of threshold values that reproduce every count and the runs only a lowered threshold explains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.helpers import invoke


def server_rows(seed: int, runs: int, acc: float = 1.0, single: float = 1.0, count_passes: bool = False) -> bytes:
    """(p, q, r) rows and the count a server reported: SGLang's test at the given thresholds (r is the coin), or
    with `count_passes` the seed's rule counting every pass after a rejection too (vLLM v0's counter)."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(runs):
        k = int(rng.integers(1, 7))
        q = rng.uniform(0.2, 0.95, k)
        p = np.minimum(q * rng.uniform(0.3, 1.3, k), 1.0)
        r = rng.random(k)
        if count_passes:
            reported = int((r <= np.minimum(1.0, p / q)).sum())
        else:
            kept = (r <= np.minimum(1.0, p / acc)) | (p >= single)
            reported = int(np.cumprod(kept).sum())
        lines.append(orjson.dumps({"p": p.tolist(), "q": q.tolist(), "r": r.tolist(), "reported": reported}))
    return b"\n".join(lines) + b"\n"


def audit(*args: str) -> dict[str, Any]:
    result = invoke("audit", *args, "--reported-field", "reported", "-o", "json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = orjson.loads(result.stdout)
    return data


@pytest.mark.parametrize(("threshold", "value"), [("threshold_acc", 0.7), ("threshold_single", 0.6)])
def test_a_lowered_threshold_is_named_with_the_values_every_count_allows(
    tmp_path: Path, threshold: str, value: float
) -> None:
    path = tmp_path / "server.jsonl"
    path.write_bytes(server_rows(1, 3000, **{threshold.removeprefix("threshold_"): value}))
    data = audit(str(path))
    named = data["server_rule"]
    assert named["rule"] == "tree-target-cdf" and named["verdict"] == "lossy"
    assert named["explains"] == data["mismatches"] > 0 and named["alone"] > 0
    low, high = named["thresholds"][threshold]
    assert low < value <= high < 1.0 and high - low < 0.01
    # The evidence: runs the seed's rule does not reproduce that kept a token with r above p, which r <= p
    # (the thresholds at 1, greedy-draft) rejects.
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert named["evidence"]
    for item in named["evidence"]:
        row = rows[item["line"] - 1]
        p, q, r = (np.array(row[name]) for name in "pqr")
        assert int(np.cumprod(r <= np.minimum(1.0, p / q)).sum()) != row["reported"]
        assert any(r[j] > p[j] for j in range(row["reported"]))


def test_counts_no_single_threshold_explains_are_not_named_a_lowered_threshold(tmp_path: Path) -> None:
    """A counter that adds passes after a rejection fits a lowered threshold run by run, but no one value fits
    them all: it stays named for what it is."""
    path = tmp_path / "counter.jsonl"
    path.write_bytes(server_rows(2, 3000, count_passes=True))
    data = audit(str(path))
    assert data["server_rule"]["rule"] == "no-prefix-break"


def test_merged_halves_and_parallel_reads_name_the_same_interval(tmp_path: Path) -> None:
    whole = server_rows(3, 2000, acc=0.75)
    lines = whole.splitlines(keepends=True)
    (tmp_path / "all.jsonl").write_bytes(whole)
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:900]))
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[900:]))
    expected = audit(str(tmp_path / "all.jsonl"))["server_rule"]
    assert expected["rule"] == "tree-target-cdf"
    assert audit(str(tmp_path / "all.jsonl"), "--jobs", "2")["server_rule"] == expected
    for half in ("a", "b"):
        done = invoke(
            "audit",
            str(tmp_path / f"{half}.jsonl"),
            "--reported-field",
            "reported",
            "--summary-out",
            str(tmp_path / f"{half}.json"),
        )
        assert done.exit_code == 0, done.stderr
    merged = invoke("merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert merged.exit_code == 0, merged.stderr
    named = orjson.loads(merged.stdout)["server_rule"]
    assert named["thresholds"] == expected["thresholds"] and named["explains"] == expected["explains"]


def test_a_summary_saved_before_the_thresholds_were_kept_names_no_lowered_threshold(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    path.write_bytes(server_rows(4, 1500, acc=0.7))
    saved = tmp_path / "saved.json"
    assert invoke("audit", str(path), "--reported-field", "reported", "--summary-out", str(saved)).exit_code == 0
    data = orjson.loads(saved.read_bytes())
    for key in ("thresholds", "lowered_only", "lowered_lines"):
        del data["state"]["reported"][key]
    saved.write_bytes(orjson.dumps(data))
    merged = invoke("merge", str(saved))
    assert merged.exit_code == 0, merged.stderr
    assert orjson.loads(merged.stdout)["server_rule"]["rule"] != "tree-target-cdf"  # unknown, so not claimed


def test_the_table_says_every_count_is_reproduced_and_by_which_values(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    path.write_bytes(server_rows(5, 2000, acc=0.7))
    result = invoke("audit", str(path), "--reported-field", "reported", "--max-mismatches", "0")
    assert result.exit_code == 1
    text = " ".join(result.stdout.split())
    assert "reproduces every count" in text and "threshold_acc in (" in text
    assert "verdict on tree-target-cdf: a loss of exactness" in " ".join(result.stderr.split())
