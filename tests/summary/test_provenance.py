"""A summary's provenance (specaccept_cli/summary/provenance.py): what it records, and what merge refuses."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.evaluate import Plan
from specaccept_cli.summary.provenance import (
    SAMPLE_BYTES,
    InputRecord,
    Provenance,
    ProvenanceConflict,
    describe_input,
    merged_provenance,
    reading_settings,
)
from specaccept_cli.summary.windows import WindowSpec


def test_a_small_input_is_digested_whole(tmp_path: Path) -> None:
    path = tmp_path / "small.jsonl"
    path.write_bytes(b'{"p": [1], "q": [1], "r": [0]}\n')
    record = describe_input("small.jsonl", path)
    assert record.size == path.stat().st_size
    assert record.sample_sha256 == hashlib.sha256(b"%d\n" % record.size + path.read_bytes()).hexdigest()


def test_a_large_input_is_known_by_its_size_head_and_tail(tmp_path: Path) -> None:
    """The documented limit: a change in the middle of a large file keeps the digest; head, tail or size do not."""
    content = bytearray(os.urandom(5 * SAMPLE_BYTES))
    path = tmp_path / "large.jsonl"
    path.write_bytes(content)
    digest = describe_input("large", path).sample_sha256
    head, tail = bytes(content[:SAMPLE_BYTES]), bytes(content[-SAMPLE_BYTES:])
    assert digest == hashlib.sha256(b"%d\n" % len(content) + head + tail).hexdigest()
    for where in (0, len(content) - 1):
        changed = bytearray(content)
        changed[where] ^= 1
        path.write_bytes(changed)
        assert describe_input("large", path).sample_sha256 != digest
    path.write_bytes(content + b"\n")
    assert describe_input("large", path).sample_sha256 != digest


def test_what_is_not_a_regular_file_is_known_by_name_only(tmp_path: Path) -> None:
    assert describe_input("<stdin>", None) == InputRecord("<stdin>")
    assert describe_input("s3://logs/a.jsonl", None, 1234) == InputRecord("s3://logs/a.jsonl", 1234)  # as listed
    assert describe_input("gone", tmp_path / "gone.jsonl") == InputRecord("gone")
    fifo = tmp_path / "logs.fifo"  # a named pipe with no writer: opening it would wait for ever
    os.mkfifo(fifo)
    described: list[InputRecord] = []
    worker = threading.Thread(target=lambda: described.append(describe_input("fifo", fifo)), daemon=True)
    worker.start()
    worker.join(10)
    assert described == [InputRecord("fifo")]
    read_end, write_end = os.pipe()
    try:
        assert describe_input("pipe", f"/dev/fd/{read_end}") == InputRecord("pipe")
    finally:
        os.close(read_end)
        os.close(write_end)


def test_settings_name_what_changes_the_numbers_and_only_that() -> None:
    plain = reading_settings(FieldSpec(), Plan())
    assert plain == reading_settings(FieldSpec(extras=("request_id",)), Plan(), "fail", 123)  # ids, fail's line limit
    assert reading_settings(FieldSpec(p="spec.p"), Plan())["p_field"] == "spec.p"
    assert reading_settings(FieldSpec(), Plan(), "skip", 123)["max_line_bytes"] == 123
    sampled = reading_settings(FieldSpec(), Plan(check_sampler=True, sampler_significance=0.01))
    assert sampled["check_sampler"] is True and sampled["sampler_significance"] == 0.01
    assert "sampler_significance" not in reading_settings(FieldSpec(), Plan(sampler_significance=0.01))
    timed = reading_settings(FieldSpec(), Plan(windows=WindowSpec("ts", 600)))
    assert (timed["window_time_field"], timed["window_width"]) == ("ts", 600)


def test_round_trip_and_malformed_objects() -> None:
    provenance = Provenance((InputRecord("a", 10, "ab"), InputRecord("-")), {"p_field": "p"}, "1.0", "t", ("x",))
    assert Provenance.from_dict(provenance.to_dict()) == provenance
    for broken in ([], {"inputs": {}}, {"inputs": [{"bytes": 1}]}, {"inputs": [{"name": "a", "bytes": -1}]},
                   {"settings": [1]}, {"inputs": [{"name": "a", "bytes": True}]}):  # fmt: skip
        with pytest.raises(ValueError, match=r"provenance|input"):
            Provenance.from_dict(broken)


def _made(*inputs: InputRecord, **settings: object) -> Provenance:
    return Provenance(inputs, {"p_field": "p", "on_error": "fail", **settings}, "1.0", "t")


def test_merge_keeps_every_input_and_names_the_parts() -> None:
    a, b = InputRecord("a.jsonl", 100, "aa"), InputRecord("b.jsonl", 100, "bb")
    merged = merged_provenance([("a.json", _made(a)), ("old.json", None), ("b.json", _made(b))])
    assert merged.inputs == (a, b)
    assert merged.merged_from == ("a.json", "old.json", "b.json")
    assert merged.settings == {"p_field": "p", "on_error": "fail"}
    assert merged_provenance([("old.json", None)]).settings is None  # nothing recorded, nothing claimed


def test_merge_refuses_the_same_input_under_any_name() -> None:
    a = InputRecord("day-1.jsonl", 100, "aa")
    with pytest.raises(
        ProvenanceConflict, match=r"holds input 'copy.jsonl' \(= 'day-1.jsonl'\) as a.json does"
    ) as info:
        merged_provenance([("a.json", _made(a)), ("b.json", _made(InputRecord("copy.jsonl", 100, "aa")))])
    assert info.value.source == "b.json"
    # A merge of a and b, merged again with a: a's input is in both.
    ab = merged_provenance([("a.json", _made(a)), ("b.json", _made(InputRecord("b", 5, "bb")))])
    with pytest.raises(ProvenanceConflict, match="would count twice"):
        merged_provenance([("ab.json", ab), ("a.json", _made(a))])
    # Unknown (stdin) and empty inputs cannot be told apart, and an empty one has no runs to count twice.
    for same in (InputRecord("<stdin>"), InputRecord("empty", 0, "ee")):
        assert len(merged_provenance([("a.json", _made(same)), ("b.json", _made(same))]).inputs) == 2


def test_merge_refuses_different_settings_and_says_which() -> None:
    with pytest.raises(ProvenanceConflict) as info:
        merged_provenance([("a.json", _made()), ("b.json", _made(p_field="spec.p", on_error="skip"))])
    assert str(info.value) == (
        "made with different settings (on_error 'skip' here, 'fail' in a.json; p_field 'spec.p' here, 'p' in a.json):"
        " summarise every shard the same way"
    )
    assert info.value.source == "b.json"
