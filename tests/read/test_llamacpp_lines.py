"""llama.cpp's statistics lines (both layouts) and its LLAMA_TRACE verify-step lines, built with the
engine's own format strings (llama.cpp 0c1e570: common/speculative.cpp, tools/server/server-context.cpp,
widths and padding included) from simulated steps whose truth is known."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines import EngineInterval, parse_engine_log

# "slot %12.*s: id %2d | task %d | " (SLT_INF, server-common.h) then the verify step's format.
SLOT = "slot %12.12s: id %2d | task %d | "
STEP = SLOT + "accepted %2d/%2d draft tokens"
RESTORE = STEP + " (restore checkpoint)"
DEBUG = SLOT + "accepted %d/%d draft tokens, new n_tokens = %d"
REQUEST = SLOT + "draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f"
PERPOS = SLOT + "     acc per pos = (%s)"
# "spec %12.*s: " (SPC_TRC) then common_speculative_print_stats()'s two layouts.
STATS = (
    "spec %12.12s: statistics %16s: #calls(b,g,a) = %4d %6d %6d, #gen drafts = %6d, #acc drafts = %5d, "
    "#gen tokens = %6d, #acc tokens = %5d%s%s"
)
OLD_STATS = "statistics %s: #calls = %d, #gen drafts = %d, #acc drafts = %d, #gen tokens = %d, #acc tokens = %d%s"


def steps(seed: int, n: int, n_max: int = 4) -> list[tuple[int, int]]:
    """(drafted, accepted) per verify step: drafts of 1..n_max tokens (p-min stops), greedy prefix acceptance."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d = int(rng.integers(1, n_max + 1))
        a = 0
        while a < d and rng.random() < 0.6:
            a += 1
        out.append((d, a))
    return out


def request_lines(pairs: list[tuple[int, int]], slot: int = 0, task: int = 4, n_max: int = 4) -> list[str]:
    """What print_timings() prints at -lv 4 for a request of these steps."""
    accepted, drafted, n = sum(a for _, a in pairs), sum(d for d, _ in pairs), len(pairs)
    ratio = float(np.float32(accepted) / np.float32(drafted))
    per_pos = [sum(1 for _, a in pairs if a > i) for i in range(n_max)]
    rates = ", ".join(f"{c / n:.3f}" for c in per_pos)
    return [
        REQUEST % ("print_timing", slot, task, ratio, accepted, drafted, 1 + accepted / n),
        PERPOS % ("print_timing", slot, task, rates),
    ]


def trace_lines(pairs: list[tuple[int, int]], slot: int = 0, task: int = 4) -> list[str]:
    return [STEP % ("operator()", slot, task, a, d) for d, a in pairs]


def truth(pairs: list[tuple[int, int]]) -> tuple[int, int, int]:
    """(accepted, drafted, examined): a step examines its accepted tokens and the rejected one, if any."""
    return (
        sum(a for _, a in pairs),
        sum(d for d, _ in pairs),
        sum(a + (1 if a < d else 0) for d, a in pairs),
    )


def parsed(lines: list[str]) -> tuple[list[EngineInterval | InputError], object]:
    parse = parse_engine_log(lines, "llama.log")
    return list(parse), parse.tally


@given(st.integers(0, 10_000), st.integers(1, 80))
def test_trace_lines_give_the_exact_histogram_and_close_with_their_request_line(seed: int, n: int) -> None:
    pairs = steps(seed, n)
    lines = ["srv  update_slots: all slots are idle", *trace_lines(pairs), *request_lines(pairs)]
    items, tally = parsed(lines)
    [item] = items
    assert isinstance(item, EngineInterval) and item.fmt == "llamacpp-trace" and item.counts is not None
    accepted, drafted, examined = truth(pairs)
    assert (item.accepted, item.draft_tokens, item.examined, item.drafts) == (accepted, drafted, examined, n)
    assert item.alpha == pytest.approx(accepted / examined)
    for d, a in set(pairs):
        assert item.counts[d, a] == pairs.count((d, a))
    # every line counted once: the trace and request lines as metrics, the idle line as other output
    assert (tally.lines, tally.metrics, tally.ignored, tally.bad) == (len(lines), len(lines) - 1, 1, 0)


def test_a_request_line_that_disagrees_with_its_trace_lines_is_bad() -> None:
    pairs = steps(3, 20)
    wrong = request_lines(pairs[:-1])  # fewer tokens than its own steps accepted
    items, _ = parsed([*trace_lines(pairs), *wrong])
    [item] = items
    assert isinstance(item, InputError) and item.line == len(pairs) + 1
    assert "inconsistent llama.cpp lines" in item.message and "trace lines from line 1" in item.message


def test_a_wrong_mean_length_beside_matching_totals_is_bad() -> None:
    pairs = steps(4, 12)
    line, perpos = request_lines(pairs)
    broken = line.rsplit("mean len = ", 1)[0] + "mean len =  9.99"
    [item] = parsed([*trace_lines(pairs), broken, perpos])[0]
    assert isinstance(item, InputError) and "mean length 9.99" in item.message


def test_trace_lines_without_their_request_line_are_still_counted_exactly() -> None:
    pairs = steps(5, 30)
    items, tally = parsed(trace_lines(pairs))
    [item] = items
    assert isinstance(item, EngineInterval) and item.counts is not None and item.line == 1
    assert (item.accepted, item.draft_tokens) == truth(pairs)[:2]
    assert any("not in the input" in note for note in item.notes)
    assert tally.metrics == len(pairs)


