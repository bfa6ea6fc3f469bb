"""Shared helpers: real files, real compressed streams, a real subprocess for pipes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import click
import orjson
import pytest
from click.testing import CliRunner, Result

from specaccept_cli.cli import cli


def spec_accept(p: Sequence[float], q: Sequence[float], r: Sequence[float]) -> int:
    """The reference routine of the rule, verbatim: the oracle every path must agree with."""
    accepted = 0
    for i in range(len(p)):
        threshold = min(1.0, p[i] / q[i])  # accept probability for this token
        if r[i] <= threshold:
            accepted += 1  # keep it
        else:
            break  # first rejection stops the run
    return accepted


FIRST_EXAMPLE = {"p": [0.9, 0.2, 0.8], "q": [0.5, 0.8, 0.4], "r": [0.1, 0.5, 0.2]}


def jsonl_bytes(rows: Iterable[object]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def write_jsonl(path: Path, rows: Iterable[object]) -> Path:
    path.write_bytes(jsonl_bytes(rows))
    return path


def all_commands() -> dict[str, click.Command]:
    """Every command of the group, the lazily loaded ones included."""
    context = click.Context(cli)
    return {name: command for name in cli.list_commands(context) if (command := cli.get_command(context, name))}


def invoke(*args: str, input: bytes | str | None = None) -> Result:
    """Run the CLI in-process (stdout and stderr kept apart)."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def run_process(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """Run `python -m specaccept_cli` as a real subprocess, no terminal."""
    full_env = {**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "specaccept_cli", *args],
        input=input,
        capture_output=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(autouse=True)
def _pinned_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich output in tests: fixed width, no colour, whatever the machine's terminal."""
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
