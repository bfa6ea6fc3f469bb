"""The README's console examples print what specaccept prints today.

Users copy these blocks, and a block made before a later change goes stale without anyone noticing (a last
digit, a wording, a column). Each ```console block marked `<!-- checked -->` on the line before its fence is
run here, command by command, in a real shell with the venv's `specaccept` first on PATH, at the width the
README's blocks were made at, and its output must equal the README's text (trailing spaces stripped). A line
`...` (indented or not) in the README's output stands for lines left out (any number, at least one).

Commands run in a scratch directory that links `examples/` and `tests/` of the repository, so the paths read
exactly as from the repository root while the files the examples write (`mixed.jsonl`, `summary.json`, ...)
do not land in the checkout. Each block gets a directory of its own, so a block stands alone: files it reads
that the README only describes in words are made by the commands of its marker,
`<!-- checked; first: COMMANDS -->`, run before the block with their output not compared.

Blocks left unmarked, and why: those whose inputs the user would have (`serving.jsonl.gz`, `day-1.jsonl.gz`,
`greedy.jsonl`, `kubectl logs`, `.prom` scrapes, object storage, a Dask scheduler), the `make` and shell
completion lines (not specaccept commands), and the `requests.jsonl` block, which lists commands to run and
shows no output. Nothing checked varies from run to run: simulations are seeded, summaries' `created` comes
from SOURCE_DATE_EPOCH, and no checked output holds an absolute path or a timing. The whole check takes about
6 s (a few dozen specaccept processes). `python -m tests.test_readme_examples` prints each checked block's
real output, for pasting after a deliberate change.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# `<!-- checked -->`, or `<!-- checked; first: COMMANDS -->` to make the files a block reads but the README only
# describes in words (run before the block, their output not compared).
MARK = re.compile(r"<!-- checked(?:; first: (?P<setup>.*?))? -->")
# The width the README's terminal output was made at (its tables are 100 characters wide).
COLUMNS = "100"
# Summaries record when they were made: pinned, as in tests/conftest.py.
SOURCE_DATE_EPOCH = "1764460800"
ELISION = "..."
# Separates the output of one command from the next in the block's one shell; it never occurs in output.
SEPARATOR = "\x1e specaccept-readme-example \x1e"


@dataclass(frozen=True)
class Step:
    """One `$ command` of a block and the output the README shows after it."""

    command: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """A checked console block: where it starts in README.md and its commands in order."""

    line: int
    steps: tuple[Step, ...]
    setup: str = ""


def _incomplete(command: str) -> bool:
    """True while a command continues on the README's next line: an open parenthesis or a trailing `\\` or `|`."""
    stripped = command.rstrip()
    return command.count("(") > command.count(")") or stripped.endswith(("\\", "|"))


def parse_block(line: int, body: list[str], setup: str = "") -> Block:
    """Split a console block into `$ ` commands (with their continuation lines) and the output after each."""
    steps: list[Step] = []
    command: str | None = None
    output: list[str] = []
    for text in body:
        if command is not None and not output and _incomplete(command):
            command += "\n" + text
        elif text.startswith("$ "):
            if command is not None:
                steps.append(Step(command, tuple(output)))
            command, output = text[2:], []
        elif command is None:
            raise ValueError(f"README.md:{line}: output before the first `$ ` command")
        else:
            output.append(text)
    if command is not None:
        steps.append(Step(command, tuple(output)))
    return Block(line, tuple(steps), setup)


def checked_blocks(text: str) -> list[Block]:
    """Every ```console block whose fence follows the MARK line, in README order."""
    lines = text.split("\n")
    blocks = []
    for index, current in enumerate(lines):
        mark = MARK.fullmatch(lines[index - 1].strip()) if index > 0 else None
        if current.strip() == "```console" and mark is not None:
            # A block inside a list item is indented as a whole: its lines are read without that indent.
            indent = len(current) - len(current.lstrip())
            end = next(after for after in range(index + 1, len(lines)) if lines[after].strip() == "```")
            body = [text[indent:] for text in lines[index + 1 : end]]
            blocks.append(parse_block(index + 1, body, mark.group("setup") or ""))
    return blocks


