"""Per-request payload readers: the engines' own examples verbatim, identities, known bugs, drift, round trips."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.errors import InputError
from specaccept_cli.read.payloads import parse_payloads, sniff_payload
from specaccept_cli.rule.requests import BadRecord, RequestRecord
from tests import payloads as sim

# vLLM docs/features/speculative_decoding/acceptance_metrics.md (current), the summary example.
VLLM_DOC = b"""{"choices": [], "usage": {}, "metrics": {"speculative_decoding": {
"mean_acceptance_length": 1.2325581395348837, "draft_acceptance_rate": 0.07751937984496124,
"acceptance_histogram": [39, 1, 0, 3], "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]},
"num_spec_steps": 43, "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3}}}""".replace(
    b"\n", b" "
)
# The same page at vllm commit cd19998 (the per-choice shape with a sparse, string-keyed histogram).
VLLM_CHOICE_DOC = b"""{"choices": [{"index": 0, "message": {"role": "assistant", "content": "..."},
"finish_reason": "stop", "speculative_decoding_stats": {"mean_acceptance_length": 1.2325581395348837,
"draft_acceptance_rate": 0.07751937984496124, "acceptance_histogram": {"0": 39, "1": 1, "3": 3},
"num_spec_steps": 43, "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3}}]}""".replace(
    b"\n", b" "
)
# ai-dynamo/aiperf docs/reference/spec-decode-acceptance.md, "The TensorRT-LLM adapter" (PR NVIDIA/TensorRT-LLM#19311).
TRTLLM_DOC = b"""{"choices": [{"index": 0, "message": {"role": "assistant", "content": "..."}, "finish_reason": "stop",
"avg_decoded_tokens_per_iter": 2.5, "speculative_decoding": {"acceptance_rate": 0.5,
"total_accepted_draft_tokens": 30, "total_draft_tokens": 60, "num_spec_steps": 20,
"acceptance_histogram": [8, 0, 6, 6], "num_spec_tokens": 3}}]}""".replace(b"\n", b" ")
# sgl-project/sglang#33518, a reviewer's capture of sglext.spec_tokens_details (DSpark block size 5).
SGLEXT_CAPTURE = b"""{"id": "4f099bcb459f4f429fd04900425deb00", "object": "chat.completion", "sglext":
{"spec_tokens_details": {"spec_accept_rate": 0.2930232558139535, "spec_accept_length": 2.4651162790697674,
"spec_num_correct_drafts": 63, "spec_num_proposed_drafts": 215, "spec_verify_ct": 43,
"spec_correct_drafts_histogram": [11, 14, 11, 4, 0, 3]}}}""".replace(b"\n", b" ")
# ai-dynamo/aiperf docs/tutorials/spec-decode-metrics.md, "Per-request trace" ("illustrative values"): its
# histogram accepts 278 drafts, not the 281 the record states, so the record is a bad line.
AIPERF_DOC = b"""{"metadata": {"...": "..."}, "metrics": {"...": "..."}, "spec_decode_acceptance": {"engine": "vllm",
"mean_acceptance_length": 3.18, "draft_acceptance_rate": 0.436, "acceptance_histogram": {"0": 34, "1": 22, "2": 19,
"3": 16, "4": 15, "5": 22}, "num_accepted_draft_tokens": 281, "num_draft_tokens": 640, "num_spec_steps": 128,
"num_spec_tokens": 5}}""".replace(b"\n", b" ")


def parse(*lines: bytes, fmt: str = "auto") -> tuple[list[RequestRecord], list[InputError], Any]:
    """The records, the bad lines and the tally of payload lines, as the payload reader gives them."""
    parsed = parse_payloads(list(lines), "payloads.jsonl", fmt)
    records, errors = [], []
    for item in parsed:
        if isinstance(item, InputError):
            errors.append(item)
        else:
            records.append(item[1])
    return records, errors, parsed.tally


def test_vllm_doc_example_is_the_exact_histogram_of_its_request():
    (record,), errors, _ = parse(VLLM_DOC)
    assert errors == []
    counts = record.counts()
    assert counts is not None
    assert counts[3].tolist() == [39, 1, 0, 3]
    assert record.runs() is not None
    examined = 39 * 1 + 1 * 2 + 3 * 3
    k, a = record.runs()  # type: ignore[misc]
    assert int(np.minimum(a + 1, k).sum()) == examined


def test_vllm_per_choice_sparse_histogram_reads_the_same_request():
    (new,), _, _ = parse(VLLM_DOC)
    (old,), errors, _ = parse(VLLM_CHOICE_DOC)
    assert errors == []
    assert old.fmt == "vllm-choice-stats" and new.fmt == "vllm-metrics"
    assert np.array_equal(old.counts(), new.counts())


def test_trtllm_doc_example_reads_exactly():
    (record,), errors, _ = parse(TRTLLM_DOC)
    assert errors == [] and record.engine == "tensorrt-llm"
    assert record.counts()[3].tolist() == [8, 0, 6, 6]  # type: ignore[index]


def test_sglext_capture_is_exact_under_its_nominal_width_and_says_so():
    (record,), errors, _ = parse(SGLEXT_CAPTURE)
    assert errors == []
    assert record.k == 5 and record.drafted_nominal
    assert record.counts()[5].tolist() == [11, 14, 11, 4, 0, 3]  # type: ignore[index]
    assert any("nominal" in note for note in record.notes)


def test_aiperf_doc_example_breaks_its_own_histogram():
    records, (error,), tally = parse(AIPERF_DOC)
    assert records == []
    assert error.line == 1 and "accepts 278 tokens, not the 281" in error.message
    assert tally.bad == 1  # type: ignore[attr-defined]


def test_llamacpp_timings_give_bounds_that_contain_the_truth():
    (truth,) = sim.requests(3, count=1, ragged=0.4)
    (record,), errors, _ = parse(orjson.dumps(sim.llamacpp_completion(truth)))
    assert errors == [] and record.runs() is None
    low, high = record.examined_bounds()  # type: ignore[misc]
    assert low <= truth.examined <= high


def test_llamacpp_stream_chunks_before_the_final_one_are_not_requests():
    chunk = {"content": "a", "stop": False, "timings": {"draft_n": 4, "draft_n_accepted": 2}}
    final = {"content": "", "stop": True, "timings": {"draft_n": 9, "draft_n_accepted": 5}}
    records, errors, _ = parse(orjson.dumps(chunk), orjson.dumps(final))
    assert errors == [] and [r.drafted for r in records] == [9]


def test_a_stream_is_read_from_its_sse_data_lines_and_the_final_usage_chunk():
    (truth,) = sim.requests(5, count=1)
    delta = {"id": truth.request_id, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}}]}
    capture = sim.sse([delta, delta, sim.vllm_response(truth, stream=True)]).split(b"\n")
    records, errors, tally = parse(*capture)
    assert errors == [] and len(records) == 1
    assert records[0].request_id == truth.request_id
    assert np.array_equal(records[0].counts(), sim.truth_counts([truth]))
    assert tally.ignored == len(capture) - 1  # type: ignore[attr-defined]


