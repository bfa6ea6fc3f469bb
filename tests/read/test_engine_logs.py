"""Engine metrics logs and Prometheus scrapes: verbatim lines, round trips, bounds, errors."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines import (
    EngineInterval,
    LineTally,
    ScrapeSeries,
    parse_engine_log,
    parse_prometheus_scrapes,
    read_prometheus_scrapes,
    recover_counts,
    sniff_engine_format,
)
from tests.engines import (
    counters,
    llama_perpos_line,
    prom_text,
    sglang_meta,
    simulate,
    truth_hist,
    vllm_full_line,
    vllm_perpos_line,
)

SAMPLES = Path(__file__).parent / "engine_logs"


def only(items: list[EngineInterval | InputError]) -> EngineInterval:
    assert len(items) == 1, items
    item = items[0]
    assert isinstance(item, EngineInterval), item
    return item


# ---------------------------------------------------------------------------------------------
# A vLLM v1 line with per-position rates, decoded by hand


VLLM_LINE = (
    "(APIServer pid=12) INFO 11-30 13:00:01 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 3.49, "
    "Accepted throughput: 0.12 tokens/s, Drafted throughput: 0.34 tokens/s, Accepted: 92 tokens, Drafted: 259 tokens, "
    "Per-position acceptance rate: 0.757, 0.622, 0.432, 0.324, 0.189, 0.108, 0.054, Avg Draft acceptance rate: 35.5%"
)


def test_vllm_line_recovers_the_histogram_by_hand() -> None:
    it = only(list(parse_engine_log([VLLM_LINE], "server.log")))
    assert (it.engine, it.fmt, it.line, it.timestamp) == ("vllm", "vllm-log-v1-full", 1, "11-30 13:00:01")
    assert it.labels == {"process": "APIServer", "pid": "12"}
    assert it.k == 7 and it.drafts == 37 and it.draft_tokens == 259 and it.accepted == 92
    assert it.per_position == (28, 23, 16, 12, 7, 4, 2)
    assert it.accepted_hist == (9, 5, 7, 4, 5, 3, 2, 2)
    assert it.counts is not None and it.counts.shape == (8, 8) and it.counts.dtype == np.int64
    assert it.counts[7].tolist() == [9, 5, 7, 4, 5, 3, 2, 2] and int(it.counts[:7].sum()) == 0
    assert it.examined == 37 + 92 - 2
    assert it.alpha == pytest.approx(92 / 127)
    assert it.tokens_per_pass == pytest.approx(1 + 92 / 37)
    assert it.printed["Avg Draft acceptance rate"] == "35.5%"
    assert it.describe() == (
        "vLLM 'Avg Draft acceptance rate' 35.5% = accepted/drafted; per-token alpha = 0.72; tokens per pass 3.49"
    )
    assert it.to_dict()["counts"][7] == [9, 5, 7, 4, 5, 3, 2, 2]


# ---------------------------------------------------------------------------------------------
# Verbatim sample files of each supported version


def test_vllm_v1_full_sample_file_with_ordinary_lines() -> None:
    path = SAMPLES / "vllm-v1-full.log"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert sniff_engine_format(lines) == "vllm-log"
    parse = parse_engine_log(lines, str(path))
    items = list(parse)
    assert all(isinstance(i, EngineInterval) for i in items)
    assert [i.line for i in items if isinstance(i, EngineInterval)] == [4, 7, 9]
    assert parse.tally.metrics == 3 and parse.tally.bad == 0
    assert parse.tally.ignored == len(lines) - 3
    assert all(isinstance(i, EngineInterval) and i.counts is not None for i in items)


def test_vllm_v1_perpos_and_basic_sample_files() -> None:
    with (SAMPLES / "vllm-v1-perpos.log").open("rb") as raw:  # bytes lines, as from a compressed stream
        perpos = list(parse_engine_log(raw, "perpos.log"))
    assert [type(i) for i in perpos] == [EngineInterval, EngineInterval]
    first = perpos[0]
    assert isinstance(first, EngineInterval)
    assert first.fmt == "vllm-log-v1-perpos" and first.counts is not None and first.k == 3
    basic = list(parse_engine_log((SAMPLES / "vllm-v1-basic.log").read_text().splitlines(), "basic.log"))
    it = basic[0]
    assert isinstance(it, EngineInterval) and it.fmt == "vllm-log-v1-basic"
    assert it.counts is None and it.alpha is None and it.alpha_bounds is not None
    assert it.accepted is not None and it.draft_tokens is not None
    low, high = it.alpha_bounds
    assert low == pytest.approx(it.accepted / it.draft_tokens)
    assert high == pytest.approx(it.accepted / (it.accepted + 1))
    # With the draft length from the server's config, the bounds tighten.
    tight = next(iter(parse_engine_log((SAMPLES / "vllm-v1-basic.log").read_text().splitlines(), "basic.log", k=4)))
    assert isinstance(tight, EngineInterval) and tight.alpha_bounds is not None
    assert tight.alpha_bounds[0] >= low and tight.alpha_bounds[1] <= high
    assert tight.alpha_bounds[1] - tight.alpha_bounds[0] < high - low


def test_sglang_sample_file() -> None:
    lines = (SAMPLES / "sglang.log").read_text().splitlines()
    assert sniff_engine_format(lines) == "sglang-log"
    parse = parse_engine_log(lines, "sglang.log", k=3)
    items = list(parse)
    good = [i for i in items if isinstance(i, EngineInterval)]
    assert [i.fmt for i in good] == ["sglang-log", "sglang-log-rate"]
    assert good[0].timestamp == "2025-03-05 10:21:07" and good[0].labels == {"tp": "0"}
    assert good[1].labels == {"dp": "0", "tp": "0"}
    assert good[0].tokens_per_pass_bounds == pytest.approx((3.235, 3.245))
    assert good[0].counts is None and good[0].alpha_bounds is not None
    low, high = good[0].alpha_bounds
    assert 0 < low < high <= 1
    assert parse.tally.ignored == len(lines) - 2 and parse.tally.bad == 0
    assert good[1].printed == {"accept len": "2.87", "accept rate": "0.62"}
    assert "accept len" in good[0].describe()


def test_llamacpp_sample_file() -> None:
    lines = (SAMPLES / "llamacpp.log").read_text().splitlines()
    assert sniff_engine_format(lines) == "llamacpp-log"
    parse = parse_engine_log(lines, "llama.log")
    items = list(parse)
    assert all(isinstance(i, EngineInterval) for i in items), items
    fmts = [i.fmt for i in items if isinstance(i, EngineInterval)]
    assert fmts == [
        "llamacpp-request",
        "llamacpp-stats",
        "llamacpp-request-meanlen",
        "llamacpp-request-perpos",
        "llamacpp-request-perpos",
    ]
    old = items[0]
    assert isinstance(old, EngineInterval)
    assert (old.accepted, old.draft_tokens) == (158, 289) and old.alpha_bounds is not None
    stats = items[1]
    assert isinstance(stats, EngineInterval)
    assert stats.drafts == 120 and stats.labels == {"drafter": "draft"}
    assert stats.alpha_bounds is not None and stats.alpha_bounds[0] <= stats.alpha_bounds[1]
    trace = items[3]  # "draft acceptance ... mean len" followed by the "acc per pos" trace line
    assert isinstance(trace, EngineInterval) and trace.per_position is not None
    assert trace.labels == {"slot": "1", "task": "88"}
    # every line counted: the 'acc per pos' line is a metrics line with its request's
    assert parse.tally.metrics == 6 and parse.tally.bad == 0
    assert parse.tally.lines == parse.tally.metrics + parse.tally.ignored


def test_prometheus_sample_two_scrapes() -> None:
    lines = (SAMPLES / "vllm-metrics.prom").read_text().splitlines()
    assert sniff_engine_format(lines) == "prometheus"
    items = list(parse_prometheus_scrapes(lines, "vllm-metrics.prom"))
    assert all(isinstance(i, EngineInterval) for i in items), items
    interval = only(items)
    one = only(list(parse_prometheus_scrapes(lines[: lines.index("")], "first.prom")))
    assert one.notes[-1] == "one scrape: counts since the counters started"
    assert one.drafts == 1000 and one.per_position == (700, 480, 310) and one.counts is not None
    assert interval.timestamp == "2025-11-30T13:00:10Z"
    assert interval.labels == {"engine": "0", "model_name": "meta-llama/Llama-3.1-8B-Instruct"}
    assert interval.drafts == 400 and interval.accepted == 614 and interval.draft_tokens == 1200
    assert interval.per_position == (292, 196, 126)
    assert interval.counts is not None and interval.counts[3].tolist() == [108, 96, 70, 126]
    assert interval.alpha == pytest.approx(614 / (400 + 292 + 196))


def test_prometheus_counter_reset_counts_from_the_restart_and_says_so() -> None:
    lines = (SAMPLES / "vllm-metrics-reset.prom").read_text().splitlines()
    tally = LineTally()
    items = list(parse_prometheus_scrapes(lines, "reset.prom", tally=tally))
    assert tally.resets == 1 and tally.bad == 0
    interval = only(items)
    # As Prometheus's increase(): the second scrape's counters, counted from zero after the restart.
    assert (interval.drafts, interval.draft_tokens, interval.accepted) == (50, 150, 73)
    assert interval.per_position == (36, 22, 15)
    (note,) = [note for note in interval.notes if note.startswith("counter reset")]
    assert "drafts 1000 -> 50" in note and "lines 1 and 23" in note and "lost" in note


def two_files(first: str, second: str) -> list[EngineInterval | InputError]:
    series = ScrapeSeries()
    items = [*series.add(first.splitlines(), "before.prom", LineTally())]
    items += series.add(second.splitlines(), "after.prom", LineTally())
    return items + list(series.finish())


def test_prometheus_two_files_are_one_series() -> None:
    scrapes = (SAMPLES / "vllm-metrics.prom").read_text().split("\n\n")
    it = only(two_files(scrapes[0], scrapes[1]))
    assert it.drafts == 400 and it.counts is not None and it.source == "after.prom"
    backwards = only(two_files(scrapes[1], scrapes[0]))
    assert any(note.startswith("counter reset") for note in backwards.notes)


def test_sglang_prometheus_gauges() -> None:
    lines = (SAMPLES / "sglang-metrics.prom").read_text().splitlines()
    it = only(list(parse_prometheus_scrapes(lines, "sglang.prom")))
    assert it.engine == "sglang" and it.k == 3 and it.tokens_per_pass == pytest.approx(3.12)
    assert it.counts is None and it.alpha_bounds is not None


# ---------------------------------------------------------------------------------------------
# Round trips: simulated runs -> engine counters -> printed line -> parse -> the truth


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    runs=st.integers(1, 990),
    k=st.integers(1, 8),
    alpha=st.floats(0.02, 0.98),
)
def test_vllm_full_line_round_trip_is_exact(seed: int, runs: int, k: int, alpha: float) -> None:
    lengths, accepted = simulate(seed, runs, k, alpha)
    drafts, draft_tokens, acc, per_pos = counters(lengths, accepted, k)
    it = only(list(parse_engine_log([vllm_full_line(drafts, draft_tokens, acc, per_pos)], "sim.log")))
    assert it.counts is not None
    assert it.counts[k].tolist() == truth_hist(accepted, k)
    examined = int(np.where(accepted < lengths, accepted + 1, lengths).sum())
    assert it.examined == examined
    assert it.alpha == pytest.approx(acc / examined)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), runs=st.integers(1, 990), k=st.integers(1, 6), alpha=st.floats(0.05, 0.95))
def test_vllm_perpos_line_round_trip_is_exact(seed: int, runs: int, k: int, alpha: float) -> None:
    lengths, accepted = simulate(seed, runs, k, alpha)
    drafts, draft_tokens, acc, per_pos = counters(lengths, accepted, k)
    it = only(list(parse_engine_log([vllm_perpos_line(drafts, draft_tokens, acc, per_pos)], "sim.log")))
    assert it.counts is not None and it.counts[k].tolist() == truth_hist(accepted, k)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), runs=st.integers(1500, 20000), k=st.integers(2, 6), alpha=st.floats(0.1, 0.9))
def test_vllm_busy_interval_is_bounded_around_the_truth(seed: int, runs: int, k: int, alpha: float) -> None:
    """Thousands of drafts: 3-decimal rates no longer pin every count; the bounds hold the truth."""
    lengths, accepted = simulate(seed, runs, k, alpha)
    drafts, draft_tokens, acc, per_pos = counters(lengths, accepted, k)
    it = only(list(parse_engine_log([vllm_full_line(drafts, draft_tokens, acc, per_pos)], "sim.log")))
    assert it.drafts == drafts  # Drafted / k
    assert it.per_position_bounds is not None
    for count, (low, high) in zip(per_pos, it.per_position_bounds, strict=True):
        assert low <= count <= high
    true_alpha = acc / int(np.where(accepted < lengths, accepted + 1, lengths).sum())
    if it.alpha is not None:
        assert it.alpha == pytest.approx(true_alpha)
    else:
        assert it.alpha_bounds is not None
        assert it.alpha_bounds[0] - 1e-12 <= true_alpha <= it.alpha_bounds[1] + 1e-12
        assert it.alpha_bounds[1] - it.alpha_bounds[0] < 0.01


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), runs=st.integers(1, 900), k=st.integers(2, 6), alpha=st.floats(0.05, 0.95))
def test_variable_draft_lengths_give_bounds_that_hold_the_truth(seed: int, runs: int, k: int, alpha: float) -> None:
    """n-gram-like drafters: lengths vary, so examined is bounded; the accepted histogram may be exact."""
    lengths, accepted = simulate(seed, runs, k, alpha, variable=True)
    drafts, draft_tokens, acc, per_pos = counters(lengths, accepted, k)
    line = vllm_full_line(drafts, draft_tokens, acc, per_pos)
    it = only(list(parse_engine_log([line], "sim.log", assume_full_drafts=False)))
    assert it.drafts_bounds is not None and it.drafts_bounds[0] <= drafts <= it.drafts_bounds[1]
    examined = int(np.where(accepted < lengths, accepted + 1, lengths).sum())
    assert it.examined_bounds is not None and it.examined_bounds[0] <= examined <= it.examined_bounds[1]
    if it.drafts == drafts and it.per_position is not None:
        assert list(it.accepted_hist or ()) == truth_hist(accepted, k)
    if it.counts is not None:  # only when every draft happened to be full
        assert it.counts[k].tolist() == truth_hist(accepted, k)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), runs=st.integers(1, 900), k=st.integers(1, 6), alpha=st.floats(0.05, 0.95))
def test_llamacpp_perpos_round_trip(seed: int, runs: int, k: int, alpha: float) -> None:
    lengths, accepted = simulate(seed, runs, k, alpha)
    drafts, draft_tokens, acc, per_pos = counters(lengths, accepted, k)
    line = llama_perpos_line(draft_tokens, acc, drafts, per_pos)
    it = only(list(parse_engine_log([line], "llama.log")))
    examined = int(np.where(accepted < lengths, accepted + 1, lengths).sum())
    assert it.examined_bounds is not None and it.examined_bounds[0] <= examined <= it.examined_bounds[1]
    assert it.counts is None  # the draft length is not in the line: never a guessed histogram
    if it.drafts == drafts:
        assert list(it.accepted_hist or ()) == truth_hist(accepted, k)
    # With the draft length from the server's flags (--draft-max), a full-length interval is exact.
    known = only(list(parse_engine_log([line], "llama.log", k=k)))
    assert known.drafts_bounds is not None and known.drafts_bounds[0] <= drafts <= known.drafts_bounds[1]
    if known.drafts == drafts:
        assert known.counts is not None and known.counts[k].tolist() == truth_hist(accepted, k)
        assert known.alpha == pytest.approx(acc / examined)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), runs=st.integers(1, 50000), k=st.integers(1, 8), alpha=st.floats(0.0, 1.0))
def test_prometheus_round_trip_is_exact_at_any_size(seed: int, runs: int, k: int, alpha: float) -> None:
    lengths, accepted = simulate(seed, runs, k, alpha)
    drafts, draft_tokens, acc, per_pos = counters(lengths, accepted, k)
    split = runs // 3
    first = counters(lengths[:split], accepted[:split], k)
    it = only(
        list(parse_prometheus_scrapes([*prom_text(first), "", *prom_text((drafts, draft_tokens, acc, per_pos))], "p"))
    )
    rest = accepted[split:]
    assert it.counts is not None and it.counts[k].tolist() == truth_hist(rest, k)
    assert it.drafts == runs - split


# ---------------------------------------------------------------------------------------------
# Bad lines, hostile labels, mixed output


def test_inconsistent_lines_are_reported_with_line_numbers() -> None:
    bad_rate = VLLM_LINE.replace("0.622", "0.640")  # 0.640 x 37 is not an integer count
    bad_pct = VLLM_LINE.replace("35.5%", "37.5%")
    bad_mean = VLLM_LINE.replace("3.49", "3.60")
    truncated = VLLM_LINE[: VLLM_LINE.index("Per-position")]
    lines = ["INFO starting server", bad_rate, "ordinary", bad_pct, bad_mean, truncated, VLLM_LINE]
    parse = parse_engine_log(lines, "srv.log")
    items = list(parse)
    errors = [i for i in items if isinstance(i, InputError)]
    assert [e.line for e in errors] == [2, 4, 5, 6]
    assert all(e.source == "srv.log" and e.raw is not None for e in errors)
    assert "35.5" not in errors[1].message and "37.5%" in errors[1].message
    assert "no known layout" in errors[3].message
    assert str(errors[0]).startswith("srv.log:2: inconsistent vLLM line")
    assert parse.tally.bad == 4 and parse.tally.metrics == 1 and parse.tally.ignored == 2


def test_per_position_sum_must_equal_accepted() -> None:
    line = VLLM_LINE.replace("Accepted: 92 tokens", "Accepted: 93 tokens").replace("35.5%", "35.9%")
    [item] = list(parse_engine_log([line], "x"))
    assert isinstance(item, InputError)


def test_hostile_label_values_are_data() -> None:
    hostile = 'model_name="[red]evil[/red] \\"quoted\\" back\\\\slash \\n\x1b[31m",engine="0"'
    first = prom_text((10, 30, 12, [6, 4, 2]), hostile)
    second = prom_text((20, 60, 24, [12, 8, 4]), hostile)
    items = list(parse_prometheus_scrapes(["# timestamp 1", *first, "# timestamp 2", *second], "h.prom"))
    it = items[-1]
    assert isinstance(it, EngineInterval)
    assert it.labels["model_name"] == '[red]evil[/red] "quoted" back\\slash \n\x1b[31m'
    assert it.timestamp == "2" and it.counts is not None


def test_hostile_log_text_is_kept_as_data() -> None:
    line = "(\x1b[31m[bold]x[/bold] pid=1) " + VLLM_LINE.split(") ", 1)[1]
    items = list(parse_engine_log([line], "x"))
    it = only(items)
    assert it.counts is not None


def test_mixed_server_output_counts_ordinary_lines() -> None:
    lines = [
        "INFO:     Started server process [12]",
        "(APIServer pid=12) INFO 11-30 13:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 12.0 tokens/s",
        VLLM_LINE,
        b"\xff\xfe binary junk",
        'INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK',
        "[2025-03-05 10:21:07 TP0] Decode batch. #running-req: 1, #token: 10, token usage: 0.00, accept len: 2.00, ",
    ]
    parse = parse_engine_log(lines, "mixed.log")
    items = list(parse)
    assert len(items) == 2 and isinstance(items[1], InputError)  # the SGLang line is another engine's: reported
    assert items[1].line == 6 and "a metrics line of SGLang in vllm-log output" in items[1].message
    assert parse.tally.lines == 6 and parse.tally.metrics == 1 and parse.tally.ignored == 4 and parse.tally.bad == 1
    assert sniff_engine_format(lines) == "vllm-log"
    assert sniff_engine_format(["nothing", "here"]) is None


def test_prometheus_bad_spec_sample_is_an_error_other_metrics_ignored() -> None:
    lines = [
        "# HELP process_cpu_seconds_total Total CPU",
        "process_cpu_seconds_total 12.5",
        'vllm:spec_decode_num_drafts_total{engine="0" 12',
        *prom_text((10, 30, 12, [6, 4, 2])),
    ]
    items = list(parse_prometheus_scrapes(lines, "m.prom"))
    assert isinstance(items[0], InputError) and items[0].line == 3
    assert isinstance(items[1], EngineInterval)


def test_prometheus_scrapes_split_on_repeated_series_and_sample_timestamps() -> None:
    one = prom_text((10, 30, 12, [6, 4, 2]))
    two = prom_text((20, 60, 24, [12, 8, 4]))
    scrapes = [s for s in read_prometheus_scrapes(one + two, "x") if not isinstance(s, InputError)]
    assert len(scrapes) == 2
    stamped = [line + " 1700000000000" for line in one if not line.startswith("#")]
    stamped += [line + " 1700000010000" for line in one if not line.startswith("#")]
    scrapes = [s for s in read_prometheus_scrapes(stamped, "x") if not isinstance(s, InputError)]
    assert [s.timestamp for s in scrapes] == ["1700000000000", "1700000010000"]


def test_prometheus_inconsistent_counters() -> None:
    items = list(parse_prometheus_scrapes(prom_text((10, 30, 12, [6, 4, 3])), "x"))
    assert isinstance(items[0], InputError) and "sum to 13" in items[0].message


def test_no_drafts_interval() -> None:
    line = (
        "INFO 11-30 13:00:01 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: nan, "
        "Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, "
        "Drafted: 0 tokens, Per-position acceptance rate: nan, nan, nan, Avg Draft acceptance rate: nan%"
    )
    it = only(list(parse_engine_log([line], "x")))
    assert it.counts is not None and int(it.counts.sum()) == 0 and it.k == 3


def test_recover_counts_bounds_without_positions() -> None:
    rec = recover_counts(158, 289)
    assert rec.alpha_bounds == pytest.approx((158 / 289, 158 / 159))
    fixed = recover_counts(158, 289 - 289 % 4, k=4)
    assert fixed.alpha_bounds is not None and fixed.alpha_bounds[0] > 158 / 289


def test_rounding_fits_both_sides_of_a_tie() -> None:
    # 0.0625 prints as 0.062 (half-even on the binary value) or 0.063: both are accepted.
    rec = recover_counts(1, 16, rates=["0.062"], drafts=16)
    assert rec.per_position == (1,)
    assert Fraction(1, 16) == Fraction("0.0625")


# ---------------------------------------------------------------------------------------------
# Bounds when the figures cannot pin the counts down, and their cost


def test_totals_with_known_k_bound_alpha_quickly() -> None:
    rec = recover_counts(612_345, 1_000_003, k=7)  # not divisible by 7: drafts varied
    assert rec.alpha_bounds is not None and rec.counts is None
    assert rec.alpha_bounds[0] == pytest.approx(612_345 / 1_000_003)
    full = recover_counts(600_000, 1_000_000, k=8)  # Drafted = 8 x 125000
    assert full.drafts == 125_000 and full.alpha_bounds is not None
    low, high = full.alpha_bounds
    # acc_8 in [max(0, A - 7 x 125000), A // 8] = [0, 75000]
    assert low == pytest.approx(600_000 / (600_000 + 125_000)) and high == pytest.approx(600_000 / 650_000)


def test_llamacpp_statistics_with_known_k_bounds_every_position() -> None:
    rec = recover_counts(400_000, 700_000, drafts=150_000, k=8, acc_first=120_000, assume_full_drafts=False)
    assert rec.per_position_bounds is not None and rec.per_position_bounds[0] == (120_000, 120_000)
    assert rec.alpha_bounds is not None and 0 < rec.alpha_bounds[0] < rec.alpha_bounds[1] < 1


def test_too_many_candidate_drafts_counts_fall_back_to_totals() -> None:
    rec = recover_counts(5, 7_000_000, rates=["0.000"] * 7, mean_length="1.00", assume_full_drafts=False)
    assert rec.alpha_bounds is not None and rec.drafts_bounds == (1_000_000, 7_000_000)
    assert "not used" in rec.notes[0]


def test_sglang_without_k_bounds_alpha_from_the_mean_only() -> None:
    line = (
        "[2025-03-05 10:21:07 TP0] Decode batch. #running-req: 4, #token: 5821, token usage: 0.03, accept len: 3.00, "
    )
    it = only(list(parse_engine_log([line], "s.log")))
    assert it.alpha_bounds is not None
    assert it.alpha_bounds[0] == pytest.approx(1.995 / 2.995) and it.alpha_bounds[1] == 1.0
    bad = list(parse_engine_log([line.replace("3.00", "0.50")], "s.log"))
    assert isinstance(bad[0], InputError) and "below 1" in bad[0].message


def test_llamacpp_orphan_per_position_line_is_bad() -> None:
    parse = parse_engine_log(["slot print_timing: id  1 | task 88 |      acc per pos = (0.698, 0.292, 0.104)"], "x")
    [item] = list(parse)
    assert isinstance(item, InputError) and item.line == 1 and parse.tally.bad == 1


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine format"):
        parse_engine_log([], "x", fmt="tgi-log")


def test_explicit_prometheus_format_through_parse_engine_log() -> None:
    lines = (SAMPLES / "vllm-metrics.prom").read_text().splitlines()
    parse = parse_engine_log(lines, "m.prom", fmt="prometheus")
    items = list(parse)
    assert len(items) == 1 and parse.tally.metrics > 0 and parse.tally.ignored > 0


# ---------------------------------------------------------------------------------------------
# SGLang responses: meta_info per finished request


@pytest.mark.parametrize("wrap", ["generate", "openai", "batch", "bare"])
def test_sglang_responses_round_trip_exactly(wrap: str) -> None:
    k = 4
    metas = [sglang_meta(60 + i, 30 + 7 * i, k, 0.7, f"req-{i}") for i in range(3)]
    records: list[object]
    if wrap == "generate":
        records = [{"text": "...", "meta_info": meta} for meta, _ in metas]
    elif wrap == "openai":
        records = [{"choices": [{"index": 0, "meta_info": meta}]} for meta, _ in metas]
    elif wrap == "batch":
        records = [[{"text": "...", "meta_info": meta} for meta, _ in metas]]
    else:
        records = [meta for meta, _ in metas]
    lines = [orjson.dumps(record).decode() for record in records]
    assert sniff_engine_format(lines) == "sglang-requests"
    parse = parse_engine_log(lines, "responses.jsonl", "sglang-requests")
    items = list(parse)
    assert all(isinstance(item, EngineInterval) and item.counts is not None for item in items)
    total = sum(item.counts for item in items if isinstance(item, EngineInterval) and item.counts is not None)
    truth = np.concatenate([accepted for _, accepted in metas])
    assert total[k].tolist() == truth_hist(truth, k) and total[:k].sum() == 0
    assert [item.labels["id"] for item in items if isinstance(item, EngineInterval)] == ["req-0", "req-1", "req-2"]
    assert parse.tally.metrics == 3


def test_sglang_response_without_draft_counts_needs_the_draft_length() -> None:
    meta, accepted = sglang_meta(70, 40, 3, 0.8, "r")
    del meta["spec_draft_token_num"]
    line = orjson.dumps({"meta_info": meta}).decode()
    bounded = only(list(parse_engine_log([line], "r.jsonl", "sglang-requests")))
    assert bounded.counts is None and bounded.alpha_bounds is not None
    low, high = bounded.alpha_bounds
    truth = accepted.sum() / np.minimum(accepted + 1, 3).sum()
    assert low <= truth <= high
    exact = only(list(parse_engine_log([line], "r.jsonl", "sglang-requests", k=3)))
    assert exact.counts is not None and exact.alpha == pytest.approx(truth, abs=0)


def test_sglang_response_whose_counts_disagree_is_a_bad_line() -> None:
    meta, _ = sglang_meta(71, 20, 3, 0.6, "r")
    meta["spec_accept_token_num"] += 1
    items = list(parse_engine_log([orjson.dumps(meta).decode()], "r.jsonl", "sglang-requests"))
    assert len(items) == 1 and isinstance(items[0], InputError)
    assert items[0].line == 1 and "spec_accept_histogram accepts" in items[0].message
    meta["spec_accept_histogram"] = [1, "2"]
    (bad,) = parse_engine_log([orjson.dumps(meta).decode()], "r.jsonl", "sglang-requests")
    assert isinstance(bad, InputError) and "not a list of whole counts" in bad.message


def test_logged_runs_with_sglang_fields_are_not_taken_for_responses() -> None:
    row = orjson.dumps({"p": [0.5], "q": [0.5], "r": [0.1], "spec_verify_ct": 1}).decode()
    assert sniff_engine_format([row]) is None


def test_llamacpp_ratio_is_a_float32_quotient() -> None:
    """493/574 = 0.8588850..., but llama.cpp divides in float32 (0.85888499) and prints 0.85888."""
    line = llama_perpos_line(574, 493, 287, [287, 206])
    assert "0.85888 (" in line
    interval = only(list(parse_engine_log([line], "llama.log")))
    assert interval.accepted == 493 and interval.draft_tokens == 574