def example_environment() -> dict[str, str]:
    """The environment of a checked command: this venv's scripts first, a pinned width and clock, no colour."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "GITHUB_STEP_SUMMARY"}
    }
    environment.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
        COLUMNS=COLUMNS,
        LINES="50",
        TERM="dumb",
        NO_COLOR="1",
        SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH,
        PYTHONIOENCODING="utf-8",
        LC_ALL="C.UTF-8",
    )
    return environment


def scratch_directory(directory: Path) -> Path:
    """A directory where `examples/...` and `tests/...` resolve as from the repository root."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("examples", "tests"):
        link = directory / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)
    return directory


def run_block(block: Block, directory: Path) -> list[list[str]]:
    """Run the block's commands in one bash, in order (so `echo $?` sees the previous command): each one's output.

    stderr goes to the same pipe as stdout, as on the terminal the README shows.
    """
    script = ["set +e", f"{{\n{block.setup}\n}} > /dev/null 2>&1"] if block.setup else ["set +e"]
    for step in block.steps:
        # `(exit $status)` hands the command's status on to the next one across the separator's printf.
        script += [f"{{\n{step.command}\n}} 2>&1", "status=$?", f"printf '%s\\n' '{SEPARATOR}'", "(exit $status)"]
    result = subprocess.run(
        ["bash", "-c", "\n".join([*script, "exit 0"])],
        cwd=directory,
        env=example_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    chunks = result.stdout.split(SEPARATOR + "\n")
    assert chunks[-1] == "", f"output after the last separator: {chunks[-1]!r}"
    return [[line.rstrip() for line in chunk.rstrip("\n").split("\n")] if chunk else [] for chunk in chunks[:-1]]


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Whether actual equals expected, where an expected line `...` stands for one or more actual lines."""
    # An elision may be indented to sit inside the text it shortens (a JSON object's keys).
    expected = tuple(ELISION if line.strip() == ELISION else line.rstrip() for line in expected)
    if ELISION not in expected:
        return list(expected) == actual
    head, *rest = expected
    if head == ELISION:
        return any(matches(tuple(rest), actual[start:]) for start in range(1, len(actual) + 1))
    return bool(actual) and actual[0] == head and matches(tuple(rest), actual[1:])


def _blocks() -> list[Block]:
    return checked_blocks(README.read_text(encoding="utf-8"))


def _transcript(block: Block, outputs: list[list[str]]) -> Iterator[str]:
    for step, output in zip(block.steps, outputs, strict=True):
        yield from [f"$ {line}" if number == 0 else line for number, line in enumerate(step.command.split("\n"))]
        yield from output


def test_the_readme_marks_its_runnable_examples() -> None:
    """Guards the marker itself: a typo in it would silently check nothing."""
    blocks = _blocks()
    assert len(blocks) >= 18
    assert all(block.steps for block in blocks)


@pytest.mark.parametrize("block", _blocks(), ids=lambda block: f"README.md:{block.line}")
def test_readme_example_prints_what_the_readme_shows(block: Block, tmp_path: Path) -> None:
    outputs = run_block(block, scratch_directory(tmp_path))
    for step, output in zip(block.steps, outputs, strict=True):
        expected = "\n".join(step.expected)
        actual = "\n".join(output)
        assert matches(step.expected, output), (
            f"README.md:{block.line}: `$ {step.command}` prints\n{actual}\n--- but the README shows ---\n{expected}"
        )


def test_elision_stands_for_one_or_more_lines() -> None:
    assert matches(("a", ELISION, "d"), ["a", "b", "c", "d"])
    assert not matches(("a", ELISION, "d"), ["a", "d"])
    assert not matches(("a", ELISION, "d"), ["a", "b", "e"])
    assert matches((ELISION,), ["x"])
    assert matches(("{", "  ...", "}"), ["{", '  "a": 1', "}"])
    assert not matches(("a",), ["a", "b"])


def test_a_command_continues_while_its_parenthesis_is_open() -> None:
    block = parse_block(1, ["$ (echo 1;", "   echo 2) > x", "$ cat x", "1", "2"])
    assert block.steps == (Step("(echo 1;\n   echo 2) > x", ()), Step("cat x", ("1", "2")))


if __name__ == "__main__":
    # Print every checked block as it runs today, to compare or paste after a deliberate change.
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for number, block in enumerate(_blocks()):
            directory = scratch_directory(Path(scratch) / str(number))
            print(f"=== README.md:{block.line}")
            print("\n".join(_transcript(block, run_block(block, directory))))
