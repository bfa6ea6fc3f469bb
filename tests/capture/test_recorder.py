"""The recorder for real: files `audit` reads, rotation, a full disk, threads, fork, exit and SIGTERM."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from specaccept_cli.capture import Recorder
from tests.helpers import run_process, spec_accept


def steps(n: int, seed: int = 0) -> list[tuple[list[float], list[float], list[float], int]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k = 1 + i % 8
        p, q, r = rng.random(k).tolist(), rng.uniform(0.05, 1.0, k).tolist(), rng.random(k).tolist()
        rows.append((p, q, r, spec_accept(p, q, r)))
    return rows


def audit(*args: str) -> dict[str, object]:
    done = run_process("audit", *args, "-o", "json")
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def rows_of(directory: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for part in sorted(directory.iterdir()):
        if part.suffix == ".parquet":
            rows += pq.read_table(part).to_pylist()
        elif part.suffix == ".jsonl":
            rows += [orjson.loads(line) for line in part.read_bytes().splitlines()]
    return rows


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
def test_a_capture_audits_with_the_default_fields_and_the_engines_count(tmp_path: Path, form: str) -> None:
    directory = tmp_path / "capture"
    with Recorder(directory, form, block_rows=100, max_pending_blocks=20, handle_sigterm=False) as recorder:
        for i, (p, q, r, accepted) in enumerate(steps(1000)):
            values = (p, q, r) if i % 2 else (np.array(p, np.float32), np.array(q), np.array(r))
            assert recorder.record(*values, request_id=f"req-{i // 20}", step=i % 20, accepted=accepted)
    assert recorder.stats.written == 1000 and recorder.stats.dropped == 0
    assert [Path(part).name for part in recorder.stats.parts] == [f"part-00001.{form}"]
    numbers = audit(str(directory), "--reported-field", "accepted", "--cluster-field", "request_id")
    assert numbers["runs"] == 1000 and numbers["reported_runs"] == 1000
    assert numbers["mismatches"] == 0 and numbers["clusters"] == 50
    # The float32 values come back as the doubles they are: the rule sees what the engine saw.
    first = rows_of(directory)[0]
    assert first["p"] == np.array(steps(1)[0][0], np.float32).astype(float).tolist()
    assert set(first) >= {"p", "q", "r", "request_id", "step", "accepted", "time"}


def test_a_directory_of_jsonl_parts_and_one_being_written_audits_as_the_parts_alone(tmp_path: Path) -> None:
    """`audit DIR` reads every part, JSONL and Parquet alike, and never the hidden part still being written."""
    directory = tmp_path / "capture"
    rows = steps(600)
    for form, chunk in (("jsonl", rows[:200]), ("jsonl", rows[200:400]), ("parquet", rows[400:])):
        with Recorder(directory, form, handle_sigterm=False) as recorder:  # type: ignore[arg-type]
            for i, (p, q, r, accepted) in enumerate(chunk):
                assert recorder.record(p, q, r, request_id=f"req-{i // 10}-{form}", accepted=accepted)
    (directory / ".part-123-abc-1.jsonl.tmp").write_bytes(b'{"p": [0.5], "q"')  # a part being written
    (directory / ".hidden").mkdir()
    (directory / ".hidden" / "old.jsonl").write_bytes(b"not a row\n")
    assert sorted(path.name for path in directory.glob("part-*")) == [
        "part-00001.jsonl",
        "part-00002.jsonl",
        "part-00003.parquet",
    ]
    numbers = audit(str(directory), "--reported-field", "accepted")
    assert numbers["runs"] == 600 and numbers["mismatches"] == 0 and numbers["skipped_rows"] == 0


def test_a_wrong_engine_count_is_a_mismatch_the_audit_finds(tmp_path: Path) -> None:
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder:
        for p, q, r, accepted in steps(200):
            recorder.record(p, q, r, accepted=accepted + (1 if accepted < len(p) else 0))
    numbers = audit(str(tmp_path / "c"), "--reported-field", "accepted")
    assert numbers["mismatches"] == sum(1 for p, q, r, a in steps(200) if a < len(p))


def test_labels_become_columns_and_rows_without_one_hold_null(tmp_path: Path) -> None:
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder:
        recorder.record([0.5], [0.5], [0.1], model="a")
        recorder.record([0.5], [0.5], [0.1])
        recorder.record([0.5], [0.5], [0.1], model="b", shard=3)
    rows = rows_of(tmp_path / "c")
    assert [(row["model"], row["shard"]) for row in rows] == [("a", None), (None, None), ("b", 3)]


def test_rotation_by_size_writes_whole_numbered_parts_and_no_temporary_file_remains(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    recorder = Recorder(directory, block_rows=50, max_pending_blocks=80, rotate_bytes=20_000, handle_sigterm=False)
    with recorder:
        for p, q, r, accepted in steps(3000):
            recorder.record(p, q, r, accepted=accepted)
    names = sorted(os.listdir(directory))
    assert len(names) > 2 and names == [f"part-{i:05d}.parquet" for i in range(1, len(names) + 1)]
    assert sum(pq.ParquetFile(directory / name).metadata.num_rows for name in names) == 3000
    numbers = audit(str(directory), "--reported-field", "accepted")
    assert numbers["runs"] == 3000 and numbers["mismatches"] == 0


def test_rotation_by_time_publishes_parts_a_reader_can_open_while_recording_goes_on(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    recorder = Recorder(directory, rotate_seconds=0.2, flush_seconds=0.05, handle_sigterm=False)
    seen: set[str] = set()
    deadline = time.monotonic() + 1.5
    for p, q, r, accepted in steps(10_000):
        recorder.record(p, q, r, accepted=accepted)
        for name in os.listdir(directory):
            if name.endswith(".parquet") and name not in seen:
                pq.read_table(directory / name)  # whole: a footer and every row group
                seen.add(name)
        if time.monotonic() > deadline:
            break
        time.sleep(0.0002)
    recorder.close()
    assert len(seen) >= 2, "parts were published while recording went on"
    assert not [name for name in os.listdir(directory) if name.startswith(".")]
    assert sum(len(pq.read_table(directory / name)) for name in os.listdir(directory)) == recorder.stats.recorded


def test_bad_values_are_refused_counted_and_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="specaccept.capture")
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder:
        assert not recorder.record([0.5, 0.5], [0.5], [0.1, 0.2])  # lengths differ
        assert not recorder.record(np.zeros((2, 2)), np.zeros(2), np.zeros(2))  # not one value per token
        assert not recorder.record([0.5], [0.5], [0.1], accepted=1.5)  # a count that is not whole
        assert not recorder.record([0.5], [0.5], [0.1], step=True)
        assert not recorder.record([0.5], [0.5], [0.1], p_field="x", time="soon")  # type: ignore[arg-type]
        assert recorder.record([0.5], [0.5], [0.1], accepted=np.int64(1), step=np.int32(4))
        # Values that are not numbers are found by the writer, off the serving loop: the row is refused there.
        recorder.record(["x"], [0.5], [0.1], accepted=0)
        recorder.record([None, 0.5], [0.5, 0.5], [0.1, 0.1], accepted=0)
        recorder.record([[0.5]], [0.5], [0.1], accepted=0)
        assert recorder.record((0.9, 1), [0.5, 1], [0.1, 0.3], accepted=2)  # ints and tuples are numbers
    assert recorder.stats.bad_values == 8 and recorder.stats.written == 2
    assert [(row["p"], row["accepted"], row["step"]) for row in rows_of(tmp_path / "c")] == [
        ([0.5], 1, 4),
        ([0.9, 1.0], 2, None),
    ]
    warnings = [record for record in caplog.records if "refused" in record.getMessage()]
    assert len(warnings) == 1 and "different lengths" in warnings[0].getMessage()


UNWRITABLE = [
    pytest.param({"step": 2**70}, "step = 1180591620717411303424 does not fit in a 64-bit integer", id="step"),
    pytest.param({"accepted": 2**64}, "accepted = 18446744073709551616 does not fit", id="accepted"),
    pytest.param({"request_id": -(2**63) - 1}, "request_id = -9223372036854775809 does not fit", id="int-request"),
    pytest.param({"request_id": "req-\ud800"}, "request_id is not valid UTF-8 text", id="surrogate-request"),
    pytest.param({"tenant": "\udcff"}, "tenant is not valid UTF-8 text", id="surrogate-label"),
    pytest.param({"tenant": ["a", 2**64]}, "tenant = 18446744073709551616 does not fit", id="list-label"),
]


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
@pytest.mark.parametrize(("value", "words"), UNWRITABLE)
def test_a_value_no_part_can_hold_is_refused_at_record_and_the_good_rows_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, form: str, value: dict[str, object], words: str
) -> None:
    """Once `record()` said True to such a row, and the writer lost its whole block (1,000 good rows)."""
    caplog.set_level(logging.WARNING, logger="specaccept.capture")
    with Recorder(tmp_path / "c", form, block_rows=2000, handle_sigterm=False) as recorder:
        for i in range(500):
            assert recorder.record([0.5], [0.5], [0.1], request_id="req", step=i, tenant="a")
        assert recorder.record([0.5], [0.5], [0.1], **value) is False  # type: ignore[arg-type]
        for _ in range(500):
            assert recorder.record([0.5], [0.5], [0.1], request_id=7, step=2**63 - 1, accepted=-(2**63), tenant="é")
    stats = recorder.stats
    assert (stats.written, stats.bad_values, stats.dropped, stats.write_errors) == (1000, 1, 0, 0)
    assert len(rows_of(tmp_path / "c")) == 1000
    assert any(words in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
def test_a_row_the_writer_cannot_encode_costs_that_row_alone(tmp_path: Path, form: str) -> None:
    """The writer's last line of defence, for a value `record()` let through: here put in the buffers by hand."""
    with Recorder(tmp_path / "c", form, block_rows=10_000, handle_sigterm=False) as recorder:
        for i in range(300):
            assert recorder.record([0.5], [0.5], [0.1], step=i)
        with recorder._lock:
            recorder._block.step[150] = 2**70  # what record() now refuses
        for i in range(300, 600):
            assert recorder.record([0.5], [0.5], [0.1], step=i)
    assert (recorder.stats.written, recorder.stats.bad_values, recorder.stats.dropped) == (599, 1, 0)
    assert sorted(row["step"] for row in rows_of(tmp_path / "c")) == [i for i in range(600) if i != 150]