def test_null_payloads_for_n_greater_than_one_are_counted_not_read():
    line = orjson.dumps({"choices": [{}, {}], "metrics": {"speculative_decoding": None}})
    records, errors, tally = parse(line)
    assert records == [] and errors == [] and tally.null_payloads == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_spec_steps": 44}, "counts 43 steps, not the 44"),
        ({"num_accepted_draft_tokens": 11}, "accepts 10 tokens, not the 11"),
        ({"num_draft_tokens": 5}, "more accepted than drafted"),
        ({"num_draft_tokens": 140}, "vllm#56977"),
        ({"draft_acceptance_rate": 0.5}, "acceptance rate 0.5 is not accepted / drafted"),
        ({"mean_acceptance_length": 2.0}, "mean acceptance length 2.0 is not"),
        ({"acceptance_histogram": [39, 1, -1, 3]}, "not a whole count"),
        ({"num_spec_tokens": 2}, "more than the draft budget k = 2"),
    ],
)
def test_a_record_that_breaks_an_identity_is_a_bad_line(change, message):
    value = orjson.loads(VLLM_DOC)
    value["metrics"]["speculative_decoding"].update(change)
    value["metrics"]["speculative_decoding"].pop("acceptance_histogram_by_draft_length")
    records, (error,), _ = parse(b"\n", orjson.dumps(value))
    assert records == [] and error.line == 2
    assert message in error.message


