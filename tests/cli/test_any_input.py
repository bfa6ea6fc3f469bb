"""Any bytes in, any summary file in: exit status 0, 1 or 2 and one stderr line, never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specaccept_cli.read.sources import MAGIC
from tests.helpers import (
    audit_bytes,
    invoke,
    nonblank_lines,
    save,
    simulated,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    for mode in ("fail", "skip"):
        result = audit_bytes(tmp_path, data, "-o", "json", "--on-error", mode, "--max-line-bytes", "120")
        assert result.exit_code in (0, 1, 2)
        assert "Traceback" not in result.stderr
        if result.exit_code == 2:
            assert len(result.stderr.splitlines()) == 1
            assert result.stderr.startswith("specaccept: ")
        if mode == "skip":
            summary = orjson.loads(result.stdout)
            nothing_valid = summary["runs"] == 0 and (summary["skipped_rows"] or summary["skipped_sources"])
            assert result.exit_code == (1 if nothing_valid else 0)  # no valid run out of a non-empty input
            if summary["skipped_sources"]:  # only a compressed stream can fail as a whole here
                assert data.startswith(tuple(MAGIC))
                continue
            assert summary["runs"] + summary["skipped_rows"] == nonblank_lines(data)


_json_scalars = st.none() | st.booleans() | st.integers(-3, 12) | st.floats(allow_nan=False) | st.text(max_size=3)


_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


_states = st.fixed_dictionaries(
    {},
    optional={
        "joint_counts": st.lists(
            st.lists(st.integers(-2, 12) | st.sampled_from([10**30, 1e30, 2**63, 10**5]) | _json_scalars, max_size=4),
            max_size=5,
        )
        | _json_values,
        "passing_tokens": st.integers(-5, 50) | st.just(2**63 - 1) | _json_values,
        "threshold_sum_fixed": st.integers(-5, 10**12) | st.sampled_from([2**63 - 1, 10**30]) | _json_values,
        "threshold_scale": _json_values,
        "sampled_tokens": st.integers(-5, 50) | _json_values,
        "reported": _json_values
        | st.fixed_dictionaries(
            {"runs": st.integers(0, 5), "mismatches": st.integers(0, 5), "unexplained": st.integers(0, 5)},
            optional={"explains": _json_values, "examples": _json_values},
        ),
        "sampler": _json_values
        | st.fixed_dictionaries(
            {"significance": _json_values, "r_histogram_bins": st.just(4096) | _json_values},
            optional={"r_histogram": _json_values, "examined_tokens": _json_values},
        ),
    },
)


@given(
    body=st.one_of(
        st.binary(max_size=40),
        st.builds(lambda v: json.dumps(v).encode(), _json_values),
        st.builds(lambda s: json.dumps({"schema": "specaccept.summary/1", "state": s}).encode(), _states),
    )
)
def test_any_summary_file_gives_0_1_or_2(body: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzz.json"
        path.write_bytes(body)
        good = save(simulated(30, 0.7, seed=1), Path(directory) / "good.json")
        commands = (["diff", str(good), str(path)], ["diff", str(path), str(good)], ["merge", str(path), str(path)])
        for args in commands:
            result = invoke(*args)  # catch_exceptions=False: a traceback fails the test
            assert result.exit_code in (0, 1, 2)
            if result.exit_code == 2:
                assert len(result.stderr.splitlines()) == 1 or result.stderr.startswith("Usage:")
