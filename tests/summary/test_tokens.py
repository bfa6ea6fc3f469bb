"""Impossible or suspicious logs: the token tallies behind them, exact under merges and files, and each
warning fired where it should and nowhere on ordinary logs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.summary.evaluate import Plan, evaluate_batch
from specaccept_cli.summary.files import summary_from_object, summary_object
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.tokens import TokenTally
from tests.helpers import invoke, jsonl_bytes


def batch_of(rows: list[dict[str, list[float]]]) -> RunBatch:
    offsets = np.concatenate([[0], np.cumsum([len(row["p"]) for row in rows])]).astype(np.int64)

    def column(name: str) -> np.ndarray:
        return np.array([value for row in rows for value in row[name]], dtype=np.float64)

    return RunBatch("t", np.arange(1, len(rows) + 1), offsets, column("p"), column("q"), column("r"), {})


def summary_of(rows: list[dict[str, list[float]]]) -> Summary:
    evaluated, errors = evaluate_batch(batch_of(rows), Plan(), keep_runs=False)
    assert not errors
    return evaluated.summary


def ordinary_rows(seed: int, runs: int = 1500) -> list[dict[str, list[float]]]:
    """Runs whose p/q averages 0.95, as any real pair of models keeps under 1 (the mean-p/q check)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(runs):
        k = int(rng.integers(1, 7))
        q = rng.uniform(0.05, 1, k)
        p = np.minimum(1.0, q * rng.uniform(0, 1.9, k))
        rows.append({"p": p.tolist(), "q": q.tolist(), "r": rng.random(k).tolist()})
    return rows


