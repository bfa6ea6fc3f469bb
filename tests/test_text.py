"""Text from data made safe: escaping for terminals, JSON and GitHub workflow commands."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.text import (
    defused,
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
