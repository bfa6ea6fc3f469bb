"""specaccept: audit speculative-decoding acceptance logs with the exact accept-prefix rule.

The public API. The data flows one way:
inputs -> `read` (batches) -> `rule` (accepted lengths) -> `summary` (additive state, then
estimates) -> `checks` -> `views`; `summarise` wires the first stages, serial or parallel.

    from specaccept_cli import summarise, estimate, FieldSpec, Plan, ReadRequest
    state = summarise(["logs.jsonl.gz"], FieldSpec(extras=("model",)), Plan(group_by="model"), jobs=2)
    numbers = estimate(state)          # alpha, intervals, per-position rates, ...
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
    from specaccept_cli.checks import Comparison, GateResult, check_gates, compare
    from specaccept_cli.pipeline import ReadRequest, summarise
    from specaccept_cli.read.sources import read_all
    from specaccept_cli.rule.batch import FieldSpec, RunBatch
    from specaccept_cli.rule.vectorized import BatchOutcome, accept_prefix_batch
    from specaccept_cli.summary.estimates import Estimates, estimate
    from specaccept_cli.summary.evaluate import Plan
    from specaccept_cli.summary.files import merge_summaries, read_summary_file, summary_from_object, summary_object
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.summary.windows import WindowSpec, drift_test

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
    "check_gates": "specaccept_cli.checks",
    "compare": "specaccept_cli.checks",
    "Comparison": "specaccept_cli.checks",
    "GateResult": "specaccept_cli.checks",
    "WindowSpec": "specaccept_cli.summary.windows",
    "drift_test": "specaccept_cli.summary.windows",
}

__all__ = [
    "BatchOutcome",
    "Comparison",
    "Estimates",
    "FieldSpec",
    "GateResult",
    "InputError",
    "Plan",
    "ReadRequest",
    "RunBatch",
    "SpecacceptError",
    "Summary",
    "WindowSpec",
    "__version__",
    "accept_prefix",
    "accept_prefix_batch",
    "check_gates",
    "compare",
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
