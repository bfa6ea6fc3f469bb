"""The console examples of README.md and of every page in docs/ print what specaccept prints today.

Users copy these blocks, and a block made before a later change goes stale without anyone noticing (a last
digit, a wording, a column). Each ```console block marked `<!-- checked -->` on the line before its fence is
run here, command by command, in a real shell with the venv's `specaccept` first on PATH, at the width the
blocks were made at, and its output must equal the page's text (trailing spaces stripped). A line `...`
(indented or not) in the page's output stands for lines left out (any number, at least one).

Commands run in a scratch directory that links `examples/` and `tests/` of the repository, so the paths read
exactly as from the repository root while the files the examples write (`mixed.jsonl`, `summary.json`, ...)
do not land in the checkout. Each block gets a directory of its own, so a block stands alone: files it reads
that the page only describes in words are made by the commands of its marker,
`<!-- checked; first: COMMANDS -->`, run before the block with their output not compared.

Blocks left unmarked, and why: those whose inputs the user would have (`serving.jsonl.gz`, `day-1.jsonl.gz`,
`greedy.jsonl`, `kubectl logs`, `.prom` scrapes, object storage, a Dask scheduler), the `make` and shell
completion lines (not specaccept commands), and the `requests.jsonl` block, which lists commands to run and
shows no output. Nothing checked varies from run to run: simulations are seeded, summaries' `created` comes
from SOURCE_DATE_EPOCH, and no checked output holds an absolute path or a timing.

Update mode, for after a deliberate change to the output: `UPDATE_EXAMPLES=1` (on these tests, or
`UPDATE_EXAMPLES=1 python -m tests.test_readme_examples`, which `make docs` runs) writes each block's real
output into its page instead of comparing. A block without `...` is replaced whole; in a block with `...` each
part shown is found again by its first and last lines, compared by `shape` (numbers and box-drawing rules
blurred), and replaced by what stands there now. A part that cannot be found is left as it was and reported:
that block needs a person. `python -m tests.test_readme_examples` without the variable prints every block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
# `<!-- checked -->`, or `<!-- checked; first: COMMANDS -->` to make the files a block reads but the page only
# describes in words (run before the block, their output not compared).
MARK = re.compile(r"<!-- checked(?:; first: (?P<setup>.*?))? -->")
# The width the pages' terminal output was made at (their tables are 100 characters wide).
COLUMNS = "100"
# Summaries record when they were made: pinned, as in tests/conftest.py.
SOURCE_DATE_EPOCH = "1764460800"
ELISION = "..."
# Separates the output of one command from the next in the block's one shell; it never occurs in output.
SEPARATOR = "\x1e specaccept-readme-example \x1e"
UPDATE = os.environ.get("UPDATE_EXAMPLES", "") not in ("", "0")


@dataclass(frozen=True)
class Step:
    """One `$ command` of a block and the output the page shows after it."""

    command: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """A checked console block: where it is (page, 1-based line of its fence, lines of its body), its commands."""

    line: int
    steps: tuple[Step, ...]
    setup: str = ""
    page: str = "README.md"
    indent: int = 0
    end: int = 0  # 0-based index of the closing fence in the page's lines

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def _incomplete(command: str) -> bool:
    """True while a command continues on the page's next line: an open parenthesis or a trailing `\\` or `|`."""
    stripped = command.rstrip()
    return command.count("(") > command.count(")") or stripped.endswith(("\\", "|"))


def parse_block(line: int, body: list[str], setup: str = "", page: str = "README.md") -> Block:
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
            raise ValueError(f"{page}:{line}: output before the first `$ ` command")
        else:
            output.append(text)
    if command is not None:
        steps.append(Step(command, tuple(output)))
    return Block(line, tuple(steps), setup, page)


def checked_blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every ```console block whose fence follows the MARK line, in page order."""
    lines = text.split("\n")
    blocks = []
    for index, current in enumerate(lines):
        mark = MARK.fullmatch(lines[index - 1].strip()) if index > 0 else None
        if current.strip() == "```console" and mark is not None:
            # A block inside a list item is indented as a whole: its lines are read without that indent.
            indent = len(current) - len(current.lstrip())
            end = next(after for after in range(index + 1, len(lines)) if lines[after].strip() == "```")
            body = [text[indent:] for text in lines[index + 1 : end]]
            block = parse_block(index + 1, body, mark.group("setup") or "", page)
            blocks.append(Block(block.line, block.steps, block.setup, page, indent, end))
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


