"""specaccept: audit speculative-decoding acceptance logs with the exact accept-prefix rule.

The public API. The data flows one way:
inputs -> `read` (batches) -> `rule` (accepted lengths) -> `summary` (additive state, then
estimates) -> `conclude` (every test, gate and verdict, once) -> `views`; `summarise` wires the first
stages, serial or parallel.

    from specaccept_cli import summarise, conclude, FieldSpec, GateSpec, Plan, ReadRequest
    state = summarise(["logs.jsonl.gz"], FieldSpec(extras=("model",)), Plan(group_by="model"), jobs=2)
    findings = conclude(state, spec=GateSpec(min_alpha=0.6))
    findings.numbers.alpha             # alpha, intervals, per-position rates, ...
    findings.verdict                   # every check: (check, "ok" | "warn" | "fail", text)
    same = summarise(ReadRequest(["logs.jsonl.gz"], FieldSpec(extras=("model",)), Plan(group_by="model"), jobs=2))

Nothing here imports click or rich, and numpy/pyarrow load only when a name that needs
them is first used, so `from specaccept_cli import accept_prefix` stays instant.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from specaccept_cli.errors import InputError, SpecacceptError
from specaccept_cli.rule.scalar import accept_prefix

if TYPE_CHECKING:
    from specaccept_cli.pipeline import ReadRequest, summarise
    from specaccept_cli.read.sources import read_all
    from specaccept_cli.rule.batch import FieldSpec, RunBatch
    from specaccept_cli.rule.vectorized import BatchOutcome, accept_prefix_batch
    from specaccept_cli.summary.estimates import Estimates, estimate
    from specaccept_cli.summary.evaluate import Plan
    from specaccept_cli.summary.files import merge_summaries, read_summary_file, summary_from_object, summary_object
    from specaccept_cli.summary.server import ReportedTally, SamplerTally, TestResult
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.summary.windows import Drift, WindowEstimate, WindowSpec, WindowTally, drift_test
    from specaccept_cli.verdict import Findings, GateSpec, SamplerTest, Status, VerdictEntry, conclude
    from specaccept_cli.verdict.checks import Comparison, GateResult, Issue, MetricComparison, check_gates, compare

from specaccept_cli.version import __version__

# Public name -> the module that defines it; loaded on first use (PEP 562).
_LAZY = {
    "summarise": "specaccept_cli.pipeline",
    "ReadRequest": "specaccept_cli.pipeline",
    "read_all": "specaccept_cli.read.sources",
    "FieldSpec": "specaccept_cli.rule.batch",
    "RunBatch": "specaccept_cli.rule.batch",
    "BatchOutcome": "specaccept_cli.rule.vectorized",
    "accept_prefix_batch": "specaccept_cli.rule.vectorized",
    "Plan": "specaccept_cli.summary.evaluate",
    "Summary": "specaccept_cli.summary.state",
    "Estimates": "specaccept_cli.summary.estimates",
    "estimate": "specaccept_cli.summary.estimates",
    "summary_object": "specaccept_cli.summary.files",
    "summary_from_object": "specaccept_cli.summary.files",
    "read_summary_file": "specaccept_cli.summary.files",
    "merge_summaries": "specaccept_cli.summary.files",
    "check_gates": "specaccept_cli.verdict.checks",
    "compare": "specaccept_cli.verdict.checks",
    "Comparison": "specaccept_cli.verdict.checks",
    "GateResult": "specaccept_cli.verdict.checks",
    "Issue": "specaccept_cli.verdict.checks",
    "MetricComparison": "specaccept_cli.verdict.checks",
    "conclude": "specaccept_cli.verdict",
    "Findings": "specaccept_cli.verdict",
    "GateSpec": "specaccept_cli.verdict",
    "SamplerTest": "specaccept_cli.verdict",
    "VerdictEntry": "specaccept_cli.verdict",
    "Status": "specaccept_cli.verdict",
    "ReportedTally": "specaccept_cli.summary.server",
    "SamplerTally": "specaccept_cli.summary.server",
    "TestResult": "specaccept_cli.summary.server",
    "Drift": "specaccept_cli.summary.windows",
    "WindowEstimate": "specaccept_cli.summary.windows",
    "WindowTally": "specaccept_cli.summary.windows",
    "WindowSpec": "specaccept_cli.summary.windows",
    "drift_test": "specaccept_cli.summary.windows",
}

__all__ = [
    "BatchOutcome",
    "Comparison",
    "Drift",
    "Estimates",
    "FieldSpec",
    "Findings",
    "GateResult",
    "GateSpec",
    "InputError",
    "Issue",
    "MetricComparison",
    "Plan",
    "ReadRequest",
    "ReportedTally",
    "RunBatch",
    "SamplerTally",
    "SamplerTest",
    "SpecacceptError",
    "Status",
    "Summary",
    "TestResult",
    "VerdictEntry",
    "WindowEstimate",
    "WindowSpec",
    "WindowTally",
    "__version__",
    "accept_prefix",
    "accept_prefix_batch",
    "check_gates",
    "compare",
    "conclude",
    "drift_test",
    "estimate",
    "merge_summaries",
    "read_all",
    "read_summary_file",
    "summarise",
    "summary_from_object",
    "summary_object",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'specaccept_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
