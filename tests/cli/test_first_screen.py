"""The first screen: the answer first, numbers never cut, gates never look equal, names that say what they are."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.helpers import invoke, invoke_env, write_jsonl

KEPT = {"p": [0.9], "q": [0.5], "r": [0.1]}  # one token, kept
REJECTED = {"p": [0.1], "q": [0.5], "r": [0.9]}  # one token, rejected


@pytest.fixture(scope="module")
def near_gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alpha = 3009 / 5998 = 0.5016672..., which reads 0.5017 at four decimals."""
    path = tmp_path_factory.mktemp("gate") / "near.jsonl"
    return write_jsonl(path, [KEPT] * 3009 + [REJECTED] * 2989)


def test_a_failed_gate_never_reads_equal_to_its_threshold(near_gate: Path) -> None:
    result = invoke("audit", str(near_gate), "--min-alpha", "0.5017")
    assert result.exit_code == 1
    assert re.search(r"--min-alpha\s*│\s*0\.5017\s*│\s*0\.50167\s*│\s*failed", result.stdout), result.stdout
    assert "gate failed: alpha = 0.50167 is below --min-alpha 0.5017" in result.stderr
    markdown = invoke("audit", str(near_gate), "--min-alpha", "0.5017", "-o", "markdown").stdout
    assert "| --min-alpha | 0.5017 | 0.50167 | failed |" in markdown
    passed = invoke("audit", str(near_gate), "--min-alpha", "0.5")
    assert passed.exit_code == 0
    assert re.search(r"--min-alpha\s*│\s*0\.5\s*│\s*0\.5017\s*│\s*passed", passed.stdout)  # four decimals suffice


def skewed_sampler_log(path: Path, runs: int = 3000, seed: int = 3) -> Path:
    """r = u^1.3 instead of u: the sampler accepts too often; the i.i.d. model still fits such a log."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(runs):
        k = int(rng.integers(1, 6))
        q = rng.uniform(0.2, 1.0, k)
        p = np.clip(q * rng.uniform(0.5, 1.2, k), 0, 1)
        r = rng.uniform(0, 1, k) ** 1.3
        rows.append({"p": p.tolist(), "q": q.tolist(), "r": r.tolist()})
    return write_jsonl(path, rows)


def test_sampler_tests_show_by_default_and_gate_only_when_asked(tmp_path: Path) -> None:
    path = skewed_sampler_log(tmp_path / "skewed.jsonl")
    result = invoke("audit", str(path))
    assert result.exit_code == 0, result.stderr  # shown, not gated
    assert "Sampler health" in result.stdout
    assert re.search(r"r uniformity \(KS D\).*fails at 0\.001", result.stdout)
    markdown = invoke("audit", str(path), "-o", "markdown").stdout
    assert "### Sampler health" in markdown and "fails at 0.001" in markdown
    assert "sampler" not in orjson.loads(invoke("audit", str(path), "-o", "json").stdout)["state"]
    gated = invoke("audit", str(path), "--check-sampler")
    assert gated.exit_code == 1 and "sampler r uniformity" in gated.stderr
    greedy = write_jsonl(tmp_path / "greedy.jsonl", [{"d": [1, 2], "t": [1, 3]}])
    no_r = invoke("audit", str(greedy), "--draft-tokens-field", "d", "--target-tokens-field", "t")
    assert no_r.exit_code == 0 and "Sampler health" not in no_r.stdout  # no r logged: nothing to test


def test_numeric_groups_sort_by_value(tmp_path: Path) -> None:
    rows = [{**KEPT, "shard": shard} for shard in (0, 1, 10, 11, 2, 2, 2, 3)] + [KEPT]  # the last has no shard
    path = write_jsonl(tmp_path / "shards.jsonl", rows)
    table = invoke_env({"COLUMNS": "160"}, "audit", str(path), "--group-by", "shard").stdout
    keys = re.findall(r"^│ (\S+)\s+│", table.split("By shard")[1], flags=re.MULTILINE)
    assert keys == ["0", "1", "2", "3", "10", "11", "null"]
    words = write_jsonl(tmp_path / "words.jsonl", [{**KEPT, "m": m} for m in ("b", "a", "a")])
    table = invoke_env({"COLUMNS": "160"}, "audit", str(words), "--group-by", "m").stdout
    assert re.findall(r"^│ (\S+)\s+│", table.split("By m")[1], flags=re.MULTILINE) == ["a", "b"]  # largest first