def test_nan_and_infinity_in_a_jsonl_capture_stay_visible_and_the_audit_refuses_those_rows(tmp_path: Path) -> None:
    """orjson writes NaN as null; the capture writes the tokens, which the reader names."""
    with Recorder(tmp_path / "c", "jsonl", handle_sigterm=False) as recorder:
        recorder.record([0.9, 0.2], [0.5, 0.5], [0.1, 0.1])
        recorder.record([float("nan"), 0.2], [0.5, 0.5], [0.1, 0.1])
        recorder.record([0.9], [float("inf")], [0.1], request_id="é")
        recorder.record([0.9], [0.5], [-float("inf")])
    [part] = recorder.stats.parts
    lines = Path(part).read_bytes().splitlines()
    assert [line.split(b',"time"')[0] for line in lines[1:]] == [
        b'{"p":[NaN,0.2],"q":[0.5,0.5],"r":[0.1,0.1]',
        '{"p":[0.9],"q":[Infinity],"r":[0.1],"request_id":"é"'.encode(),
        b'{"p":[0.9],"q":[0.5],"r":[-Infinity]',
    ]
    summary = audit(part, "--on-error", "skip")
    assert summary["runs"] == 1 and summary["skipped_rows"] == 3
    assert all("NaN or Infinity" in error["message"] for error in summary["errors"])  # type: ignore[index, union-attr, attr-defined]
    done = run_process("audit", part)
    assert done.returncode == 2 and b":2: NaN or Infinity at column 7 is not valid JSON" in done.stderr


