"""`-o json` against goldens captured before the verdict was computed in one place.

Every key the output had then keeps its value (the bytes of its JSON; a float to 12 significant digits,
never its last bit); keys may only be added
(`verdict`). Provenance's `created` and `specaccept` (the time and the version) are dropped: they change
with every run. `SPECACCEPT_WRITE_GOLDEN=1` rewrites the files (only when the output is meant to change).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden" / "json"

PLAIN = "serving-logs.jsonl.gz"
SERVER = "server-reported.jsonl.gz"
CASES: dict[str, list[str]] = {
    "plain": [PLAIN],
    "parquet": ["serving-logs.parquet"],
    "vllm-log": ["vllm-server.log"],
    "vllm-log-drift": ["vllm-server.log", "--check-drift"],
    "server-sampler": [SERVER, "--reported-field", "reported", "--check-sampler"],
    "server-max-mismatches": [SERVER, "--reported-field", "reported", "--max-mismatches", "0"],
    "gates": [PLAIN, "--min-alpha", "0.9", "--min-tokens-per-pass", "1.5", "--min-acceptance-rate", "0.1"],
    "baseline": [PLAIN, "--baseline", "{baseline}"],
    "baseline-clustered": [SERVER, "--cluster-field", "request_id", "--baseline", "{baseline}", "--max-drop", "0.1"],
    "windows-drift": [PLAIN, "--window", "500", "--check-drift"],
    "groups-cost": [SERVER, "--group-by", "reported", "--cost-ratio", "0.05"],
}
VOLATILE = ("created", "specaccept")


def run_json(arguments: list[str], baseline: Path) -> tuple[int, dict[str, Any]]:
    argv = [item.format(baseline=baseline) for item in arguments]
    done = subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", *argv, "-o", "json", "-q"],
        cwd=EXAMPLES,
        capture_output=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr.decode()
    data = json.loads(done.stdout)
    for name in VOLATILE:
        data.get("provenance", {}).pop(name, None)
    return done.returncode, data


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A baseline summary of the other example log (the same one every run: the comparison is pinned)."""
    path = tmp_path_factory.mktemp("baseline") / "baseline.json"
    subprocess.run(
        [sys.executable, "-m", "specaccept_cli", "audit", SERVER, "-q", "--summary-out", str(path)],
        cwd=EXAMPLES,
        capture_output=True,
        check=True,
    )
    return path


def assert_only_added(golden: Any, current: Any, where: str = "$", added: bool = True) -> None:
    """Every key of `golden` is in `current` with the same JSON bytes; `current` may hold more keys (`added`),
    but not inside a list, whose elements keep their keys as they were."""
    if isinstance(golden, dict):
        assert isinstance(current, dict), where
        for key, value in golden.items():
            assert key in current, f"{where}.{key} is gone"
            assert_only_added(value, current[key], f"{where}.{key}", added)
        assert [key for key in current if key in golden] == list(golden), f"{where}: keys reordered"
        assert added or list(current) == list(golden), f"{where}: keys added inside a list"
    elif isinstance(golden, list):
        assert isinstance(current, list) and len(current) == len(golden), f"{where} changed: {golden!r} -> {current!r}"
        for index, (old, new) in enumerate(zip(golden, current)):
            assert_only_added(old, new, f"{where}[{index}]", added=False)
    elif isinstance(golden, float) and isinstance(current, float):
        # A float to 12 significant digits, not its last bit: a sum taken in another order may move that
        assert math.isclose(current, golden, rel_tol=1e-12, abs_tol=1e-300), (
            f"{where} changed: {golden!r} -> {current!r}"
        )
    else:
        assert json.dumps(current) == json.dumps(golden), f"{where} changed: {golden!r} -> {current!r}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_keeps_every_key_of_the_golden(case: str, baseline: Path) -> None:
    status, data = run_json(CASES[case], baseline)
    path = GOLDEN / f"{case}.json.gz"
    if os.environ.get("SPECACCEPT_WRITE_GOLDEN") == "1":
        payload = json.dumps({"exit": status, "output": data}, indent=1).encode()
        path.write_bytes(gzip.compress(payload, mtime=0))
    golden = json.loads(gzip.decompress(path.read_bytes()))
    assert status == golden["exit"]
    assert_only_added(golden["output"], data)


def test_the_goldens_are_small() -> None:
    assert sum(path.stat().st_size for path in GOLDEN.iterdir()) < 200_000
