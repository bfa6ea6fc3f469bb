"""Per-request payloads on a Dask cluster: each file read whole by one task, the bytes of one process."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests import payloads as sim
from tests.helpers import invoke


def test_payloads_on_the_cluster_print_the_bytes_of_one_process(cluster: str, tmp_path: Path) -> None:
    batch = sim.requests(41, count=40, spread=0.6)
    paths = []
    for index in range(3):
        path = tmp_path / f"responses-{index}.jsonl"
        path.write_bytes(sim.jsonl([sim.vllm_response(r) for r in batch[index::3]]))
        paths.append(str(path))
    alone = invoke("audit", *paths, "-o", "json")
    spread = invoke("audit", *paths, "-o", "json", "--scheduler", cluster)
    assert alone.exit_code == spread.exit_code == 0, alone.stderr + spread.stderr
    assert orjson.loads(alone.stdout)["clusters"] == 40
    assert spread.stdout == alone.stdout
