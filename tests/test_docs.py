"""The README documents every command and option, and its quick start is exactly the two make targets."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from tests.helpers import (
    all_commands,
)

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_quick_start_is_exactly_make_demo_and_make_test() -> None:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```console\n(.*?)```", section, re.S)
    assert block is not None
    assert block.group(1).split("\n")[:-1] == ["make demo", "make test"]


@pytest.mark.parametrize("name", sorted(all_commands()))
def test_every_command_is_documented(name: str) -> None:
    assert f"### `specaccept {name}" in README


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (name, option)
        for name, command in sorted(all_commands().items())
        for param in command.params
        if isinstance(param, click.Option)
        for option in param.opts
        if option.startswith("--")
    ],
)
def test_every_option_is_documented(command: str, option: str) -> None:
    assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", README), f"{command} {option} missing from README"


def test_the_library_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's Python example, run as written on files made for it, without click or rich."""
    import gzip
    import subprocess
    import sys

    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"p": [0.9, 0.2], "q": [0.5, 0.8], "r": [0.1, 0.5], "model": "draft-1b", "request_id": "r1"}] * 3
    (tmp_path / "monday.jsonl.gz").write_bytes(gzip.compress(b"".join(orjson.dumps(row) + b"\n" for row in rows)))
    table = {**{name: [[0.5], [0.5]] for name in "pqr"}, "request_id": ["r2", "r3"]}
    pq.write_table(pa.table(table), tmp_path / "tuesday.parquet")
    code = re.search(r"## As a library.*?```python\n(.*?)```", README, re.S)
    assert code is not None
    check = "\nimport sys\nassert 'click' not in sys.modules and 'rich' not in sys.modules\nprint(by_model.groups)\n"
    result = subprocess.run(
        [sys.executable, "-c", code.group(1) + check], cwd=tmp_path, capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    assert b"draft-1b" in result.stdout


def test_the_module_table_matches_the_tree() -> None:
    """Every module named in the README's module table exists, and every module of the package is named."""
    table = README[README.index("| module | holds |") :].split("\n\n", 1)[0]
    named: set[str] = set()
    for cell in (line.split("|")[1] for line in table.splitlines()[2:]):
        named.update(re.findall(r"`([\w/]+\.py)`", cell))
    package = Path(__file__).resolve().parent.parent / "specaccept_cli"
    actual = {str(path.relative_to(package)) for path in package.rglob("*.py")}
    assert named - actual == set(), "the README names modules that do not exist"
    unnamed = {path for path in actual - named if not path.endswith(("/__init__.py", "__main__.py"))}
    assert unnamed == set(), "modules missing from the README's module table"
