"""A Dask cluster gives the way out one process gives: the reason an error carries crosses back with it."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from specaccept_cli.cli.ways_out import FIELD_OPTIONS, field_options, with_way_out
from specaccept_cli.errors import InputError, Reason, Why
from specaccept_cli.pipeline import distributed as on_cluster
from specaccept_cli.pipeline import summarise
from tests.helpers import invoke, jsonl_bytes, simulated_rows, write_parquet

ROW = {"p": [0.5, 0.9], "q": [0.6, 0.3], "r": [0.1, 0.2]}
META = {FIELD_OPTIONS: field_options({"--p-field": "p", "--q-field": "q", "--r-field": "r"})}


def _late(directory: Path, name: str, bad: object) -> Path:
    """Good rows, then one bad row far from the start: in a later share of the file than the first."""
    path = directory / name
    path.write_bytes(jsonl_bytes([ROW] * 2_000 + [bad] + [ROW] * 50))
    return path


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Why]]:
    directory = tmp_path_factory.mktemp("broken")
    cut = directory / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(jsonl_bytes(simulated_rows(4_000, seed=5)))[:-3_000])
    return {
        "missing p": (_late(directory, "missing.jsonl", {"q": [0.6], "r": [0.1]}), Why(Reason.MISSING_FIELD, "p")),
        "p not a list": (_late(directory, "wrong.jsonl", {**ROW, "p": 0.5}), Why(Reason.WRONG_FIELD, "p")),
        "an array row": (_late(directory, "array.jsonl", [1, 2]), Why(Reason.NOT_AN_OBJECT)),
        "a rule field naming no rule": (
            _late(directory, "rule.jsonl", {**ROW, "rule": "team-a"}),
            Why(Reason.NOT_A_RULE, "rule"),
        ),
        "a cut gzip": (cut, Why(Reason.CUT)),
        "missing column": (
            write_parquet(directory / "no-r.parquet", [{"p": [0.5], "q": [0.5]}] * 3_000, 1_000),
            Why(Reason.MISSING_FIELD, "r"),
        ),
    }


@pytest.mark.parametrize(
    "case", ["missing p", "p not a list", "an array row", "a rule field naming no rule", "a cut gzip", "missing column"]
)
def test_a_cluster_gives_the_reason_and_way_out_of_one_process(
    client: object, cluster: str, broken: dict[str, tuple[Path, Why]], case: str
) -> None:
    path, expected = broken[case]
    with pytest.raises(InputError) as alone:
        summarise([str(path)])
    with pytest.raises(InputError) as spread:  # small shares: the bad row is read by a task far from the start
        on_cluster.summarise([str(path)], client=client, range_bytes=4_000, share_rows=500, fan_in=2)
    assert str(spread.value) == str(alone.value)
    assert spread.value.why == alone.value.why
    assert alone.value.why is not None and alone.value.why.reason is expected.reason
    assert alone.value.why == expected._replace(lines=alone.value.why.lines)
    way_out = with_way_out(alone.value, META)
    assert with_way_out(spread.value, META) == way_out != str(alone.value)
    one, many = (invoke("audit", str(path), *options) for options in (("--jobs", "1"), ("--scheduler", cluster)))
    assert many.exit_code == one.exit_code == 2
    assert many.stderr == one.stderr and way_out in one.stderr
