"""`--summary-out`, `diff` and `merge` (specaccept_cli/cli/summaries.py): files, messages, exit codes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    FIRST_EXAMPLE,
    audit_json,
    invoke,
    save,
    simulated,
)


@pytest.mark.parametrize("output", ["table", "json", "markdown", "jsonl", "csv"])
def test_summary_out_in_every_mode(hand_log: Path, tmp_path: Path, output: str) -> None:
    target = tmp_path / "out" / "summary.json"
    target.parent.mkdir()
    result = invoke("audit", str(hand_log), "-o", output, "--summary-out", str(target))
    assert result.exit_code == 0, result.stderr
    expected = orjson.loads(invoke("audit", str(hand_log), "-o", "json").stdout)
    assert orjson.loads(target.read_bytes()) == expected
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]  # no temporary file left behind


def test_summary_out_replaces_and_gzips(hand_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "summary.json.gz"
    target.write_bytes(b"old")
    assert invoke("audit", str(hand_log), "-o", "json", "--summary-out", str(target)).exit_code == 0
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    assert invoke("diff", str(target), str(target)).exit_code == 0  # baselines may be gzip-compressed


def test_summary_out_to_a_missing_directory_is_one_line(hand_log: Path, tmp_path: Path) -> None:
    result = invoke("audit", str(hand_log), "--summary-out", str(tmp_path / "no" / "such.json"))
    assert result.exit_code == 2
    assert result.stderr.startswith("specaccept: cannot write ")
    assert len(result.stderr.splitlines()) == 1


def test_a_summary_file_alone_is_a_baseline(hand_log: Path, tmp_path: Path) -> None:
    """Only the saved state is needed: strip every derived key and the comparison is the same."""
    full = tmp_path / "full.json"
    invoke("audit", str(hand_log), "--summary-out", str(full))
    data = orjson.loads(full.read_bytes())
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps({"schema": data["schema"], "state": data["state"]}))
    current = save(simulated(50, 0.7, seed=1), tmp_path / "current.json")
    a = orjson.loads(invoke("diff", str(full), str(current), "-o", "json").stdout)
    b = orjson.loads(invoke("diff", str(bare), str(current), "-o", "json").stdout)
    assert a["metrics"] == b["metrics"]
    assert a["metrics"][0]["baseline_standard_error"] is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file or directory"),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[3, 0, 1e30]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "not a usable summary",
        ),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[3, 0, 1]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 1000000000000000000000000000, "sampled_tokens": 0}}',
            "counters out of range",
        ),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[3, 0, 4611686018427387904], '
            b'[3, 0, 4611686018427387904]], "passing_tokens": 0, "threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "not a usable summary: ",  # then the words of the error that stopped it
        ),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[100000, 0, 1]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "implausible draft length 100000",
        ),
        (b"{not json", "not a JSON summary"),
        (b"[1, 2]", "not a specaccept.summary/1 object (a JSON list)"),
        (b'{"schema": "other/1"}', "not a specaccept.summary/1 object (schema: 'other/1')"),
        (b'{"schema": "specaccept.summary/1", "state": {}}', "summary state is incomplete"),
        (
            b'{"schema": "specaccept.summary/1", "state": {"joint_counts": [[2, 3, 1]], "passing_tokens": 0, '
            b'"threshold_sum_fixed": 0, "sampled_tokens": 0}}',
            "impossible",
        ),
    ],
)
@pytest.mark.parametrize("side", ["baseline", "current"])
def test_diff_rejects_what_is_not_a_summary(tmp_path: Path, content: bytes | None, message: str, side: str) -> None:
    good = save(simulated(20, 0.7, seed=1), tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_bytes(content)
    args = [str(bad), str(good)] if side == "baseline" else [str(good), str(bad)]
    for command in (["diff", *args], ["merge", str(good), str(bad)]):
        result = invoke(*command)
        assert result.exit_code == 2
        assert result.stderr.startswith(f"specaccept: {bad}: ")
        assert message in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_audit_with_a_bad_baseline_fails_before_reading_logs(tmp_path: Path) -> None:
    result = invoke("audit", str(tmp_path / "never-read.jsonl"), "--baseline", str(tmp_path / "missing.json"))
    assert result.exit_code == 2
    assert "missing.json: cannot read" in result.stderr


def test_diff_outputs(tmp_path: Path) -> None:
    a = save(simulated(2000, 0.8, seed=1), tmp_path / "a.json")
    b = save(simulated(2000, 0.8, seed=2), tmp_path / "b.json")
    table = invoke("diff", str(a), str(b))
    assert table.exit_code == 0
    assert "Baseline comparison" in table.stdout and "tokens per pass" in table.stdout
    markdown = invoke("diff", str(a), str(b), "-o", "markdown").stdout
    assert markdown.startswith("### Baseline comparison\n\n| metric | baseline | current | change | z | p | verdict |")
    data = orjson.loads(invoke("diff", str(a), str(b), "-o", "json", "--max-drop", "0").stdout)
    assert data["schema"] == "specaccept.comparison/1"
    assert data["max_drop"] == 0.0 and data["significance"] == 0.01
    assert data["baseline_file"] == str(a)


def test_merge_refuses_to_mix_grouped_and_plain_summaries(tmp_path: Path) -> None:
    a = audit_json([FIRST_EXAMPLE], tmp_path, "a")
    (tmp_path / "grouped.json").write_bytes(orjson.dumps({**a, "group_by": "g", "groups": {"x": a}}))
    (tmp_path / "plain.json").write_bytes(orjson.dumps(a))
    result = invoke("merge", str(tmp_path / "grouped.json"), str(tmp_path / "plain.json"))
    assert result.exit_code == 2
    assert "plain.json: has no 'groups'" in result.stderr
    (tmp_path / "broken.json").write_bytes(orjson.dumps({**a, "group_by": "g", "groups": {"x": [1]}}))
    result = invoke("merge", str(tmp_path / "broken.json"))
    assert result.exit_code == 2
    assert "broken.json: not a usable summary: not a specaccept.summary/1 object (a JSON list)" in result.stderr
    (tmp_path / "other.json").write_bytes(orjson.dumps({**a, "group_by": "h", "groups": {"x": a}}))
    result = invoke("merge", str(tmp_path / "grouped.json"), str(tmp_path / "other.json"))
    assert result.exit_code == 2
    assert "other.json: cannot add summaries grouped by different fields ('g', 'h')" in result.stderr


def test_merge_needs_at_least_one_file() -> None:
    assert invoke("merge").exit_code == 2


def test_merge_refuses_shards_audited_differently(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    assert (
        invoke("simulate", "--runs", "300", "--alpha", "0.7", "--k", "4", "--seed", "2", "-o", str(path)).exit_code == 0
    )
    plain, sampled = tmp_path / "plain.json", tmp_path / "sampled.json"
    assert invoke("audit", str(path), "-o", "json", "--summary-out", str(plain)).exit_code == 0
    assert invoke("audit", str(path), "-o", "json", "--check-sampler", "--summary-out", str(sampled)).exit_code == 0
    result = invoke("merge", str(sampled), str(plain))
    assert result.exit_code == 2
    assert f"{plain}: has no sampler tally while {sampled} has" in result.stderr
    broken = orjson.loads(sampled.read_bytes())
    broken["state"]["sampler"]["significance"] = 2.0
    (tmp_path / "broken.json").write_bytes(orjson.dumps(broken))
    result = invoke("merge", str(tmp_path / "broken.json"))
    assert result.exit_code == 2 and "significance outside (0, 1)" in result.stderr


def test_the_same_system_twice_passes_and_a_5_percent_drop_fails(tmp_path: Path) -> None:
    baseline = save(simulated(100_000, 0.78, seed=1), tmp_path / "main.json")
    same = save(simulated(100_000, 0.78, seed=2), tmp_path / "same.json")
    worse = save(simulated(100_000, 0.78 * 0.95, seed=3), tmp_path / "worse.json")

    result = invoke("diff", str(baseline), str(same), "-o", "json")
    assert result.exit_code == 0, result.stderr
    verdicts = {row["metric"]: row["verdict"] for row in orjson.loads(result.stdout)["metrics"]}
    assert verdicts == {"alpha": "ok", "tokens_per_pass": "ok"}

    result = invoke("diff", str(baseline), str(worse), "-o", "json")
    assert result.exit_code == 1
    data = orjson.loads(result.stdout)
    alpha = data["metrics"][0]
    assert alpha["metric"] == "alpha" and alpha["verdict"] == "regressed"
    assert alpha["change"] == pytest.approx(-0.05, abs=0.01)
    assert alpha["p"] < 1e-6
    assert data["regressed"] is True
    assert "alpha regressed" in result.stderr


def test_merge_of_saved_shards_is_the_audit_of_the_whole(tmp_path: Path) -> None:
    """The wiring of the property in summary/test_files.py: --summary-out (gzip too), merge, merge -o."""
    log = invoke("simulate", "--runs", "120", "--alpha", "0.7", "--k", "0-6", "--seed", "5").stdout_bytes
    rows = log.splitlines(keepends=True)
    whole_bytes = invoke("audit", "-", "-o", "json", input=log).stdout_bytes
    shards = []
    for index, (start, end) in enumerate([(0, 0), (0, 37), (37, 100), (100, 120)]):
        path = tmp_path / f"part-{index}.jsonl"
        path.write_bytes(b"".join(rows[start:end]))
        summary = tmp_path / (f"part-{index}.json" + (".gz" if index % 2 else ""))
        assert invoke("audit", str(path), "-o", "csv", "--summary-out", str(summary)).exit_code == 0
        shards.append(str(summary))
    merged = invoke("merge", *shards)
    assert merged.exit_code == 0, merged.stderr
    # Windows of runs follow each input's own order (time windows merge exactly: summary/test_windows.py).
    assert without_run_windows(merged.stdout_bytes) == without_run_windows(whole_bytes)  # key order included
    out = tmp_path / "all.json"
    assert invoke("merge", *shards, "-o", str(out)).exit_code == 0
    assert out.read_bytes() == merged.stdout_bytes


def without_run_windows(data: bytes) -> bytes:
    summary = orjson.loads(data)
    for key in ("windows_by", "windows", "drift"):
        summary.pop(key)
    del summary["state"]["windows"]
    return orjson.dumps(summary)
