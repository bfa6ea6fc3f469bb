"""A Dask cluster gives the bytes one process gives: summaries, kept errors, exit codes, from disk and from S3."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import signal
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from specaccept_cli.errors import InputError, SpecacceptError
from specaccept_cli.pipeline import distributed as on_cluster
from specaccept_cli.pipeline import summarise
from specaccept_cli.rule.batch import FieldSpec, RunBatch
from specaccept_cli.rule.vectorized import BatchOutcome
from specaccept_cli.summary.estimates import estimate
from specaccept_cli.summary.evaluate import Plan, RunColumns, RunSink
from specaccept_cli.summary.files import json_bytes, summary_object
from specaccept_cli.summary.state import Summary
from tests.helpers import (
    Shards,
    invoke,
    invoke_env,
    jsonl_bytes,
    mixed_lines,
    simulated_rows,
    without_provenance,
    write_parquet,
)

BY_HOST = ("--group-by", "host", "--check-sampler")


def machine(summary: Summary) -> bytes:
    return json_bytes(summary_object(summary, None, estimate(summary)))


def test_the_cluster_prints_the_bytes_of_one_process(cluster: str, shards: Shards) -> None:
    paths = [str(path) for path in shards.files]
    alone = invoke("audit", *paths, "-o", "json", *BY_HOST)
    spread = invoke("audit", *paths, "-o", "json", *BY_HOST, "--scheduler", cluster)
    assert alone.exit_code == spread.exit_code == 0, alone.stderr + spread.stderr
    assert orjson.loads(alone.stdout)["runs"] == shards.runs
    assert spread.stdout == alone.stdout
    assert spread.stderr == alone.stderr


def test_the_first_runs_from_a_cluster_are_those_of_one_process(cluster: str, shards: Shards) -> None:
    """The table's preview is part of each share's summary (bounded, added in input order): no run comes back."""
    paths = [str(path) for path in shards.files]
    alone = invoke("audit", *paths, "-o", "json", "--max-rows", "25")
    spread = invoke("audit", *paths, "-o", "json", "--max-rows", "25", "--scheduler", cluster)
    assert alone.exit_code == spread.exit_code == 0, alone.stderr + spread.stderr
    first = orjson.loads(alone.stdout)["first_runs"]
    assert first["count"] == shards.runs and first["shown"] == 25
    assert orjson.loads(spread.stdout)["first_runs"] == first
    table = invoke("audit", *paths, "--scheduler", cluster).stdout
    assert "Runs" in table and f"… and {shards.runs - 10:,} more runs" in table


def test_from_s3_on_a_local_cluster_the_same_bytes(shards: Shards) -> None:
    """The issue's acceptance test: `--scheduler local:2 s3://...` == one process on the same objects."""
    alone = invoke("audit", shards.url, "-o", "json", "--group-by", "host")
    spread = invoke("audit", shards.url, "-o", "json", "--group-by", "host", "--scheduler", "local:2")
    local = invoke("audit", *[str(path) for path in shards.files], "-o", "json", "--group-by", "host")
    assert alone.exit_code == spread.exit_code == 0, alone.stderr + spread.stderr
    assert orjson.loads(alone.stdout)["runs"] == shards.runs
    assert spread.stdout == alone.stdout
    # No source name in a clean summary but its provenance: disk == bucket.
    assert without_provenance(alone.stdout_bytes) == without_provenance(local.stdout_bytes)


