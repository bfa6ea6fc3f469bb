"""The record types are msgspec Structs: what they must keep of the dataclasses they replaced."""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import pkgutil
import sys

import msgspec
import numpy as np
import pytest
from msgspec.structs import replace

import specaccept_cli
from specaccept_cli.pipeline.request import ReadRequest
from specaccept_cli.summary.clusters import ClusterTally
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.windows import WindowSpec, WindowTally

OPTIONAL = ("specaccept_cli.capture.hf",)  # needs the `hf` extra's torch and transformers


def _record_types() -> list[type[msgspec.Struct]]:
    for module in pkgutil.walk_packages(specaccept_cli.__path__, "specaccept_cli."):
        if module.name not in OPTIONAL:
            importlib.import_module(module.name)
    found, todo = [], list(msgspec.Struct.__subclasses__())
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        if kind.__module__.startswith("specaccept_cli."):
            found.append(kind)
    return found


def test_every_record_with_its_own_equality_keeps_not_equal_its_negation() -> None:
    """A Struct made with eq=False answers != by identity even when the class defines __eq__."""
    kinds = _record_types()
    assert len(kinds) > 60  # every module was imported
    with_own_eq = [kind for kind in kinds if "__eq__" in vars(kind)]
    assert {kind.__name__ for kind in with_own_eq} >= {"Summary", "WindowTally", "ClusterTally", "SamplerTally"}
    assert [kind.__name__ for kind in with_own_eq if not kind.__struct_config__.eq] == []


def test_equal_summaries_are_not_unequal() -> None:
    # Counts padded differently are the same counts: only Summary.__eq__ knows it.
    small = Summary(counts=np.array([[0, 0], [1, 2]], dtype=np.int64), passing_tokens=3)
    padded = Summary(counts=np.array([[0, 0, 0], [1, 2, 0], [0, 0, 0]], dtype=np.int64), passing_tokens=3)
    assert small == padded
    assert (small != padded) is False  # __ne__ itself, which eq=False would answer by identity
    assert small != replace(small, passing_tokens=4)
    spec = WindowSpec(width=10)  # windows of 10 runs
    assert (WindowTally.empty(spec) != WindowTally.empty(spec)) is False


def test_replace_runs_post_init_as_dataclasses_replace_did() -> None:
    request = ReadRequest(inputs=["a", "b"])
    assert request.inputs == ("a", "b")
    assert replace(request, inputs="c").inputs == ("c",)  # one path, not its letters
    grouped = replace(Summary(), group_by="model", groups={"x": Summary()})
    assert type(grouped.groups).__name__ == "Groups"


def test_records_are_frozen_and_cross_a_process_boundary() -> None:
    summary = Summary(counts=np.array([[0, 0], [1, 2]], dtype=np.int64), passing_tokens=3, skipped_rows=1)
    with pytest.raises(AttributeError):
        summary.skipped_rows = 2  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(summary)) == summary


def test_a_cluster_tally_caches_its_sums_but_does_not_send_them() -> None:
    keys = np.array([7, 9, 7], dtype=np.uint64)  # the hashed request ids
    tally = ClusterTally.of_runs("id", keys, np.array([2, 2, 2]), np.array([1, 2, 0]))
    assert tally.clusters == 2 and "sums" in vars(tally)
    copied = pickle.loads(pickle.dumps(tally))
    assert vars(copied) == {} and copied == tally and copied.clusters == 2


def test_no_record_is_a_dataclass_any_more() -> None:
    """Python 3.11 compiles each dataclass method with its own exec: 50 of them were 42 ms of an audit's start-up."""
    _record_types()  # imports every module
    classes = [
        value
        for name, module in sys.modules.items()
        if name.startswith("specaccept_cli")
        for value in vars(module).values()
        if isinstance(value, type) and value.__module__ == name
    ]
    assert len(classes) > 60
    assert [kind.__qualname__ for kind in classes if dataclasses.is_dataclass(kind)] == []
