"""`audit` over time: --time-field, --window, --check-drift, the JSON keys, Parquet timestamps, merged shards."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import FIRST_EXAMPLE as FIRST
from tests.helpers import interleaved, invoke, without_provenance, write_jsonl

START = 1_764_500_000  # 2025-11-30T10:53:20Z


def timed_rows(runs: int, seed: int, step_at: int | None = None, every: float = 0.9) -> list[dict[str, object]]:
    """Runs whose tokens pass with probability 0.8 (0.7 from run `step_at` on), one every `every` seconds."""
    rng = random.Random(seed)
    rows = []
    for index in range(runs):
        alpha = 0.7 if step_at is not None and index >= step_at else 0.8
        q = [rng.uniform(0.2, 1.0) for _ in range(rng.randint(1, 8))]
        rows.append(
            {
                "ts": START + index * every,
                "p": [alpha * value for value in q],  # min(1, p/q) = alpha: a token passes with probability alpha
                "q": q,
                "r": [rng.random() for _ in q],
            }
        )
    return rows


@pytest.fixture(scope="module")
def step_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("step") / "step.jsonl", timed_rows(4000, 3, step_at=2000))


@pytest.fixture(scope="module")
def steady_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("steady") / "steady.jsonl", timed_rows(2000, 4))


def test_interleaved_requests_make_the_drift_test_use_request_totals_with_cluster_field(tmp_path: Path) -> None:
    """64 requests at a time: the mix of active requests moves alpha between windows. With the request field
    the test takes sigma from request totals, so the same log is judged more cautiously."""
    k, accepted, request = interleaved(4000, np.random.default_rng(31), concurrent=64)
    rows = []
    for drafted, kept, name in zip(k.tolist(), accepted.tolist(), request.tolist()):
        # Kept tokens: p = q (threshold 1); the first rejected one: threshold 0.5 and r = 0.9.
        p = [0.5] * kept + [0.25] * (drafted - kept)
        rows.append(
            {"request_id": f"req-{name}", "p": p, "q": [0.5] * drafted, "r": [0.1] * kept + [0.9] * (drafted - kept)}
        )
    log = write_jsonl(tmp_path / "interleaved.jsonl", rows)
    plain = invoke("audit", str(log), "-o", "json", "--check-drift", "--cluster-field", "none")
    robust = invoke("audit", str(log), "-o", "json", "--check-drift", "--cluster-field", "request_id")
    found = invoke("audit", str(log), "-o", "json", "--check-drift")  # the first row's request_id, by default
    assert orjson.loads(found.stdout)["drift"] == orjson.loads(robust.stdout)["drift"]
    runs_only, by_request = orjson.loads(plain.stdout)["drift"], orjson.loads(robust.stdout)["drift"]
    assert orjson.loads(robust.stdout)["accepted_tokens"] == int(accepted.sum())
    assert runs_only["variance"] in ("runs", "windows") and by_request["variance"] == "clusters"
    assert by_request["statistic"] < runs_only["statistic"] and by_request["p_value"] > runs_only["p_value"]
    assert by_request["change_at"] == runs_only["change_at"]  # the same peak, judged with a wider sigma
    for result, drift in ((plain, runs_only), (robust, by_request)):
        assert result.exit_code == (1 if drift["p_value"] < 0.01 else 0), result.stderr


def test_a_step_passes_the_iid_check_but_not_the_drift_check(step_log: Path) -> None:
    result = invoke("audit", str(step_log), "-o", "json", "--check-drift")
    assert result.exit_code == 1
    summary = orjson.loads(result.stdout)
    assert summary["iid_check"]["consistent"] is True  # the whole log looks fine on its own
    drift = summary["drift"]
    assert drift["p_value"] < 1e-6
    assert abs(drift["change_at"] - 2000) <= 0.05 * 4000
    assert drift["alpha_before"] == pytest.approx(0.8, abs=0.03)
    assert drift["alpha_after"] == pytest.approx(0.7, abs=0.03)
    assert "drift: alpha is not constant over the log" in result.stderr
    windows = summary["windows"]
    assert summary["windows_by"] == {
        "unit": "runs",
        "time_field": None,
        "width": 128,
        "requested_width": None,
        "order": "input",
        "design_effect": 1.0,
        "interval": "over runs",
    }
    assert len(windows) == 32 and sum(window["runs"] for window in windows) == 4000
    assert set(windows[0]) == {
        "start",
        "end",
        "runs",
        "drafted_tokens",
        "accepted_tokens",
        "alpha",
        "alpha_ci",
        "tokens_per_pass",
    }


def test_steady_log_passes_check_drift_and_the_table_draws_the_timeline(steady_log: Path) -> None:
    result = invoke("audit", str(steady_log), "--max-rows", "0", "--check-drift", "--significance", "0.001")
    assert result.exit_code == 0, result.stderr
    assert "Alpha over the log (32 windows of 64 runs in input order)" in result.stdout
    assert "alpha looks constant over the log" in result.stdout


def test_time_windows_by_field_and_duration(step_log: Path) -> None:
    result = invoke("audit", str(step_log), "-o", "json", "--time-field", "ts", "--window", "10m")
    assert result.exit_code == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert summary["windows_by"]["unit"] == "seconds" and summary["windows_by"]["width"] == 600
    windows = summary["windows"]
    assert all(window["start"] % 600 == 0 and window["end"] == window["start"] + 600 for window in windows)
    change = summary["drift"]["change_at"]
    assert abs(change - (START + 2000 * 0.9)) <= 600  # the boundary of the window where the step falls
    table = invoke("audit", str(step_log), "--max-rows", "0", "--time-field", "ts", "--window", "10m")
    assert "windows of 10m of ts" in table.stdout
    assert "^" in table.stdout  # windows whose interval excludes the whole-log alpha are marked


def test_time_windows_of_shards_merge_to_the_whole_byte_for_byte(tmp_path: Path) -> None:
    rows = timed_rows(900, 5)
    whole = invoke("audit", str(write_jsonl(tmp_path / "all.jsonl", rows)), "-o", "json", "--time-field", "ts")
    shuffled = random.Random(1).sample(rows, len(rows))  # shards need not be in time order
    shards = []
    for index, part in enumerate((shuffled[:300], shuffled[300:310], shuffled[310:])):
        path = write_jsonl(tmp_path / f"part-{index}.jsonl", part)
        out = tmp_path / f"part-{index}.json"
        saved = invoke("audit", str(path), "-o", "csv", "--time-field", "ts", "--summary-out", str(out))
        assert saved.exit_code == 0, saved.stderr
        shards.append(str(out))
    merged = invoke("merge", *shards)
    assert merged.exit_code == 0, merged.stderr
    # Byte for byte but for what each was made of (one file; three shard files).
    assert without_provenance(merged.stdout_bytes) == without_provenance(whole.stdout_bytes)


def test_windows_need_the_same_kind_on_every_shard(tmp_path: Path) -> None:
    by_time, by_runs = tmp_path / "time.json", tmp_path / "runs.json"
    log = write_jsonl(tmp_path / "log.jsonl", timed_rows(50, 6))
    invoke("audit", str(log), "-o", "csv", "--time-field", "ts", "--summary-out", str(by_time))
    other = write_jsonl(tmp_path / "other.jsonl", timed_rows(50, 7))
    invoke("audit", str(other), "-o", "csv", "--summary-out", str(by_runs))
    result = invoke("merge", str(by_time), str(by_runs))
    assert result.exit_code == 2
    assert "made with different settings (window_time_field None here, 'ts' in " in result.stderr
    for path in (by_time, by_runs):  # summaries that recorded no settings: the windows themselves disagree
        data = orjson.loads(path.read_bytes())
        del data["provenance"]
        path.write_bytes(orjson.dumps(data))
    result = invoke("merge", str(by_time), str(by_runs))
    assert result.exit_code == 2
    assert "cannot add windows of different kinds" in result.stderr


def test_parquet_timestamp_column(tmp_path: Path) -> None:
    rows = timed_rows(600, 7, step_at=300, every=6.0)
    table = pa.table(
        {
            "at": pa.array(
                [datetime.fromtimestamp(row["ts"], tz=UTC) for row in rows],  # type: ignore[arg-type]
                type=pa.timestamp("ms", tz="UTC"),
            ),
            "p": [row["p"] for row in rows],
            "q": [row["q"] for row in rows],
            "r": [row["r"] for row in rows],
        }
    )
    path = tmp_path / "log.parquet"
    pq.write_table(table, path)
    parquet = orjson.loads(invoke("audit", str(path), "-o", "json", "--time-field", "at").stdout)
    jsonl = orjson.loads(
        invoke("audit", str(write_jsonl(tmp_path / "log.jsonl", rows)), "-o", "json", "--time-field", "ts").stdout
    )
    assert parquet["windows"] == jsonl["windows"] and parquet["drift"] == jsonl["drift"]
    assert parquet["windows_by"]["width"] == 300  # an hour of runs: 5-minute windows


@pytest.mark.parametrize("time_field", [None, "ts"])
def test_windows_are_the_same_on_several_processes(tmp_path: Path, time_field: str | None) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", timed_rows(3000, 8))
    one = invoke("audit", str(log), "-o", "json", "--jobs", "1", *(("--time-field", time_field) if time_field else ()))
    several = run_in_blocks(log, time_field)
    assert orjson.loads(one.stdout)["windows"] == several


def run_in_blocks(log: Path, time_field: str | None) -> object:
    """The windows of `log` read on two worker processes, in small blocks (so blocks straddle windows)."""
    from specaccept_cli.pipeline.parallel import evaluate_source
    from specaccept_cli.pipeline.request import ReadRequest
    from specaccept_cli.read.policy import ErrorPolicy
    from specaccept_cli.read.sources import expand_inputs
    from specaccept_cli.rule.batch import FieldSpec
    from specaccept_cli.summary.evaluate import Plan, add_up
    from specaccept_cli.summary.files import summary_object
    from specaccept_cli.summary.windows import WindowSpec

    plan = Plan(windows=WindowSpec(time_field))
    (source,) = expand_inputs([str(log)])
    results = evaluate_source(
        source,
        ReadRequest(fields=FieldSpec(extras=(time_field,) if time_field else ()), plan=plan, jobs=2),
        ErrorPolicy("fail", None),
        keep_runs=False,
        block_bytes=4096,
        blocks_per_task=3,
    )
    return orjson.loads(orjson.dumps(summary_object(add_up(results, windows=plan.windows))))["windows"]


def test_a_bad_time_is_a_bad_row(tmp_path: Path) -> None:
    rows = timed_rows(5, 9)
    rows[3]["ts"] = "soon"
    log = write_jsonl(tmp_path / "log.jsonl", rows)
    result = invoke("audit", str(log), "--time-field", "ts")
    assert result.exit_code == 2
    assert f"{log}:4: ts = 'soon' is not a time" in result.stderr
    skipped = invoke("audit", str(log), "--time-field", "ts", "--on-error", "skip", "-o", "json")
    assert skipped.exit_code == 0 and orjson.loads(skipped.stdout)["runs"] == 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--window", "5m"), "needs --time-field"),
        (("--window", "0"), "is not a number of runs"),
        (("--time-field", "ts", "--window", "300"), "is not a duration"),
        (("--time-field", "a..b"), "is not a dotted field path"),
    ],
)
def test_window_usage_errors(steady_log: Path, options: tuple[str, ...], message: str) -> None:
    result = invoke("audit", str(steady_log), *options)
    assert result.exit_code == 2
    assert message in result.stderr


def test_check_drift_fails_when_it_cannot_test(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "short.jsonl", timed_rows(12, 10))  # two windows of 8 runs
    result = invoke("audit", str(log), "--check-drift", "--max-rows", "0")
    assert result.exit_code == 1
    assert "drift cannot be tested: it needs at least 3 windows" in result.stderr


TIME_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),  # what orjson writes
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.datetimes().map(lambda moment: moment.isoformat()),
    st.lists(st.integers(min_value=0, max_value=9), max_size=2),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(TIME_VALUES, min_size=1, max_size=6))
def test_any_time_value_is_a_time_or_a_bad_row(tmp_path: Path, values: list[object]) -> None:
    from specaccept_cli.summary.windows import epoch_seconds

    rows = [{**FIRST, "ts": value} for value in values]
    log = write_jsonl(tmp_path / "log.jsonl", rows)
    result = invoke("audit", str(log), "--time-field", "ts", "-o", "json", "--on-error", "skip")
    assert result.exit_code == (0 if any(epoch_seconds(value) is not None for value in values) else 1)  # no valid run
    summary = orjson.loads(result.stdout)
    good = sum(epoch_seconds(value) is not None for value in values)
    assert summary["runs"] == good == sum(window["runs"] for window in summary["windows"])
    assert summary["skipped_rows"] == len(values) - good


def test_markdown_says_whether_alpha_moved(step_log: Path) -> None:
    result = invoke("audit", str(step_log), "-o", "markdown")
    assert "### Over the log\n\nalpha is not constant over the log (p = " in result.stdout  # the verdict's words
    strict = invoke("audit", str(step_log), "-o", "markdown", "--check-drift", "--significance", "1e-60")
    assert strict.exit_code == 0, strict.stderr  # p is tiny, but not below 1e-60
    assert "alpha looks constant over the log (p = " in strict.stdout
