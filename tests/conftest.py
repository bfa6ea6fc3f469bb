"""Fixtures only (helpers live in tests/helpers.py), and the hypothesis profiles.

`fast` (the default, `make test`): enough examples to catch a regression in seconds.
`deep` (`make fuzz`, or `HYPOTHESIS_PROFILE=deep pytest`): many more, for a long search.
Property tests set no `max_examples` of their own, so the profile decides.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers import HAND_ROWS, write_jsonl

settings.register_profile("fast", max_examples=100, deadline=None)
settings.register_profile(
    "deep", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


@pytest.fixture(autouse=True)
def _pinned_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich output in tests: fixed width, no colour, whatever the machine's terminal."""
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    # A summary records when it was made: pinned, so two runs of a command write the same bytes.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764460800")


@pytest.fixture
def hand_log(tmp_path: Path) -> Path:
    """HAND_ROWS as a JSONL file: alpha 3/4, tokens per pass 2, acceptance rate 3/5."""
    return write_jsonl(tmp_path / "hand.jsonl", HAND_ROWS)
