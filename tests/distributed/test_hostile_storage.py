"""An object that goes away while it is read: the message says the storage failed, not that the data is damaged."""

from __future__ import annotations

import gzip

import orjson
import pytest

from specaccept_cli.errors import InputError
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.read.sources import Reading, expand_inputs, read_source
from tests.helpers import BUCKET, S3, invoke, jsonl_bytes, simulated_rows


@pytest.mark.parametrize("compressed", [False, True])
def test_an_object_deleted_mid_read_is_a_read_error_of_the_storage(s3: S3, compressed: bool) -> None:
    data = jsonl_bytes(simulated_rows(120_000, seed=3))  # about 25 MB: several 8 MiB requests
    key = f"deleted/log.jsonl{'.gz' if compressed else ''}"
    body = gzip.compress(data, compresslevel=1) if compressed else data
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=body)  # type: ignore[attr-defined]
    (source,) = expand_inputs([f"s3://{BUCKET}/{key}"])
    batches = read_source(source, Reading(), ErrorPolicy("fail"))
    runs = len(next(batches))
    s3.client.delete_object(Bucket=BUCKET, Key=key)  # type: ignore[attr-defined]
    with pytest.raises(InputError) as caught:
        for batch in batches:
            runs += len(batch)
    message = str(caught.value)
    assert message.startswith(f"s3://{BUCKET}/{key}: read error after ")
    assert "object storage read failed" in message
    assert "truncated" not in message and "corrupt" not in message
    assert 0 < runs < 120_000


def test_an_object_read_by_byte_ranges_reads_as_one_stream(s3: S3) -> None:
    """`-j 2` cuts a plain object into byte ranges, each read through the same failing-request check."""
    s3.client.put_object(  # type: ignore[attr-defined]
        Bucket=BUCKET, Key="ranges/log.jsonl", Body=jsonl_bytes(simulated_rows(40_000, seed=4))
    )
    url = f"s3://{BUCKET}/ranges/log.jsonl"
    one, two = (invoke("audit", url, "-o", "json", "-j", jobs) for jobs in ("1", "2"))
    assert one.exit_code == two.exit_code == 0, two.stderr
    assert orjson.loads(one.stdout_bytes)["state"] == orjson.loads(two.stdout_bytes)["state"]