def model_rows(seed: int, runs: int, vocabulary: int = 50) -> list[dict[str, list[float]]]:
    """Runs drafted as a real drafter does: per token a draft distribution q and a target p over a small
    vocabulary (the target sharper where the draft is, as distillation gives), the token drawn from q."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(runs):
        k = int(rng.integers(1, 7))
        p_of, q_of = [], []
        for _ in range(k):
            logits = rng.normal(0, 2.5, vocabulary)
            q = np.exp(logits - logits.max())
            q /= q.sum()
            target = np.exp(1.3 * logits + rng.normal(0, 1.0, vocabulary))
            target /= target.sum()
            token = rng.choice(vocabulary, p=q)
            p_of.append(float(target[token]))
            q_of.append(float(q[token]))
        rows.append({"p": p_of, "q": q_of, "r": rng.random(k).tolist()})
    return rows


probability = st.floats(0.001, 1.0, allow_nan=False)
run = st.integers(1, 5).flatmap(
    lambda k: st.fixed_dictionaries(
        {
            "p": st.lists(probability, min_size=k, max_size=k),
            "q": st.lists(probability, min_size=k, max_size=k),
            "r": st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=k, max_size=k),
        }
    )
)


@given(st.lists(run, min_size=2, max_size=30), st.data())
def test_the_tally_of_parts_merges_to_the_tally_of_the_whole(
    rows: list[dict[str, list[float]]], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(rows) - 1))
    whole = TokenTally.of_batch(batch_of(rows))
    parts = TokenTally.of_batch(batch_of(rows[:cut]))
    rest = TokenTally.of_batch(batch_of(rows[cut:]))
    assert whole is not None and parts is not None and rest is not None
    assert parts + rest == whole == rest + parts
    assert TokenTally.from_dict(orjson.loads(orjson.dumps(whole.to_dict()))) == whole
    tokens = [value for row in rows for value in row["p"]]
    assert whole.tokens == len(tokens)
    assert whole.p_at_most_q == sum(p <= q for row in rows for p, q in zip(row["p"], row["q"]))


def test_a_saved_summary_keeps_the_tally() -> None:
    summary = summary_of(ordinary_rows(1, 200))
    again = summary_from_object(orjson.loads(orjson.dumps(summary_object(summary))))
    assert again.tokens == summary.tokens is not None
    broken = summary_object(summary)
    broken["state"]["tokens"]["p_at_most_q"] = 10**9
    with pytest.raises(ValueError, match="more tokens with p <= q"):
        summary_from_object(orjson.loads(orjson.dumps(broken)))


def audit_log(tmp_path: Path, rows: list[dict[str, list[float]]], *options: str) -> list[dict[str, object]]:
    path = tmp_path / "log.jsonl"
    path.write_bytes(jsonl_bytes(rows))
    result = invoke("audit", str(path), "-o", "json", *options)
    assert result.exit_code in (0, 1), result.stderr
    return [entry for entry in orjson.loads(result.stdout)["verdict"] if entry["check"] == "log"]


def kinds(entries: list[dict[str, object]]) -> list[str]:
    return sorted(str(entry["text"]).split(":")[0] for entry in entries)


def test_no_log_warning_on_ordinary_logs(tmp_path: Path) -> None:
    for seed in range(5):
        assert audit_log(tmp_path, ordinary_rows(seed)) == []
    for example in ("examples/serving-logs.jsonl.gz", "examples/server-reported.jsonl.gz"):
        result = invoke("audit", example, "-o", "json")
        assert [entry for entry in orjson.loads(result.stdout)["verdict"] if entry["check"] == "log"] == []


def test_p_at_most_q_everywhere_warns_and_its_swap_accepts_everything(tmp_path: Path) -> None:
    rows = ordinary_rows(2)
    for row in rows:
        row["p"] = [min(p, q) for p, q in zip(row["p"], row["q"])]
    (entry,) = audit_log(tmp_path, rows)
    assert entry["status"] == "warn" and "p <= q on all" in str(entry["text"]) and "swapped" in str(entry["text"])
    accepted, mean = audit_log(tmp_path, rows, "--p-field", "q", "--q-field", "p")
    assert "every drafted token accepted" in str(accepted["text"]) and "alpha 1.0000" in str(accepted["text"])
    assert str(mean["text"]).startswith("mean p/q is")  # q/p >= 1 on every token: its mean is above the limit too


def test_a_constant_p_or_q_warns(tmp_path: Path) -> None:
    rows = ordinary_rows(3)
    for row in rows:
        row["q"] = [0.5] * len(row["q"])
    (entry,) = audit_log(tmp_path, rows)
    assert str(entry["text"]).startswith("q is 0.5 on all") and "a constant" in str(entry["text"])
    for row in rows:
        row["p"] = [0.25] * len(row["p"])
    assert len(audit_log(tmp_path, rows)) == 2  # p and q constant (p <= q everywhere is then the constants' doing)


def test_r_identical_across_runs_warns(tmp_path: Path) -> None:
    rows = ordinary_rows(4)
    fixed = np.random.default_rng(9).random(6).tolist()
    for row in rows:
        row["r"] = fixed[: len(row["r"])]
    (entry,) = audit_log(tmp_path, rows)
    assert "r is identical across runs" in str(entry["text"]) and "6 draft positions" in str(entry["text"])
    rows[0]["r"] = [0.123, *rows[0]["r"][1:]]  # one run drew its own: no longer every run alike
    assert audit_log(tmp_path, rows) == []


def test_a_merge_with_a_summary_that_lacks_the_tally_says_nothing_about_every_token() -> None:
    from specaccept_cli.verdict.conclude import conclude

    rows = ordinary_rows(5)
    for row in rows:
        row["p"] = [min(p, q) for p, q in zip(row["p"], row["q"])]
    summary = summary_of(rows)
    assert [entry.check for entry in conclude(summary).verdict].count("log") == 1
    older = summary_of(ordinary_rows(6))
    from msgspec.structs import replace

    merged = summary + replace(older, tokens=None)  # a file from before the tally
    assert [entry.check for entry in conclude(merged).verdict].count("log") == 0


def test_swapped_fields_on_a_real_pair_of_models_warn_on_mean_p_over_q(tmp_path: Path) -> None:
    rows = model_rows(1, 600)
    assert audit_log(tmp_path, rows) == []
    (entry,) = audit_log(tmp_path, rows, "--p-field", "q", "--q-field", "p")
    assert entry["status"] == "warn" and str(entry["text"]).startswith("mean p/q is")
    assert "swapped" in str(entry["text"]) and "(--p-field)" not in str(entry["text"])  # the hint is the view's


def test_the_mean_p_over_q_limit_holds_for_honest_logs_and_catches_their_swaps() -> None:
    """Seeded: 40 honest logs of real model pairs stay under the limit; every one of them swapped crosses it,
    and the mean the tally keeps is the mean of min(p/q, 2) to within one fixed-point step a token."""
    crossed = 0
    for seed in range(40):
        rows = model_rows(100 + seed, 300)
        tally = TokenTally.of_batch(batch_of(rows))
        assert tally is not None and tally.tokens >= 600
        ratios = [min(p / q, 2.0) for row in rows for p, q in zip(row["p"], row["q"])]
        mean = tally.mean_ratio()
        assert mean is not None and sum(ratios) / len(ratios) - 1 / 65536 <= mean <= sum(ratios) / len(ratios)
        assert mean <= tally.mean_ratio_limit()
        swapped = TokenTally.of_batch(batch_of([{"p": row["q"], "q": row["p"], "r": row["r"]} for row in rows]))
        assert swapped is not None
        ratio = swapped.mean_ratio()
        crossed += ratio is not None and ratio > swapped.mean_ratio_limit()
    assert crossed == 40


def test_the_simulated_examples_keep_mean_p_over_q_under_one() -> None:
    from specaccept_cli.simulate import simulate

    for alpha in (0.3, 0.78, 0.95, 1.0):
        chunk = next(simulate(3000, alpha, 1, 8, seed=3))
        tally = TokenTally.of_batch(RunBatch("t", np.arange(3000), chunk.offsets, chunk.p, chunk.q, chunk.r, {}))
        assert tally is not None
        mean = tally.mean_ratio()
        assert mean is not None and mean <= 1.0


def test_a_tally_from_before_the_ratio_says_nothing_about_it() -> None:
    tally = TokenTally.of_batch(batch_of(model_rows(2, 50)))
    assert tally is not None and tally.ratio_fixed is not None
    older = {key: value for key, value in tally.to_dict().items() if key != "ratio_fixed"}
    old = TokenTally.from_dict(older)
    assert old.ratio_fixed is None and old.mean_ratio() is None and (old + tally).mean_ratio() is None
    with pytest.raises(ValueError, match="above its cap"):
        TokenTally.from_dict(tally.to_dict() | {"ratio_fixed": 2 * 65536 * tally.tokens + 1})
    with pytest.raises(ValueError, match="below one step a token where p > q"):  # each such token adds >= 1
        TokenTally.from_dict(tally.to_dict() | {"ratio_fixed": (tally.tokens - tally.p_at_most_q) * 65536 - 1})
