"""Per-run JSON lines: the compiled formatter writes exactly what the Python loop writes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.native import extension
from specaccept_cli.rule.batch import RunBatch
from specaccept_cli.rule.vectorized import BatchOutcome
from specaccept_cli.views import records
from specaccept_cli.views.records import JsonlWriter

COMPILED = extension("_jsonl_c")
counts = st.integers(0, 2**62)


class _Bytes(io.BytesIO):
    def flush(self) -> None:
        pass


def _written(source: str, lines: list[int], k: list[int], accepted: list[int]) -> bytes:
    arrays = [np.array(values, dtype=np.int64) for values in (lines, k, accepted)]
    offsets = np.zeros(len(lines) + 1, dtype=np.int64)
    empty = np.zeros(0, dtype=np.float64)
    batch = RunBatch(source, arrays[0], offsets, empty, empty, empty)
    outcome = BatchOutcome(k=arrays[1], accepted=arrays[2], passing_tokens=0, threshold_sum_fixed=0, sampled_tokens=0)
    out = _Bytes()
    JsonlWriter(out, ()).write(batch, outcome, {})  # type: ignore[arg-type]
    return out.getvalue()


@given(
    st.text(max_size=12),
    st.lists(st.tuples(counts, counts, st.integers(0, 2**62)), max_size=30),
)
def test_the_compiled_formatter_writes_what_the_loop_writes(source: str, runs: list[tuple[int, int, int]]) -> None:
    if not COMPILED:
        pytest.skip("the compiled reader is not built")
    lines, k, accepted = ([run[i] for run in runs] for i in range(3))
    compiled = _written(source, lines, k, accepted)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(records, "extension", lambda name: False)
        assert _written(source, lines, k, accepted) == compiled


def test_the_formatter_declines_what_it_does_not_write() -> None:
    if not COMPILED:
        pytest.skip("the compiled reader is not built")
    one = np.array([1], dtype=np.int64)
    assert COMPILED.format_runs(b"{", np.array([-1], dtype=np.int64), one, one) is None
    assert COMPILED.format_runs(b"{", one, one, np.array([2**63 - 1], dtype=np.int64)) is None  # a + 1 overflows
    assert COMPILED.format_runs(b"{", one, np.array([1, 2], dtype=np.int64), one) is None
    assert COMPILED.format_runs(b'{"line":', one, one, one) == b'{"line":1,"k":1,"accepted":1,"emitted":2}\n'
