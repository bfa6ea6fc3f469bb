"""What the docs say about the project agrees with what the project does (claims a reader acts on)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


def test_the_action_is_said_to_install_its_dependencies_from_a_package_index() -> None:
    action = (ROOT / "action.yml").read_text(encoding="utf-8")
    installs = [line for line in action.splitlines() if "pip install" in line]
    assert installs and not any("--no-index" in line for line in installs)  # so it needs an index
    ci = _text("docs/ci.md")
    assert "no package index" not in ci
    assert "come from the package index pip is set up with" in ci


def test_the_example_vllm_log_is_called_simulated() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\nexamples:")[1].split("\n\n")[0]
    assert "-m tests.engines examples/vllm-server.log" in target  # `make examples` simulates it (tests/engines.py)
    readme = _text("README.md")
    assert "a vLLM server's own output" not in readme
    assert re.search(r"vLLM server log: simulated, in the format of vLLM's own", readme)


def test_the_exit_status_table_tells_a_stopped_live_audit_from_an_interrupted_one() -> None:
    table = _text("docs/ci.md").split("## Exit status")[1]
    row = next(line for line in table.split("| 130 |")[1:])
    assert "`audit --follow` and `watch`" in row and "0 or 1" in row
    assert "the exit status is theirs: 0, or 1" in _text("docs/live.md").split("## Stopping is normal")[1][:600]
