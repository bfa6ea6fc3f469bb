"""The CLI with the compiled reader and without it (SPECACCEPT_NO_EXTENSIONS=1): the same bytes out.

Two worker processes, one per reader (the variable is read at start-up, as in any `specaccept` process),
run the CLI on the same generated files: valid and near-valid JSONL from test_jsonl_fast's strategies,
read in small blocks (so that blocks the compiled reader takes and blocks it declines sit side by side)
and in the default ones. Everything the CLI gives must be equal: `audit -o json` (provenance aside, which
names the input's path), `-o jsonl`, the error line and exit status of a failed audit, and with
`--on-error skip` the counts, the listed rows and the quarantine file byte for byte.
Numbers: the reader's conversion of any number token against float() of the exact path, bit for bit.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept_cli.read import jsonl_fast
from tests.read.test_jsonl_fast import blocks

COMPILED = jsonl_fast.compiled_reader()
SPECACCEPT_OFF = {"SPECACCEPT_NO_EXTENSIONS": "1"}

WORKER = r"""
import json, sys
from click.testing import CliRunner
from specaccept_cli.cli import cli
from specaccept_cli.read import jsonl, jsonl_fast

print(json.dumps(jsonl_fast.reader_name()), flush=True)
defaults = jsonl.iter_text_blocks.__defaults__
for request in sys.stdin:
    block_bytes, args = json.loads(request)
    jsonl.iter_text_blocks.__defaults__ = (block_bytes or defaults[0], *defaults[1:])
    result = CliRunner().invoke(cli, args)
    crash = None if result.exception is None or isinstance(result.exception, SystemExit) else repr(result.exception)
    answer = {"stdout": result.stdout_bytes.hex(), "stderr": result.stderr_bytes.hex(), "code": result.exit_code}
    print(json.dumps({**answer, "crash": crash}), flush=True)
"""


class Worker:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "COLUMNS": "120", "TERM": "dumb", "NO_COLOR": "1", **env},
            text=True,
        )
        self.reader = self._answer()

    def _answer(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the worker died"
        return json.loads(line)

    def run(self, block_bytes: int, *args: str) -> tuple[bytes, bytes, int]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps([block_bytes, list(args)]) + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        assert answer["crash"] is None, answer["crash"]
        return bytes.fromhex(answer["stdout"]), bytes.fromhex(answer["stderr"]), answer["code"]

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[Worker, Worker]]:
    if not COMPILED:
        if os.environ.get("CI") and not os.environ.get("SPECACCEPT_NO_EXTENSIONS"):
            pytest.fail("the compiled reader is not built (CI builds it)")
        pytest.skip("the compiled reader is not built")
    compiled = Worker({"SPECACCEPT_NO_EXTENSIONS": ""})
    pure = Worker({"SPECACCEPT_NO_EXTENSIONS": "1"})
    try:
        assert compiled.reader == "compiled (C)"
        assert pure.reader.startswith("pure Python")
        yield compiled, pure
    finally:
        compiled.close()
        pure.close()


def without_provenance(summary: bytes) -> Any:
    document = orjson.loads(summary)
    document.pop("provenance", None)
    return document


@st.composite
def files(draw: st.DrawFn) -> bytes:
    """A few blocks' worth of lines, some valid, some near-valid, maybe a blank line or a last newline."""
    parts = draw(st.lists(blocks(), min_size=1, max_size=4))
    return b"\n".join(parts) + draw(st.sampled_from([b"", b"\n"]))


@settings(max_examples=40)
@given(files(), st.sampled_from([0, 48, 200]), st.sampled_from([[], ["--group-by", "id"]]))
def test_both_readers_give_the_same_bytes(
    workers: tuple[Worker, Worker],
    tmp_path_factory: pytest.TempPathFactory,
    data: bytes,
    block_bytes: int,
    extra: list[str],
) -> None:
    compiled, pure = workers
    directory = tmp_path_factory.mktemp("parity")
    log = directory / "log.jsonl"
    log.write_bytes(data)

    strict = [worker.run(block_bytes, "audit", str(log), "-o", "json", *extra) for worker in workers]
    assert strict[0][1:] == strict[1][1:]  # the error line and the exit status
    if strict[0][2] == 0:
        assert without_provenance(strict[0][0]) == without_provenance(strict[1][0])
    else:
        assert strict[0][0] == strict[1][0]
    runs = [worker.run(block_bytes, "audit", str(log), "-o", "jsonl") for worker in workers]
    assert runs[0] == runs[1]

    skipped = []
    for name, worker in (("compiled", compiled), ("pure", pure)):
        quarantine = directory / f"{name}.quarantine"
        out, err, code = worker.run(
            block_bytes,
            "audit",
            str(log),
            "-o",
            "json",
            "--on-error",
            "skip",
            "--allow-empty",
            "--quarantine",
            str(quarantine),
            *extra,
        )
        body = without_provenance(out) if code == 0 else out
        skipped.append((body, err, code, quarantine.read_bytes() if quarantine.exists() else None))
    assert skipped[0] == skipped[1]


