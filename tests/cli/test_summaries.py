"""`--summary-out`, `diff` and `merge` (specaccept_cli/cli/summaries.py): files, messages, exit codes."""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path

import orjson
import pytest

from tests.helpers import (
    FIRST_EXAMPLE,
    audit_json,
    invoke,
    invoke_env,
    save,
    simulated,
    without_provenance,
    write_jsonl,
)


@pytest.mark.parametrize("output", ["table", "json", "markdown", "jsonl", "csv"])
def test_summary_out_in_every_mode(hand_log: Path, tmp_path: Path, output: str) -> None:
    target = tmp_path / "out" / "summary.json"
    target.parent.mkdir()
    result = invoke("audit", str(hand_log), "-o", output, "--summary-out", str(target))
    assert result.exit_code == 0, result.stderr
    expected = orjson.loads(invoke("audit", str(hand_log), "-o", "json").stdout)
    assert expected.pop("verdict")  # the checks' verdict: -o json shows it, a saved summary does not keep it
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
        (b"[1, 2]", "not a specaccept.summary/2 object (a JSON list)"),
        (b'{"schema": "other/1"}', "not a specaccept.summary/2 object (schema: 'other/1')"),
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
    header = "| metric | baseline | current | change | z | p | Holm p | detectable | verdict |"
    assert markdown.startswith("### Baseline comparison\n\n" + header)
    data = orjson.loads(invoke("diff", str(a), str(b), "-o", "json", "--max-drop", "0").stdout)
    assert data["schema"] == "specaccept.comparison/1"
    assert data["max_drop"] == 0.0 and data["significance"] == 0.01
    assert data["baseline_file"] == str(a)


def test_merge_refuses_to_mix_grouped_and_plain_summaries(tmp_path: Path) -> None:
    a = audit_json([FIRST_EXAMPLE], tmp_path, "a")
    del a["provenance"]  # as written before summaries recorded their inputs: copies of one file are not caught
    (tmp_path / "grouped.json").write_bytes(orjson.dumps({**a, "group_by": "g", "groups": {"x": a}}))
    (tmp_path / "plain.json").write_bytes(orjson.dumps(a))
    result = invoke("merge", str(tmp_path / "grouped.json"), str(tmp_path / "plain.json"))
    assert result.exit_code == 2
    assert "plain.json: has no 'groups'" in result.stderr
    (tmp_path / "broken.json").write_bytes(orjson.dumps({**a, "group_by": "g", "groups": {"x": [1]}}))
    result = invoke("merge", str(tmp_path / "broken.json"))
    assert result.exit_code == 2
    assert "broken.json: not a usable summary: not a specaccept.summary/2 object (a JSON list)" in result.stderr
    (tmp_path / "other.json").write_bytes(orjson.dumps({**a, "group_by": "h", "groups": {"x": a}}))
    result = invoke("merge", str(tmp_path / "grouped.json"), str(tmp_path / "other.json"))
    assert result.exit_code == 2
    assert "other.json: cannot add summaries grouped by different fields ('g', 'h')" in result.stderr


def test_merge_needs_at_least_one_file() -> None:
    assert invoke("merge").exit_code == 2


def test_merge_refuses_shards_audited_differently(tmp_path: Path) -> None:
    paths = [tmp_path / "x.jsonl", tmp_path / "y.jsonl"]
    for seed, path in enumerate(paths):
        simulate = ("simulate", "--runs", "300", "--alpha", "0.7", "--k", "4", "--seed", str(seed), "-o", str(path))
        assert invoke(*simulate).exit_code == 0
    plain, sampled = tmp_path / "plain.json", tmp_path / "sampled.json"
    assert invoke("audit", str(paths[0]), "-o", "json", "--summary-out", str(plain)).exit_code == 0
    assert invoke("audit", str(paths[1]), "-o", "json", "--check-sampler", "--summary-out", str(sampled)).exit_code == 0
    result = invoke("merge", str(sampled), str(plain))
    assert result.exit_code == 2
    assert f"{plain}: made with different settings (check_sampler False here, True in {sampled}; " in result.stderr
    # Summaries written before they recorded their settings: the missing tally still gives it away.
    for path in (plain, sampled):
        data = orjson.loads(path.read_bytes())
        del data["provenance"]
        path.write_bytes(orjson.dumps(data))
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
    # Byte for byte, key order included, but for what each was made of (stdin; four shard files), and windows
    # of runs, which follow each input's own order (time windows merge exactly: summary/test_windows.py).
    assert without_run_windows(without_provenance(merged.stdout_bytes)) == without_run_windows(
        without_provenance(whole_bytes)
    )
    out = tmp_path / "all.json"
    assert invoke("merge", *shards, "-o", str(out)).exit_code == 0
    assert out.read_bytes() == merged.stdout_bytes


