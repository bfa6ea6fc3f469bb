"""The verdict: `conclude(summary, baseline, spec) -> Findings`, the one place every estimate, test and check
is computed, so every view draws the same answer.

A folder of its own rather than more of `checks.py`: `checks` stays the comparison engine (the
two-sample test, Holm, the k-mix distance) that `conclude` calls, while the verdict holds what is
decided from it and everything else (the findings' types apart from the checks they run).
"""

from __future__ import annotations

from specaccept_cli.verdict.conclude import CHECKS, conclude, skipped_phrase
from specaccept_cli.verdict.findings import Findings, GateSpec, SamplerTest, Status, VerdictEntry

__all__ = ["CHECKS", "Findings", "GateSpec", "SamplerTest", "Status", "VerdictEntry", "conclude", "skipped_phrase"]
