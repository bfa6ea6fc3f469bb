"""The error policy as a value: Summary's skipped counters and error list, ErrorPolicy, text helpers."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specaccept_cli.errors import MAX_KEPT_ERRORS, InputError, SkippedRow
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES
from specaccept_cli.summary.files import summary_from_object, summary_object
from specaccept_cli.summary.state import Summary
from specaccept_cli.text import defused, json_controls_escaped, safe_text, visible


def errors(source: str, count: int) -> tuple[SkippedRow, ...]:
    return tuple(SkippedRow(source, line, f"bad {line}") for line in range(1, count + 1))


def test_skipped_state_adds_and_merge_keeps_the_first_twenty_in_order() -> None:
    a = Summary(skipped_rows=15, errors=errors("a", 15))
    b = Summary(skipped_rows=30, skipped_sources=1, errors=errors("b", 20))
    merged = a + b
    assert merged.skipped_rows == 45 and merged.skipped_sources == 1
    assert merged.errors == errors("a", 15) + errors("b", 5)
    assert len((b + a).errors) == MAX_KEPT_ERRORS and (b + a).errors[0].source == "b"


def test_skipped_state_survives_to_dict_and_from_dict() -> None:
    summary = Summary(skipped_rows=3, skipped_sources=1, errors=(SkippedRow("x.gz", None, "cut"), *errors("y", 2)))
    data = orjson.loads(orjson.dumps(summary_object(summary)))
    assert data["skipped_rows"] == 3 and data["skipped_sources"] == 1
    assert data["errors"][0] == {"source": "x.gz", "line": None, "message": "cut"}
    assert summary_from_object(data) == summary
    assert summary_from_object(data) + summary_from_object(data) == summary + summary


def test_an_older_summary_without_skipped_keys_still_loads() -> None:
    data = summary_object(Summary())
    del data["skipped_rows"], data["errors"], data["state"]["skipped_rows"], data["state"]["skipped_sources"]
    assert summary_from_object(data) == Summary()


@pytest.mark.parametrize(
    "broken",
    [{"skipped_rows": -1}, {"skipped_rows": "many"}],
)
def test_malformed_skipped_state_is_rejected(broken: dict[str, object]) -> None:
    data = summary_object(Summary())
    data["state"].update(broken)
    with pytest.raises(ValueError):
        summary_from_object(data)


def test_malformed_errors_are_rejected() -> None:
    data = summary_object(Summary())
    data["errors"] = [{"source": "x"}]
    with pytest.raises(ValueError):
        summary_from_object(data)


@given(st.lists(st.booleans(), max_size=60), st.integers(0, 60))
def test_policy_on_split_input_merges_to_the_policy_on_the_whole(bad: list[bool], cut: int) -> None:
    """Skipping over two halves and adding the summaries = skipping over the whole."""

    def run(flags: list[bool], first: int) -> Summary:
        policy = ErrorPolicy("skip")
        for offset, is_bad in enumerate(flags):
            if is_bad:
                policy(InputError("s", first + offset, "bad"))
        return Summary(
            skipped_rows=policy.skipped_rows, skipped_sources=policy.skipped_sources, errors=tuple(policy.errors)
        )

    assert run(bad[:cut], 1) + run(bad[cut:], 1 + len(bad[:cut])) == run(bad, 1)


def test_fail_policy_raises_and_skip_policy_quarantines_raw_lines() -> None:
    error = InputError("s", 3, "bad", raw=b'{"p": [NaN]}')
    with pytest.raises(InputError):
        ErrorPolicy("fail")(error)
    sink = io.BytesIO()
    policy = ErrorPolicy("skip", sink)
    policy(error)
    policy(InputError("s", 4, "line is longer than 10 bytes"))  # an overlong line has no bytes kept
    policy.source_failed(InputError("t.gz", None, "compressed stream is truncated"))
    assert sink.getvalue() == b'{"p": [NaN]}\n'
    assert (policy.skipped_rows, policy.skipped_sources, policy.skipped) == (2, 1, 3)


def test_cli_default_line_limit_is_the_readers() -> None:
    from specaccept_cli.cli.audit import audit

    (option,) = [param for param in audit.params if param.name == "max_line_bytes"]
    assert option.default == DEFAULT_MAX_LINE_BYTES


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
