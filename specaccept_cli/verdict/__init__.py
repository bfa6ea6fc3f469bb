"""The verdict: `conclude(summary, baseline, spec) -> Findings`, the one place every estimate, test and check
is computed, so every view draws the same answer.

`checks` is the comparison engine that `conclude` calls (the gates, the two-sample drop test, Holm,
the k-mix distance, power planning); `conclude` and `findings` hold what is decided from it (the
findings' types apart from the checks they run).
"""

from __future__ import annotations

from specaccept_cli.verdict.conclude import CHECKS, conclude, skipped_phrase
from specaccept_cli.verdict.findings import Findings, GateSpec, SamplerTest, Status, VerdictEntry

__all__ = ["CHECKS", "Findings", "GateSpec", "SamplerTest", "Status", "VerdictEntry", "conclude", "skipped_phrase"]
