"""Gates and baselines: thresholds on both sides, the drop test by hand, simulated systems, false alarms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.checks import check_gates, compare, drop_test
from specaccept_cli.rule.vectorized import accept_prefix_batch
from specaccept_cli.simulate import simulate
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.files import summary_object
from specaccept_cli.summary.probability import normal_cdf
from specaccept_cli.summary.state import Summary
from tests.conftest import FIRST_EXAMPLE, invoke, write_jsonl

# The hand log of test_cli: alpha = 3/4, tokens per pass = 2, acceptance rate = 3/5.
HAND_ROWS = [
    FIRST_EXAMPLE,
    {"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.99, 0.99]},
    {"p": [], "q": [], "r": []},
]


@pytest.fixture
def hand_log(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)


def simulated(runs: int, alpha: float, seed: int, k: tuple[int, int] = (1, 8)) -> Summary:
    """The summary of a simulated log, in-process (no JSON round trip)."""
    total = Summary()
    for chunk in simulate(runs, alpha, k[0], k[1], seed):
        total = total + Summary.of_outcome(accept_prefix_batch(chunk.offsets, chunk.p, chunk.q, chunk.r))
    return total


def save(summary: Summary, path: Path) -> Path:
    path.write_bytes(orjson.dumps(summary_object(summary)))
    return path


# --- the normal tail -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("z", "expected"),
    [
        (0.0, 0.5),
        (-1.959963984540054, 0.025),
        (-2.3263478740408408, 0.01),
        (1.6448536269514722, 0.95),
        (-3.0, 0.0013498980316301),  # tables: 1.3499e-3
        (-10.0, 7.619853024160527e-24),
        (-20.0, 2.753624118606233e-89),  # erfc keeps the far tail; 1 - erf would give 0
    ],
)
def test_normal_cdf_known_values(z: float, expected: float) -> None:
    assert normal_cdf(z) == pytest.approx(expected, rel=1e-9)


# --- gates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "threshold", "status"),
    [
        ("--min-alpha", "0.75", 0),  # equal passes
        ("--min-alpha", "0.7", 0),
        ("--min-alpha", "0.7501", 1),
        ("--min-tokens-per-pass", "2", 0),
        ("--min-tokens-per-pass", "1.5", 0),
        ("--min-tokens-per-pass", "2.0001", 1),
        ("--min-acceptance-rate", "0.6", 0),
        ("--min-acceptance-rate", "0.59", 0),
        ("--min-acceptance-rate", "0.6001", 1),
    ],
)
def test_gate_exit_status_on_both_sides(hand_log: Path, option: str, threshold: str, status: int) -> None:
    result = invoke("audit", str(hand_log), option, threshold, "-o", "json")
    assert result.exit_code == status, result.stderr
    assert orjson.loads(result.stdout)["runs"] == 3  # the normal output is printed either way
    if status:
        lines = result.stderr.splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("specaccept: gate failed: ")
        assert option in lines[0] and threshold in lines[0]
    else:
        assert result.stderr == ""


@pytest.mark.parametrize("output", ["table", "json", "markdown", "jsonl", "csv"])
def test_failed_gate_keeps_the_output_in_every_mode(hand_log: Path, output: str) -> None:
    result = invoke("audit", str(hand_log), "-o", output, "--min-alpha", "0.8", "--min-tokens-per-pass", "3")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "specaccept: gate failed: alpha = 0.75 is below --min-alpha 0.8",
        "specaccept: gate failed: tokens per pass = 2 is below --min-tokens-per-pass 3",
    ]
    assert result.stdout  # records, table, markdown or JSON: still there
    if output == "json":
        gates = orjson.loads(result.stdout)["gates"]
        assert [(g["option"], g["value"], g["passed"]) for g in gates] == [
            ("--min-alpha", 0.75, False),
            ("--min-tokens-per-pass", 2.0, False),
        ]


def test_table_view_shows_the_gates(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "--min-alpha", "0.5", "--min-acceptance-rate", "0.9")
    assert result.exit_code == 1
    assert "Gates" in result.stdout
    assert "passed" in result.stdout and "failed" in result.stdout


def test_a_gate_on_a_metric_without_value_fails(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = invoke("audit", str(empty), "--min-alpha", "0", "-o", "json")
    assert result.exit_code == 1
    assert "alpha has no value (no runs to estimate it from); --min-alpha 0 fails" in result.stderr
    assert invoke("audit", str(empty), "-o", "json").exit_code == 0  # no gate, no failure


@pytest.mark.parametrize(
    "args",
    [
        ["--min-alpha", "abc"],
        ["--min-alpha", "nan"],
        ["--min-alpha", "1.5"],
        ["--min-acceptance-rate", "-0.1"],
        ["--min-tokens-per-pass", "inf"],
        ["--min-tokens-per-pass", "0.5"],
        ["--max-drop", "1"],
        ["--significance", "0"],
        ["--significance", "x"],
    ],
)
def test_bad_gate_values_are_usage_errors(hand_log: Path, args: list[str]) -> None:
    result = invoke("audit", str(hand_log), *args)
    assert result.exit_code == 2
    assert args[0] in result.stderr


@pytest.mark.parametrize("option", ["--max-drop", "--significance"])
def test_comparison_options_need_a_baseline(hand_log: Path, option: str) -> None:
    result = invoke("audit", str(hand_log), option, "0.05")
    assert result.exit_code == 2
    assert f"{option} applies to a comparison: give --baseline too" in result.stderr


def test_check_gates_is_pure_and_ordered() -> None:
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[3, 1] = 1  # one run: k=3, a=1 -> alpha 1/2, tokens per pass 2, acceptance rate 1/3
    results = check_gates(estimate(Summary(counts=counts)), {"min_acceptance_rate": 0.3, "min_alpha": 0.6})
    assert [(r.option, r.value, r.passed) for r in results] == [
        ("--min-alpha", 0.5, False),
        ("--min-acceptance-rate", 1 / 3, True),
    ]
    assert check_gates(estimate(Summary(counts=counts)), {"min_alpha": None}) == []


# --- the drop test ---------------------------------------------------------------------------


def test_drop_test_by_hand() -> None:
    # max_drop 0: z = (0.9 - 1.0) / sqrt(0.03^2 + 0.04^2) = -0.1 / 0.05 = -2
    z, p = drop_test(1.0, 0.03, 0.9, 0.04, max_drop=0.0)
    assert z == pytest.approx(-2.0)
    assert p == pytest.approx(0.022750131948179, rel=1e-9)
    # max_drop 0.05: floor 0.95; z = (0.9 - 0.95) / sqrt(0.04^2 + 0.95^2 * 0.03^2) = -0.05 / 0.0491146618 = -1.018026
    z, p = drop_test(1.0, 0.03, 0.9, 0.04, max_drop=0.05)
    assert z == pytest.approx(-1.018026, rel=1e-6)
    assert p == pytest.approx(0.154329, rel=1e-4)
    # No variance: certainty either way, z undefined.
    assert drop_test(1.0, 0.0, 0.97, 0.0, max_drop=0.02) == (None, 0.0)
    assert drop_test(1.0, 0.0, 0.99, 0.0, max_drop=0.02) == (None, 1.0)


def test_a_drop_within_max_drop_never_regresses() -> None:
    # 1% down with tiny standard errors: significant, but inside the 2% tolerance.
    z, p = drop_test(1.0, 1e-6, 0.99, 1e-6, max_drop=0.02)
    assert z is not None and z > 0 and p > 0.5


def test_comparison_of_tiny_summaries_is_untestable_and_fails() -> None:
    one_run = np.zeros((3, 3), dtype=np.int64)
    one_run[2, 1] = 1
    comparison = compare(estimate(simulated(100, 0.7, 1)), estimate(Summary(counts=one_run)))
    assert [row.verdict for row in comparison.metrics] == ["untestable", "untestable"]
    assert len(comparison.failures) == 2
    assert "at least 2 runs" in comparison.failures[0].message(0.02, 0.01)


# --- simulated systems -----------------------------------------------------------------------


def test_the_same_system_twice_passes_and_a_5_percent_drop_fails(tmp_path: Path) -> None:
    baseline = save(simulated(100_000, 0.78, seed=1), tmp_path / "main.json")
    same = save(simulated(100_000, 0.78, seed=2), tmp_path / "same.json")
    worse = save(simulated(100_000, 0.78 * 0.95, seed=3), tmp_path / "worse.json")

    result = invoke("diff", str(baseline), str(same), "-o", "json")
    assert result.exit_code == 0, result.stderr
    verdicts = {row["metric"]: row["verdict"] for row in orjson.loads(result.stdout)["metrics"]}
    assert verdicts == {"alpha": "ok", "tokens_per_pass": "ok"}

    result = invoke("diff", str(baseline), str(worse), "-o", "json")
    assert result.exit_code == 1
    data = orjson.loads(result.stdout)
    alpha = data["metrics"][0]
    assert alpha["metric"] == "alpha" and alpha["verdict"] == "regressed"
    assert alpha["change"] == pytest.approx(-0.05, abs=0.01)
    assert alpha["p"] < 1e-6
    assert data["regressed"] is True
    assert "alpha regressed" in result.stderr


def test_audit_against_a_baseline_file(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    worse = tmp_path / "worse.jsonl"
    for path, alpha, seed in ((good, "0.8", "1"), (worse, "0.6", "2")):
        invoke("simulate", "--runs", "3000", "--alpha", alpha, "--k", "4", "--seed", seed, "-o", str(path))
    baseline = tmp_path / "main.json"
    assert invoke("audit", str(good), "-o", "json", "--summary-out", str(baseline)).exit_code == 0

    same = invoke("audit", str(good), "--baseline", str(baseline), "-o", "json")
    assert same.exit_code == 0
    assert [row["verdict"] for row in orjson.loads(same.stdout)["comparison"]["metrics"]] == ["ok", "ok"]

    table = invoke("audit", str(worse), "--baseline", str(baseline), "--max-rows", "0")
    assert table.exit_code == 1
    assert "Baseline comparison" in table.stdout and "regressed" in table.stdout
    assert [line.split(":")[1].strip() for line in table.stderr.splitlines()] == [
        "alpha regressed",
        "tokens per pass regressed",
    ]


@pytest.mark.slow
def test_false_alarm_rate_stays_near_the_significance() -> None:
    """Pairs of small logs of the same system, max-drop 0 so only the test decides.

    Over 2,000 pairs the count of p-values under a level is Binomial(2000, level); the
    bounds below are about 3.5 standard deviations either side of the mean.
    """
    pairs = 2000
    p_values: dict[str, list[float]] = {"alpha": [], "tokens_per_pass": []}
    for pair in range(pairs):
        baseline = simulated(300, 0.7, seed=10_000 + pair, k=(1, 6))
        current = simulated(300, 0.7, seed=20_000 + pair, k=(1, 6))
        for row in compare(estimate(baseline), estimate(current), max_drop=0.0, significance=0.05).metrics:
            assert row.p is not None
            p_values[row.metric].append(row.p)
    for values in p_values.values():
        below = np.asarray(values)
        assert 5 <= int((below < 0.01).sum()) <= 36  # mean 20, sd 4.4
        assert 66 <= int((below < 0.05).sum()) <= 134  # mean 100, sd 9.7
        assert 153 <= int((below < 0.1).sum()) <= 247  # mean 200, sd 13.4


@pytest.mark.slow
def test_a_true_drop_of_exactly_max_drop_alarms_at_the_significance() -> None:
    """The boundary of H0: current alpha is exactly (1 - max_drop) x baseline alpha.

    The test is built so that this worst case for false alarms alarms at the nominal
    rate: Binomial(2000, 0.05) here, bounds about 3.5 standard deviations wide.
    """
    alarms = 0
    for pair in range(2000):
        baseline = simulated(300, 0.7, seed=30_000 + pair, k=(1, 6))
        current = simulated(300, 0.7 * 0.95, seed=40_000 + pair, k=(1, 6))
        alpha = compare(estimate(baseline), estimate(current), max_drop=0.05, significance=0.05).metrics[0]
        assert alpha.metric == "alpha"
        alarms += alpha.verdict == "regressed"
    assert 66 <= alarms <= 134  # mean 100, sd 9.7
