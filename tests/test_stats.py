"""The statistics of a summary: by hand on small logs, and against `simulate`, whose truth is known."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.pipeline import summarise
from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.simulate import simulate
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.files import summary_from_object, summary_object
from specaccept_cli.summary.state import Summary, group_key
from tests.conftest import invoke, write_jsonl

# Three runs worked by hand (thresholds min(1, p/q) in brackets):
#   run 1: thresholds [1, 0.25, 1], r [0.1, 0.5, 0.2] -> pass, FAIL, pass: a = 1, 2 tokens pass their own test
#   run 2: thresholds [1, 1],       r [0.3, 0.9]      -> pass, pass:       a = 2, 2 pass
#   run 3: thresholds [0.2],        r [0.5]           -> FAIL:             a = 0, 0 pass
# runs 3, drafted 6, accepted 3, examined 2 + 2 + 1 = 5, emitted 6, passing 4, threshold sum 4.45.
HAND_ROWS = [
    {"p": [0.9, 0.2, 0.8], "q": [0.5, 0.8, 0.4], "r": [0.1, 0.5, 0.2], "model": "a"},
    {"p": [0.5, 0.5], "q": [0.5, 0.5], "r": [0.3, 0.9], "model": "b"},
    {"p": [0.1], "q": [0.5], "r": [0.5], "model": "a"},
]


@pytest.fixture
def hand(tmp_path: Path) -> dict[str, object]:
    result = invoke("audit", str(write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)), "-o", "json", "--cost-ratio", "0.1")
    assert result.exit_code == 0, result.stderr
    summary: dict[str, object] = orjson.loads(result.stdout)
    return summary


def test_alpha_and_its_interval_by_hand(hand: dict[str, object]) -> None:
    # a = [1, 2, 0], e = [2, 2, 1], alpha = 3/5.
    # residuals a - alpha e = [-0.2, 0.8, -0.6]; sum of squares 1.04;
    # var = n/(n-1) * 1.04 / 5^2 = 1.5 * 1.04 / 25 = 0.0624; se = 0.249800
    assert hand["alpha"] == pytest.approx(0.6)
    se = math.sqrt(0.0624)
    low, high = hand["alpha_ci"]  # type: ignore[misc]
    assert low == pytest.approx(0.6 - 1.959963984540054 * se)
    assert high == 1.0  # 0.6 + 0.4896 clamps at 1


def test_expected_alpha_by_hand(hand: dict[str, object]) -> None:
    assert hand["expected_alpha"] == pytest.approx(4.45 / 6, abs=1e-9)


def test_tokens_per_pass_predicted_by_hand(hand: dict[str, object]) -> None:
    # alpha 0.6: k=3 -> (1 - 0.6^4)/0.4 = 2.176; k=2 -> 1.96; k=1 -> 1.6; mean 5.736 / 3
    assert hand["tokens_per_pass"] == 2.0
    assert hand["tokens_per_pass_predicted"] == pytest.approx(5.736 / 3)
    check = hand["iid_check"]
    assert isinstance(check, dict)
    assert check["difference"] == pytest.approx(2.0 - 5.736 / 3)
    # observed a + 1 = [2, 3, 1]: sample variance 1, standard error sqrt(1/3)
    assert check["standard_error"] == pytest.approx(math.sqrt(1 / 3))
    assert check["consistent"] is True


def test_per_position_by_hand(hand: dict[str, object]) -> None:
    assert hand["per_position"] == [
        # every run drafts position 1 and tests it; runs 1 and 2 keep it
        {"position": 1, "drafts": 3, "reached": 3, "accepted": 2, "rate": 2 / 3, "unconditional_rate": 2 / 3},
        # runs 1, 2 draft it and both reach it (a >= 1); only run 2 keeps it
        {"position": 2, "drafts": 2, "reached": 2, "accepted": 1, "rate": 1 / 2, "unconditional_rate": 1 / 2},
        # only run 1 drafts it, and it stopped at position 2: never tested
        {"position": 3, "drafts": 1, "reached": 0, "accepted": 0, "rate": None, "unconditional_rate": 0.0},
    ]


def test_accepted_histogram_by_hand(hand: dict[str, object]) -> None:
    assert hand["accepted_histogram"] == {"0": 1, "1": 1, "2": 1, "3": 0}


def test_speedup_and_optimal_k_by_hand(hand: dict[str, object]) -> None:
    # emitted 6 / (drafted 6 * 0.1 + runs 3) = 6 / 3.6
    assert hand["cost_ratio"] == 0.1
    assert hand["speedup"] == pytest.approx(6 / 3.6)
    # alpha 0.6, c 0.1: k=1 1.6/1.1 = 1.4545, k=2 1.96/1.2 = 1.6333, k=3 2.176/1.3 = 1.6738, k=4 2.3056/1.4 = 1.6469
    assert hand["optimal_k"] == 3


def test_every_engine_convention_by_hand(hand: dict[str, object]) -> None:
    assert hand["conventions"] == {
        "vllm": {"acceptance_rate": 3 / 6, "mean_acceptance_length": 2.0, "per_position": [2 / 3, 1 / 3, 0.0]},
        # run 1's third token passes its own test after the rejection: vLLM v0 counts it (4 passing)
        "vllm_v0": {"acceptance_rate": 4 / 6, "system_efficiency": 6 / 9},
        "sglang": {"accept_rate": 6 / 9, "accept_length": 2.0},
        "llama_cpp": {"acceptance_rate": 3 / 6},
        "spec_bench": {"tau": 2.0},
        "eagle": {"per_position": [2 / 3, 1 / 2, None]},
    }


def test_state_stays_the_last_key_and_cost_keys_need_a_cost_ratio(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)
    plain = orjson.loads(invoke("audit", str(path), "-o", "json").stdout)
    assert list(plain)[-1] == "state"
    assert not {"cost_ratio", "speedup", "optimal_k", "groups"} & set(plain)
    grouped = orjson.loads(invoke("audit", str(path), "-o", "json", "--group-by", "model").stdout)
    assert list(grouped)[-1] == "state"
    assert list(grouped["groups"]["a"])[-1] == "state"


def test_empty_and_single_run_summaries_have_no_interval() -> None:
    empty = summary_object(Summary(), cost_ratio=0.1)
    assert empty["alpha_ci"] is None
    assert empty["tokens_per_pass_predicted"] is None
    assert empty["iid_check"] is None
    assert empty["per_position"] == []
    assert empty["accepted_histogram"] == {"0": 0}
    assert empty["speedup"] is None
    assert empty["optimal_k"] is None
    counts = np.zeros((3, 3), dtype=np.int64)
    counts[2, 1] = 1
    single = Summary(counts=counts)
    assert estimate(single).alpha == 0.5
    assert estimate(single).alpha_ci is None


def test_all_kept_predicts_k_plus_one() -> None:
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[3, 3] = 5
    counts[2, 2] = 5
    summary = Summary(counts=counts)
    assert estimate(summary).alpha == 1.0
    assert estimate(summary).tokens_per_pass_predicted == 3.5  # (4 + 3) / 2
    assert estimate(summary).iid_check is not None and estimate(summary).iid_check.consistent


# --- against the truth: simulate ---------------------------------------------------------------


def simulated_summary(runs: int, alpha: float, k_low: int, k_high: int, seed: int, **kwargs: object) -> Summary:
    summary = Summary()
    for chunk in simulate(runs, alpha, k_low, k_high, seed, **kwargs):  # type: ignore[arg-type]
        summary = summary + Summary.of_outcome(accept_prefix_batch(chunk.offsets, chunk.p, chunk.q, chunk.r))
    return summary


def test_simulated_alpha_08_k4_matches_the_truth() -> None:
    summary = simulated_summary(100_000, 0.8, 4, 4, seed=11)
    low, high = estimate(summary).alpha_ci  # type: ignore[misc]
    assert low <= 0.8 <= high
    assert high - low < 0.01
    assert estimate(summary).expected_alpha == pytest.approx(0.8, abs=0.005)
    assert estimate(summary).tokens_per_pass == pytest.approx(3.3616, abs=0.02)
    assert estimate(summary).tokens_per_pass_predicted == pytest.approx(3.3616, abs=0.02)
    assert estimate(summary).iid_check is not None and estimate(summary).iid_check.consistent
    for row in estimate(summary).per_position:
        assert row.rate == pytest.approx(0.8, abs=0.01)  # i.i.d.: every conditional rate is alpha
        assert row.unconditional_rate == pytest.approx(0.8**row.position, abs=0.01)


def test_position_dependent_acceptance_splits_conditional_from_unconditional() -> None:
    by_position = [0.9, 0.7, 0.5]
    summary = simulated_summary(100_000, 0.0, 4, 4, seed=5, alpha_by_position=by_position)
    rows = estimate(summary).per_position
    truth = [0.9, 0.7, 0.5, 0.5]  # the last value repeats
    reach = 1.0
    for row, alpha in zip(rows, truth):
        # conditional (EAGLE) recovers each position's own probability ...
        assert row.rate == pytest.approx(alpha, abs=0.01)
        # ... unconditional (vLLM) is the product of all up to it
        reach *= alpha
        assert row.unconditional_rate == pytest.approx(reach, abs=0.01)
    assert rows[3].unconditional_rate < 0.2 < rows[3].rate
    # one alpha cannot describe this: the i.i.d. check says so
    assert estimate(summary).iid_check is not None and not estimate(summary).iid_check.consistent


def test_interval_covers_the_true_alpha_95_percent_of_the_time() -> None:
    # 1,000 simulated logs of 100 runs with k in 1..8: the interval should cover alpha = 0.7
    # in ~95% of them; binomial sd at 1,000 logs is 0.7%, so [0.93, 0.97] is a 3-sd band.
    rng = np.random.default_rng(2024)
    covered = 0
    logs = 1000
    for seed in rng.integers(0, 2**32, size=logs).tolist():
        interval = estimate(simulated_summary(100, 0.7, 1, 8, seed=seed)).alpha_ci
        assert interval is not None
        covered += interval[0] <= 0.7 <= interval[1]
    assert 0.93 <= covered / logs <= 0.97


def test_interval_stays_honest_when_runs_share_a_context() -> None:
    # Each run's context sets its own acceptance: 0.3 or 0.97 with equal odds (k = 8). The target
    # is the ratio E[a] / E[examined] over that mixture. Tokens of one run are correlated, so a
    # token-level binomial interval is too narrow; the interval over runs is not.
    k = 8

    def moments(alpha: float) -> tuple[float, float]:
        return sum(alpha**j for j in range(1, k + 1)), sum(alpha**j for j in range(k))

    (a_low, e_low), (a_high, e_high) = moments(0.3), moments(0.97)
    truth = (a_low + a_high) / (e_low + e_high)
    rng = np.random.default_rng(7)
    logs = 1000
    covered = covered_by_tokens = 0
    for _ in range(logs):
        low_runs = int(rng.binomial(100, 0.5))
        summary = simulated_summary(low_runs, 0.3, k, k, seed=int(rng.integers(2**32))) + simulated_summary(
            100 - low_runs, 0.97, k, k, seed=int(rng.integers(2**32))
        )
        low, high = estimate(summary).alpha_ci  # type: ignore[misc]
        covered += low <= truth <= high
        alpha, examined = estimate(summary).alpha, summary.examined_tokens
        assert alpha is not None
        half = 1.959963984540054 * math.sqrt(alpha * (1 - alpha) / examined)
        covered_by_tokens += alpha - half <= truth <= alpha + half
    assert covered / logs >= 0.93
    assert covered_by_tokens / logs <= 0.90  # the test can tell an honest interval from a naive one


# --- groups ----------------------------------------------------------------------------------------


def test_group_keys_are_strings_or_compact_json() -> None:
    assert group_key("model-a") == "model-a"
    assert group_key(3) == "3"
    assert group_key(1.5) == "1.5"
    assert group_key(True) == "true"
    assert group_key(None) == "null"
    assert group_key([1, "x"]) == '[1,"x"]'
    assert group_key({"b": 1, "a": 2}) == '{"a":2,"b":1}'


def test_group_by_json_field_by_hand(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)
    result = invoke("audit", str(path), "-o", "json", "--group-by", "model")
    summary = orjson.loads(result.stdout)
    assert summary["group_by"] == "model"
    assert set(summary["groups"]) == {"a", "b"}
    a, b = summary["groups"]["a"], summary["groups"]["b"]
    assert (a["runs"], a["accepted_tokens"], a["examined_tokens"]) == (2, 1, 3)
    assert (b["runs"], b["accepted_tokens"], b["examined_tokens"]) == (1, 2, 2)
    assert a["alpha"] == pytest.approx(1 / 3)
    assert a["conventions"]["vllm_v0"]["acceptance_rate"] == 2 / 4  # group a's own passing tokens
    assert a["expected_alpha"] == pytest.approx((2.25 + 0.2) / 4, abs=1e-9)
    assert summary["runs"] == 3  # the whole is still there
    rebuilt = summary_from_object(summary)
    assert rebuilt.groups == {"a": summary_from_object(a), "b": summary_from_object(b)}
    rebuilt = dataclasses.replace(rebuilt, group_by=None, groups=None)
    assert rebuilt == summary_from_object(a) + summary_from_object(b)  # the groups partition the runs


def test_group_by_missing_or_non_string_values(tmp_path: Path) -> None:
    rows = [
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": 0.7}},
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": 0.7}},
        {"p": [0.5], "q": [0.5], "r": [0.1]},
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": None}},
        {"p": [0.5], "q": [0.5], "r": [0.1], "meta": {"t": [1, 2]}},
    ]
    path = write_jsonl(tmp_path / "g.jsonl", rows)
    summary = orjson.loads(invoke("audit", str(path), "-o", "json", "--group-by", "meta.t").stdout)
    assert {key: group["runs"] for key, group in summary["groups"].items()} == {"0.7": 2, "null": 2, "[1,2]": 1}


def test_group_by_parquet_column_matches_jsonl(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = []
    for index in range(300):
        k = int(rng.integers(0, 6))
        rows.append(
            {
                "p": rng.random(k).tolist(),
                "q": (1 - rng.random(k)).tolist(),
                "r": rng.random(k).tolist(),
                "meta": {"model": ["small", "large", "tiny"][index % 3], "shard": index % 2},
            }
        )
    jsonl = write_jsonl(tmp_path / "g.jsonl", rows)
    parquet = tmp_path / "g.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet, row_group_size=50)
    for field in ("meta.model", "meta.shard"):
        from_json = orjson.loads(invoke("audit", str(jsonl), "-o", "json", "--group-by", field).stdout)
        from_parquet = orjson.loads(invoke("audit", str(parquet), "-o", "json", "--group-by", field).stdout)
        assert from_json == from_parquet
        groups = from_json["groups"]
        assert sum(group["runs"] for group in groups.values()) == 300
    assert set(from_json["groups"]) == {"0", "1"}


def test_group_by_a_missing_parquet_column_is_an_input_error(tmp_path: Path) -> None:
    parquet = tmp_path / "g.parquet"
    pq.write_table(pa.Table.from_pylist([{"p": [0.5], "q": [0.5], "r": [0.1]}]), parquet)
    result = invoke("audit", str(parquet), "--group-by", "model")
    assert result.exit_code == 2
    assert "missing column 'model'" in result.stderr


def test_hostile_group_values_are_escaped_in_the_table(tmp_path: Path) -> None:
    rows = [
        {"p": [0.5], "q": [0.5], "r": [0.1], "m": "[bold red]boom[/] \x1b[31mred\x07"},
        {"p": [0.5], "q": [0.5], "r": [0.1], "m": "plain"},
    ]
    path = write_jsonl(tmp_path / "g.jsonl", rows)
    result = invoke("audit", str(path), "--group-by", "m", "--max-rows", "0")
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "[bold red]boom[/]" in result.stdout  # shown literally, not interpreted
    assert "By m" in result.stdout


def test_grouped_summaries_merge_key_by_key_and_round_trip(tmp_path: Path) -> None:
    rows = HAND_ROWS * 4 + [{"p": [0.3], "q": [0.9], "r": [0.1], "model": "c"}]
    whole = summarise_rows(tmp_path / "whole.jsonl", rows)
    left = summarise_rows(tmp_path / "left.jsonl", rows[:5])
    right = summarise_rows(tmp_path / "right.jsonl", rows[5:])
    assert left + right == whole
    assert left.groups is not None and "c" not in left.groups
    assert summary_from_object(orjson.loads(orjson.dumps(summary_object(whole)))) == whole
    assert Summary() + whole == whole
    with pytest.raises(ValueError, match="without groups"):
        _ = whole + summary_from_object(summary_object(Summary.of_outcome(accept_prefix_batch(*one_run()))))
    other = Summary(group_by="other", groups={})
    with pytest.raises(ValueError, match="different fields"):
        _ = whole + other


def one_run() -> tuple[np.ndarray, ...]:
    return np.array([0, 1], dtype=np.int64), np.array([0.5]), np.array([0.5]), np.array([0.1])


def summarise_rows(path: Path, rows: list[dict[str, object]]) -> Summary:
    from specaccept_cli.rule.batch import FieldSpec

    write_jsonl(path, rows)
    return summarise([str(path)], FieldSpec(extras=("model",)), Plan(group_by="model"))


def test_from_dict_rejects_malformed_groups() -> None:
    data = summary_object(Summary(group_by="m", groups={"x": Summary()}))
    data["groups"]["x"]["groups"] = {}
    data["groups"]["x"]["group_by"] = "m"
    with pytest.raises(ValueError, match="groups of its own"):
        summary_from_object(data)
    data = summary_object(Summary())
    data["groups"] = []
    with pytest.raises(ValueError, match="group_by"):
        summary_from_object(data)


# --- the table view ------------------------------------------------------------------------------


def test_table_view_shows_every_statistic(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)
    result = invoke("audit", str(path), "--max-rows", "0", "--cost-ratio", "0.1", "--conventions")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for text in (
        "alpha 95% interval",
        "expected alpha",
        "predicted (i.i.d.)",
        "i.i.d. model explains the logs",
        "Per position",
        "Accepted length",
        "█",
        "observed speedup",
        "best",
        "What each engine would report",
        "vllm_v0",
        "system_efficiency",
        "They divide different counts",
    ):
        assert text in out, text


def test_conventions_only_with_the_flag(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)
    assert "What each engine would report" not in invoke("audit", str(path), "--max-rows", "0").stdout


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


# --- properties ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=60))
def test_per_position_and_histogram_equal_counting_run_by_run(pairs: list[tuple[int, int]]) -> None:
    runs = [(k, min(a, k)) for k, a in pairs]
    size = max((k for k, _ in runs), default=0) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    for k, a in runs:
        counts[k, a] += 1
    summary = Summary(counts=counts)
    for row in estimate(summary).per_position:
        j = row.position
        assert row.drafts == sum(k >= j for k, _ in runs)
        assert row.reached == sum(k >= j and a >= j - 1 for k, a in runs)
        assert row.accepted == sum(a >= j for _, a in runs)
    assert len(estimate(summary).per_position) == max((k for k, _ in runs), default=0)
    assert sum(estimate(summary).accepted_histogram.values()) == len(runs)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 200), st.integers(1, 6))
def test_groups_of_a_batch_are_the_summaries_of_their_runs(seed: int, runs: int, n_keys: int) -> None:
    from specaccept_cli.summary.evaluate import split_by_group

    rng = np.random.default_rng(seed)
    k = rng.integers(0, 9, size=runs)
    offsets = np.zeros(runs + 1, dtype=np.int64)
    np.cumsum(k, out=offsets[1:])
    n = int(offsets[-1])
    batch = RunBatch(
        source="x",
        lines=np.arange(1, runs + 1),
        offsets=offsets,
        p=rng.random(n),
        q=1.0 - rng.random(n),
        r=rng.random(n),
    )
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r, per_run=True)
    labels = [[None, 1, "a", True, "1", [2]][int(i)] for i in rng.integers(0, n_keys, size=runs)]
    groups = split_by_group(outcome, labels)
    for key, group in groups.items():
        members = batch.select(np.array([group_key(label) == key for label in labels], dtype=bool))
        assert group == Summary.of_outcome(accept_prefix_batch(members.offsets, members.p, members.q, members.r))
    total = sum(groups.values(), Summary())
    assert total == Summary.of_outcome(outcome)


def test_saved_grouped_summaries_merge_to_the_whole(tmp_path: Path) -> None:
    rows = HAND_ROWS * 3 + [{"p": [0.3], "q": [0.9], "r": [0.1], "model": "c"}]
    saved = []
    for name, part in (("left", rows[:4]), ("right", rows[4:]), ("whole", rows)):
        path = write_jsonl(tmp_path / f"{name}.jsonl", part)
        saved.append(orjson.loads(invoke("audit", str(path), "-o", "json", "--group-by", "model").stdout))
    left, right, whole = (summary_from_object(data) for data in saved)
    assert left + right == whole
    assert summary_object(left + right) == saved[2]


def test_group_by_does_not_change_per_run_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)
    plain = invoke("audit", str(path), "-o", "jsonl").stdout
    grouped = invoke("audit", str(path), "-o", "jsonl", "--group-by", "model").stdout
    assert plain == grouped
    assert "model" not in grouped
