"""Tables fit the width they get: the baseline comparison keeps every column and every word whole at 120, 80
and 60 columns (rows instead of columns when a row per metric is too wide), and never cuts a number."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from tests.helpers import TESTS, invoke, invoke_env

EXAMPLES = TESTS.parent / "examples"
WORDS = ("metric", "baseline", "current", "change", "z", "p", "Holm", "detectable", "verdict")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """A log that regressed against a baseline, and the comparison as -o json gives it."""
    baseline = tmp_path_factory.mktemp("widths") / "baseline.json"
    made = invoke("audit", str(EXAMPLES / "serving-logs.jsonl.gz"), "--summary-out", str(baseline), "-o", "json")
    assert made.exit_code == 0, made.stderr
    current = invoke("audit", str(EXAMPLES / "server-reported.jsonl.gz"), "--baseline", str(baseline), "-o", "json")
    assert current.exit_code == 1  # it regressed
    return baseline, orjson.loads(current.stdout)["comparison"]


def _section(out: str) -> str:
    return out.split("Baseline comparison")[1].split("z = standard errors")[0]


@pytest.mark.parametrize("columns", [120, 80, 60])
def test_the_comparison_keeps_every_column_and_word_whole(
    compared: tuple[Path, dict[str, object]], columns: int
) -> None:
    baseline, comparison = compared
    out = invoke_env(
        {"COLUMNS": str(columns)},
        "audit",
        str(EXAMPLES / "server-reported.jsonl.gz"),
        "--baseline",
        str(baseline),
        "--max-rows",
        "0",
    ).stdout
    assert all(len(line) <= columns for line in out.splitlines()), columns
    table = _section(out)
    assert "…" not in table
    tokens = set(re.findall(r"[^\s│┃]+", table))  # every word and number drawn, each as a whole
    for word in WORDS[1:] if columns < 120 else WORDS:  # a column per metric is headed by the metric's name
        assert word in tokens, (columns, word)
    metrics = comparison["metrics"]
    assert isinstance(metrics, list) and len(metrics) == 2
    for row in metrics:
        for value in (
            f"{row['baseline']:.4f}",
            f"{row['current']:.4f}",
            f"{row['change']:+.2%}",
            f"{row['z']:+.2f}",
            f"{row['p']:.3g}",
            f"{row['p_adjusted']:.3g}",
            f"{row['detectable_drop']:.2%}",
            "(underpowered)",
            row["verdict"],
        ):
            shown = value.lstrip("+")  # a positive change or z may be shown without its sign
            assert value in tokens or shown in tokens, (columns, value, table)
    assert "tokens" in tokens and "pass" in tokens
    if columns >= 120:  # wide enough: one row per metric
        assert re.search(r"│ alpha +│", table)
    else:  # rows instead of columns: one row per figure, one column per metric
        assert re.search(r"│ change +│ +-?[0-9.]+% +│ +-?[0-9.]+% +│", table), table
