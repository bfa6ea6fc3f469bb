"""`--help` of audit, report and watch: the eight options a first run needs first, then the rest in sections by
kind, every option exactly once."""

from __future__ import annotations

import re

import click
import pytest

from tests.helpers import all_commands, invoke

SECTIONS = {
    "audit": [
        "Options a first run needs",
        "Input",
        "What to compute",
        "Gates and baselines (exit 1 when one fails)",
        "Output",
        "Live (a stream that never ends)",
        "Engines and clusters",
    ],
    "report": [
        "Options a first run needs",
        "Input",
        "What to compute",
        "Gates and baselines (exit 1 when one fails)",
        "Output",
        "Live (a stream that never ends)",
        "Engines and clusters",
    ],
    "watch": ["Options a first run needs", "Scraping", "What to compute", "Gates (exit 1 when one fails)", "Output"],
}


def _sections(text: str) -> dict[str, list[str]]:
    """Each section's title and the options it lists (each option's first spelling, as its help line starts)."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        title = re.fullmatch(r"(\S.*):", line)
        if title is not None and not line.startswith(("Usage", " ")):
            current = found.setdefault(title.group(1), [])
        elif current is not None and re.match(r"  -", line):
            current.append(line.split()[0].rstrip(","))
    return found


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_options_are_listed_in_sections_each_once(name: str) -> None:
    result = invoke(name, "--help")
    assert result.exit_code == 0
    sections = _sections(result.stdout)
    assert list(sections) == SECTIONS[name]  # no "Other options": every option has its section
    first = [option for option in sections["Options a first run needs"] if option != "-h"]
    assert len(first) == 8, first
    listed = [option for options in sections.values() for option in options]
    command = all_commands()[name]
    options = [param for param in command.params if isinstance(param, click.Option)]
    assert sorted(listed) == sorted([*(param.opts[0] for param in options), "-h"])


def test_audit_starts_with_what_a_first_audit_needs() -> None:
    first = _sections(invoke("audit", "--help").stdout)["Options a first run needs"]
    assert first == [
        "-o",
        "--full",
        "--max-rows",
        "--id-field",
        "--on-error",
        "--min-alpha",
        "--baseline",
        "--summary-out",
        "-h",
    ]
