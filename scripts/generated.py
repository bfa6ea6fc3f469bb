"""What the scripts that write generated docs share: a block between two markers replaced by what the code says
today, and the one way to write a page or, with --check, to say it is stale (exit 1) without writing.

    python scripts/cli_reference.py     # docs/cli.md, the whole page
    python scripts/format_table.py      # docs/input.md, the table of formats
    python scripts/rules_table.py       # docs/rules.md, the table of rules
(`make docs` runs the three; each takes --check.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def with_block(text: str, begin: str, end: str, body: str) -> str:
    """`text` with what stands between the markers `begin` and `end` replaced by `body` (a line of its own)."""
    before, rest = text.split(begin, 1)
    _, after = rest.split(end, 1)
    return f"{before}{begin}\n{body}\n{end}{after}"


def write_or_check(page: Path, fresh: str, description: str, argv: list[str] | None = None) -> int:
    """Write `fresh` to `page` where it differs; with --check, write nothing and exit 1 when it differs."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale, writing nothing")
    args = parser.parse_args(argv)
    current = page.read_text(encoding="utf-8") if page.exists() else None
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    if args.check:
        if current != fresh:
            print(f"{name} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    if current != fresh:
        page.write_text(fresh, encoding="utf-8")
        print(f"wrote {name}")
    return 0