def test_a_file_of_bad_rows_names_the_same_line(workers: tuple[Worker, Worker], tmp_path: Path) -> None:
    """A fixed near-valid file: the compiled reader takes the good blocks, the bad one is worded alike."""
    good = b'{"p":[0.5,1],"q":[1,0.25],"r":[0.1,0.9],"id":"a\\u00e9"}'
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"\n".join([good] * 50 + [b'{"p":[0.5],"q":[1],"r":[0.1],"p":[2]}'] + [good] * 50) + b"\n")
    answers = [worker.run(256, "audit", str(log), "-o", "json") for worker in workers]
    assert answers[0] == answers[1]
    assert answers[0][2] == 2 and b"log.jsonl:51: p[0] = 2.0 is out of range" in answers[0][1]


# --- the number conversion, against float() ------------------------------------------------------

DIGITS = st.text("0123456789", min_size=1, max_size=25)


@st.composite
def number_tokens(draw: st.DrawFn) -> str:
    """JSON number tokens: integers, fractions and exponents, short and long, near halfway points too."""
    kind = draw(st.integers(0, 3))
    if kind == 0:  # the shortest repr of a double, or its 17-digit spelling, or a nudge past it
        value = draw(st.floats(0, 1e300, allow_nan=False) | st.floats(0, 1))
        return draw(st.sampled_from([repr(value), f"{value:.17e}", f"{value:.20e}", f"{value:.25g}"]))
    head = draw(st.sampled_from(["0", *"123456789"])) + ("" if draw(st.booleans()) else draw(DIGITS))
    if head.startswith("0"):
        head = "0"
    fraction = "" if kind == 1 else "." + draw(DIGITS)
    exponent = (
        ""
        if kind != 3
        else draw(st.sampled_from("eE")) + draw(st.sampled_from(["", "+", "-"])) + str(draw(st.integers(0, 330)))
    )
    return draw(st.sampled_from(["", "-"])) + head + fraction + exponent


def exact_double(token: str) -> float | None:
    """What the exact path makes of a token: orjson's value as a float, or None when it is out of range."""
    try:
        value = orjson.loads(token)
    except orjson.JSONDecodeError:
        return None
    try:
        return float(value)
    except OverflowError:
        return None


@given(st.lists(number_tokens(), min_size=1, max_size=20))
def test_numbers_convert_to_the_exact_paths_doubles(tokens: list[str]) -> None:
    if not COMPILED:
        pytest.skip("the compiled reader is not built")
    expected = [exact_double(token) for token in tokens]
    listed = ",".join(tokens)
    line = f'{{"p":[{listed}],"q":[{listed}],"r":[{listed}]}}'
    parsed = COMPILED.parse_block(line.encode(), (b"p", b"q", b"r"), (), 1 << 20, None)
    if parsed is None:  # declined: a number out of range, or beyond the digits it converts itself
        return
    values = struct.unpack(f"{len(tokens)}d", bytes(parsed[0]))
    assert all(value is not None for value in expected)
    assert [struct.pack("d", value) for value in values] == [struct.pack("d", value) for value in expected]


@st.composite
def probability_tokens(draw: st.DrawFn) -> str:
    """Number tokens of values in [0, 1], which lists hold: the digits the reader converts itself (up to 19
    significant, exponents up to 27 places down) and beyond, halfway points and their neighbours."""
    kind = draw(st.integers(0, 4))
    if kind == 0:  # a double's shortest repr, its 17 to 25 digit spellings, the midpoint to its neighbour
        value = draw(st.floats(0, 1))
        above = struct.unpack("<d", struct.pack("<Q", struct.unpack("<Q", struct.pack("<d", value))[0] + 1))[0]
        midpoint = (Decimal(value) + Decimal(min(above, 1.0))) / 2
        places = draw(st.integers(15, 30))
        return draw(st.sampled_from([repr(value), f"{value:.17e}", f"{value:.20e}", f"{midpoint:.{places}g}"]))
    if kind == 1:  # 0.ddd with leading zeros
        return "0." + "0" * draw(st.integers(0, 12)) + draw(DIGITS)
    if kind == 2:  # digits times a power of ten that keeps them below 1
        digits = draw(DIGITS).lstrip("0") or "0"
        return digits + draw(st.sampled_from("eE")) + "-" + str(len(digits) + draw(st.integers(0, 30)))
    if kind == 3:  # a fraction with an exponent of its own
        return f"0.{draw(DIGITS)}e-{draw(st.integers(0, 25))}"
    return draw(st.sampled_from(["0", "1", "0.0", "1.0", "1.00000000000000000000", "-0.0", "0e0", "1E-0"]))