def test_a_log_that_starts_inside_a_request_gives_exact_steps_and_a_bounded_rest() -> None:
    pairs = steps(6, 40)
    seen = pairs[10:]  # the log was cut: the first 10 steps' trace lines are not in it
    items, _ = parsed([*trace_lines(seen), *request_lines(pairs)])
    exact, rest = items
    assert isinstance(exact, EngineInterval) and isinstance(rest, EngineInterval)
    assert exact.counts is not None and (exact.accepted, exact.draft_tokens) == truth(seen)[:2]
    assert rest.counts is None and (rest.accepted, rest.draft_tokens) == truth(pairs[:10])[:2]
    assert rest.alpha_bounds is not None
    low, high = rest.alpha_bounds
    accepted, _, examined = truth(pairs[:10])
    assert low <= accepted / examined <= high


def test_slots_interleave_and_a_new_task_closes_the_old_one() -> None:
    one, two, three = steps(7, 9), steps(8, 11), steps(9, 5)
    lines = []
    for i in range(11):
        if i < len(one):
            lines.append(trace_lines([one[i]], slot=0, task=1)[0])
        lines.append(trace_lines([two[i]], slot=1, task=2)[0])
    lines += request_lines(two, slot=1, task=2)
    lines += trace_lines(three, slot=0, task=3)  # slot 0's task 1 ended without its line
    lines += request_lines(three, slot=0, task=3)
    items, tally = parsed(lines)
    assert [type(item) for item in items] == [EngineInterval] * 3
    by_task = {item.labels["task"]: item for item in items if isinstance(item, EngineInterval)}
    for task, pairs in (("1", one), ("2", two), ("3", three)):
        assert (by_task[task].accepted, by_task[task].draft_tokens) == truth(pairs)[:2]
    assert tally.lines == tally.metrics == len(lines)


def test_a_checkpoint_restore_counts_the_step_once_and_not_its_replay() -> None:
    # server-context.cpp: a partial acceptance on a recurrent model prints "(restore checkpoint)", then the
    # accepted prefix and its next token are verified again, a second trace line that drafts nothing new.
    lines = [
        RESTORE % ("operator()", 0, 4, 1, 4),
        STEP % ("operator()", 0, 4, 2, 2),
        STEP % ("operator()", 0, 4, 3, 3),
    ]
    [item] = parsed(lines)[0]
    assert isinstance(item, EngineInterval) and (item.accepted, item.draft_tokens, item.drafts) == (4, 7, 2)


def test_debug_step_lines_count_alone_and_repeat_nothing_beside_trace_lines() -> None:
    pairs = steps(10, 6)
    debug = [DEBUG % ("operator()", 0, 4, a, d, 40 + i) for i, (d, a) in enumerate(pairs)]
    [alone] = parsed(debug)[0]
    assert isinstance(alone, EngineInterval) and (alone.accepted, alone.draft_tokens) == truth(pairs)[:2]
    both = [line for pair in zip(trace_lines(pairs), debug, strict=True) for line in pair]
    items, tally = parsed(both)
    [item] = items
    assert isinstance(item, EngineInterval) and (item.accepted, item.draft_tokens) == truth(pairs)[:2]
    assert tally.ignored == len(pairs)


@given(st.integers(0, 10_000), st.integers(1, 200))
def test_statistics_lines_of_both_layouts_are_running_totals(seed: int, n: int) -> None:
    pairs = steps(seed, n)
    accepted, drafted, _ = truth(pairs)
    acc_drafts = sum(1 for _, a in pairs if a > 0)
    per_pos = [sum(1 for _, a in pairs if a > i) for i in range(max(a for _, a in pairs))]
    tail = (
        f", #mean acc len = {1 + accepted / n:.2f}, #acc rate/pos = ({', '.join(f'{c / n:.3f}' for c in per_pos)})"
        if per_pos
        else f", #mean acc len = {1 + accepted / n:.2f}, #acc rate/pos = ()"
    )
    current = STATS % (
        "common_speculative_print_stats",
        "draft-simple",
        1,
        n,
        n,
        n,
        acc_drafts,
        drafted,
        accepted,
        tail,
        "",
    )
    old = OLD_STATS % ("draft", n, n, acc_drafts, drafted, accepted, ", dur = 12.345 ms")
    for line in (current, old):
        [item] = parsed([line])[0]
        assert isinstance(item, EngineInterval), line
        assert item.fmt == "llamacpp-stats" and (item.accepted, item.draft_tokens) == (accepted, drafted)
        assert item.drafts == n and item.alpha_bounds is not None
        low, high = item.alpha_bounds
        exact = truth(pairs)
        assert low <= exact[0] / exact[2] <= high


def test_statistics_with_perf_timing_and_padding_parse() -> None:
    line = STATS % ("common_speculative_print_stats", "ngram-mod", 3, 17, 12, 12, 7, 40, 19, "", "")
    line += ", dur(b,g,a) = 0.012, 1.250, 0.003 ms"
    [item] = parsed([line])[0]
    assert isinstance(item, EngineInterval) and item.labels == {"drafter": "ngram-mod"} and item.drafts == 12


def test_statistics_whose_mean_length_disagrees_are_bad() -> None:
    line = STATS % (
        "common_speculative_print_stats",
        "draft-simple",
        1,
        10,
        10,
        10,
        5,
        30,
        12,
        ", #mean acc len = 3.50, #acc rate/pos = (0.500, 0.400, 0.300)",
        "",
    )
    [item] = parsed([line])[0]
    assert isinstance(item, InputError) and "inconsistent llama.cpp statistics" in item.message