def test_a_label_named_like_a_field_is_refused_without_corrupting_the_block(tmp_path: Path) -> None:
    with Recorder(tmp_path / "c", handle_sigterm=False) as recorder:
        assert recorder.record([0.5], [0.5], [0.1], accepted=1)
        assert not recorder.record([0.5], [0.5], [0.1], **{"time ": 1, "p": 2})  # type: ignore[arg-type]
        assert recorder.record([0.5, 0.5], [0.5, 0.5], [0.1, 0.1], accepted=2)
    rows = rows_of(tmp_path / "c")
    assert [row["accepted"] for row in rows][-1] == 2 and all(len(row["p"]) == row["accepted"] for row in rows)


def test_record_after_close_is_dropped_and_counted_not_raised(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "c", handle_sigterm=False)
    recorder.record([0.5], [0.5], [0.1])
    recorder.close()
    recorder.close()
    assert recorder.record([0.5], [0.5], [0.1]) is False
    assert recorder.stats.dropped == 1 and recorder.stats.written == 1


def test_a_writer_that_falls_behind_bounds_memory_by_dropping(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "c", block_rows=10, max_pending_blocks=1, handle_sigterm=False)
    recorder.record([0.5], [0.5], [0.1])
    with recorder._io_lock:  # the disk is stuck: the writer cannot write a block
        taken = sum(recorder.record([0.5], [0.5], [0.1]) for _ in range(1000))
        assert taken < 40, "at most a few blocks are held while the writer is stuck"
        assert recorder.stats.dropped == 1000 - taken
    recorder.close()
    assert recorder.stats.written == taken + 1 == len(rows_of(tmp_path / "c"))