def test_per_step_arrays_must_add_up_to_the_totals_and_name_the_invalidated_drafts_bug():
    (truth,) = sim.requests(11, count=1)
    value = sim.vllm_response(truth, detailed=True)
    payload = value["metrics"]["speculative_decoding"]
    payload.pop("acceptance_histogram_by_draft_length")
    payload["num_draft_tokens"] += 3  # counted drafts the grammar threw away
    payload["draft_acceptance_rate"] = payload["num_accepted_draft_tokens"] / payload["num_draft_tokens"]
    _, (error,), _ = parse(orjson.dumps(value))
    assert "per-step drafted sums to" in error.message and "vllm#56977" in error.message


def test_sglang_old_server_rate_is_named():
    (truth,) = sim.requests(13, count=1)
    value = sim.sglang_generate(truth)
    meta = value["meta_info"]
    steps, k, accepted = truth.steps, truth.k, sum(truth.accepted)
    meta["spec_accept_rate"] = (accepted + steps) / (steps * (k + 1))
    _, (error,), _ = parse(orjson.dumps(value))
    assert "sglang#23530" in error.message


def test_eos_inside_the_accepted_prefix_is_a_note_naming_the_bug():
    (truth,) = sim.requests(17, count=1)
    value = sim.vllm_response(truth)
    value["usage"]["completion_tokens"] -= 4
    (record,), errors, _ = parse(orjson.dumps(value))
    assert errors == [] and any("vllm#56101" in note for note in record.notes)


def test_renamed_fields_are_drift_reported_once_never_guessed():
    # The closed vllm-project/vllm#47322's names, as its description printed them.
    renamed = {
        "num_drafted_tokens": 500,
        "num_accepted_tokens": 413,
        "draft_acceptance_rate": 0.826,
        "num_draft_steps": 250,
        "mean_accepted_length_per_step": 2.65,
        "per_position_acceptance_rates": [0.892, 0.76],
    }
    line = orjson.dumps({"choices": [{"index": 0, "speculative_decoding_stats": renamed}]})
    records, errors, tally = parse(line, line)
    assert records == [] and errors == []
    (message,) = tally.drift.messages()  # type: ignore[attr-defined]
    assert "num_drafted_tokens" in message and "num_draft_steps" in message


def test_an_unknown_extra_field_beside_known_counters_is_drift_and_the_record_still_reads():
    value = orjson.loads(VLLM_DOC)
    value["metrics"]["speculative_decoding"]["num_bonus_tokens"] = 43
    (record,), errors, tally = parse(orjson.dumps(value))
    assert errors == [] and record.counts() is not None
    assert "num_bonus_tokens" in tally.drift.messages()[0]  # type: ignore[attr-defined]


def test_a_payload_line_that_is_not_json_is_a_bad_line():
    _, (error,), _ = parse(b'{"metrics": {"speculative_decoding": {"num_spec_steps": 4')
    assert "not JSON" in error.message and error.line == 1


def test_the_format_is_sniffed_by_content():
    assert sniff_payload([b"hello", VLLM_DOC]) == "vllm-payload"
    assert sniff_payload([TRTLLM_DOC]) == "trtllm-payload"
    assert sniff_payload([SGLEXT_CAPTURE]) == "sglang-payload"
    assert sniff_payload([AIPERF_DOC]) == "aiperf-records"
    assert sniff_payload([orjson.dumps(sim.llamacpp_completion(sim.requests(1, count=1)[0]))]) == "llamacpp-payload"
    assert sniff_payload([b'{"p": [0.5], "q": [0.5], "r": [0.1]}']) is None


