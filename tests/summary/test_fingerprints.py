"""Fingerprints of the acceptance mode: each found where it is, and none in a seeded study of ordinary logs."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.requests import RequestRecord
from specaccept_cli.simulate import Requests, simulate
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.evaluate import Plan, evaluate_batch
from specaccept_cli.summary.files import summary_from_object, summary_object
from specaccept_cli.summary.fingerprints import GREEDY, HOMOGENEOUS_P, LOSSY, SYNTHETIC, fingerprints, spread_power
from specaccept_cli.summary.requests import request_part
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


def test_one_run_requests_never_show_the_synthetic_fingerprint() -> None:
    """Requests of one run each hold no between-request evidence: the pooled run variance already holds the
    spread between them, so the dispersion test has no power and its silence is not read as synthetic rates
    (the server-reported example, 2,000 one-run requests, showed it before)."""
    result = invoke("audit", "examples/server-reported.jsonl.gz", "-o", "json")
    assert result.exit_code in (0, 1), result.stderr
    assert orjson.loads(result.stdout)["fingerprints"] == []
    summary = simulated_requests(Requests((1, 1)), runs=5000)  # identical requests, one run each
    assert summary.clusters is not None and len(summary.clusters.sums) == 5000
    assert spread_power(summary, np.ones(5000), 1.0) == pytest.approx(HOMOGENEOUS_P, abs=0.005)  # the test's size
    assert fingerprints(summary) == ()
    # ... where requests of 20 runs each, just as identical, are evidence: the test would have seen a spread
    twenty = simulated_requests(Requests((20, 20)), runs=5000)
    assert [item.code for item in fingerprints(twenty)] in ([SYNTHETIC], [])  # p > 0.01 in 99% of seeds
    assert spread_power(twenty, np.full(250, 20.0), 1.0) > 0.95


def simulated_requests(requests: Requests, runs: int, seed: int = 4) -> Summary:
    """A simulated (p, q, r) log clustered by request, through the per-batch stage."""
    total = Summary()
    for chunk in simulate(runs, 0.7, 2, 6, seed, requests=requests):
        assert chunk.request is not None
        count = chunk.offsets.shape[0] - 1
        extras: dict[str, list[object]] = {"request_id": chunk.request.tolist()}
        batch = RunBatch("sim", np.arange(1, count + 1), chunk.offsets, chunk.p, chunk.q, chunk.r, extras)
        evaluated, errors = evaluate_batch(batch, Plan(cluster_field="request_id"), keep_runs=False)
        assert not errors
        total = total + evaluated.summary
    return total


def test_the_synthetic_evidence_says_what_was_tested_and_its_power() -> None:
    found = [
        item
        for seed in range(10)
        for item in fingerprints(summary_of(synthetic_by_rates(seed, [0.8, 0.6, 0.45, 0.3])))
        if item.code == SYNTHETIC
    ]
    assert found and all("the test had power" in item.evidence and "SD 0.05" in item.evidence for item in found)


def test_too_few_runs_per_request_give_no_power_and_no_fingerprint() -> None:
    """Identical requests of 2-3 runs: the dispersion test would not have seen a real spread, so it stays silent."""
    rng = np.random.default_rng(2)
    batch = []
    for index in range(1500):
        steps = int(rng.integers(2, 4))
        accepted = (rng.random((steps, 4)) < np.array([0.8, 0.6, 0.45, 0.3])).sum(axis=1)
        batch.append(sim.Request(f"few-{index}", 4, (4,) * steps, tuple(accepted.tolist())))
    summary = summary_of(batch)
    assert summary.runs >= 3000
    assert fingerprints(summary) == ()