@given(st.lists(probability_tokens(), min_size=1, max_size=20))
def test_probabilities_in_lists_convert_to_the_exact_paths_doubles(tokens: list[str]) -> None:
    """Each token a line of its own: every list value is converted, none may decline."""
    if not COMPILED:
        pytest.skip("the compiled reader is not built")
    expected = [exact_double(token) for token in tokens]
    block = "\n".join(f'{{"p":[{token}],"q":[1],"r":[{token}]}}' for token in tokens)
    parsed = COMPILED.parse_block(block.encode(), (b"p", b"q", b"r"), (), 1 << 20, None)
    assert parsed is not None
    values = struct.unpack(f"{len(tokens)}d", bytes(parsed[0]))
    assert [struct.pack("d", value) for value in values] == [struct.pack("d", value) for value in expected]
    assert bytes(parsed[2]) == bytes(parsed[0])


def test_fractions_whose_first_candidate_misses_walk_to_the_right_double() -> None:
    """17 to 19 digits after the point: the reader's first guess, w / 10^n in doubles, is a unit off for
    about a third of them and it walks to the neighbour (`proven_quotient`); up and down, each exact."""
    if not COMPILED:
        pytest.skip("the compiled reader is not built")
    rng = random.Random(7)
    tokens, moves = [], {"up": 0, "down": 0}
    while min(moves.values()) < 2000:
        places = rng.randint(17, 19)
        w = rng.randint(10 ** (places - 2), 10**places - 1)  # 16 to 19 significant digits, above 2^53 mostly
        token = f"0.{w:0{places}d}"
        first, wanted = float(w) / float(f"1e{places}"), float(token)
        if w < 2**53 or first == wanted:
            continue
        moves["up" if wanted > first else "down"] += 1
        tokens.append(token)
    block = "\n".join(f'{{"p":[{token}],"q":[1],"r":[{token}]}}' for token in tokens)
    parsed = COMPILED.parse_block(block.encode(), (b"p", b"q", b"r"), (), 1 << 20, None)
    assert parsed is not None
    values = struct.unpack(f"{len(tokens)}d", bytes(parsed[0]))
    assert [struct.pack("d", value) for value in values] == [struct.pack("d", float(token)) for token in tokens]


@given(st.lists(number_tokens(), min_size=1, max_size=20))
def test_numbers_of_any_size_in_a_carried_field_are_orjsons(tokens: list[str]) -> None:
    """A field carried per run (`--id-field`) holds any number: it is read as orjson reads it, or declined."""
    if not COMPILED:
        pytest.skip("the compiled reader is not built")
    block = "\n".join(f'{{"p":[0.5],"q":[1],"r":[0.5],"x":{token}}}' for token in tokens)
    parsed = COMPILED.parse_block(block.encode(), (b"p", b"q", b"r"), (b"x",), 1 << 20, None)
    if parsed is None:  # an integer of more than 18 digits, or a number beyond a double: the exact path's
        assert any(exact_double(token) is None or _long_integer(token) for token in tokens)
        return
    for token, value in zip(tokens, parsed[4][0]):
        wanted = orjson.loads(token)
        assert type(value) is type(wanted)
        assert struct.pack("d", value) == struct.pack("d", wanted) if isinstance(value, float) else value == wanted


def _long_integer(token: str) -> bool:
    return "." not in token and "e" not in token.lower() and len(token.lstrip("-")) > 18


def test_count_newlines_is_bytes_count() -> None:
    """The block cutter counts lines with the compiled reader's loop when it is built, with numpy without."""
    texts = [b"", b"\n", b"a\nb", b"\n" * 1000, bytes(range(256)) * 4097, b"x" * 70000 + b"\n"]
    for text in texts:
        assert jsonl_fast.count_newlines(text) == text.count(b"\n")
    if COMPILED:
        assert [COMPILED.count_newlines(memoryview(text)) for text in texts] == [text.count(b"\n") for text in texts]


def test_version_names_the_reader_in_use() -> None:
    """`specaccept --version` says which JSONL reader this installation uses, in a real process."""
    for env, expected in (
        (SPECACCEPT_OFF, b"JSONL reader: pure Python (SPECACCEPT_NO_EXTENSIONS is set)"),
        (
            {"SPECACCEPT_NO_EXTENSIONS": ""},
            b"JSONL reader: compiled (C)"
            if COMPILED
            else b"JSONL reader: pure Python (the compiled reader is not built",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "specaccept_cli", "--version"],
            capture_output=True,
            env={**os.environ, **env},
            check=False,
        )
        assert done.returncode == 0 and expected in done.stdout, done.stdout
