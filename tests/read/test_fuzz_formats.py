"""A short profile of `make fuzz`'s target over the engine-line, scrape and payload readers (tests/fuzz_formats.py),
and the inputs that once broke them (issue 36), kept as examples so every run tries them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.fuzz_formats import ENGINE_FORMATS, PAYLOAD_FORMATS, check_command, check_lines, check_page, strategies

ONCE_BROKEN = [
    (b"{\n", "prometheus"),  # IndexError in exposition.py
    (b"sglang:spec_accept_length 1e23\nsglang:spec_num_steps 3\n", "prometheus"),  # ZeroDivisionError
    (b'{"spec_decode_acceptance": {"acceptance_histogram": {"0": 1, "1000000000": 1}}}\n', "aiperf-records"),
    (b'data: {"id": "x", "choices": [], "usage": {"prompt_to', "vllm-payload"),  # a capture cut mid-event
]


@given(data=strategies(), fmt=st.sampled_from([*ENGINE_FORMATS, *PAYLOAD_FORMATS, "payload-auto"]))
@example(*ONCE_BROKEN[0])
@example(*ONCE_BROKEN[1])
@example(*ONCE_BROKEN[2])
@example(*ONCE_BROKEN[3])
def test_every_line_reader_gives_items_or_errors_at_real_lines(data: bytes, fmt: str) -> None:
    check_lines(data, fmt)


@given(data=strategies())
@example(b"{\n\x1f\x8b\x08\x00binary\n{ \x01")
def test_a_scraped_page_is_intervals_or_errors_never_an_exception(data: bytes) -> None:
    check_page(data)


@pytest.mark.parametrize(("data", "fmt"), ONCE_BROKEN)
def test_the_inputs_that_once_broke_a_reader_end_with_a_status_not_an_exception(
    tmp_path: Path, data: bytes, fmt: str
) -> None:
    check_command(data, fmt, tmp_path)


@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=strategies(), fmt=st.sampled_from([*ENGINE_FORMATS, *PAYLOAD_FORMATS]))
def test_the_audit_command_on_fuzzed_input_exits_0_1_or_2(tmp_path: Path, data: bytes, fmt: str) -> None:
    check_command(data, fmt, tmp_path)