def _page_name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def page_blocks(path: Path) -> list[Block]:
    return checked_blocks(path.read_text(encoding="utf-8"), _page_name(path))


def _blocks() -> list[Block]:
    return [block for path in PAGES for block in page_blocks(path)]


def _transcript(block: Block, outputs: list[list[str]]) -> Iterator[str]:
    for step, output in zip(block.steps, outputs, strict=True):
        yield from [f"$ {line}" if number == 0 else line for number, line in enumerate(step.command.split("\n"))]
        yield from output


# --- update mode -------------------------------------------------------------------------------------


def shape(line: str) -> str:
    """A line with its numbers and box-drawing rules blurred: how a part of a block is found again after a change."""
    line = re.sub(r"\d[\d,.]*", "0", line)
    return re.sub(r"[\u2500-\u257f\s]+", " ", line).strip()


class Unplaced(Exception):
    """A part of a block, shown between elisions, whose lines the new output no longer has."""


def _segments(expected: tuple[str, ...]) -> list[tuple[str, ...] | str]:
    """The expected output as parts and elisions, in order: an elision is its own line's text (kept as written)."""
    tokens: list[tuple[str, ...] | str] = []
    part: list[str] = []
    for line in expected:
        if line.strip() == ELISION:
            if part:
                tokens.append(tuple(part))
                part = []
            tokens.append(line)
        else:
            part.append(line)
    if part:
        tokens.append(tuple(part))
    return tokens


def _place(part: tuple[str, ...], actual: list[str], first: int, is_last: bool) -> tuple[int, int]:
    """Where `part` stands in `actual` now: (start, end), end exclusive, searching from index `first`.

    The start is the first line shaped like the part's first; the end, the line shaped like its last that makes
    the part's length closest to what it was; a last part (no elision after it) runs to the end of the output.
    """
    starts = [index for index in range(first, len(actual)) if shape(actual[index]) == shape(part[0])]
    for start in starts:
        if is_last:
            return start, len(actual)
        if len(part) == 1:
            return start, start + 1
        ends = [index for index in range(start + 1, len(actual)) if shape(actual[index]) == shape(part[-1])]
        if ends:
            end = min(ends, key=lambda index: (abs(index - start + 1 - len(part)), index))
            return start, end + 1
    raise Unplaced(part[0])


def rewritten_output(expected: tuple[str, ...], actual: list[str]) -> tuple[str, ...]:
    """The output a page should show for `actual`: `expected` if it still matches, else the new text.

    Raises Unplaced when the block elides and one of its parts cannot be found in the new output.
    """
    if matches(expected, actual):
        return expected
    if not any(line.strip() == ELISION for line in expected):
        return tuple(actual)
    tokens = _segments(expected)
    shown: list[str] = []
    cursor = 0
    for number, token in enumerate(tokens):
        if isinstance(token, str):  # an elision: at least one line left out before the next part
            continue
        elided_before = number > 0 and isinstance(tokens[number - 1], str)
        is_last = number == len(tokens) - 1
        start, end = _place(token, actual, cursor + (1 if elided_before else 0), is_last)
        if not elided_before and start != cursor:
            raise Unplaced(token[0])
        if elided_before:
            shown.append(str(tokens[number - 1]))
        shown += actual[start:end]
        cursor = end
    if isinstance(tokens[-1], str) and cursor < len(actual):
        shown.append(tokens[-1])
    result = tuple(shown)
    if not matches(result, actual):
        raise Unplaced(expected[0] if expected else "")
    return result


