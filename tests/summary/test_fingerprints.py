"""Fingerprints of the acceptance mode: each found where it is, and none in a seeded study of ordinary logs."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.pipeline.payloads import request_part
from specaccept_cli.read.payloads.record import RequestRecord
from specaccept_cli.simulate import Requests, simulate
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.files import summary_from_object, summary_object
from specaccept_cli.summary.fingerprints import GREEDY, LOSSY, SYNTHETIC, fingerprints
from specaccept_cli.summary.state import Summary
from tests import payloads as sim
from tests.helpers import invoke, jsonl_bytes


def summary_of(batch: list[sim.Request]) -> Summary:
    """The summary the payload path builds, one request at a time (no files: the study runs many)."""

    def fail(error: InputError) -> None:
        raise error

    total = Summary()
    for line, request in enumerate(batch, start=1):
        record = RequestRecord(
            engine="vllm",
            fmt="vllm-metrics",
            request_id=request.request_id,
            k=request.k,
            per_step_accepted=request.accepted,
            per_step_drafted=request.drafted,
        ).check()
        part = request_part(record, "study", line, Plan(), fail)
        assert part is not None
        total = total + part.summary
    return total


def synthetic_by_length(seed: int, length: float, count: int = 60, k: int = 4) -> list[sim.Request]:
    """vLLM's synthetic sampler with a length target: the minimum-variance schedule of unconditional rates."""
    rng = np.random.default_rng(seed)
    full = int(length - 1)
    fraction = length - 1 - full
    out = []
    for index in range(count):
        steps = int(rng.integers(5, 60))
        accepted = np.minimum(full + (rng.random(steps) < fraction), k)
        out.append(sim.Request(f"s-{seed}-{index}", k, (k,) * steps, tuple(accepted.tolist())))
    return out


def synthetic_by_rates(seed: int, rates: list[float], count: int = 80) -> list[sim.Request]:
    """Explicit unconditional rates: P(a >= i) = rates[i - 1] for every run of every request alike."""
    rng = np.random.default_rng(seed)
    k = len(rates)
    out = []
    for index in range(count):
        steps = int(rng.integers(20, 60))
        draws = rng.random(steps)
        accepted = (draws[:, None] < np.array(rates)[None, :]).sum(axis=1)
        out.append(sim.Request(f"r-{seed}-{index}", k, (k,) * steps, tuple(accepted.tolist())))
    return out


@pytest.mark.parametrize("length", [2.3, 3.0, 3.71, 1.6])
def test_a_synthetic_length_target_is_found(length: float) -> None:
    (found,) = fingerprints(summary_of(synthetic_by_length(3, length)))
    assert found.code == SYNTHETIC and "minimum-variance schedule" in found.evidence


def test_explicit_synthetic_rates_are_found_by_the_absence_of_variation_between_requests() -> None:
    detected = sum(
        any(
            item.code == SYNTHETIC for item in fingerprints(summary_of(synthetic_by_rates(seed, [0.8, 0.6, 0.45, 0.3])))
        )
        for seed in range(40)
    )
    assert detected >= 34  # p > 0.05 on identical requests: 95% expected


def test_no_fingerprint_on_ordinary_request_clustered_logs_in_a_seeded_study() -> None:
    """200 logs of requests whose difficulty varies as real prompts' does, some with ragged drafts: no alarm."""
    alarms = []
    for seed in range(200):
        batch = sim.requests(1000 + seed, count=60, spread=2.0, ragged=0.3 if seed % 2 else 0.0)
        found = fingerprints(summary_of(batch))
        if found:
            alarms.append((seed, found))
    assert alarms == []


def test_no_fingerprint_on_ordinary_logged_runs(tmp_path: Path) -> None:
    """Simulated (p, q, r) logs, with and without request clusters: sampled drafts, the exact rule."""
    for seed in range(20):
        rows = []
        requests = Requests(runs=(10, 60), alpha_beta=(14.0, 6.0))
        for chunk in simulate(3000, 0.7, 2, 6, seed, requests=requests):
            assert chunk.request is not None
            p, q, r = chunk.p.tolist(), chunk.q.tolist(), chunk.r.tolist()
            for index, (start, end) in enumerate(pairwise(chunk.offsets.tolist())):
                rows.append(
                    {"p": p[start:end], "q": q[start:end], "r": r[start:end], "request_id": int(chunk.request[index])}
                )
        path = tmp_path / f"log-{seed}.jsonl"
        path.write_bytes(jsonl_bytes(rows))
        for options in ((), ("--cluster-field", "request_id")):
            result = invoke("audit", str(path), "-o", "json", *options)
            assert result.exit_code == 0, result.stderr
            assert orjson.loads(result.stdout)["fingerprints"] == [], (seed, options)


def test_a_one_hot_draft_is_greedy_drafting(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(300):
        k = int(rng.integers(1, 6))
        rows.append({"p": rng.random(k).tolist(), "q": [1.0] * k, "r": rng.random(k).tolist()})
    path = tmp_path / "greedy.jsonl"
    path.write_bytes(jsonl_bytes(rows))
    result = invoke("audit", str(path), "-o", "json")
    (found,) = orjson.loads(result.stdout)["fingerprints"]
    assert found["code"] == GREEDY and "reduces to r <= p" in found["evidence"]
    table = invoke("audit", str(path))
    assert GREEDY in table.stdout  # the verdict names it with its evidence


def reported_rows(seed: int, server: str) -> list[dict[str, object]]:
    """Runs with the count a server reported: the exact rule, a lossy rule, or one counting the bonus token."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for _ in range(400):
        k = int(rng.integers(2, 6))
        q = rng.uniform(0.2, 0.9, k)
        p = np.minimum(q * rng.uniform(0.3, 1.2, k), 1.0)
        r = rng.random(k)
        ratio = np.minimum(1.0, p / q)
        relaxed = np.minimum(1.0, 1.6 * p / q) if server == "lossy" else ratio
        kept = int(np.cumprod(r <= relaxed).sum())
        exact = int(np.cumprod(r <= ratio).sum())
        reported = kept if server == "lossy" else exact + 1 if server == "bonus" else exact
        rows.append({"p": p.tolist(), "q": q.tolist(), "r": r.tolist(), "reported": reported})
    return rows


@pytest.mark.parametrize(("server", "expected"), [("exact", []), ("bonus", []), ("lossy", [LOSSY])])
def test_lossy_acceptance_is_kept_tokens_no_counting_bug_explains(tmp_path: Path, server: str, expected) -> None:
    path = tmp_path / f"{server}.jsonl"
    path.write_bytes(jsonl_bytes(reported_rows(9, server)))
    result = invoke("audit", str(path), "-o", "json", "--reported-field", "reported")
    assert result.exit_code in (0, 1), result.stderr
    assert [item["code"] for item in orjson.loads(result.stdout)["fingerprints"]] == expected


def test_fingerprints_survive_a_saved_summary_and_a_merge() -> None:
    synthetic = summary_of(synthetic_by_length(8, 2.5))
    again = summary_from_object(orjson.loads(orjson.dumps(summary_object(synthetic))))
    assert estimate(again).fingerprints == estimate(synthetic).fingerprints != ()
    halves = summary_of(synthetic_by_length(8, 2.5)[:30]) + summary_of(synthetic_by_length(8, 2.5)[30:])
    assert estimate(halves).fingerprints == estimate(synthetic).fingerprints
