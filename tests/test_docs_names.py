"""Every command, option and `--format` value a docs page (README.md, docs/*.md) names exists in the Click
commands: a page cannot send a user to `--format vllm-choice-stats` (refused) or to an option that was renamed.

Three checks: each `specaccept COMMAND ...` line in code names a command, and options of that command;
each `--format X` and "format `X`" names a value `--format` takes; any other `--option` on a page is an
option of some command, or one of another program's listed below with the program it belongs to.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from specaccept_cli.cli import cli
from tests.helpers import all_commands

ROOT = Path(__file__).resolve().parent.parent
PAGES = {
    "README.md": (ROOT / "README.md").read_text(encoding="utf-8"),
    **{
        f"docs/{path.name}": path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "docs").glob("*.md"))
        if path.name != "cli.md"  # generated from the commands themselves
    },
}
COMMANDS = all_commands()

# Options of other programs that the pages name, each with its program: a new one is added here on purpose.
OTHER_PROGRAMS = {
    "--atheris": "tests.fuzz_reader (the fuzz target's own switch)",
    "--cluster-audit": "benchmarks/bench.py",
    "--profile": "benchmarks/bench.py",
    "--runs-per-request": "benchmarks/bench.py",
    "--strict": "mypy",
    "--files": "pre-commit try-repo",
    "--disable-background-networking": "Chromium",
    "--host-resolver-rules": "Chromium",
    "--enable-force-include-usage": "vllm serve",
    "--per-request-spec-decode-metrics": "vllm serve",
    "--per-request-spec-decode-stats": "vllm serve (an earlier revision)",
    "--speculative-decoding-stats": "SGLang's server",
    "--speculative-eagle-topk": "SGLang's server",
    "--export-level": "AIPerf",
    "--extra_llm_api_options": "trtllm-serve",
    "--metrics": "llama-server",
    "--target": "cmake --build",
    "--flag": "a placeholder for any check's option (cli/hints.py)",
    "--min-": "a prefix: the --min-* gates",
}


def _options(command: click.Command) -> set[str]:
    return {
        option
        for param in command.params
        if isinstance(param, click.Option)
        for option in (*param.opts, *param.secondary_opts)
    } | {"--help", "-h"}


EVERY_OPTION = set().union(*(_options(command) for command in COMMANDS.values()), _options(cli))
FORMAT_VALUES = set(next(p for p in COMMANDS["audit"].params if p.name == "input_format").type.choices)  # type: ignore[attr-defined]


def code_of(text: str) -> list[str]:
    """The page's code: fenced blocks and inline code spans (prose such as "specaccept reads ..." is not a command)."""
    fence = re.compile(r"```[^\n]*\n(.*?)```", re.S)
    return [*fence.findall(text), *re.findall(r"`([^`\n]+)`", fence.sub("", text))]


def command_lines(text: str) -> list[tuple[str, str]]:
    """(command, the rest of its line up to a pipe, `;`, `&&` or a comment) for each `specaccept COMMAND` in code."""
    found = []
    for snippet in code_of(text):
        for line in snippet.replace("\\\n", " ").splitlines():
            for match in re.finditer(r"(?<![\w./=-])specaccept ([a-z][\w-]*)([^|;&#\n]*)", line):
                found.append((match.group(1), match.group(2)))
    return found


def test_the_checks_find_what_they_look_for() -> None:
    """The patterns are not vacuous: the pages hold many command lines, formats and options."""
    lines = [line for text in PAGES.values() for line in command_lines(text)]
    assert len(lines) > 100 and {command for command, _ in lines} >= {"audit", "watch", "plan", "report", "diff"}
    assert sum(len(re.findall(r"--format[ =]", text)) for text in PAGES.values()) >= 4
    assert command_lines("`specaccept audti x.jsonl`") == [("audti", " x.jsonl")]
    assert _bad_formats("read it with `--format vllm-choice-stats`") == ["vllm-choice-stats"]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_command_line_on_a_page_names_a_command_and_its_own_options(page: str) -> None:
    wrong = []
    for command, rest in command_lines(PAGES[page]):
        if command not in COMMANDS:
            wrong.append(f"`specaccept {command}`: no such command")
            continue
        options = _options(COMMANDS[command])
        for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-zA-Z])(?=[\s=]|$)", rest):
            if option not in options:
                wrong.append(f"`specaccept {command} ... {option}`: {command} has no such option")
    assert not wrong, f"{page}: " + "; ".join(wrong)


def _bad_formats(text: str) -> list[str]:
    values = [a or b for a, b in re.findall(r"--format[ =]`?([\w-]+)|\bformat `([\w-]+)`", text)]
    return [value for value in values if value not in FORMAT_VALUES]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_format_a_page_names_is_one_that_format_takes(page: str) -> None:
    assert not _bad_formats(PAGES[page]), f"{page}: --format takes none of {_bad_formats(PAGES[page])}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_option_a_page_names_is_specaccepts_or_a_listed_programs(page: str) -> None:
    named = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", PAGES[page]))
    unknown = sorted(named - EVERY_OPTION - set(OTHER_PROGRAMS))
    assert not unknown, f"{page} names options no command has: {unknown}"
