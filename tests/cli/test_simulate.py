"""`simulate`: honest, reproducible, every output format, and its usage errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from specaccept_cli.summary.formulas import expected_tokens_per_pass
from tests.helpers import (
    invoke,
    without_provenance,
)


def test_simulate_is_honest_and_reproducible(tmp_path: Path) -> None:
    path = tmp_path / "sim.jsonl"
    assert (
        invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "4", "--seed", "3", "-o", str(path)).exit_code
        == 0
    )
    again = invoke("simulate", "--runs", "20000", "--alpha", "0.8", "--k", "4", "--seed", "3").stdout_bytes
    assert path.read_bytes() == again
    summary = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert summary["runs"] == 20000 and summary["drafted_tokens"] == 80000
    assert abs(summary["alpha"] - 0.8) < 0.01  # sd of alpha-hat here is about 0.003
    assert abs(summary["tokens_per_pass"] - expected_tokens_per_pass(0.8, 4)) < 0.03


def test_simulate_parquet_and_gzip_and_k_range(tmp_path: Path) -> None:
    parquet = tmp_path / "sim.parquet"
    gz = tmp_path / "sim.jsonl.gz"
    for path in (parquet, gz):
        result = invoke("simulate", "--runs", "3000", "--alpha", "0.6", "--k", "1-8", "--seed", "5", "-o", str(path))
        assert result.exit_code == 0, result.stderr
    a = orjson.loads(without_provenance(invoke("audit", str(parquet), "-o", "json").stdout_bytes))
    b = orjson.loads(without_provenance(invoke("audit", str(gz), "-o", "json").stdout_bytes))
    assert a == b  # same seed, same runs, whichever the format (only the files they came from differ)
    ks = {k for k, _, _ in a["state"]["joint_counts"]}
    assert ks == set(range(1, 9))


@pytest.mark.parametrize("alpha", ["0", "1"])
def test_simulate_extremes(alpha: str) -> None:
    out = invoke("simulate", "--runs", "200", "--alpha", alpha, "--k", "3", "--seed", "1").stdout
    summary = orjson.loads(invoke("audit", "-", "-o", "json", input=out).stdout)
    assert summary["accepted_tokens"] == (0 if alpha == "0" else 600)


def test_simulate_bad_k_is_a_usage_error() -> None:
    result = invoke("simulate", "--runs", "1", "--alpha", "0.5", "--k", "8-1")
    assert result.exit_code == 2
    assert "--k" in result.stderr


def test_simulate_alpha_by_position_cli(tmp_path: Path) -> None:
    out = tmp_path / "falling.jsonl"
    result = invoke(
        "simulate", "--runs", "3000", "--alpha-by-position", "1,0", "--k", "3", "--seed", "1", "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(invoke("audit", str(out), "-o", "json").stdout)
    # position 1 always passes, position 2 never: every run accepts exactly 1
    assert summary["accepted_histogram"] == {"0": 0, "1": 3000, "2": 0, "3": 0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--k", "4"], "exactly one of --alpha and --alpha-by-position"),
        (["--k", "4", "--alpha", "0.5", "--alpha-by-position", "0.5"], "exactly one"),
        (["--k", "4", "--alpha-by-position", "0.9,1.5"], "not a list of probabilities"),
        (["--k", "4", "--alpha-by-position", "x"], "not a list of probabilities"),
    ],
)
def test_simulate_alpha_by_position_errors(args: list[str], message: str) -> None:
    result = invoke("simulate", "--runs", "1", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_simulate_refuses_absurd_draft_lengths() -> None:
    assert invoke("simulate", "--runs", "1", "--alpha", "0.5", "--k", "2000").exit_code == 2


def test_simulate_o_takes_a_path_not_a_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("simulate", "--runs", "3", "--alpha", "0.8", "--k", "2", "-o", "json")
    assert result.exit_code == 2
    assert "'json' is an output format in other commands; here -o takes a path" in result.stderr
    assert not (tmp_path / "json").exists()
    assert invoke("simulate", "--runs", "3", "--alpha", "0.8", "--k", "2", "-o", "./json").exit_code == 0
    assert len((tmp_path / "json").read_bytes().splitlines()) == 3