def test_a_named_format_reads_only_its_engine():
    records, _, tally = parse(VLLM_DOC, TRTLLM_DOC, fmt="trtllm-payload")
    assert [r.engine for r in records] == ["tensorrt-llm"]
    assert tally.ignored == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    ("writer", "ragged"),
    [
        (lambda r: sim.vllm_response(r), 0.3),  # ragged drafts, exact through the histogram by draft length
        (lambda r: sim.vllm_response(r, detailed=True), 0.3),
        (sim.vllm_summary_only, 0.0),  # full drafts: drafted = steps x k proves it
        (sim.trtllm_response, 0.0),
        (sim.aiperf_record, 0.3),
    ],
)
def test_seeded_round_trips_recover_every_request_exactly(seed, writer, ragged):
    batch = sim.requests(seed, count=30, ragged=ragged)
    records, errors, _ = parse(*sim.jsonl([writer(r) for r in batch]).splitlines())
    assert errors == [] and len(records) == len(batch)
    for record, truth in zip(records, batch):
        assert np.array_equal(_padded(record.counts(), truth.k), sim.truth_counts([truth]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_sglang_requests_are_exact_only_when_a_pass_proves_the_chain(seed):
    """SGLang's proposed count is passes x width for a chain and for an EAGLE tree's nodes alike: a request is
    read as a chain of k only when some pass accepted all k drafts; the others are bounded, and the bounds hold."""
    batch = sim.requests(seed, count=30)
    records, errors, _ = parse(*sim.jsonl([sim.sglang_generate(r) for r in batch]).splitlines())
    assert errors == [] and len(records) == len(batch)
    proven = 0
    for record, truth in zip(records, batch):
        if max(truth.accepted) == truth.k:
            proven += 1
            assert np.array_equal(_padded(record.counts(), truth.k), sim.truth_counts([truth]))
            continue
        assert record.counts() is None and record.k is None
        low, high = record.examined_bounds()  # type: ignore[misc]
        assert low <= truth.examined <= high
    assert 0 < proven < len(batch)


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_seeded_ragged_summaries_without_rows_by_length_bound_the_truth(seed):
    for truth in sim.requests(seed, count=30, ragged=0.5):
        value = sim.vllm_summary_only(truth)
        (record,), errors, _ = parse(orjson.dumps(value))
        assert errors == []
        if sum(truth.drafted) == truth.steps * truth.k:
            assert record.counts() is not None
            continue
        assert record.counts() is None  # the drafted total does not say which steps were short
        low, high = record.examined_bounds()  # type: ignore[misc]
        assert low <= truth.examined <= high


def test_check_rejects_negative_counts_built_by_hand():
    with pytest.raises(BadRecord, match="negative"):
        RequestRecord(engine="vllm", fmt="x", steps=-1).check()


def _padded(counts: np.ndarray | None, k: int) -> np.ndarray:
    assert counts is not None
    out = np.zeros((k + 1, k + 1), dtype=np.int64)
    out[: counts.shape[0], : counts.shape[1]] = counts
    return out


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "num_spec_steps",
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "num_spec_tokens",
    "acceptance_histogram",
    "acceptance_histogram_by_draft_length",
    "per_step_accepted",
    "per_step_drafted",
    "draft_acceptance_rate",
    "mean_acceptance_length",
]


@settings(max_examples=100, deadline=None)
@given(
    shape=st.sampled_from([VLLM_DOC, VLLM_CHOICE_DOC, TRTLLM_DOC, SGLEXT_CAPTURE, AIPERF_DOC]),
    replacements=st.lists(st.tuples(st.sampled_from([*FIELDS, "spec_verify_ct", "total_draft_tokens"]), JSON_VALUES)),
)
def test_any_damage_to_a_payload_is_a_record_or_a_bad_line_never_a_crash(shape, replacements):
    value = orjson.loads(shape)

    def damage(node: object) -> None:
        if isinstance(node, dict):
            for name, replacement in replacements:
                if name in node:
                    node[name] = replacement
            for child in list(node.values()):
                damage(child)
        elif isinstance(node, list):
            for child in node:
                damage(child)

    damage(value)
    line = orjson.dumps(value)
    for item in parse_payloads([line], "fuzz.jsonl"):
        assert isinstance(item, (InputError, tuple))
        if isinstance(item, tuple):
            item[1].counts()  # a record that passed its checks gives counts or bounds without raising
            item[1].examined_bounds()
