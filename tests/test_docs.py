"""The README documents every command and option, and its quick start is exactly the two make targets."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from tests.conftest import all_commands

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