def rewrite_block(path: Path, ordinal: int, outputs: list[list[str]]) -> list[str]:
    """Write the real `outputs` into the `ordinal`-th checked block of the page; the parts it could not place."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    block = checked_blocks(text, _page_name(path))[ordinal]
    unplaced: list[str] = []
    body: list[str] = []
    for step, output in zip(block.steps, outputs, strict=True):
        try:
            shown = rewritten_output(step.expected, output)
        except Unplaced as exc:
            unplaced.append(f"{block.name}: `$ {step.command}`: no longer prints a part starting {exc.args[0]!r}")
            shown = step.expected
        body += [f"$ {line}" if number == 0 else line for number, line in enumerate(step.command.split("\n"))]
        body += shown
    fence = block.line - 1  # 0-based index of the opening fence
    indented = [" " * block.indent + line if line else "" for line in body]
    new_text = "\n".join([*lines[: fence + 1], *indented, *lines[block.end :]])
    if new_text != text:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False) as handle:
            handle.write(new_text)
        os.replace(handle.name, path)
    return unplaced


def update_pages(scratch: Path) -> list[str]:
    """Run every checked block of every page and write its real output in: the parts that need a person."""
    unplaced = []
    for path in PAGES:
        for ordinal, block in enumerate(page_blocks(path)):
            outputs = run_block(block, scratch_directory(scratch / f"{path.stem}-{ordinal}"))
            unplaced += rewrite_block(path, ordinal, outputs)
    return unplaced


# --- the tests -----------------------------------------------------------------------------------------


def test_the_pages_mark_their_runnable_examples() -> None:
    """Guards the marker itself: a typo in it would silently check nothing."""
    blocks = _blocks()
    assert len(blocks) >= 21
    assert len(page_blocks(ROOT / "README.md")) == 3  # one example for each of the three uses
    assert all(block.steps for block in blocks)


def _ordinal(block: Block) -> int:
    return [other.line for other in page_blocks(ROOT / block.page)].index(block.line)


@pytest.mark.parametrize("block", _blocks(), ids=lambda block: block.name)
def test_example_prints_what_the_page_shows(block: Block, tmp_path: Path) -> None:
    outputs = run_block(block, scratch_directory(tmp_path))
    if UPDATE:
        unplaced = rewrite_block(ROOT / block.page, _ordinal(block), outputs)
        assert not unplaced, "\n".join(unplaced)
        return
    for step, output in zip(block.steps, outputs, strict=True):
        expected = "\n".join(step.expected)
        actual = "\n".join(output)
        assert matches(step.expected, output), (
            f"{block.name}: `$ {step.command}` prints\n{actual}\n--- but the page shows ---\n{expected}"
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


def test_update_keeps_a_matching_block_and_replaces_a_whole_one() -> None:
    assert rewritten_output(("a", ELISION, "d"), ["a", "b", "d"]) == ("a", ELISION, "d")
    assert rewritten_output(("old",), ["new", "lines"]) == ("new", "lines")


def test_update_finds_the_parts_shown_between_elisions_again() -> None:
    before = (
        "╭─ panel ──╮",
        "│ alpha 0.78 │",
        "╰──────────╯",
        ELISION,
        "Per position",
        "│ 1 │ 0.77 │",
        "└───┘",
        ELISION,
    )
    after = ["╭─ panel ────╮", "│ alpha 0.78 │", "│ verdict ok │", "╰────────────╯", "Acceptance", "│ x │"]
    after += ["Per position", "│ 1 │ 0.7705 │", "│ 2 │ 0.7951 │", "└───┘", "Accepted length", "0 459"]
    assert rewritten_output(before, after) == (*after[:4], ELISION, *after[6:10], ELISION)
    # A trailing elision with nothing left to stand for goes; a part that is gone is left to a person.
    assert rewritten_output(("head", ELISION), ["head", "more"]) == ("head", ELISION)
    with pytest.raises(Unplaced):
        rewritten_output(("head", ELISION, "Per position", "x"), ["head", "other", "lines"])


def test_update_writes_real_output_into_the_page_and_leaves_other_lines_alone(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = "intro\n\n- item\n\n  <!-- checked -->\n  ```console\n  $ echo hi; echo there\n  stale\n  ```\n\nafter\n"
    page.write_text(text, encoding="utf-8")
    (block,) = checked_blocks(text, "page.md")
    assert rewrite_block(page, 0, run_block(block, scratch_directory(tmp_path / "run"))) == []
    assert page.read_text(encoding="utf-8") == text.replace("  stale\n", "  hi\n  there\n")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        if UPDATE:
            # Write every checked block's real output into its page (make docs); list what needs a person.
            problems = update_pages(Path(scratch))
            print("\n".join(problems) if problems else "every checked example is as specaccept prints it")
            sys.exit(1 if problems else 0)
        # Print every checked block as it runs today, to compare.
        for number, block in enumerate(_blocks()):
            directory = scratch_directory(Path(scratch) / str(number))
            print(f"=== {block.name}")
            print("\n".join(_transcript(block, run_block(block, directory))))
