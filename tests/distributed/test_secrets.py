"""Credentials never reach an output: a URL that carries them is refused with them redacted, and the
ones given the proper ways (environment, --storage-option) appear in no output of a real audit.

Against moto's S3 server on 127.0.0.1 (see conftest.py); every output is searched for the secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specaccept_cli.read.storage import redacted
from tests.helpers import BAD_LINES, BUCKET, HAND_ROWS, ROWS, S3, invoke, invoke_env, jsonl_bytes, run_process

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzSECRET"  # shaped like an AWS secret key: `/` and `+` included


def put(s3: S3, key: str, data: bytes) -> str:
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=data)  # type: ignore[attr-defined]
    return f"s3://{BUCKET}/{key}"


URLS_WITH_CREDENTIALS = {
    "key and secret": f"s3://AKIDEXAMPLE:{SECRET}@{BUCKET}/secrets/logs.jsonl",
    "a prefix": f"s3://AKIDEXAMPLE:{SECRET}@{BUCKET}/secrets/",
    "a token alone": f"gs://{SECRET}@{BUCKET}/secrets/logs.jsonl",
    "in the query": f"s3://{BUCKET}/secrets/logs.jsonl?access_key=AKIDEXAMPLE&secret_key={SECRET}",
    "a file URL": f"file://user:{SECRET}@localhost/tmp/logs.jsonl",
}


@pytest.mark.parametrize("name", list(URLS_WITH_CREDENTIALS))
def test_a_url_with_credentials_is_refused_in_one_redacted_line(s3: S3, name: str) -> None:
    url = URLS_WITH_CREDENTIALS[name]
    put(s3, "secrets/logs.jsonl", jsonl_bytes(HAND_ROWS))
    result = run_process("audit", url, "-o", "json")
    assert result.returncode == 2
    assert SECRET.encode() not in result.stderr + result.stdout
    assert SECRET.split("/")[0].encode() not in result.stderr  # not even the part before a `/`
    (line,) = result.stderr.decode().splitlines()
    assert line.startswith("specaccept: ") and "***" in line
    assert "a URL must not carry credentials" in line
    assert result.stdout == b""


def test_credentials_in_every_other_place_a_url_goes_are_redacted(s3: S3, tmp_path: Path) -> None:
    """A summary path, a baseline, an output: not object storage, yet named in messages."""
    url = f"s3://AKIDEXAMPLE:{SECRET}@{BUCKET}/secrets/main.json"
    log = tmp_path / "log.jsonl"
    log.write_bytes(jsonl_bytes(HAND_ROWS))
    for args in (
        ["audit", str(log), "--baseline", url],
        ["audit", str(log), "--summary-out", url],
        ["merge", url, url],
        ["diff", url, str(log)],
        ["report", "--summary", url, "-o", str(tmp_path / "r.html")],
    ):
        result = invoke(*args)
        assert result.exit_code == 2, args
        assert SECRET not in result.stderr and SECRET not in result.stdout, args
        assert "s3://***@" in result.stderr, args


def test_a_bucket_with_a_colon_is_refused_without_showing_it(s3: S3) -> None:
    """`s3://KEY:SECRET/bucket/...` (the `@` forgotten) is no bucket: refused, the part shown as ***."""
    result = invoke("audit", f"s3://AKIDEXAMPLE:{SECRET.split('/')[0]}/{BUCKET}/x.jsonl")
    assert result.exit_code == 2
    assert SECRET.split("/")[0] not in result.stderr
    assert result.stderr == (
        f"specaccept: s3://***/{BUCKET}/x.jsonl: a bucket name cannot hold ':' (credentials go in the "
        "environment or --storage-option, an endpoint in --storage-option endpoint=...)\n"
    )


def test_no_output_of_an_audit_holds_its_credentials(s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials given as they should be (environment, --storage-option): a whole audit, every output read."""
    url = put(s3, "secrets/mixed.jsonl", jsonl_bytes(ROWS) + BAD_LINES[0] + b"\n" + BAD_LINES[1] + b"\n")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    options = ["--storage-option", f"secret_key={SECRET}", "--storage-option", "access_key=AKIDEXAMPLE"]
    summary, html, quarantine, step = (tmp_path / name for name in ("s.json", "r.html", "q.jsonl", "step.md"))
    outputs = [summary, html, quarantine, step]
    texts: list[str] = []
    for output in ("json", "jsonl", "csv", "markdown", "table"):
        result = invoke_env(
            {"GITHUB_STEP_SUMMARY": str(step)},
            "audit",
            url,
            "-o",
            output,
            *options,
            "--on-error",
            "skip",
            "--quarantine",
            str(quarantine),
            "--summary-out",
            str(summary),
            "--html",
            str(html),
            "--github",
            "--min-alpha",
            "0.99",  # a failed gate: its messages and annotations are outputs too
            "--id-field",
            "id",
        )
        assert result.exit_code == 1, result.stderr
        texts += [result.stdout, result.stderr, *(path.read_text() for path in outputs)]
    assert url in texts[0]  # the provenance names the object, and only the object
    assert all(SECRET not in text for text in texts)
    assert quarantine.read_bytes() == BAD_LINES[0] + b"\n" + BAD_LINES[1] + b"\n"
    failed = invoke(
        "audit",
        url,
        "--storage-option",
        "endpoint=http://127.0.0.1:9",
        "--storage-option",
        "connect_timeout=1",
        *options,
    )
    assert failed.exit_code == 2 and SECRET not in failed.stderr


def test_redaction_leaves_ordinary_text_alone() -> None:
    for text in (
        "s3://bucket/user@example.com/logs.jsonl: no such object",
        "http://127.0.0.1:9000/bucket: cannot read: connection refused",
        "logs.jsonl:12: 'p' is 1, not a list of numbers",
    ):
        assert redacted(text) == text
    assert redacted(f"see s3://K:{SECRET}@b/x and gs://t@c/y") == "see s3://***@b/x and gs://***@c/y"
    assert redacted(f"s3://b/x?region=eu&secret_key={SECRET}&y=1") == "s3://b/x?region=eu&secret_key=***&y=1"
