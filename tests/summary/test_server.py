"""Reported counts and sampler health, on logs from a real (tiny) speculative decoder."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.faulty import faulty_counts
from specaccept_cli.rule.vectorized import THRESHOLD_SCALE, accept_prefix_batch
from specaccept_cli.summary.server import (
    R_HISTOGRAM_BINS,
    RULES,
    THRESHOLD_BINS,
    ReportedTally,
    SamplerTally,
    parse_reported,
)
from tests.helpers import (
    spec_accept,
)
from tests.specdec import FAULTS, model_pair, speculative_runs


def batch_of(rows: list[dict[str, object]]) -> RunBatch:
    lengths = [len(row["p"]) for row in rows]  # type: ignore[arg-type]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = {name: np.array([x for row in rows for x in row[name]], dtype=np.float64) for name in "pqr"}  # type: ignore[attr-defined]
    return RunBatch(
        source="log.jsonl",
        lines=np.arange(1, len(rows) + 1, dtype=np.int64),
        offsets=offsets,
        p=flat["p"],
        q=flat["q"],
        r=flat["r"],
        extras={"reported": [row.get("reported") for row in rows]},
    )


def tally(rows: list[dict[str, object]]) -> tuple[ReportedTally, SamplerTally]:
    batch = batch_of(rows)
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r, tallies=True)
    reported, valid, errors = parse_reported(batch, "reported")
    assert errors == [] and valid.all()
    reported_tally, _ = ReportedTally.of_batch(batch, outcome, reported, faulty_counts(batch, outcome))
    return reported_tally, SamplerTally.of_batch(outcome)


def test_faulty_counts_by_hand() -> None:
    # thresholds 1, 0.25, 1, 0.5; r 0.1, 0.25 (tie), 0.2, 0.9
    rows = [{"p": [0.9, 0.2, 0.8, 0.25], "q": [0.5, 0.8, 0.4, 0.5], "r": [0.1, 0.25, 0.2, 0.9], "reported": 0}]
    batch = batch_of(rows)
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)
    assert outcome.accepted.tolist() == [3]
    counts = faulty_counts(batch, outcome).counts
    assert counts["strict-inequality"].tolist() == [1]  # 0.25 < 0.25 fails
    assert counts["no-prefix-break"].tolist() == [3]
    assert counts["greedy-draft"].tolist() == [1]  # 0.25 <= 0.2 fails
    assert counts["bonus-counted"].tolist() == [4]


def test_parse_reported_rejects_non_counts() -> None:
    rows = [
        {**row, "p": [0.5], "q": [0.5], "r": [0.5]}
        for row in [{"reported": 1}, {"reported": 2.0}, {"reported": -1}, {"reported": "3"}, {"reported": True}, {}]
    ]
    counts, valid, errors = parse_reported(batch_of(rows), "reported")
    assert counts[:2].tolist() == [1, 2]
    assert valid.tolist() == [True, True, False, False, False, False]
    assert [(error.line, error.message) for error in errors] == [
        (3, "'reported' is -1, not a non-negative count"),
        (4, "'reported' is the string '3', not a non-negative count"),
        (5, "'reported' is true, not a non-negative count"),
        (6, "'reported' is missing or null, not a non-negative count"),
    ]


@pytest.mark.parametrize("quality", [0.2, 0.6, 0.95])
@pytest.mark.parametrize("seed", [1, 2])
def test_honest_server_has_no_mismatches_and_a_healthy_sampler(quality: float, seed: int) -> None:
    target, draft = model_pair(vocab=12, quality=quality, seed=seed)
    rows = list(speculative_runs(target, draft, runs=3000, k=5, seed=seed))
    assert [row["reported"] for row in rows] == [spec_accept(row["p"], row["q"], row["r"]) for row in rows]  # type: ignore[arg-type]
    reported, sampler = tally(rows)
    assert reported.runs == 3000 and reported.mismatches == 0 and reported.examples == []
    calibration = sampler.calibration(0.001)
    uniformity = sampler.r_uniformity(0.001)
    assert calibration.ok and uniformity.ok, (calibration, uniformity)


@pytest.mark.parametrize("fault", FAULTS)
def test_every_injected_bug_is_flagged_and_attributed(fault: str) -> None:
    # A top-k target (p = 0 happens) and 8-bit uniform draws (r = 0 happens): the ties where
    # strict `<` differs from `<=`, as on real servers; harmless for the other faults.
    target, draft = model_pair(vocab=12, quality=0.3, seed=3, top_k=3)
    rows = list(speculative_runs(target, draft, runs=4000, k=6, seed=3, fault=fault, r_levels=256))
    reported, _ = tally(rows)
    assert reported.mismatches > 0
    ranking = reported.diagnosis()
    assert reported.explains[fault] == reported.mismatches  # the injected rule explains every mismatch
    assert ranking[0]["explains"] == reported.mismatches
    assert reported.unexplained == 0
    assert all(fault in example.rules for example in reported.examples)
    assert len(reported.examples) == min(20, reported.mismatches)
    assert reported.headline().startswith(f"most explained by {fault} ")  # the injected bug is named


def test_headline_names_the_rule_that_explains_runs_alone() -> None:
    """The headline goes by the runs a rule alone explains, not by its total, which shares runs with others."""
    from specaccept_cli.summary.server import RULES, ReportedTally

    def tally(bonus: tuple[int, int], no_break: tuple[int, int], several: int) -> ReportedTally:
        """(explains, alone) of bonus-counted and no-prefix-break."""
        explains = {**dict.fromkeys(RULES, 0), "bonus-counted": bonus[0], "no-prefix-break": no_break[0]}
        alone = {**dict.fromkeys(RULES, 0), "bonus-counted": bonus[1], "no-prefix-break": no_break[1]}
        return ReportedTally(runs=100, mismatches=60, explains=explains, alone=alone, several=several)

    both = tally((50, 20), (40, 10), 30)
    assert both.diagnosis()[0]["rule"] == "bonus-counted"
    assert both.headline() == "most explained by bonus-counted (50 runs, 20 by it alone; 30 runs fit several rules)"
    shared_only = tally((40, 0), (30, 10), 30)  # every bonus-counted run is also a no-prefix-break run
    assert shared_only.diagnosis()[0]["rule"] == "bonus-counted"
    assert shared_only.headline().startswith("most explained by no-prefix-break (30 runs, 10 by it alone")


def test_mismatches_at_near_ties_are_recognised() -> None:
    # thresholds 0.5: r = 0.501 is rejected by the rule, a server that saw p rounded to bf16 kept it
    near = [{"p": [0.25, 0.9], "q": [0.5, 0.5], "r": [0.501, 0.1], "reported": 1}]
    reported, _ = tally(near)
    assert reported.mismatches == 1 and reported.near_ties == 1 and reported.all_near_ties()
    far = [{"p": [0.25, 0.9], "q": [0.5, 0.5], "r": [0.9, 0.1], "reported": 1}]
    reported, _ = tally(far)
    assert reported.mismatches == 1 and reported.near_ties == 0 and not reported.all_near_ties()


def test_unexplained_mismatches_are_counted() -> None:
    rows = [{"p": [0.9, 0.9], "q": [0.3, 0.3], "r": [0.5, 0.5], "reported": 0}]  # a = 2; no faulty rule gives 0
    reported, _ = tally(rows)
    assert reported.mismatches == 1 and reported.unexplained == 1
    assert all(item["explains"] == 0 for item in reported.diagnosis())


@pytest.mark.parametrize("seed", [4, 5])
def test_biased_uniform_draws_fail_both_sampler_tests(seed: int) -> None:
    target, draft = model_pair(vocab=12, quality=0.6, seed=seed)
    rows = list(speculative_runs(target, draft, runs=3000, k=5, seed=seed, r_power=1.3))
    _, sampler = tally(rows)
    assert sampler.calibration(0.001).ok is False
    assert sampler.r_uniformity(0.001).ok is False


def test_calibration_by_hand() -> None:
    # one run, thresholds 0.5 and 0.25, both examined (first accepted, second rejected)
    rows = [{"p": [0.25, 0.2], "q": [0.5, 0.8], "r": [0.1, 0.9], "reported": 1}]
    _, sampler = tally(rows)
    assert sampler.examined_tokens == 2 and sampler.accepted_tokens == 1
    result = sampler.calibration(0.001)
    expected = (1 - 0.75) / (0.5 * 0.5 + 0.25 * 0.75) ** 0.5
    assert result.statistic == pytest.approx(expected, rel=1e-8)


def test_tallies_add_and_round_trip() -> None:
    target, draft = model_pair(vocab=8, quality=0.5, seed=9)
    rows = list(speculative_runs(target, draft, runs=600, k=4, seed=9, fault="bonus-counted"))
    whole_reported, whole_sampler = tally(rows)
    left, right = tally(rows[:250]), tally(rows[250:])
    assert (left[0] + right[0]).to_dict() == whole_reported.to_dict()
    assert left[1] + right[1] == whole_sampler
    assert ReportedTally.from_dict(whole_reported.to_dict()).to_dict() == whole_reported.to_dict()
    assert SamplerTally.from_dict(whole_sampler.to_dict()) == whole_sampler
    assert set(whole_reported.explains) == set(RULES)


def test_report_tallies_by_hand() -> None:
    """The reported x recomputed pairs and the min(1, p/q) bins the report's plots draw.

    run 1: thresholds 1, 0.25; r 0.1, 0.5 -> a = 1 (examined: t = 1 kept, t = 0.25 rejected); reported 1
    run 2: threshold 0.5; r 0.3 -> a = 1 (t = 0.5 kept); reported 2 (bonus counted)
    run 3: threshold 0.5; r 0.9 -> a = 0 (t = 0.5 rejected); reported 99 (clipped to 64)
    """
    rows = [
        {"p": [0.9, 0.2], "q": [0.5, 0.8], "r": [0.1, 0.5], "reported": 1},
        {"p": [0.25], "q": [0.5], "r": [0.3], "reported": 2},
        {"p": [0.25], "q": [0.5], "r": [0.9], "reported": 99},
    ]
    reported, sampler = tally(rows)
    assert reported.pairs == {(1, 1): 1, (1, 2): 1, (0, 64): 1}
    examined, accepted = sampler.threshold_bins.tolist()
    assert (examined[19], accepted[19]) == (1, 1)  # t = 1 lands in the last bin
    assert (examined[5], accepted[5]) == (1, 0)  # t = 0.25
    assert (examined[10], accepted[10]) == (2, 1)  # t = 0.5, twice
    assert sum(examined) == 4 and sum(accepted) == 2


def test_report_tallies_add_and_round_trip() -> None:
    target, draft = model_pair(vocab=12, quality=0.6, seed=3)
    rows = list(speculative_runs(target, draft, runs=300, k=4, seed=4, fault="bonus-counted"))
    whole_reported, whole_sampler = tally(rows)
    first, second = tally(rows[:120]), tally(rows[120:])
    assert first[0] + second[0] == whole_reported
    assert first[1] + second[1] == whole_sampler
    assert ReportedTally.from_dict(whole_reported.to_dict()) == whole_reported
    assert SamplerTally.from_dict(whole_sampler.to_dict()) == whole_sampler
    data = whole_sampler.to_dict()
    data["threshold_bins"][1][0] = data["threshold_bins"][0][0] + 1
    with pytest.raises(ValueError, match="more accepted than examined"):
        SamplerTally.from_dict(data)
    older = {key: value for key, value in whole_sampler.to_dict().items() if key != "threshold_bins"}
    assert int(SamplerTally.from_dict(older).threshold_bins.sum()) == 0  # files of earlier versions still read


@st.composite
def sampler_rows(draw: st.DrawFn) -> list[dict[str, object]]:
    """Runs of 0 to 8 tokens, thresholds anywhere in [0, 1] (ties with r included), all-accepted runs too."""
    rows = []
    for _ in range(draw(st.integers(1, 12))):
        k = draw(st.integers(0, 8))
        unit = st.floats(0, 1) | st.sampled_from([0.0, 0.05, 0.5, 0.95, 1.0])
        q = [draw(st.floats(0.01, 1) | st.just(1.0)) for _ in range(k)]
        p = [draw(unit) for _ in range(k)]
        r = [draw(unit | st.just(min(1.0, p[i] / q[i]))) for i in range(k)]
        rows.append({"p": p, "q": q, "r": r, "reported": 0})
    return rows


@given(sampler_rows())
def test_sampler_tally_is_the_token_by_token_count(rows: list[dict[str, object]]) -> None:
    """Every field of the batch's tally against a plain walk over each run's examined tokens."""
    _, tallied = tally(rows)
    examined = accepted = expected = variance = 0
    bins = np.zeros((2, THRESHOLD_BINS), dtype=np.int64)
    r_bins = np.zeros(R_HISTOGRAM_BINS, dtype=np.int64)
    for row in rows:
        p, q, r = (cast(list[float], row[name]) for name in "pqr")
        a = spec_accept(p, q, r)
        accepted += a
        for i in range(min(a + 1, len(p))):  # the tokens the run examined
            t = min(1.0, p[i] / q[i])
            examined += 1
            expected += int(np.rint(t * THRESHOLD_SCALE))
            variance += int(np.rint(t * (1.0 - t) * THRESHOLD_SCALE))
            cell = min(int(t * THRESHOLD_BINS), THRESHOLD_BINS - 1)
            bins[0, cell] += 1
            bins[1, cell] += r[i] <= t
        for value in r:
            r_bins[min(int(value * R_HISTOGRAM_BINS), R_HISTOGRAM_BINS - 1)] += 1
    assert (tallied.examined_tokens, tallied.accepted_tokens) == (examined, accepted)
    assert (tallied.expected_fixed, tallied.variance_fixed) == (expected, variance)
    assert np.array_equal(tallied.threshold_bins, bins) and np.array_equal(tallied.r_histogram, r_bins)


@pytest.mark.parametrize(
    ("fault", "verdict"),
    [("greedy-draft", "design"), ("strict-inequality", "lossy"), ("no-prefix-break", "miscounted")],
)
def test_the_rule_that_explains_the_counts_is_named_with_its_evidence_and_verdict(fault: str, verdict: str) -> None:
    """r <= p is the engine's design (vLLM without draft probabilities), a strict `<` a loss of exactness, a
    counter that runs past the first rejection a wrong count over right decisions."""
    target, draft = model_pair(vocab=12, quality=0.3, seed=3, top_k=3)
    rows = list(speculative_runs(target, draft, runs=2000, k=6, seed=5, fault=fault, r_levels=256))
    reported, _ = tally(rows)
    named = reported.named()
    assert named is not None and named["rule"] == fault and named["verdict"] == verdict
    assert named["alone"] > 0 and named["evidence"]
    lines = {example.line: example.rules for example in reported.examples}
    assert all(lines[item["line"]] == (fault,) for item in named["evidence"])  # runs no other rule explains
    assert reported.summary_keys()["server_rule"] == named


def test_greedy_draft_counts_are_the_tables_recompute() -> None:
    """The audit's r <= p is the registry's greedy-draft rule: q is ignored, ties keep."""
    from specaccept_cli.rule.chains import greedy_draft_scalar

    steps = [{"p": [0.3, 0.3, 0.9], "r": [0.3, 0.31, 0.1]}, {"p": [0.0, 0.5], "r": [0.0, 0.9]}]
    rows: list[dict[str, object]] = [
        {**steps[0], "q": [0.1, 0.1, 0.2], "reported": 1},
        {**steps[1], "q": [0.5, 0.5], "reported": 1},
    ]
    batch = batch_of(rows)
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r)
    counts = faulty_counts(batch, outcome).counts["greedy-draft"].tolist()
    assert counts == [greedy_draft_scalar(step, {}) for step in steps] == [1, 1]


def test_a_summary_saved_under_the_former_name_reads() -> None:
    target, draft = model_pair(vocab=12, quality=0.3, seed=3, top_k=3)
    rows = list(speculative_runs(target, draft, runs=500, k=6, seed=5, fault="greedy-draft"))
    whole, _ = tally(rows)
    saved = whole.to_dict()

    def renamed(name: str) -> str:
        return "target-probability-only" if name == "greedy-draft" else name

    former = {
        **saved,
        "explains": {renamed(name): runs for name, runs in saved["explains"].items()},
        "alone": {renamed(name): runs for name, runs in saved["alone"].items()},
        "examples": [{**item, "rules": [renamed(name) for name in item["rules"]]} for item in saved["examples"]],
    }
    assert ReportedTally.from_dict(former) == whole
    assert whole.explains["greedy-draft"] == whole.mismatches > 0


@pytest.mark.parametrize(
    ("name", "params", "kind"),
    [
        ("standard", None, "exact"),
        ("block", None, "exact"),
        ("sample-match", None, "exact"),
        ("tree-residual", None, "exact"),
        ("greedy-draft", None, "design"),
        ("one-hot", None, "design"),
        ("argmax", None, "design"),
        ("tree-target-cdf", None, "design"),
        ("tree-target-cdf", {"threshold_single": 1.0, "threshold_acc": 1.0}, "design"),
        ("tree-target-cdf", {"threshold_acc": 0.7}, "lossy"),
        ("SGLANG_TREE", {"threshold_single": 0.3}, "lossy"),
        ("typical", {"epsilon": 0.09, "delta": 0.3}, "lossy"),
        ("synthetic", None, "measures-nothing"),
    ],
)
def test_the_verdict_on_any_rule_follows_the_table(name: str, params: dict[str, float] | None, kind: str) -> None:
    from specaccept_cli.summary.server import VERDICT_WORDS, rule_verdict

    verdict = rule_verdict(name, params)
    assert verdict.kind == kind and kind in VERDICT_WORDS
    if kind == "lossy" and params and "threshold" in next(iter(params)):
        assert "below 1" in verdict.meaning


def test_a_name_outside_the_table_has_no_verdict() -> None:
    from specaccept_cli.summary.server import rule_verdict

    with pytest.raises(KeyError, match="unknown rule 'strict'"):
        rule_verdict("strict")
