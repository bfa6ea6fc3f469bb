"""Text from data made safe: escaping for terminals, JSON and GitHub workflow commands."""

from __future__ import annotations

import sys
import unicodedata

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.text import (
    CommandFence,
    csv_text,
    defused,
    json_commands_escaped,
    json_controls_escaped,
    safe_text,
    visible,
    workflow_command,
    workflow_data,
    workflow_property,
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("a\x1b[31mb", "a\\x1b[31mb"),
        ("line\nbreak\r", "line\\x0abreak\\x0d"),
        ("::error::x", "\\x3a:error::x"),
        ("  ::warning file=a::y", "  \\x3a:warning file=a::y"),
        ("\n::error::x", "\\x0a::error::x"),  # visible first: the newline is gone, so no line starts with ::
        ("a::b", "a::b"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        (7, "7"),
    ],
)
def test_safe_text(text: object, shown: str) -> None:
    assert safe_text(text) == shown


def test_defused_leaves_ordinary_text_alone() -> None:
    assert defused("source.jsonl:3: p[0] = 2.0") == "source.jsonl:3: p[0] = 2.0"
    assert visible("tab\there") == "tab\\x09here"


@given(st.text())
def test_json_escaping_is_lossless(text: str) -> None:
    encoded = json_controls_escaped(orjson.dumps({"v": text}))
    assert orjson.loads(encoded) == {"v": text}
    decoded = encoded.decode()
    assert not any(0x80 <= ord(char) <= 0x9F or char in "\u2028\u2029\u202e\u2066" for char in decoded)


def test_workflow_escaping_follows_githubs_rules() -> None:
    assert workflow_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert workflow_data("%0A") == "%250A"  # an encoded newline in the data stays text
    assert workflow_property("a: b, c%") == "a%3A b%2C c%25"
    assert workflow_data("\x1b[31mred") == "\\x1b[31mred"
    assert workflow_command("error", "x::y", title="t:1,2") == "::error title=t%3A1%2C2::x::y"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x ##[add-mask]hunter2", "x ##\\x5badd-mask]hunter2"),
        ("#\ufe0f#[error]x", "#\ufe0f#\\x5berror]x"),  # a character the runner's ICU comparison skips
        ("#\u200b#[error]x", "#\\u200b#[error]x"),  # made visible: the runner sees no `##[` then
        ("# #[x] and #[y]", "# #[x] and #[y]"),
        ("\ufe0f::error::x", "\ufe0f\\x3a:error::x"),
    ],
)
def test_safe_text_breaks_the_runners_prefix_anywhere(text: str, shown: str) -> None:
    assert safe_text(text) == shown


def test_every_invisible_format_character_is_made_visible() -> None:
    """Unicode's category Cf (but the number signs that print a mark) and the blank fillers."""
    printing = {0x0600, 0x0601, 0x0602, 0x0603, 0x0604, 0x0605, 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD}
    printing.add(0x110CD)
    hiding = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf" and c not in printing]
    assert {0x061C, 0x2060, 0x2064, 0xE0001, 0xE0041, 0xE007F} <= set(hiding)
    for code in [*hiding, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x034F]:
        shown = visible(f"a{chr(code)}b")
        assert shown.isascii() and shown != "ab", hex(code)
        assert csv_text(chr(code)).isascii(), hex(code)
        encoded = json_controls_escaped(orjson.dumps(chr(code)))
        assert encoded.isascii() and orjson.loads(encoded) == chr(code), hex(code)
    assert visible("\u0661\u0662 \u0600") == "\u0661\u0662 \u0600"  # digits and a number sign print


def test_csv_cells_keep_the_prefix_and_json_escapes_it_losslessly() -> None:
    assert csv_text("::set-output::x ##[error]y") == "\\x3a:set-output::x ##[error]y"
    for text in ("##[error]y", "a#\ufe0f#[b", "#" * 5 + "["):
        encoded = json_commands_escaped(json_controls_escaped(orjson.dumps({"v": text})))
        assert orjson.loads(encoded) == {"v": text}
        assert b"##[" not in encoded and "#\ufe0f#[" not in encoded.decode()


def test_a_fence_opens_only_for_a_command_and_closes_once() -> None:
    fence = CommandFence()
    assert fence.before(b"a,b\n1,2\n") == b""
    assert fence.end() == b""
    opening = fence.before(b"x,##[error]y\n")
    token = opening.split(b"::")[2].strip()
    assert opening == b"::stop-commands::" + token + b"\n" and len(token) == 32
    assert fence.before(b"::error::z\n") == b""  # already open
    assert fence.end() == b"::" + token + b"::\n"
    assert fence.end() == b""
    assert CommandFence().before(b"a\n  ::warning::b\n") != b""
