"""The table of formats is the only list: docs/input.md shows it as generated, `--format` offers it, and no
module but the table and a format's own engine module spells a format's name."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import click

from specaccept_cli.read.formats import ENTRY_MODULES, Kind, choices, table
from tests.helpers import all_commands, load_script

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "specaccept_cli"


def test_the_table_in_docs_input_is_current() -> None:
    """Run `make docs` (scripts/format_table.py) after changing an entry."""
    text = (ROOT / "docs" / "input.md").read_text(encoding="utf-8")
    assert load_script("format_table").page(text) == text, "docs/input.md's table of formats is stale: make docs"
    for entry in table():
        assert f"| `{entry.name}` | {entry.kind.value} |" in text


def test_the_check_fails_on_a_stale_table() -> None:
    text = (ROOT / "docs" / "input.md").read_text(encoding="utf-8")
    stale = text.replace("| `vllm-log` |", "| `vllm-logs` |")
    assert load_script("format_table").page(stale) == text != stale


def test_format_choices_are_the_tables() -> None:
    option = next(param for param in all_commands()["audit"].params if param.name == "input_format")
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == choices()
    assert set(choices()) == {"auto"} | {entry.name for entry in table() if entry.kind is not Kind.SUMMARY}


def test_every_engine_entry_has_a_reader_a_sniff_and_a_source() -> None:
    for entry in table():
        if entry.engine == "specaccept":
            continue
        assert entry.reader is not None and entry.sniff is not None and entry.markers, entry.name
        assert entry.follows and "." in entry.follows, entry.name  # an engine file, named


def test_a_format_name_is_spelled_only_in_the_table_and_its_engine_module() -> None:
    owners = {}
    for module in ENTRY_MODULES:
        for entry in importlib.import_module(module).FORMATS:
            owners[entry.name] = ROOT / (module.replace(".", "/") + ".py")
    table_module = PACKAGE / "read" / "formats.py"
    sources = {path: path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}
    for name, owner in owners.items():
        quoted = re.compile(rf"(?<!refines=)[\"']{re.escape(name)}[\"']")  # a refinement names what it refines
        spelled = {path for path, text in sources.items() if quoted.search(text)}
        assert spelled <= {owner, table_module}, (name, sorted(str(path.relative_to(ROOT)) for path in spelled))
