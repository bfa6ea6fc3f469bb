"""docs/rules.md: its table is what scripts/rules_table.py writes from the registry, and it names every rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from specaccept_cli.rule.registry import RULES
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")


def test_the_rules_table_is_current() -> None:
    assert load_script("rules_table").page_with_table(PAGE) == PAGE, "docs/rules.md is stale: make docs"


def test_the_table_has_a_row_per_rule_with_its_fields_and_engine_files() -> None:
    writer = load_script("rules_table")
    table = PAGE.split(writer.START, 1)[1].split(writer.END, 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [rule.name for rule in RULES]
    for rule, row in zip(RULES, rows):
        assert all(f"`{name}`" in row for name in (*rule.fields, *rule.aliases)), rule.name
        assert all(f"`{engine.source}`" in row for engine in rule.engines), rule.name


def test_the_row_contract_names_every_rule_and_its_fields() -> None:
    contract = PAGE.split("## The row contract", 1)[1].split("\n## ", 1)[0]
    for rule in RULES:
        assert f"`{rule.name}`" in contract, rule.name
        assert all(f"`{name}`" in contract for name in rule.fields), rule.name
    assert "0-based" in contract and "`parent`" in contract and "-1" in contract


def test_the_check_mode_fails_on_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = load_script("rules_table")
    stale = tmp_path / "rules.md"
    stale.write_text(PAGE.replace("| `standard` (`seed`", "| `seed-rule` (`seed`"), encoding="utf-8")
    monkeypatch.setattr(writer, "PAGE", stale)
    assert writer.main(["--check"]) == 1
    assert writer.main([]) == 0
    assert writer.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == PAGE


def test_the_pages_example_rows_give_the_lengths_it_states() -> None:
    import json
    import math

    from specaccept_cli.rule.registry import rule_named
    from specaccept_cli.rule.scalar import accept_prefix

    block = PAGE.split("```json\n", 1)[1].split("```", 1)[0]
    chain, tree = (json.loads(line) for line in block.splitlines())
    rule = rule_named(chain.pop("rule"))
    fields = {name: [math.nan if value is None else value for value in values] for name, values in chain.items()}
    assert rule.chain_scalar is not None and rule.chain_scalar(fields, {}) == 2
    assert accept_prefix(fields["p"], fields["q"], fields["r"]) == 0  # the seed's chain rule keeps none
    rule = rule_named(tree.pop("rule"))
    nodes = tree["nodes"]
    parent = [node["parent"] for node in nodes]
    node_fields = {name: [node[name] for node in nodes] for name in rule.fields}
    assert rule.tree_scalar is not None and rule.tree_scalar(parent, node_fields, {}) == 2
    assert "keeps 2 tokens" in PAGE and "accepted depth 2" in PAGE
