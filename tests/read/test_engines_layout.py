"""The engine readers stay a package a newcomer can find their way in: small modules, short functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINES = Path(__file__).resolve().parents[2] / "specaccept_cli" / "read" / "engines"
MODULES = sorted(ENGINES.glob("*.py"))
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_the_package_holds_one_module_per_engine_and_concern() -> None:
    names = {path.stem for path in MODULES}
    assert {"lines", "recovery", "vllm", "sglang", "llamacpp", "exposition", "prometheus", "logs"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_module_is_long(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_function_is_long(path: Path) -> None:
    tree = ast.parse(path.read_text())
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []
