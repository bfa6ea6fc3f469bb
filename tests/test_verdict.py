"""`conclude`: every check said once, in order, as data and in words without any option's name."""

from __future__ import annotations

import re

import numpy as np
import pytest
from msgspec.structs import replace

import specaccept_cli
from specaccept_cli import Findings, GateSpec, conclude
from specaccept_cli.summary.state import Summary
from specaccept_cli.verdict import CHECKS
from tests.helpers import simulated


def one_run() -> Summary:
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[3, 1] = 1
    return Summary(counts=counts)


def test_findings_are_frozen_and_exported() -> None:
    findings = conclude(simulated(200, 0.7, seed=1))
    with pytest.raises(AttributeError, match="immutable"):
        findings.verdict = ()  # type: ignore[misc]
    for name in ("conclude", "Findings", "GateSpec", "VerdictEntry", "Issue", "SamplerTest", "Drift"):
        assert name in specaccept_cli.__all__ and getattr(specaccept_cli, name) is not None
    assert isinstance(findings, Findings)


def test_every_entry_has_a_status_and_no_option_name() -> None:
    baseline = simulated(500, 0.8, seed=2)
    findings = conclude(simulated(500, 0.6, seed=3), baseline, GateSpec(min_alpha=0.7, max_mismatches=0))
    assert {entry.status for entry in findings.verdict} <= {"ok", "warn", "fail"}
    assert not any("--" in entry.text for entry in findings.verdict), [e.text for e in findings.verdict]
    checks = [entry.check for entry in findings.verdict]
    assert checks.index("gate") < checks.index("baseline") < checks.index("iid")  # CHECKS' order
    assert len(CHECKS) == 11  # rule_entries: the runs left out of alpha (issue 42)
    # A failure is a typed record: which check, what went wrong, the value against its limit.
    gate = next(issue for issue in findings.failures if issue.check == "gate")
    assert (gate.kind, gate.metric, gate.limit) == ("below", "alpha", 0.7)
    assert gate.value is not None and gate.value < 0.7
    assert findings.failed


def test_baseline_in_its_three_states() -> None:
    baseline = simulated(3000, 0.8, seed=4)
    same = conclude(simulated(3000, 0.8, seed=5), baseline)
    assert same.entries("baseline")[0].status == "ok"
    assert same.entries("baseline")[0].text.startswith("no drop beyond 0.02 from the baseline (alpha ")
    # 3,000 runs a side cannot see a 2% drop: the comparison says so, with the drop it can see.
    underpowered = [entry.text for entry in same.entries("baseline")[1:]]
    assert underpowered[0].startswith("alpha comparison is underpowered: with 80% power it flags a drop of 4.")
    needs = re.search(r"not one just beyond the tolerated 2\.00%; that needs about ([\d,]+) runs$", underpowered[0])
    assert needs is not None and 6_000 < int(needs.group(1).replace(",", "")) < 12_000  # more than the 3,000 here
    # A drop beyond max-drop that noise explains: a warning that gives its p, not "no drop".
    small = conclude(simulated(300, 0.74, seed=6), baseline)  # 4.4% down, Holm p = 0.23
    warned = [entry for entry in small.entries("baseline") if entry.status == "warn"]
    row = small.comparison.metrics[0] if small.comparison else None
    assert row is not None and row.change is not None and row.change < -0.02 and row.verdict == "ok"
    assert warned and warned[0].text.startswith("alpha 0.")
    assert "a drop beyond the tolerated 0.02, but not significant (Holm p = " in warned[0].text
    assert not small.failed
    regressed = conclude(simulated(3000, 0.6, seed=7), baseline)
    assert regressed.status("baseline") == "fail" and "regressed" in regressed.entries("baseline")[0].text


def test_drift_cannot_pass_untested_when_it_is_gated() -> None:
    """Windows come from reading (the per-view tests cover a drifting log end to end)."""
    findings = conclude(one_run(), spec=GateSpec(strict_drift=True))
    assert findings.status("drift") == "fail"  # no windows to test: gating drift cannot pass
    assert conclude(one_run()).status("drift") is None


def test_no_valid_run_fails_and_allow_empty_accepts_it() -> None:
    empty = replace(Summary(), skipped_rows=3)
    assert [issue.kind for issue in conclude(empty).failures] == ["no_valid_run"]
    allowed = conclude(empty, spec=GateSpec(allow_empty=True))
    assert not allowed.failed and allowed.status("skipped") == "warn"
    too_many = conclude(replace(simulated(50, 0.7, seed=10), skipped_rows=5), spec=GateSpec(max_errors=2))
    assert [(issue.kind, issue.value, issue.limit) for issue in too_many.failures] == [("too_many", 5, 2)]
