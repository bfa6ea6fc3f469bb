"""Adding a distributed audit's parts: any tree of any fan-in gives the left-to-right sum, as one process reads."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import InputError, SkippedRow
from specaccept_cli.pipeline.distributed import Part, add_parts
from specaccept_cli.summary.state import Summary
from tests.helpers import outcome_summary


@st.composite
def parts(draw: st.DrawFn) -> list[Part]:
    """Parts of one source as byte-range tasks return them: lines from 1, some rows skipped, maybe a failure."""
    count = draw(st.integers(1, 12))
    found = []
    for index in range(count):
        lines = draw(st.integers(0, 50))
        skipped = sorted(draw(st.sets(st.integers(1, max(lines, 1)), max_size=3))) if lines else []
        errors = tuple(SkippedRow("log", line, f"bad {index}") for line in skipped)
        summary = outcome_summary(seed=index, runs=draw(st.integers(0, 5)))[0]
        summary = summary + Summary(skipped_rows=len(errors), errors=errors)
        ending = draw(st.sampled_from(["none", "ended", "error"]))
        error = InputError("log", draw(st.integers(1, max(lines, 1))), "first") if ending == "error" else None
        found.append(Part(summary, lines, ending == "ended", error))
    return found


def left_to_right(items: list[Part], within_source: bool) -> Part:
    total = items[0]
    for item in items[1:]:
        total = add_parts([total, item], within_source)
    return total


def tree(items: list[Part], fan_in: int, within_source: bool) -> Part:
    while len(items) > 1:
        items = [add_parts(items[start : start + fan_in], within_source) for start in range(0, len(items), fan_in)]
    return items[0]


def described(part: Part) -> tuple[object, ...]:
    error = None if part.error is None else (part.error.line, part.error.message)
    return part.summary.runs, part.summary.errors, part.summary.skipped_rows, part.lines, part.ended, error


@given(parts(), st.integers(2, 9), st.booleans())
def test_any_tree_adds_as_left_to_right(items: list[Part], fan_in: int, within_source: bool) -> None:
    assert described(tree(items, fan_in, within_source)) == described(left_to_right(items, within_source))


@given(parts())
def test_later_parts_are_shifted_by_the_lines_before_them(items: list[Part]) -> None:
    total = add_parts(items, within_source=True)
    expected: list[int] = []
    offset = 0
    for item in items:
        expected += [row.line + offset for row in item.summary.errors if row.line is not None]
        if item.error is not None or item.ended:
            break
        offset += item.lines
    assert [row.line for row in total.summary.errors] == expected[:20]


def test_a_failed_part_stops_its_source_but_not_the_next_source() -> None:
    counted = outcome_summary(seed=1, runs=4)[0]
    ended = Part(Summary(skipped_sources=1), ended=True)
    assert add_parts([ended, Part(counted)], within_source=True).summary.runs == 0
    assert add_parts([ended, Part(counted)], within_source=False).summary.runs == 4
    failed = Part(Summary(), error=InputError("log", 3, "bad"))
    assert add_parts([failed, Part(counted)], within_source=False).summary.runs == 0