def test_many_threads_record_whole_rows(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "c", block_rows=64, max_pending_blocks=200, handle_sigterm=False)

    def work(thread: int) -> None:
        for i in range(1500):
            k = 1 + (i + thread) % 8
            value = thread + i / 10_000
            recorder.record([value] * k, [value] * k, [value] * k, request_id=f"t{thread}", step=i, accepted=k)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recorder.close()
    rows = rows_of(tmp_path / "c")
    assert len(rows) == 9000 == recorder.stats.written
    for row in rows:
        thread = int(str(row["request_id"])[1:])
        value = thread + int(row["step"]) / 10_000  # type: ignore[call-overload]
        assert row["p"] == row["q"] == row["r"] == [value] * int(row["accepted"])  # type: ignore[call-overload]
    assert sorted((row["request_id"], row["step"]) for row in rows) == sorted(
        (f"t{t}", i) for t in range(6) for i in range(1500)
    )


def script(body: str, directory: Path) -> subprocess.Popen[bytes]:
    code = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from specaccept_cli.capture import Recorder
        directory = {str(directory)!r}
        """
    ) + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_rows_are_flushed_at_exit_without_close(tmp_path: Path) -> None:
    child = script(
        """
        recorder = Recorder(directory)
        for i in range(500):
            recorder.record([0.5, 0.2], [0.5, 0.8], [0.1, 0.9], request_id=i, accepted=1)
        """,
        tmp_path / "c",
    )
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err.decode()
    assert len(rows_of(tmp_path / "c")) == 500


def test_sigterm_flushes_then_dies_of_the_signal(tmp_path: Path) -> None:
    child = script(
        """
        recorder = Recorder(directory, flush_seconds=600)
        for i in range(700):
            recorder.record([0.5], [0.5], [0.1], request_id=i, accepted=1)
        print("ready", flush=True)
        time.sleep(60)
        """,
        tmp_path / "c",
    )
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGTERM
    assert len(rows_of(tmp_path / "c")) == 700


def test_sigterm_chains_the_handler_that_was_there_before(tmp_path: Path) -> None:
    child = script(
        """
        def mine(signum, frame):
            print("previous handler ran", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, mine)
        recorder = Recorder(directory, flush_seconds=600)
        for i in range(300):
            recorder.record([0.5], [0.5], [0.1], accepted=1)
        print("ready", flush=True)
        time.sleep(60)
        """,
        tmp_path / "c",
    )
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 3 and b"previous handler ran" in out
    assert len(rows_of(tmp_path / "c")) == 300


def test_a_forked_child_writes_its_own_part_and_not_its_parents_rows(tmp_path: Path) -> None:
    child = script(
        """
        recorder = Recorder(directory, flush_seconds=600)
        for i in range(100):
            recorder.record([0.5], [0.5], [0.1], request_id="parent-before", step=i, accepted=1)
        pid = os.fork()
        if pid == 0:
            for i in range(40):
                recorder.record([0.5], [0.5], [0.1], request_id="child", step=i, accepted=1)
            recorder.close()
            os._exit(0)
        for i in range(60):
            recorder.record([0.5], [0.5], [0.1], request_id="parent-after", step=i, accepted=1)
        _, status = os.waitpid(pid, 0)
        recorder.close()
        print(os.waitstatus_to_exitcode(status), recorder.stats.written)
        """,
        tmp_path / "c",
    )
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err.decode()
    assert out.split() == [b"0", b"160"]
    parts = sorted((tmp_path / "c").iterdir())
    assert len(parts) == 2
    by_part = [sorted({row["request_id"] for row in pq.read_table(part).to_pylist()}) for part in parts]
    assert sorted(by_part) == [["child"], ["parent-after", "parent-before"]]
    assert len(rows_of(tmp_path / "c")) == 200


@pytest.mark.parametrize("form", ["parquet", "jsonl"])
def test_a_full_disk_is_counted_never_raised_and_what_was_written_stays_readable(tmp_path: Path, form: str) -> None:
    """A real write error: the file size limit (RLIMIT_FSIZE) makes write() fail with EFBIG."""
    child = script(
        f"""
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, resource.RLIM_INFINITY))
        recorder = Recorder(directory, {form!r}, block_rows=100, max_pending_blocks=50)
        import random
        for i in range(4000):
            p, q, r = ([random.random() for _ in range(3)] for _ in range(3))
            assert recorder.record(p, q, r, request_id=i, accepted=1)
            if i == 199:
                recorder.flush(timeout=30)  # a first part, whole, under the limit
        recorder.close()
        stats = recorder.stats
        print(stats.recorded, stats.written, stats.dropped, stats.write_errors)
        """,
        tmp_path / "c",
    )
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err.decode()
    recorded, written, dropped, errors = map(int, out.split())
    assert recorded == 4000 and errors >= 1 and dropped > 0 and written + dropped == recorded
    assert err.decode().count("cannot") == 1, err.decode()  # logged once
    parts = sorted((tmp_path / "c").glob("part-*"))
    assert parts and len(rows_of(tmp_path / "c")) == written >= 200
    numbers = audit(*(str(part) for part in parts))
    assert numbers["runs"] == written and numbers["skipped_rows"] == 0


def test_flush_publishes_every_row_recorded_so_far_and_recording_goes_on(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    recorder = Recorder(directory, flush_seconds=600, handle_sigterm=False)
    for p, q, r, accepted in steps(30):
        recorder.record(p, q, r, accepted=accepted)
    recorder.flush(timeout=30)
    assert len(rows_of(directory)) == 30
    for p, q, r, accepted in steps(20, seed=1):
        recorder.record(p, q, r, accepted=accepted)
    recorder.close()
    assert sorted(os.listdir(directory)) == ["part-00001.parquet", "part-00002.parquet"]
    assert len(rows_of(directory)) == 50
