"""The optional compiled parts (C extensions built by setup.py), each with a pure path that gives the same results.

`extension(name)` is the module when it was built and `SPECACCEPT_NO_EXTENSIONS` is not set, else False:
callers then take their numpy or pure-Python path. Without a C compiler at install time the package
installs without them; `specaccept --version` says which parts are compiled.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from functools import cache
from typing import Any

EXTENSIONS = ("_jsonl_c", "_rule_c")  # the JSONL block reader; the rule and its tallies over a batch


@cache
def extension(name: str) -> Any:
    """`specaccept_cli.<name>`, or False when it is not built or SPECACCEPT_NO_EXTENSIONS is set (looked
    for once per process: a per-batch call costs a dictionary lookup)."""
    if os.environ.get("SPECACCEPT_NO_EXTENSIONS"):
        return False
    with contextlib.suppress(ImportError):  # not built (or not usable here): the pure path
        return importlib.import_module(f"specaccept_cli.{name}")
    return False


def in_use(module: Any, pure: str, part: str) -> str:
    """What `--version` says of a part: compiled, or its pure path and why (`pure`: what that path is)."""
    if module:
        return "compiled (C)"
    if os.environ.get("SPECACCEPT_NO_EXTENSIONS"):
        return f"{pure} (SPECACCEPT_NO_EXTENSIONS is set)"
    return f"{pure} (the {part} is not built: no C compiler at install time?)"
