"""Write the table of verification rules into docs/rules.md from the registry (`specaccept_cli.rule.registry`).

Only the part between the page's markers is generated; the prose around it is written by hand. Nothing in
the table is typed twice, so it cannot drift from the code; `tests/rule/test_rules_doc.py` fails when the
committed page differs from what this writes.

    python scripts/rules_table.py            # rewrite the table in docs/rules.md
    python scripts/rules_table.py --check    # exit 1 when the table is stale
"""

from __future__ import annotations

import sys

from generated import ROOT, with_block, write_or_check  # scripts/generated.py

PAGE = ROOT / "docs" / "rules.md"
START = "<!-- rules-table:start (scripts/rules_table.py writes this part from the registry) -->"
END = "<!-- rules-table:end -->"

MODELS = {
    "chain": "(1 - a^(k+1)) / (1 - a)",
    "at-least-chain": "at least (1 - a^(k+1)) / (1 - a)",
    "tree": "1 + c_1 + c_1 c_2 + ... from per-depth rates",
}


def _code(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{name}`" for name in names) or "-"


def table() -> str:
    """The markdown table of every rule: name and aliases, fields, test, losslessness, model, engines."""
    sys.path.insert(0, str(ROOT))
    from specaccept_cli.rule.registry import RULES

    lines = [
        "| rule (aliases) | kind | a step carries | kept iff | lossless | expected tokens per pass | engines |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        carries = _code(rule.fields)
        if rule.kind == "tree":
            carries = f"`nodes[]`: `parent`, {carries}"
        if rule.optional:
            carries += f"; optional {_code(rule.optional)}"
        if rule.ignored:
            carries += f"; ignored {_code(rule.ignored)}"
        if rule.params:
            parts = [f"`{p.name}`" + ("" if p.default is None else f" (default {p.default:g})") for p in rule.params]
            carries += "; per step " + ", ".join(parts)
        lossless = {"always": "yes", "never": "no", "when": "when"}[rule.lossless] + f": {rule.lossless_when}"
        engines = "; ".join(f"{engine.name}: `{engine.source}`" for engine in rule.engines)
        name = f"`{rule.name}`" + (f" ({_code(rule.aliases)})" if rule.aliases else "")
        cells = [name, rule.kind, carries, rule.test, lossless, MODELS[rule.model], engines]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def page_with_table(text: str) -> str:
    """The page's text with the part between the markers replaced by the table of today."""
    return with_block(text, START, END, table())


def main(argv: list[str] | None = None) -> int:
    return write_or_check(PAGE, page_with_table(PAGE.read_text(encoding="utf-8")), __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
