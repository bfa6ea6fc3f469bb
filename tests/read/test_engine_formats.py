"""Engine formats beyond vLLM v1 and llama.cpp (issue 33): vLLM v0's running totals and its Prometheus counters,
vLLM's coloured prefix, SGLang's forward-iteration lines and EAGLE trees, TensorRT-LLM's shipped endpoints,
LMDeploy's and TGI's scrapes. Each line is built with the engine's own format string (cited in the reader)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.read.engines import EngineInterval, parse_engine_log, parse_prometheus_scrapes, sniff_engine_format
from specaccept_cli.read.payloads import parse_payloads
from specaccept_cli.rule.requests import RequestRecord
from tests.helpers import invoke

SAMPLES = Path(__file__).parent / "engine_logs"

# vllm/engine/metrics.py LoggingStatLogger._format_spec_decode_metrics_str, two spellings (commits f0afa0c2, 00c33e81).
V0_FORMAT = (
    "Speculative metrics: Draft acceptance rate: {:.3f}, System efficiency: {:.3f}, Number of speculative tokens: {}, "
    "Number of accepted tokens: {}, Number of draft tokens: {}, Number of emitted tokens: {}."
)
V0_FORMAT_OLD = V0_FORMAT.replace("draft tokens:", "draft tokens tokens:").replace(
    "emitted tokens:", "emitted tokens tokens:"
)


def intervals(items: list[EngineInterval | InputError]) -> list[EngineInterval]:
    assert all(isinstance(item, EngineInterval) for item in items), items
    return [item for item in items if isinstance(item, EngineInterval)]


# ---------------------------------------------------------------------------------------------
# vLLM v0: running totals of every passing token, emitted tokens and draft tokens


def v0_worker(seed: int, logs: int, k: int, fmt: str = V0_FORMAT) -> tuple[list[str], list[tuple[int, int, int]]]:
    """A v0 worker's log lines (running totals, as AsyncMetricsCollector prints them) and each interval's truth:
    (accepted prefix tokens, sequences, examined tokens)."""
    rng = np.random.default_rng(seed)
    passing = draft = emitted = 0
    lines, truth = [], []
    for n in range(logs):
        sequences = int(rng.integers(50, 200))
        passes = rng.random((sequences, k)) < 0.7  # v0 tests every position, also after a rejection
        prefix = np.where(~passes, np.arange(k), k).min(axis=1)
        passing += int(passes.sum())
        draft += sequences * k
        emitted += int((prefix + 1).sum())
        seqs = draft // k
        lines.append(
            f"INFO 12-16 16:{46 + n}:04 [metrics.py:439] "
            + fmt.format(passing / draft, emitted / (seqs * (k + 1)), k, passing, draft, emitted)
        )
        truth.append((int(prefix.sum()), sequences, int(np.minimum(prefix + 1, k).sum())))
    return lines, truth


@pytest.mark.parametrize("fmt", [V0_FORMAT, V0_FORMAT_OLD], ids=["f0afa0c2", "00c33e81"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vllm_v0_lines_are_differenced_and_the_prefix_is_emitted_minus_sequences(fmt: str, seed: int) -> None:
    lines, truth = v0_worker(seed, logs=4, k=4, fmt=fmt)
    found = intervals(list(parse_engine_log(lines, "v0.log")))
    assert [it.fmt for it in found] == ["vllm-log-v0"] * 4
    for it, (prefix, sequences, examined) in zip(found, truth):
        assert (it.accepted, it.drafts, it.draft_tokens, it.k) == (prefix, sequences, sequences * 4, 4)
        assert it.tokens_per_pass == pytest.approx(1 + prefix / sequences)
        assert it.counts is None and it.examined_bounds is not None  # which sequences accepted all is not logged
        assert it.examined_bounds[0] <= examined <= it.examined_bounds[1]
        assert it.timestamp is not None and it.timestamp.startswith("12-16 16:")


def test_vllm_v0_line_from_vllm_issue_9539_reads_the_prefix_not_every_passing_token() -> None:
    line = (
        "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, System efficiency: "
        "0.598, Number of speculative tokens: 3, Number of accepted tokens: 8547, Number of draft tokens: 13311, "
        "Number of emitted tokens: 10616."
    )
    (it,) = intervals(list(parse_engine_log([line], "server.log")))
    assert (it.drafts, it.accepted, it.draft_tokens) == (4437, 10616 - 4437, 13311)
    assert it.printed["Number of accepted tokens"] == "8547"  # kept as printed, never read as the prefix
    assert any("also after a rejection" in note for note in it.notes)


def test_vllm_v0_restart_counts_from_the_restart_and_a_bad_line_names_what_is_wrong() -> None:
    lines, _ = v0_worker(4, logs=2, k=4)
    restarted, _ = v0_worker(5, logs=1, k=4)
    bad = lines[0].replace("System efficiency: ", "System efficiency: 0.9").replace("0.90.", "0.9")
    found = list(parse_engine_log([*lines, *restarted, bad], "v0.log"))
    assert isinstance(found[2], EngineInterval) and "restarted" in found[2].notes[0]
    assert found[2].draft_tokens == int(restarted[0].split("Number of draft tokens: ")[1].split(",")[0])
    assert isinstance(found[3], InputError) and "system efficiency" in found[3].message


def test_vllm_v0_fixtures_of_both_spellings_read_the_same_counts() -> None:
    new = intervals(list(parse_engine_log((SAMPLES / "vllm-v0.log").read_text().splitlines(), "a")))
    old = intervals(list(parse_engine_log((SAMPLES / "vllm-v0-tokens-tokens.log").read_text().splitlines(), "b")))
    assert [(i.accepted, i.draft_tokens, i.drafts) for i in new] == [
        (i.accepted, i.draft_tokens, i.drafts) for i in old
    ]
    assert [i.draft_tokens for i in new] == [844, 1592 - 844, 2552 - 1592]
    assert [i.accepted for i in new] == [627 - 211, (1154 - 627) - 187, (1822 - 1154) - 240]


def test_vllm_v0_scrapes_are_refused_in_one_line_naming_why() -> None:
    result = invoke("audit", str(SAMPLES / "vllm-v0-metrics.prom"))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "vLLM v0 spec-decode counters" in line and "running totals" in line and "vllm/engine/metrics.py" in line
    items = list(parse_prometheus_scrapes((SAMPLES / "vllm-v0-metrics.prom").read_text().splitlines(), "v0.prom"))
    assert items and all(isinstance(item, InputError) for item in items)  # never read as v1 (5,830/8,845)


# ---------------------------------------------------------------------------------------------
# vLLM's coloured prefix


def test_vllm_coloured_prefix_keeps_time_stamps_and_process_labels() -> None:
    found = intervals(list(parse_engine_log((SAMPLES / "vllm-v1-color.log").read_bytes().splitlines(), "c.log")))
    assert [(it.labels, it.timestamp) for it in found] == [
        ({"process": "APIServer", "pid": "12"}, "11-30 13:00:01"),
        ({"process": "APIServer", "pid": "13"}, "11-30 13:00:11"),
    ]
    assert [it.accepted for it in found] == [92, 74] and all(it.recovered for it in found)


def test_vllm_coloured_log_groups_by_process_and_places_intervals_in_time() -> None:
    path = str(SAMPLES / "vllm-v1-color.log")
    grouped = invoke("audit", path, "--group-by", "pid", "-o", "json")
    assert grouped.exit_code == 0, grouped.stderr
    assert sorted(orjson.loads(grouped.stdout)["groups"]) == ["12", "13"]
    timed = invoke("audit", path, "--time-field", "timestamp", "-o", "json")
    assert timed.exit_code == 0, timed.stderr


# ---------------------------------------------------------------------------------------------
# SGLang: forward iterations, and EAGLE trees


def test_sglang_decode_batch_with_forward_iteration_is_read() -> None:
    lines = (SAMPLES / "sglang-forward-iters.log").read_text().splitlines()
    assert sniff_engine_format(lines) == "sglang-log"
    found = intervals(list(parse_engine_log(lines, "s.log")))
    assert [it.printed["accept len"] for it in found] == ["3.24", "2.91"]
    assert found[0].labels == {"tp": "0"} and found[0].timestamp == "2026-11-30 13:00:02"


# The numbers of issue 33: 100 verify passes, 241 accepted drafts, 700 proposed (a tree of 8 draft tokens:
# 100 x 7), no pass deeper than 3. Read as a chain of k = 7 the histogram would be "exact" at alpha 0.707.
TREE = {
    "meta_info": {
        "id": "r1",
        "completion_tokens": 342,
        "spec_verify_ct": 100,
        "spec_num_correct_drafts": 241,
        "spec_num_proposed_drafts": 700,
        "spec_accept_rate": 241 / 700,
        "spec_correct_drafts_histogram": [6, 14, 13, 67],
    }
}


def only_record(value: object) -> RequestRecord:
    (item,) = list(parse_payloads([orjson.dumps(value)], "r.jsonl"))
    assert not isinstance(item, InputError), item
    return item[1]


def test_an_eagle_tree_is_never_read_as_a_chain_its_alpha_is_bounded_over_chain_depths() -> None:
    record = only_record(TREE)
    assert record.counts() is None and record.k is None
    low, high = record.examined_bounds()  # type: ignore[misc]
    assert (low, high) == (241 + 100 - 67, 241 + 100)  # a depth-3 chain .. every pass stopped by a rejection
    assert 241 / high == pytest.approx(0.707, abs=5e-4) and 241 / low == pytest.approx(0.8796, abs=5e-4)
    assert any("EAGLE tree" in note for note in record.notes)


def test_a_pass_that_accepted_every_draft_proves_the_chain() -> None:
    chain = {"meta_info": {**TREE["meta_info"], "spec_correct_drafts_histogram": [6, 14, 13, 0, 0, 0, 0, 67]}}
    chain["meta_info"]["spec_num_correct_drafts"] = 14 + 26 + 67 * 7
    chain["meta_info"]["spec_accept_rate"] = (14 + 26 + 67 * 7) / 700
    record = only_record(chain)
    assert record.k == 7 and record.counts() is not None


def test_an_eagle_tree_in_the_older_sglang_requests_reading_is_bounded_too() -> None:
    lines = [orjson.dumps(TREE)]
    (it,) = intervals(list(parse_engine_log(lines, "r.jsonl", "sglang-requests")))
    assert it.counts is None and it.examined_bounds == (274, 341)


# ---------------------------------------------------------------------------------------------
# TensorRT-LLM: GET /metrics (iteration stats) and GET /perf_metrics (per request)


def iteration(index: int, drafted: int, accepted: int, requests: int) -> dict[str, object]:
    spec = {
        "acceptanceLength": (accepted + requests) / requests if requests else 0.0,
        "draftOverhead": 0.2,
        "iterLatencyMS": 2.0,
        "numAcceptedTokens": accepted,
        "numDraftTokens": drafted,
        "numRequestsWithDraftTokens": requests,
    }
    return {"iter": index, "iterLatencyMS": 12.5, "numActiveRequests": requests, "specDecodingStats": spec}


def test_trtllm_iteration_stats_are_intervals_bounded_by_their_counts() -> None:
    lines = (SAMPLES / "trtllm-metrics.jsonl").read_bytes().splitlines()
    assert sniff_engine_format(lines) == "trtllm-iteration-stats"
    found = intervals(list(parse_engine_log(lines, "m.jsonl", "trtllm-iteration-stats")))
    stats = [stat["specDecodingStats"] for line in lines for stat in orjson.loads(line)]
    drafted = [s for s in stats if s["numDraftTokens"]]
    assert len(found) == len(drafted) == 4  # the prefill-only iteration drafted nothing
    assert [(it.accepted, it.draft_tokens, it.drafts) for it in found] == [
        (s["numAcceptedTokens"], s["numDraftTokens"], s["numRequestsWithDraftTokens"]) for s in drafted
    ]
    assert all(it.counts is None and it.alpha_bounds is not None for it in found)


def test_trtllm_iteration_stats_as_json_strings_and_a_bad_acceptance_length() -> None:
    old = orjson.dumps([orjson.dumps(iteration(1, 12, 6, 4)).decode()])
    (it,) = intervals(list(parse_engine_log([old], "m.jsonl", "trtllm-iteration-stats")))
    assert (it.accepted, it.draft_tokens, it.tokens_per_pass) == (6, 12, 2.5)
    bad = iteration(2, 12, 6, 4)
    bad["specDecodingStats"]["acceptanceLength"] = 3.5  # type: ignore[index]
    (error,) = list(parse_engine_log([orjson.dumps([bad])], "m.jsonl", "trtllm-iteration-stats"))
    assert isinstance(error, InputError) and "acceptanceLength 3.5" in error.message


def test_trtllm_metrics_capture_is_audited_not_taken_for_rows() -> None:
    result = invoke("audit", str(SAMPLES / "trtllm-metrics.jsonl"), "-o", "json")
    assert result.exit_code == 0, result.stderr
    engine = orjson.loads(result.stdout)["engine"]
    assert engine["formats"] == ["trtllm-iteration-stats"] and engine["intervals"] == 4


def test_trtllm_perf_metrics_requests_are_read_as_totals() -> None:
    items = list(parse_payloads((SAMPLES / "trtllm-perf-metrics.json").read_bytes().splitlines(), "p.json"))
    records = [item[1] for item in items if not isinstance(item, InputError)]
    assert [(r.request_id, r.accepted, r.drafted, r.fmt) for r in records] == [
        ("1", 29, 45, "trtllm-perf-metrics"),
        ("2", 17, 36, "trtllm-perf-metrics"),
        ("3", 40, 48, "trtllm-perf-metrics"),
    ]
    assert all(r.counts() is None and r.examined_bounds() is not None for r in records)
    wrong = orjson.loads((SAMPLES / "trtllm-perf-metrics.json").read_bytes())
    wrong[0]["perf_metrics"]["speculative_decoding"]["acceptance_rate"] = 0.9
    (error, *_) = list(parse_payloads([orjson.dumps(wrong)], "p.json"))
    assert isinstance(error, InputError) and "acceptance rate 0.9" in error.message


# ---------------------------------------------------------------------------------------------
# LMDeploy and TGI scrapes


def test_lmdeploy_counters_are_read_like_vllm_v1() -> None:
    found = intervals(list(parse_prometheus_scrapes((SAMPLES / "lmdeploy-metrics.prom").read_text().splitlines(), "l")))
    (it,) = found
    assert (it.engine, it.fmt) == ("lmdeploy", "lmdeploy-prometheus")
    assert (it.drafts, it.draft_tokens, it.accepted, it.per_position) == (400, 1200, 568, (280, 180, 108))
    assert it.recovered and it.counts is not None and it.counts[3].tolist() == [120, 100, 72, 108]


def test_tgi_skipped_tokens_are_refused_in_one_line() -> None:
    result = invoke("audit", str(SAMPLES / "tgi-metrics.prom"))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "tgi_request_skipped_tokens" in line and "no drafted count" in line


# ---------------------------------------------------------------------------------------------
# AIPerf's aggregate export


def test_aiperf_aggregate_is_one_pooled_interval_exact_with_the_draft_length() -> None:
    path = str(SAMPLES / "profile_export_aiperf.json")
    bounded = invoke("audit", path, "-o", "json")
    assert bounded.exit_code == 0, bounded.stderr
    engine = orjson.loads(bounded.stdout)["engine"]
    assert engine["formats"] == ["aiperf-aggregate"] and engine["bounded_intervals"] == 1
    exact = orjson.loads(invoke("audit", path, "--draft-length", "5", "-o", "json").stdout)
    hist = {0: 6400, 1: 4608, 2: 3840, 3: 3328, 4: 3072, 5: 4352}
    accepted = sum(a * n for a, n in hist.items())
    examined = sum(min(a + 1, 5) * n for a, n in hist.items())
    assert exact["runs"] == sum(hist.values()) and exact["alpha"] == pytest.approx(accepted / examined)


def test_aiperf_aggregate_whose_histogram_disagrees_with_its_totals_is_refused() -> None:
    doc = orjson.loads((SAMPLES / "profile_export_aiperf.json").read_bytes())
    doc["total_spec_decode_steps"]["avg"] = 25599.0
    lines = orjson.dumps(doc, option=orjson.OPT_INDENT_2).splitlines()
    assert sniff_engine_format(lines) == "aiperf-aggregate"
    (error,) = list(parse_engine_log(lines, "profile_export_aiperf.json", "aiperf-aggregate"))
    assert isinstance(error, InputError) and "counts 25600 steps, not total_spec_decode_steps 25599" in error.message
    del doc["pooled_spec_decode_acceptance_histogram"]
    (error,) = list(parse_engine_log([orjson.dumps(doc)], "profile_export_aiperf.json", "aiperf-aggregate"))
    assert isinstance(error, InputError) and "no pooled_spec_decode_acceptance_histogram" in error.message


# ---------------------------------------------------------------------------------------------
# Issue 33, item 3: an unreadable engine line is never lost, and the error policy decides what follows


def test_an_unreadable_engine_line_stops_the_default_policy_and_skip_reads_every_other_line(tmp_path: Path) -> None:
    good, _ = v0_worker(6, logs=2, k=4)
    future = "INFO 12-16 16:47:00 [metrics.py:439] Speculative metrics: Draft acceptance rate: 0.7, Drafted: 12 tokens"
    other_engine = (
        "[2026-11-30 13:00:02 TP0] Decode batch, #running-req: 4, #token: 5821, token usage: 0.03, accept len: 3.24, "
    )
    log = tmp_path / "server.log"
    log.write_text("\n".join([good[0], future, "INFO ordinary output", other_engine, good[1]]) + "\n")
    default = invoke("audit", str(log))
    assert default.exit_code == 2
    assert default.stderr.strip().splitlines() == [
        f"specaccept: {log}:2: a vLLM v0 'Speculative metrics' line in no known layout (vllm/engine/metrics.py)"
    ]
    skipped = invoke("audit", str(log), "--on-error", "skip", "-o", "json")
    assert skipped.exit_code == 0, skipped.stderr
    summary = orjson.loads(skipped.stdout)
    assert summary["skipped_rows"] == 2 and [e["line"] for e in summary["errors"]] == [2, 4]
    engine = summary["engine"]
    assert (engine["lines"], engine["intervals"], engine["ignored_lines"], engine["bad_lines"]) == (5, 2, 1, 2)


# ---------------------------------------------------------------------------------------------
# Hostile figures in the new formats: one bad line each, never a traceback or an unbounded loop


def test_hostile_figures_in_the_new_formats_are_bad_lines() -> None:
    huge_k = "INFO 12-16 16:46:04 [metrics.py:439] " + V0_FORMAT.format(0.5, 0.5, 2**52, 2, 2**52, 2**51)
    (error,) = list(parse_engine_log([huge_k], "v0.log"))
    assert isinstance(error, InputError) and "is not a draft length" in error.message
    for spec in ({"numDraftTokens": 1e30}, {"numDraftTokens": True}, "x"):
        line = orjson.dumps([{"iter": 1, "specDecodingStats": spec}])
        (error,) = list(parse_engine_log([line], "m.jsonl", "trtllm-iteration-stats"))
        assert isinstance(error, InputError), spec
    (cut,) = list(parse_engine_log([b'[{"specDecodingStats": '], "m", "trtllm-iteration-stats"))
    assert isinstance(cut, InputError) and "not JSON" in cut.message
    doc = orjson.loads((SAMPLES / "profile_export_aiperf.json").read_bytes())
    doc["pooled_spec_decode_acceptance_histogram"] = {"99999": 1}
    (error,) = list(parse_engine_log([orjson.dumps(doc)], "a.json", "aiperf-aggregate"))
    assert isinstance(error, InputError) and "more than any draft length" in error.message
    (error,) = list(parse_engine_log([b"{", b'  "total_spec_decode_steps": '], "a.json", "aiperf-aggregate"))
    assert isinstance(error, InputError) and "not JSON" in error.message
