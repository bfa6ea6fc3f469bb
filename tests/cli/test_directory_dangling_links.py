"""A shard of an input directory that is a symlink to nothing (a rotated capture's `latest.jsonl`) is an input
that could not be read, reported as any unreadable shard is: never skipped without a word."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import random_rows, write_jsonl


def _audit(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "specaccept_cli", "audit", *args], capture_output=True, check=False)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "captures"
    folder.mkdir()
    write_jsonl(folder / "part-00001.jsonl", random_rows(120, seed=1))
    (folder / "part-00002.jsonl").symlink_to("part-00000.jsonl")  # dangling: its target was rotated away
    (folder / "notes.txt").symlink_to("/nowhere")  # not a shard's name: not an input, as a file of that name
    return folder


def test_a_dangling_link_in_a_directory_fails_the_audit_by_name(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    result = _audit(str(folder))
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err
    assert err.strip() == (
        f"specaccept: {folder / 'part-00002.jsonl'}: cannot open: No such file or directory "
        "(a symlink to 'part-00000.jsonl', which is not there)"
    )


def test_under_skip_it_is_counted_as_an_unreadable_source_and_the_rest_is_read(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    for jobs in ("1", "2"):
        result = _audit(str(folder), "--on-error", "skip", "-o", "json", "-j", jobs)
        assert result.returncode == 0, result.stderr.decode()
        data = json.loads(result.stdout)
        assert data["runs"] == 120 and data["skipped_sources"] == 1
        assert "part-00002.jsonl" in result.stderr.decode() and "which is not there" in result.stderr.decode()


def test_a_directory_of_a_link_loop_names_it(tmp_path: Path) -> None:
    folder = tmp_path / "loop"
    folder.mkdir()
    (folder / "a.jsonl").symlink_to("a.jsonl")
    result = _audit(str(folder))
    assert result.returncode == 2
    assert result.stderr.decode().startswith(f"specaccept: {folder / 'a.jsonl'}: cannot open: ")
