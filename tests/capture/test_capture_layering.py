"""capture/ is core-side: it imports rule/ at most, never click or rich, and loads transformers only when used."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CAPTURE = Path(__file__).resolve().parents[2] / "specaccept_cli" / "capture"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_capture_imports_only_the_rule_from_the_package_and_no_view_library() -> None:
    files = sorted(CAPTURE.glob("*.py"))
    assert files
    for path in files:
        for name in imported_modules(path):
            top = name.split(".")[0]
            assert top not in ("click", "rich"), f"{path.name} imports {name}"
            if top == "specaccept_cli":
                assert name.startswith(("specaccept_cli.capture", "specaccept_cli.rule")), f"{path.name} imports {name}"


def test_importing_the_recorder_or_the_integration_loads_neither_torch_nor_transformers() -> None:
    code = (
        "import sys, specaccept_cli.capture, specaccept_cli.capture.hf\n"
        "print(sorted(name for name in ('torch', 'transformers', 'click', 'rich') if name in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
