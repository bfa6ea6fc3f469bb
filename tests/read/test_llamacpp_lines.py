"""llama.cpp's statistics lines (both layouts) and its LLAMA_TRACE verify-step lines, built with the
engine's own format strings (llama.cpp 0c1e570: common/speculative.cpp, tools/server/server-context.cpp,
widths and padding included) from simulated steps whose truth is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines import EngineInterval, parse_engine_log
from tests.helpers import invoke

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


# tools/server/server-task.cpp to_metrics(): the counters are doubles through std::stringstream (6 significant
# digits, "%g"); the per-position counters are uint64_t, printed whole.
def llama_scrape(drafts: int, drafted: int, accepted: int, per_pos: list[int]) -> list[str]:
    lines = []
    for name, value in (
        ("spec_decode_num_draft_tokens_total", drafted),
        ("spec_decode_num_accepted_tokens_total", accepted),
        ("spec_decode_num_drafts_total", drafts),
    ):
        lines += [f"# TYPE llamacpp:{name} counter", f"llamacpp:{name} {float(value):g}"]
    lines.append("# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter")
    lines += [
        f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {c}' for i, c in enumerate(per_pos)
    ]
    return lines


def simulated_counters(seed: int, n: int) -> tuple[int, int, int, list[int], int]:
    """(drafts, drafted, accepted, per position, examined) of n verify steps of up to 4 tokens."""
    rng = np.random.default_rng(seed)
    d = rng.integers(1, 5, size=n)
    a = np.minimum(d, rng.geometric(0.4, size=n) - 1)
    per_pos = [int((a > i).sum()) for i in range(4)]
    return n, int(d.sum()), int(a.sum()), per_pos, int((a + (a < d)).sum())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counters_of_a_million_and_more_are_bounds_that_hold_the_truth(seed: int) -> None:
    first = simulated_counters(seed, 300_000)
    second = simulated_counters(seed + 100, 250_000)
    total = (
        first[0] + second[0],
        first[1] + second[1],
        first[2] + second[2],
        [x + y for x, y in zip(first[3], second[3], strict=True)],
    )
    before, after = llama_scrape(*first[:4]), llama_scrape(*total)
    assert any("e+06" in line for line in after)  # stringstream rounded the drafted tokens
    [item] = list(parse_engine_log([*before, "", *after], "m.prom", "prometheus"))
    assert isinstance(item, EngineInterval) and item.fmt == "llamacpp-prometheus"
    drafts, drafted, accepted, per_pos, examined = second
    assert item.accepted == accepted and item.per_position == tuple(per_pos)  # exact: the per-position sum
    assert item.draft_tokens_bounds is not None
    low, high = item.draft_tokens_bounds
    assert low <= drafted <= high and high - low <= 20 and item.draft_tokens == low
    assert item.examined_bounds is not None and item.examined_bounds[0] <= examined <= item.examined_bounds[1]
    assert item.alpha_bounds is not None and item.alpha_bounds[0] <= accepted / examined <= item.alpha_bounds[1]
    assert item.drafts_bounds is not None and item.drafts_bounds[0] <= drafts <= item.drafts_bounds[1]
    assert any("6 significant digits" in note for note in item.notes)


def test_a_rounded_accepted_counter_is_pinned_by_the_per_position_counts() -> None:
    drafts, drafted, accepted, per_pos, _ = simulated_counters(9, 40_000)
    scale = 40  # counters of the millions, every printed figure but the per-position ones rounded
    lines = llama_scrape(drafts * scale, drafted * scale, accepted * scale, [c * scale for c in per_pos])
    [item] = list(parse_engine_log(lines, "one.prom", "prometheus"))
    assert isinstance(item, EngineInterval) and item.accepted == accepted * scale
    wrong = [line.replace(f'{{position="0"}} {per_pos[0] * scale}', '{position="0"} 1') for line in lines]
    [bad] = list(parse_engine_log(wrong, "one.prom", "prometheus"))
    assert isinstance(bad, InputError) and "inconsistent llama.cpp counters" in bad.message


def test_rounded_drafted_tokens_reach_the_audit_as_bounds(tmp_path: Path) -> None:
    first, second = simulated_counters(4, 300_000), simulated_counters(5, 260_000)
    total = [first[i] + second[i] for i in range(3)] + [[x + y for x, y in zip(first[3], second[3], strict=True)]]
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text("\n".join(llama_scrape(*first[:4])) + "\n")
    after.write_text("\n".join(llama_scrape(*total)) + "\n")  # type: ignore[arg-type]
    result = invoke("audit", str(before), str(after), "-o", "json")
    assert result.exit_code == 0, result.output
    engine = orjson.loads(result.stdout)["engine"]
    _, _, accepted, _, examined = second
    low, high = engine["alpha_bounds_all_intervals"]
    assert low <= accepted / examined <= high
    # The summary's drafted total takes the low bound; the interval says the counter was rounded.
    assert any("6 significant digits" in example for example in engine["examples"])
