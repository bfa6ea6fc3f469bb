"""`ReadRequest`: one value that the front door, the pool workers and the cluster tasks all take."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import get_type_hints

import msgspec
import pytest

from specaccept_cli.errors import ExtraMissing, OneProcessOnly, WorkerDied
from specaccept_cli.pipeline import ReadRequest, parallel, summarise
from specaccept_cli.pipeline.request import ReadOptions
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.summary.evaluate import Plan
from tests.helpers import invoke, mixed_lines


def test_the_keyword_settings_are_the_requests_own() -> None:
    """`summarise(paths, ..., **settings)` takes exactly the request's settings: none missed, none invented."""
    settings = {field.name for field in msgspec.structs.fields(ReadRequest)} - {"inputs", "fields", "plan"}
    assert set(get_type_hints(ReadOptions)) == settings


def test_paths_with_settings_are_the_same_call_as_a_request(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(mixed_lines(400, seed=3, bad_every=50)))
    fields, plan = FieldSpec(extras=("id",)), Plan(group_by="id")
    by_keywords = summarise([str(path)], fields, plan, on_error="skip", jobs=2)
    by_request = summarise(ReadRequest((str(path),), fields, plan, on_error="skip", jobs=2))
    one_path = summarise(ReadRequest(str(path), fields, plan, on_error="skip"))  # a path, not its letters
    assert by_keywords == by_request == one_path
    assert by_request.skipped_rows > 0 and by_request.runs > 300


def test_a_request_and_loose_settings_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="not both"):
        summarise(ReadRequest(("a.jsonl",)), jobs=2)


def test_a_scheduler_is_for_the_cluster_driver() -> None:
    with pytest.raises(ValueError, match=r"pipeline\.distributed\.summarise"):
        summarise(ReadRequest(("a.jsonl",), scheduler="local:1"))


def test_workers_get_a_picklable_request_without_the_quarantine(tmp_path: Path) -> None:
    with (tmp_path / "bad.jsonl").open("wb") as quarantine:
        request = ReadRequest(("a.jsonl", "b.jsonl"), FieldSpec(extras=("id",)), on_error="skip", quarantine=quarantine)
        with pytest.raises(TypeError):
            pickle.dumps(request)  # a file stays in the process that writes it
        sent = request.for_workers()
    assert sent.quarantine is None and sent.inputs == ()
    assert pickle.loads(pickle.dumps(sent)) == sent
    assert sent.reading == request.reading  # what the readers need travels whole


def test_typed_errors_cross_processes_whole() -> None:
    for error in (
        WorkerDied("logs.jsonl"),
        OneProcessOnly("server.log", "vllm-log"),
        ExtraMissing("a cluster", "dask"),
    ):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error) and vars(again) == vars(error)
        assert "--" not in str(error)  # the core names no option: the command line does


PARENT = os.getpid()
_RANGE_TASK = parallel._range_task


def _die_in_a_worker(*args: object) -> object:
    if os.getpid() == PARENT:  # pragma: no cover - a range read in this process
        return _RANGE_TASK(*args)  # type: ignore[arg-type]
    os._exit(9)  # what the out-of-memory killer does to a worker


def test_the_command_tells_how_to_read_on_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core says a worker died; the command adds the option that avoids the pool."""
    monkeypatch.setattr(parallel, "_range_task", _die_in_a_worker)  # forked workers inherit it
    kwdefaults = parallel.evaluate_source.__kwdefaults__
    assert kwdefaults is not None
    monkeypatch.setitem(kwdefaults, "block_bytes", 512)  # small blocks: a small file is enough for the pool
    path = tmp_path / "logs.jsonl"
    path.write_bytes(b"\n".join(mixed_lines(300, seed=8)))
    result = invoke("audit", str(path), "--jobs", "2")
    assert result.exit_code == 2
    assert result.stderr == f"specaccept: {path}: a worker process died (out of memory?); try again with --jobs 1\n"
