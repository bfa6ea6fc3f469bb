"""Object storage in one process: s3:// objects and prefixes read as the same files on disk are."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from specaccept_cli.errors import InputError, UsageError
from specaccept_cli.pipeline import summarise
from specaccept_cli.read.parquet import read_parquet_file
from specaccept_cli.read.sources import expand_inputs
from specaccept_cli.read.storage import Storage, is_url, parse_storage_options
from specaccept_cli.rule.batch import FieldSpec
from tests.helpers import (
    BUCKET,
    HAND_ROWS,
    S3,
    Shards,
    invoke,
    jsonl_bytes,
    simulated_rows,
    without_provenance,
    write_parquet,
)


def put(s3: S3, key: str, data: bytes) -> str:
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=data)  # type: ignore[attr-defined]
    return f"s3://{BUCKET}/{key}"


def test_a_prefix_stands_for_its_log_objects_in_key_order(s3: S3, shards: Shards) -> None:
    """Hive-style folders are walked; markers (`_SUCCESS`) are not logs."""
    names = [source.name for source in expand_inputs([shards.url])]
    expected = [shards.url + path.relative_to(shards.directory).as_posix() for path in shards.files]
    assert names == expected
    assert any("/part=1/" in name for name in names)


def test_objects_read_as_the_same_files_on_disk(s3: S3, shards: Shards) -> None:
    local = summarise([str(path) for path in shards.files], FieldSpec(extras=("host",)))
    remote = summarise([shards.url], FieldSpec(extras=("host",)))
    assert remote == local
    assert remote.runs == shards.runs


def test_compressed_objects_stream_through_the_same_decompressors(s3: S3, tmp_path: Path) -> None:
    data = jsonl_bytes(HAND_ROWS * 50)
    url = put(s3, "one/hand.jsonl.gz", gzip.compress(data))
    result = invoke("audit", url, "-o", "json")
    assert result.exit_code == 0, result.stderr
    (tmp_path / "hand.jsonl").write_bytes(data)
    local = invoke("audit", str(tmp_path / "hand.jsonl"), "-o", "json")
    assert without_provenance(result.stdout_bytes) == without_provenance(local.stdout_bytes)  # only the names differ


def test_a_cut_compressed_object_names_its_url(s3: S3) -> None:
    url = put(s3, "one/cut.jsonl.gz", gzip.compress(jsonl_bytes(simulated_rows(3_000, seed=1)))[:-500])
    result = invoke("audit", url, "-o", "json")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"specaccept: {url}")
    assert "Traceback" not in result.stderr


def test_parquet_row_groups_keep_the_row_numbers_of_the_whole_file(tmp_path: Path) -> None:
    rows = simulated_rows(900, seed=2)
    rows[650] = {**rows[650], "q": [0.0] * len(rows[650]["q"])}  # type: ignore[arg-type]
    path = write_parquet(tmp_path / "groups.parquet", rows, 200)
    seen: list[InputError] = []
    batches = list(read_parquet_file(path, "groups.parquet", FieldSpec(), seen.append, row_groups=(3, 4)))
    assert [int(batch.lines[0]) for batch in batches] == [601]
    assert sum(len(batch) for batch in batches) == 199
    assert [(error.line, error.message) for error in seen] == [(651, seen[0].message)]


def test_missing_objects_and_prefixes_are_one_line(s3: S3) -> None:
    for url, why in [
        (f"s3://{BUCKET}/no/such/key.jsonl", "no such object or prefix"),
        ("s3://no-such-bucket/logs/", "no such object or prefix"),
    ]:
        result = invoke("audit", url)
        assert result.exit_code == 2
        assert result.stderr == f"specaccept: {url}: {why}\n"
    put(s3, "empty/_SUCCESS", b"")
    result = invoke("audit", f"s3://{BUCKET}/empty/")
    assert result.stderr == f"specaccept: s3://{BUCKET}/empty/: prefix holds no Parquet or JSONL objects\n"


def test_storage_options_reach_the_store_and_are_never_printed(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    url = put(s3, "opts/hand.jsonl", jsonl_bytes(HAND_ROWS))
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    secret = "do-not-print-this-secret"
    options = ("--storage-option", f"endpoint={s3.endpoint}", "--storage-option", f"secret_key={secret}")
    found = invoke(
        "audit", url, "-o", "json", *options, "--storage-option", "access_key=k", "--storage-option", "region=us-east-1"
    )
    assert found.exit_code == 0, found.stderr
    unreachable = ("--storage-option", "endpoint=http://127.0.0.1:9", "--storage-option", "connect_timeout=1")
    denied = invoke("audit", url, *unreachable, *options[2:], "--storage-option", "access_key=k")
    assert denied.exit_code == 2
    assert secret not in denied.stderr and secret not in denied.stdout
    assert denied.stderr.startswith(f"specaccept: {url}: ")
    half = invoke("audit", url, "--storage-option", f"secret_key={secret}")  # pyarrow wants both keys
    assert half.exit_code == 2 and secret not in half.stderr
    assert secret not in repr(Storage(parse_storage_options([f"secret_key={secret}"])))


def test_storage_options_are_checked_before_reading() -> None:
    with pytest.raises(UsageError, match="unknown storage option 'colour'"):
        parse_storage_options(["colour=blue"])
    with pytest.raises(UsageError, match="a storage option takes KEY=VALUE"):
        parse_storage_options(["endpoint"])
    assert parse_storage_options(["Endpoint-URL=http://x:1", "anonymous=true"]) == (
        ("endpoint_url", "http://x:1"),
        ("anonymous", "true"),
    )
    result = invoke("audit", "s3://b/k.jsonl", "--storage-option", "anonymous=maybe")
    assert result.exit_code == 2 and "not a yes/no value: 'maybe'" in result.stderr


def test_urls_are_told_from_paths() -> None:
    assert is_url("s3://bucket/key") and is_url("gs://bucket/") and is_url("FILE:///tmp/x")
    assert not is_url("logs.jsonl") and not is_url("-") and not is_url("http://example.invalid/x")


def test_file_urls_read_local_files(hand_log: Path) -> None:
    result = invoke("audit", hand_log.as_uri(), "-o", "json")
    assert result.exit_code == 0, result.stderr
    local = invoke("audit", str(hand_log), "-o", "json")
    assert without_provenance(result.stdout_bytes) == without_provenance(local.stdout_bytes)  # only the names differ


def test_server_output_in_a_bucket_is_recognised_as_on_disk(s3: S3, tmp_path: Path) -> None:
    """By content, plain or compressed (the compressed object is decompressed once, its first text looked at)."""
    log = Path(__file__).resolve().parents[2] / "examples" / "vllm-server.log"
    local = invoke("audit", str(log), "-o", "json")
    assert local.exit_code == 0, local.stderr
    for key, data in (("server/vllm.log", log.read_bytes()), ("server/vllm.log.gz", gzip.compress(log.read_bytes()))):
        url = put(s3, key, data)
        remote = invoke("audit", url, "-o", "json")
        assert remote.exit_code == 0, remote.stderr
        named = local.stdout.replace(str(log), url).encode()  # its notes name the source
        assert without_provenance(remote.stdout_bytes) == without_provenance(named)


def test_options_reach_the_file_system_of_their_scheme() -> None:
    """gs:// gets Google's file system with its own options (no GCS server here: built, not called)."""
    filesystem, path = Storage(parse_storage_options(["anonymous=true", "endpoint=http://127.0.0.1:9"])).filesystem(
        "gs://bucket/logs/"
    )
    assert type(filesystem).__name__ == "GcsFileSystem" and path == "bucket/logs"
    with pytest.raises(UsageError, match="storage option 'project_id' does not apply to s3://"):
        Storage(parse_storage_options(["project_id=p"])).filesystem("s3://bucket/key")
