"""`evaluate` on a batch mixing `standard` runs with other rules' stand-in runs: the rule runs over the standard
runs alone, and the outcome equals, field by field and bit for bit, the one of running it over every run and
taking the threshold sums and tallies from the standard runs (what `evaluate` did before)."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.rows import interleave
from specaccept_cli.rule.steps import offsets_of
from specaccept_cli.rule.vectorized import BatchOutcome, accept_prefix_batch
from specaccept_cli.summary.evaluate import evaluate


def reference(batch: RunBatch, per_run: bool, tallies: bool) -> BatchOutcome:
    """The rule over every run, its threshold sums and tallies then taken from a second run over the standard ones."""
    outcome = accept_prefix_batch(batch.offsets, batch.p, batch.q, batch.r, per_run, tallies=tallies)
    standard = batch.standard_runs
    if standard is None:
        return outcome
    alone = reference(batch.select(standard), per_run, tallies)

    def spread(values: Any) -> Any:
        if values is None:
            return None
        every = np.zeros(standard.shape[0], dtype=np.int64)
        every[standard] = values
        return every

    return replace(
        outcome,
        threshold_sum_fixed=alone.threshold_sum_fixed,
        sampled_tokens=alone.sampled_tokens,
        examined_threshold_sum_fixed=alone.examined_threshold_sum_fixed,
        threshold_fixed_per_run=spread(alone.threshold_fixed_per_run),
        examined_threshold_fixed_per_run=spread(alone.examined_threshold_fixed_per_run),
        tallies=alone.tallies,
    )


def as_plain(outcome: BatchOutcome) -> object:
    return msgspec.to_builtins(outcome, enc_hook=lambda value: (str(value.dtype), value.tolist()))


@st.composite
def mixed_batches(draw: st.DrawFn) -> RunBatch:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    standard_runs = draw(st.integers(0, 30))
    k = rng.integers(0, 9, standard_runs)
    total = int(k.sum())
    edgy = np.array([0.0, 1.0, 0.5, 5e-324])
    p = np.where(rng.random(total) < 0.2, edgy[rng.integers(0, 4, total)], rng.random(total))
    q = np.maximum(rng.random(total), 1e-3)
    r = np.where(rng.random(total) < 0.1, p / q, rng.random(total))  # r on its threshold now and then
    r = np.minimum(r, 1.0)
    others = draw(st.integers(0, 30))
    other_k = rng.integers(0, 9, others)
    accepted = np.array([rng.integers(0, length + 1) for length in other_k.tolist()], dtype=np.int64)
    lines = rng.permutation(standard_runs + others) + 1
    standard = RunBatch("x", np.sort(lines[:standard_runs]), offsets_of(k.tolist()), p, q, r, extras={"id": []})
    standard.extras["id"] = list(range(standard_runs))
    rules = [draw(st.sampled_from(["block", "argmax", "tree-match"])) for _ in range(others)]
    return interleave(standard, np.sort(lines[standard_runs:]), other_k, accepted, {"id": [None] * others}, rules)


@given(mixed_batches(), st.booleans(), st.booleans())
def test_stand_in_runs_are_not_recomputed_and_nothing_changes(batch: RunBatch, per_run: bool, tallies: bool) -> None:
    assert as_plain(evaluate(batch, per_run, tallies)) == as_plain(reference(batch, per_run, tallies))


def test_a_batch_of_standard_runs_alone_is_untouched() -> None:
    rng = np.random.default_rng(1)
    k = rng.integers(1, 6, 50)
    total = int(k.sum())
    batch = RunBatch(
        "x", np.arange(1, 51), offsets_of(k.tolist()), rng.random(total), np.full(total, 0.5), rng.random(total)
    )
    for per_run in (False, True):
        assert as_plain(evaluate(batch, per_run, True)) == as_plain(reference(batch, per_run, True))