def test_a_saved_summary_records_its_inputs_settings_version_and_time(
    hand_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib.metadata import version

    target = tmp_path / "summary.json"
    assert invoke("audit", str(hand_log), "--p-field", "p", "--summary-out", str(target)).exit_code == 0
    data = orjson.loads(target.read_bytes())
    assert list(data)[-2:] == ["provenance", "state"]  # appended: state stays last
    provenance = data["provenance"]
    assert provenance["specaccept"] == version("specaccept")
    assert provenance["created"] == "2025-11-30T00:00:00Z"  # SOURCE_DATE_EPOCH, pinned in conftest
    content = hand_log.read_bytes()
    digest = hashlib.sha256(b"%d\n" % len(content) + content).hexdigest()
    assert provenance["inputs"] == [{"name": str(hand_log), "bytes": len(content), "sample_sha256": digest}]
    assert provenance["settings"]["p_field"] == "p" and provenance["settings"]["on_error"] == "fail"
    # Unpinned, the time is now, in UTC.
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    stdin = orjson.loads(invoke("audit", "-", "-o", "json", input=content).stdout)["provenance"]
    created = datetime.datetime.strptime(stdin["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert abs((datetime.datetime.now(datetime.UTC) - created).total_seconds()) < 60
    assert stdin["inputs"] == [{"name": "<stdin>", "bytes": None, "sample_sha256": None}]


def test_merge_refuses_the_same_file_twice(tmp_path: Path) -> None:
    """Even a summary that recorded nothing of its inputs (stdin) is refused when given twice, or through a link."""
    log = invoke("simulate", "--runs", "50", "--alpha", "0.7", "--k", "4", "--seed", "1").stdout_bytes
    x = tmp_path / "x.json"
    assert invoke("audit", "-", "--summary-out", str(x), "-o", "csv", input=log).exit_code == 0
    (tmp_path / "link.json").symlink_to(x)
    for second, again in ((x, "again"), (tmp_path / "link.json", f"again (as {x})")):
        result = invoke("merge", str(x), str(second))
        assert result.exit_code == 2
        assert result.stderr == f"specaccept: {second}: given {again}: its runs would count twice\n"


def test_merge_refuses_two_summaries_of_the_same_input(tmp_path: Path) -> None:
    log = tmp_path / "day-1.jsonl"
    assert (
        invoke("simulate", "--runs", "300", "--alpha", "0.7", "--k", "4", "--seed", "2", "-o", str(log)).exit_code == 0
    )
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(log.read_bytes())
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for source, summary in ((log, first), (copy, second)):
        assert invoke("audit", str(source), "--summary-out", str(summary), "-o", "csv").exit_code == 0
    result = invoke("merge", str(first), str(second))
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: {second}: holds input '{copy}' (= '{log}') as {first} does (same size and content):"
        " its runs would count twice\n"
    )


def test_merge_refuses_summaries_made_with_different_options_and_says_which(tmp_path: Path) -> None:
    rows = [{**row, "spec": {"p": row["p"]}} for row in [FIRST_EXAMPLE, {"p": [0.5], "q": [0.5], "r": [0.2]}]]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(a, rows[:1])
    write_jsonl(b, rows[1:])
    invoke("audit", str(a), "--summary-out", str(tmp_path / "a.json"), "-o", "csv")
    invoke("audit", str(b), "--p-field", "spec.p", "--summary-out", str(tmp_path / "b.json"), "-o", "csv")
    result = invoke("merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert result.exit_code == 2
    assert result.stderr == (
        f"specaccept: {tmp_path / 'b.json'}: made with different settings (p_field 'spec.p' here, 'p' in "
        f"{tmp_path / 'a.json'}): summarise every shard the same way\n"
    )


def test_merge_o_takes_a_path_not_a_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shard = save(simulated(20, 0.7, seed=1), tmp_path / "a.json")
    monkeypatch.chdir(tmp_path)
    for name in ("json", "table", "markdown"):
        result = invoke("merge", str(shard), "-o", name)
        assert result.exit_code == 2
        assert f"'{name}' is an output format in other commands; here -o takes a path" in result.stderr
        assert f"./{name}" in result.stderr
        assert not (tmp_path / name).exists()
    assert invoke("merge", str(shard), "-o", "./json").exit_code == 0
    assert orjson.loads((tmp_path / "json").read_bytes())["runs"] == 20


def test_a_merged_summary_lists_every_input_and_cannot_be_merged_with_a_part_again(tmp_path: Path) -> None:
    paths = []
    for seed in (1, 2):
        log = tmp_path / f"shard-{seed}.jsonl"
        invoke("simulate", "--runs", "40", "--alpha", "0.7", "--k", "3", "--seed", str(seed), "-o", str(log))
        paths.append(tmp_path / f"shard-{seed}.json")
        assert invoke("audit", str(log), "--summary-out", str(paths[-1]), "-o", "csv").exit_code == 0
    merged = tmp_path / "all.json"
    assert invoke("merge", *map(str, paths), "-o", str(merged)).exit_code == 0
    provenance = orjson.loads(merged.read_bytes())["provenance"]
    assert [item["name"] for item in provenance["inputs"]] == [
        str(tmp_path / "shard-1.jsonl"),
        str(tmp_path / "shard-2.jsonl"),
    ]
    assert provenance["merged_from"] == list(map(str, paths))
    assert provenance["settings"] == orjson.loads(paths[0].read_bytes())["provenance"]["settings"]
    result = invoke("merge", str(merged), str(paths[1]))
    assert result.exit_code == 2 and "its runs would count twice" in result.stderr


def test_merge_gates_the_merged_total(tmp_path: Path) -> None:
    """Shards at alpha 0.9 and 0.5: each alone would pass or fail --min-alpha 0.7; the total decides."""
    shards = [
        save(simulated(4000, alpha, seed=seed), tmp_path / f"{seed}.json") for seed, alpha in ((1, 0.9), (2, 0.5))
    ]
    total = orjson.loads(invoke("merge", *map(str, shards)).stdout)["alpha"]
    assert 0.6 < total < 0.8
    passed = invoke_env({"GITHUB_STEP_SUMMARY": str(tmp_path / "steps.md")}, "merge", *map(str, shards),
                        "-o", str(tmp_path / "all.json"), "--min-alpha", "0.6", "--github")  # fmt: skip
    assert passed.exit_code == 0, passed.stderr
    assert "| --min-alpha | 0.6 |" in (tmp_path / "steps.md").read_text()
    failed = invoke("merge", *map(str, shards), "-o", str(tmp_path / "all.json"), "--min-alpha", "0.8", "--github")
    assert failed.exit_code == 1
    assert f"::error title=specaccept gate::alpha = {total:.6g} is below 0.8 (--min-alpha)" in failed.stderr
    assert (tmp_path / "all.json").exists()  # the summary is written before the gates conclude


def without_run_windows(data: bytes) -> bytes:
    summary = orjson.loads(data)
    for key in ("windows_by", "windows", "drift"):
        summary.pop(key)
    del summary["state"]["windows"]
    return orjson.dumps(summary)