def test_objects_cut_into_row_groups_and_byte_ranges_add_up_to_the_same_bytes(client: object, shards: Shards) -> None:
    """Ranged requests on S3: Parquet row groups and plain JSONL byte ranges as tasks of their own."""
    fields, plan = FieldSpec(extras=("host",)), Plan(group_by="host")
    alone = summarise([shards.url], fields, plan)
    spread = on_cluster.summarise([shards.url], fields, plan, client=client, range_bytes=1 << 20, share_rows=7_000)
    assert spread.runs == shards.runs
    assert machine(spread) == machine(alone)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Shards with bad rows in every kind of share, and sources that fail whole or part-way."""
    directory = tmp_path_factory.mktemp("damaged")
    plain = directory / "a-plain.jsonl"
    plain.write_bytes(b"\n".join(mixed_lines(6_000, seed=3, bad_every=97)) + b"\n")
    rows = simulated_rows(5_000, seed=4)
    for index in (10, 4_321):
        rows[index] = {**rows[index], "q": [0.0] * len(rows[index]["q"])}  # type: ignore[arg-type]
    parquet = write_parquet(directory / "b-rows.parquet", rows, 1_000)
    no_r = write_parquet(directory / "c-no-r.parquet", [{"p": [0.5], "q": [0.5]}] * 3_000, 1_000)
    cut = directory / "d-cut.jsonl.gz"
    cut.write_bytes(gzip.compress(jsonl_bytes(simulated_rows(4_000, seed=5)))[:-3_000])
    good = directory / "e-good.jsonl"
    good.write_bytes(jsonl_bytes(simulated_rows(2_000, seed=6)))
    return [str(path) for path in (plain, parquet, no_r, cut, good)]


@pytest.mark.parametrize(
    ("range_bytes", "share_rows", "fan_in"), [(1 << 30, 1 << 30, 8), (50_000, 1, 2), (120_000, 2_500, 3)]
)
def test_shard_boundaries_and_fan_in_change_no_byte(
    client: object, damaged: list[str], range_bytes: int, share_rows: int, fan_in: int
) -> None:
    fields, plan = FieldSpec(extras=("host",)), Plan(group_by="host")
    # Also with a file cut into ranges first: line numbers are shifted within a source, never across.
    for inputs in (damaged, [damaged[4], *damaged[1:4], damaged[0]]):
        alone = summarise(inputs, fields, plan, on_error="skip")
        spread = on_cluster.summarise(
            inputs,
            fields,
            plan,
            client=client,
            on_error="skip",
            range_bytes=range_bytes,
            share_rows=share_rows,
            fan_in=fan_in,
        )
        assert alone.skipped_rows > 20 and alone.skipped_sources == 2  # past the kept 20; two abandoned sources
        assert machine(spread) == machine(alone)


@pytest.mark.parametrize("first", [0, 1, 2, 3])
def test_fail_mode_raises_the_first_error_of_the_input(client: object, damaged: list[str], first: int) -> None:
    """Whichever task finishes first, the error raised is the first one one process meets."""
    inputs = damaged[first:]
    with pytest.raises(InputError) as alone:
        summarise(inputs)
    with pytest.raises(InputError) as spread:
        on_cluster.summarise(inputs, client=client, range_bytes=40_000, share_rows=1, fan_in=2)
    assert str(spread.value) == str(alone.value)
    assert (spread.value.source, spread.value.line) == (alone.value.source, alone.value.line)


@pytest.mark.parametrize("output", ["json", "jsonl"])
@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_the_command_line_exits_as_one_process(cluster: str, damaged: list[str], mode: str, output: str) -> None:
    alone = invoke("audit", *damaged, "-o", output, "--on-error", mode, "--jobs", "1")
    spread = invoke("audit", *damaged, "-o", output, "--on-error", mode, "--scheduler", cluster)
    assert spread.exit_code == alone.exit_code == (2 if mode == "fail" else 0)
    assert spread.stdout == alone.stdout
    assert spread.stderr == alone.stderr
    assert "Traceback" not in spread.stderr


def test_input_errors_survive_pickling_with_their_fields() -> None:
    error = pickle.loads(pickle.dumps(InputError("s3://b/x.jsonl", 7, "q[0] is 0", raw=b"{}")))
    assert (error.source, error.line, error.message, error.raw) == ("s3://b/x.jsonl", 7, "q[0] is 0", b"{}")
    assert str(error) == "s3://b/x.jsonl:7: q[0] is 0"


def test_stdin_is_refused_in_one_line(hand_log: Path) -> None:
    piped = invoke("audit", "-", "--scheduler", "local:2", input=hand_log.read_bytes())
    assert piped.exit_code == 2 and "a cluster cannot read stdin" in piped.stderr


@pytest.mark.parametrize("output", ["jsonl", "csv"])
def test_per_run_records_and_quarantine_come_back_in_input_order(
    cluster: str, damaged: list[str], tmp_path: Path, output: str
) -> None:
    common = ("-o", output, "--on-error", "skip", "--id-field", "host")
    alone = invoke("audit", *damaged, *common, "--quarantine", str(tmp_path / "alone.txt"))
    spread = invoke("audit", *damaged, *common, "--quarantine", str(tmp_path / "spread.txt"), "--scheduler", cluster)
    assert alone.exit_code == spread.exit_code == 0
    assert len(alone.stdout.splitlines()) > 10_000
    assert spread.stdout == alone.stdout
    assert spread.stderr == alone.stderr
    assert (tmp_path / "spread.txt").read_bytes() == (tmp_path / "alone.txt").read_bytes()
    assert (tmp_path / "alone.txt").read_bytes().count(b"\n") > 20  # every skipped row, past the 20 kept


def test_runs_of_byte_ranges_and_row_groups_keep_their_lines(client: object, damaged: list[str]) -> None:
    def records(into: list[tuple[object, ...]]) -> RunSink:
        def sink(batch: RunBatch, outcome: BatchOutcome, columns: RunColumns) -> None:
            lines, k, accepted = batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist()
            into.extend(zip([batch.source] * len(batch), lines, k, accepted))

        return sink

    alone: list[tuple[object, ...]] = []
    spread: list[tuple[object, ...]] = []
    alone_quarantine, spread_quarantine = io.BytesIO(), io.BytesIO()
    summarise(damaged, on_error="skip", sink=records(alone), quarantine=alone_quarantine)
    on_cluster.summarise(
        damaged,
        client=client,
        on_error="skip",
        range_bytes=50_000,
        share_rows=1,
        sink=records(spread),
        quarantine=spread_quarantine,
    )
    assert len(alone) > 10_000
    assert spread == alone
    assert spread_quarantine.getvalue() == alone_quarantine.getvalue()


def test_without_dask_the_scheduler_names_the_extra(hand_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails as if not installed
    result = invoke("audit", str(hand_log), "--scheduler", "local:2")
    assert result.exit_code == 2
    assert result.stderr == "specaccept: --scheduler needs Dask: pip install 'specaccept[dask]'\n"


def test_an_unreachable_scheduler_is_one_line() -> None:
    with pytest.raises(SpecacceptError, match=r"^cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9: "):  # noqa: SIM117
        with on_cluster.connect("tcp://127.0.0.1:9", timeout=1):
            pass


def test_a_missing_object_is_one_line_before_any_task(cluster: str, shards: Shards) -> None:
    result = invoke("audit", shards.url + "missing.jsonl", "--scheduler", cluster)
    assert result.exit_code == 2
    assert result.stderr == f"specaccept: {shards.url}missing.jsonl: no such object or prefix\n"


def test_a_bad_local_worker_count_is_a_usage_error(hand_log: Path) -> None:
    result = invoke("audit", str(hand_log), "--scheduler", "local:none")
    assert result.exit_code == 2
    assert "--scheduler local:N needs a number of workers, not 'none'" in result.stderr


def test_a_worker_that_dies_is_one_line(tmp_path: Path) -> None:
    """A worker killed mid-task (here: while it waits on a FIFO that nobody writes) ends the audit in one line."""
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    fifo = tmp_path / "never-written.jsonl"
    os.mkfifo(fifo)
    failures: list[BaseException] = []
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        on_cluster.local_cluster(1, quiet=50) as local,
        distributed.Client(local) as client,
    ):
        (pid,) = client.run(os.getpid).values()

        def audit() -> None:
            try:
                on_cluster.summarise([str(fifo)], client=client)
            except BaseException as exc:
                failures.append(exc)

        runner = threading.Thread(target=audit)
        runner.start()
        deadline = time.monotonic() + 30
        while not any(client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        runner.join(timeout=60)
    assert not runner.is_alive()
    assert len(failures) == 1 and type(failures[0]) is SpecacceptError
    assert str(failures[0]).startswith("a Dask worker died while running a task (plan_shares")


def test_the_scheduler_address_may_come_from_the_environment(cluster: str, hand_log: Path) -> None:
    alone = invoke("audit", str(hand_log), "-o", "json")
    spread = invoke_env({"DASK_SCHEDULER_ADDRESS": cluster}, "audit", str(hand_log), "-o", "json")
    assert spread.exit_code == 0 and spread.stdout == alone.stdout
    records = invoke_env({"DASK_SCHEDULER_ADDRESS": cluster}, "audit", str(hand_log), "-o", "jsonl")
    assert records.exit_code == 0 and records.stdout == invoke("audit", str(hand_log), "-o", "jsonl").stdout
    # The variable was read: stdin, which a cluster cannot read, is refused.
    piped = invoke_env({"DASK_SCHEDULER_ADDRESS": cluster}, "audit", "-", input=hand_log.read_bytes())
    assert piped.exit_code == 2 and "a cluster cannot read stdin" in piped.stderr


def test_a_request_that_names_its_scheduler_is_read_there(cluster: str, hand_log: Path) -> None:
    """No client given: the driver connects to the request's own scheduler, and the summary is the same."""
    from specaccept_cli.pipeline import ReadRequest

    request = ReadRequest((str(hand_log),), on_error="skip", scheduler=cluster)
    assert on_cluster.summarise(request) == summarise([str(hand_log)], on_error="skip")


