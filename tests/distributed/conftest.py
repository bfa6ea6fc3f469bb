"""Fixtures for audits on a cluster and from object storage: real processes, loopback only.

- `s3`: moto's S3 server on 127.0.0.1 (a free port), with the `AWS_*` variables a user would set
  (`AWS_ENDPOINT_URL` included), for the whole session: the cluster's worker processes inherit them.
- `cluster`: one `LocalCluster` of two worker processes, shared by every test of the session.
- `shards`: simulated logs, about 200k runs: Parquet with several row groups, plain and gzip JSONL,
  written once, and copied into a bucket under Hive-style prefixes.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest

from specaccept_cli.pipeline.distributed import local_cluster
from tests.helpers import BUCKET, PREFIX, S3, Shards, jsonl_bytes, simulated_rows, write_parquet

pytest.importorskip("distributed")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3]:
    """A local S3 server; the session's environment points the AWS tools (and pyarrow, through us) at it."""
    boto3 = pytest.importorskip("boto3")
    server_module = pytest.importorskip("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "test-key-id",
            "AWS_SECRET_ACCESS_KEY": "test-secret-never-printed",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",  # never look for instance credentials off this machine
        }.items():
            patch.setenv(name, value)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        try:
            yield S3(endpoint, client)
        finally:
            server.stop()


@pytest.fixture(scope="session")
def cluster(s3: S3) -> Iterator[str]:
    """The scheduler address of two worker processes (started after the S3 environment is set)."""
    with local_cluster(2) as local:
        yield local.scheduler_address


@pytest.fixture
def client(cluster: str) -> Iterator[object]:
    distributed = pytest.importorskip("distributed")
    with distributed.Client(cluster) as connected:
        yield connected


@pytest.fixture(scope="session")
def shards(tmp_path_factory: pytest.TempPathFactory, s3: S3) -> Shards:
    """~200k runs in 8 shards, locally and in the bucket under Hive-style `part=N/` folders (same sorted order)."""
    directory = tmp_path_factory.mktemp("shards")
    files: list[Path] = []
    for index in range(4):
        folder = directory / f"part={index // 2}"
        folder.mkdir(exist_ok=True)
        files.append(write_parquet(folder / f"shard-{index}.parquet", simulated_rows(30_000, seed=index), 7_000))
    for index in range(2):
        path = directory / f"plain-{index}.jsonl"
        path.write_bytes(jsonl_bytes(simulated_rows(25_000, seed=10 + index)))
        files.append(path)
    for index in range(2):
        path = directory / f"zipped-{index}.jsonl.gz"
        path.write_bytes(gzip.compress(jsonl_bytes(simulated_rows(15_000, seed=20 + index)), compresslevel=1))
        files.append(path)
    files.sort(key=lambda path: path.relative_to(directory).as_posix())
    for path in files:
        key = f"{PREFIX}/{path.relative_to(directory).as_posix()}"
        s3.client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())  # type: ignore[attr-defined]
    s3.client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/_SUCCESS", Body=b"")  # type: ignore[attr-defined]
    return Shards(directory, files, f"s3://{BUCKET}/{PREFIX}/", 200_000)
