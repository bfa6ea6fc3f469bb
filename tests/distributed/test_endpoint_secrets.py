"""A secret in an endpoint or a storage option is never printed, whatever the S3 client says.

pyarrow's S3 file system, pointed at a closed port on 127.0.0.1, fails for real; its errors quote
the endpoint (`Custom endpoint ... was not a valid URI`) and resolve a user in it as a host name.
"""

from __future__ import annotations

import pytest

from specaccept_cli.read import storage
from specaccept_cli.read.storage import redacted
from tests.helpers import run_process

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIDENVIRON",
    "AWS_SECRET_ACCESS_KEY": "environsecret",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _audit(*options: str) -> tuple[int, str]:
    args = ["audit", "s3://b/x.jsonl", "--storage-option", "region=us-east-1", "--storage-option", "timeout=5"]
    for option in options:
        args += ["--storage-option", option]
    result = run_process(*args, env=CREDENTIALS, timeout=60)
    return result.returncode, (result.stdout + result.stderr).decode()


@pytest.mark.parametrize(
    ("endpoint", "secrets"),
    [
        ("http://127.0.0.1:9/p?X-Amz-Security-Token=TOK3N", ["TOK3N"]),
        ("http://AKIAUSER:pa55@127.0.0.1:9", ["AKIAUSER", "pa55"]),
        ("127.0.0.1:9?token=TOK3N", ["TOK3N"]),
    ],
)
def test_an_endpoint_with_credentials_is_refused_unprinted(endpoint: str, secrets: list[str]) -> None:
    code, output = _audit(f"endpoint_override={endpoint}")
    assert code == 2
    assert "storage option endpoint takes" in output and "127.0.0.1" in output
    for secret in secrets:
        assert secret not in output
    assert "Traceback" not in output


def test_a_closed_port_is_one_line_without_the_secret_options() -> None:
    code, output = _audit(
        "endpoint_override=http://127.0.0.1:9",
        "secret_key=SECRETVALUE",
        "access_key=AKIDVALUE",
        "session_token=SESSIONTOK",
    )
    assert code == 2
    [line] = output.splitlines()
    assert line.startswith("specaccept: s3://b/x.jsonl: cannot read: ")
    assert "127.0.0.1:9" in line  # where it went is said
    for secret in ("SECRETVALUE", "AKIDVALUE", "SESSIONTOK", "environsecret"):
        assert secret not in line


def test_a_secret_option_quoted_by_a_client_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "_NEVER_SHOWN", set())
    storage.parse_storage_options(["secret_key=s3cr3tv4lue", "endpoint=http://127.0.0.1:9", "region=eu-west-1"])
    assert redacted("denied: signature for s3cr3tv4lue did not match") == "denied: signature for *** did not match"
    assert redacted("region eu-west-1 at 127.0.0.1:9") == "region eu-west-1 at 127.0.0.1:9"  # not secrets


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://h:9/m?token=abc: refused", "http://h:9/m?token=***: refused"),
        (
            "Custom endpoint `http://h/p?X-Amz-Security-Token=TOK3N` was",
            "Custom endpoint `http://h/p?X-Amz-Security-Token=***` was",
        ),
        ("s3://b/k?sig=abc&x=1: no such object", "s3://b/k?sig=***&x=1: no such object"),
    ],
)
def test_a_redacted_url_keeps_the_separator_after_it(text: str, shown: str) -> None:
    assert redacted(text) == shown