def test_server_output_on_a_cluster_is_a_typed_error_naming_no_option(cluster: str) -> None:
    from specaccept_cli.errors import OneProcessOnly

    log = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"
    with pytest.raises(OneProcessOnly) as caught:
        on_cluster.summarise([str(log)], scheduler=cluster)
    assert str(caught.value) == f"{log} is vllm-log output: server metrics are read in one process"


def test_server_output_is_refused_on_a_cluster(cluster: str) -> None:
    """Prometheus scrapes form one series across files: read in one process, not split into tasks."""
    log = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"
    assert invoke("audit", str(log), "-o", "json").exit_code == 0
    result = invoke("audit", str(log), "-o", "json", "--scheduler", cluster)
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: {log} is vllm-log output: server metrics are read in one process; run without --scheduler\n"
    )


def test_workers_of_another_version_are_one_line(cluster: str, hand_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specaccept_cli import version

    monkeypatch.setattr(version, "__version__", "0.0.0-driver")
    result = invoke("audit", str(hand_log), "--scheduler", cluster)
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: the Dask workers run specaccept {_installed_version()}, this is 0.0.0-driver: "
        "install the same version on both\n"
    )


def _installed_version() -> str:
    from importlib.metadata import version

    return version("specaccept")


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Shards whose runs carry a time (epoch seconds over a day), some of them not a time at all."""
    directory = tmp_path_factory.mktemp("timed")
    paths = []
    for index in range(3):
        rows = simulated_rows(6_000, seed=30 + index)
        for position, row in enumerate(rows):
            row["ts"] = 1_764_460_800 + index * 28_800 + position * 4.5
        if index == 1:
            paths.append(write_parquet(directory / f"t{index}.parquet", rows, 1_000))
        else:
            rows[100 + index] = {**rows[100 + index], "ts": "yesterday"}
            path = directory / f"t{index}.jsonl"
            path.write_bytes(jsonl_bytes(rows))
            paths.append(path)
    return [str(path) for path in paths]


@pytest.mark.parametrize(
    "windows", [(), ("--window", "777"), ("--time-field", "ts"), ("--time-field", "ts", "--window", "10m")]
)
def test_windows_of_runs_and_of_time_are_those_of_one_process(
    client: object, cluster: str, timed: list[str], windows: tuple[str, ...]
) -> None:
    """Windows of runs are placed by position in the whole input, which no task knows: they still match."""
    common = ("-o", "json", "--on-error", "skip", *windows)
    alone = invoke("audit", *timed, *common)
    spread = invoke("audit", *timed, *common, "--scheduler", cluster)
    assert alone.exit_code == spread.exit_code == 0, alone.stderr + spread.stderr
    assert spread.stdout == alone.stdout
    assert len(orjson.loads(alone.stdout)["windows"]) > 5
