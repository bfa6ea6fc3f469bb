"""Which rule did the server run? Logs built here by hand: (p, q, r) rows whose reported counts follow `r <= p`
(with a greedy draft, and with a sampled one) or a strict `<`, named with their verdict (docs/server-audit.md) in
`-o json` (`server_rule`) and on the terminal, with the lines only that rule explains as evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.helpers import invoke, invoke_env


def first_failure(passes: list[bool]) -> int:
    return next((index for index, passed in enumerate(passes) if not passed), len(passes))


def server_log(path: Path, kind: str, runs: int = 400, seed: int = 11) -> Path:
    """Rows as a server under `kind` decided them: its count is `reported`."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(runs):
        k = int(rng.integers(1, 6))
        p = rng.random(k).tolist()
        # a greedy draft logs its softmax probability of the argmax it took (at least 1/2 here); a sampled one any q
        q = (0.5 + 0.5 * rng.random(k) if kind == "greedy-draft greedy" else 1.0 - rng.random(k)).tolist()
        thresholds = [min(1.0, a / b) for a, b in zip(p, q, strict=True)]
        if kind == "strict":  # coarse draws: r sits on min(1, p / q) now and then
            r = [t if rng.random() < 0.3 else float(rng.random()) for t in thresholds]
            reported = first_failure([x < t for x, t in zip(r, thresholds, strict=True)])
        else:
            r = rng.random(k).tolist()
            reported = first_failure([x <= a for x, a in zip(r, p, strict=True)])
        rows.append({"request_id": f"req-{index % 20}", "p": p, "q": q, "r": r, "reported": reported})
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def lone_lines(path: Path, kind: str) -> list[int]:
    """The lines whose reported count only the server's rule reproduces (of the four the audit tries)."""
    lines = []
    for line, row in enumerate(map(orjson.loads, path.read_bytes().splitlines()), start=1):
        p, q, r, reported = row["p"], row["q"], row["r"], row["reported"]
        thresholds = [min(1.0, a / b) for a, b in zip(p, q, strict=True)]
        standard = first_failure([x <= t for x, t in zip(r, thresholds, strict=True)])
        if reported == standard:
            continue
        strict = first_failure([x < t for x, t in zip(r, thresholds, strict=True)])
        greedy = first_failure([x <= a for x, a in zip(r, p, strict=True)])
        passes = sum(x <= t for x, t in zip(r, thresholds, strict=True))
        fits = {"strict": strict == reported, "greedy-draft": greedy == reported}
        fits["others"] = reported in (passes, standard + 1)  # no-prefix-break, bonus-counted
        if fits["strict" if kind == "strict" else "greedy-draft"] and sum(fits.values()) == 1:
            lines.append(line)
    return lines


@pytest.mark.parametrize(
    ("kind", "rule", "verdict"),
    [
        ("greedy-draft greedy", "greedy-draft", "design"),
        ("greedy-draft sampled", "greedy-draft", "design"),
        ("strict", "strict-inequality", "lossy"),
    ],
)
def test_the_rule_the_server_ran_is_named_with_its_verdict_and_evidence(
    tmp_path: Path, kind: str, rule: str, verdict: str
) -> None:
    log = server_log(tmp_path / "log.jsonl", kind)
    result = invoke("audit", str(log), "--reported-field", "reported", "-o", "json")
    assert result.exit_code in (0, 1), result.stderr
    named: dict[str, Any] = orjson.loads(result.stdout_bytes)["server_rule"]
    assert (named["rule"], named["verdict"]) == (rule, verdict)
    lone = lone_lines(log, kind)
    assert named["alone"] == len(lone) > 5
    assert [item["line"] for item in named["evidence"]] == lone[:5]  # the first runs only it explains
    terminal = invoke_env({"COLUMNS": "250"}, "audit", str(log), "--reported-field", "reported")
    assert terminal.exit_code in (0, 1), terminal.stderr
    shown = " ".join((terminal.stdout + terminal.stderr).split())
    assert rule in shown and named["in_short"] in shown
    # the same from two halves' saved summaries, merged
    rows = log.read_bytes().splitlines(keepends=True)
    for index, part in enumerate((rows[:150], rows[150:])):
        (tmp_path / f"{index}.jsonl").write_bytes(b"".join(part))
        invoke(
            "audit",
            str(tmp_path / f"{index}.jsonl"),
            "--reported-field",
            "reported",
            "--summary-out",
            str(tmp_path / f"{index}.json"),
            "-q",
        )
    merged = orjson.loads(invoke("merge", str(tmp_path / "0.json"), str(tmp_path / "1.json")).stdout_bytes)
    assert merged["server_rule"]["alone"] == named["alone"]
    assert [item["line"] for item in merged["server_rule"]["evidence"]] == lone[:5]
