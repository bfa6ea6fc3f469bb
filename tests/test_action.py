"""The GitHub Action (action.yml, scripts/github-action.sh), the example workflow and the pre-commit hook.

The action's shell step runs here as the runner would run it: bash, the inputs as INPUT_* variables,
a fake GITHUB_STEP_SUMMARY and GITHUB_OUTPUT. The YAML is checked against the schemas GitHub's
files follow (check-jsonschema's vendored copies of SchemaStore's) and pre-commit's own manifest check.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from tests.helpers import invoke

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
SCRIPT = ROOT / "scripts" / "github-action.sh"
WORKFLOW = ROOT / "examples" / "github-workflow.yml"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
BIN = str(Path(sys.executable).parent)  # where this environment's specaccept lives


def run_action(directory: Path, **inputs: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str], str]:
    """The action's audit step in DIRECTORY: (the process, what it wrote to GITHUB_OUTPUT, to the step summary)."""
    outputs, step_summary = directory / "github-output", directory / "step-summary.md"
    outputs.write_text("")
    step_summary.write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "SPECACCEPT_BIN": BIN,
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(step_summary),
        "SOURCE_DATE_EPOCH": "1764460800",
        **{"INPUT_" + name.upper(): value for name, value in inputs.items()},
    }
    process = subprocess.run(
        ["bash", str(SCRIPT)], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    return process, written, step_summary.read_text()


def simulate(path: Path, alpha: float, seed: int, runs: int = 3000) -> Path:
    args = ("simulate", "--runs", str(runs), "--alpha", str(alpha), "--k", "1-8", "--seed", str(seed), "-o", str(path))
    assert invoke(*args).exit_code == 0
    return path


def test_first_run_audits_gates_and_warns_that_there_is_no_baseline_yet(tmp_path: Path) -> None:
    simulate(tmp_path / "day-1.jsonl", 0.8, seed=1)
    process, outputs, step_summary = run_action(
        tmp_path, paths="day-*.jsonl", min_alpha="0.7", baseline="baselines/main.json", summary_path="pr.json"
    )
    assert process.returncode == 0, process.stderr
    assert "::warning title=specaccept baseline::no baseline at baselines/main.json yet" in process.stdout
    assert step_summary.startswith("> **specaccept**: no baseline at baselines/main.json yet")
    assert "### Acceptance" in step_summary and "| --min-alpha | 0.7 |" in step_summary
    summary = orjson.loads((tmp_path / "pr.json").read_bytes())
    assert outputs == {
        "exit-code": "0",
        "baseline-found": "false",
        "summary-path": "pr.json",
        "runs": "3000",
        "alpha": str(summary["alpha"]),
        "tokens-per-pass": str(summary["tokens_per_pass"]),
    }
    assert [item["name"] for item in summary["provenance"]["inputs"]] == ["day-1.jsonl"]  # the glob, expanded


def test_a_regression_from_the_baseline_fails_the_step_with_annotations(tmp_path: Path) -> None:
    simulate(tmp_path / "main.jsonl", 0.8, seed=1)
    simulate(tmp_path / "pr.jsonl", 0.7, seed=2)
    assert invoke("audit", str(tmp_path / "main.jsonl"), "--summary-out", str(tmp_path / "main.json")).exit_code == 0
    process, outputs, step_summary = run_action(tmp_path, paths="pr.jsonl", baseline="main.json", max_drop="0.02")
    assert process.returncode == 1
    assert "::error title=specaccept regression::alpha regressed" in process.stderr
    assert "### Baseline comparison" in step_summary
    assert outputs["exit-code"] == "1" and outputs["baseline-found"] == "true"
    assert outputs["summary-path"] == "specaccept-summary.json"  # written, to be kept as an artifact


def test_matrix_shards_merge_gate_and_compare(tmp_path: Path) -> None:
    """Each shard through the action (into folders it makes), then the merge job: the artifacts' layout, globbed."""
    for shard in range(3):
        simulate(tmp_path / f"acceptance-{shard}.jsonl", 0.78, seed=shard, runs=1000)
        summary_path = f"shards/acceptance-shard-{shard}/shard-{shard}.json"
        process, _, _ = run_action(tmp_path, paths=f"acceptance-{shard}.jsonl", summary_path=summary_path)
        assert process.returncode == 0, process.stderr
    simulate(tmp_path / "main.jsonl", 0.78, seed=9)
    assert (
        invoke("audit", str(tmp_path / "main.jsonl"), "--summary-out", str(tmp_path / "baseline.json")).exit_code == 0
    )
    merge = {
        "summaries": "shards/*/*.json",
        "min_alpha": "0.6",
        "baseline": "baseline.json",
        "summary_path": "all.json",
    }
    process, outputs, step_summary = run_action(tmp_path, **merge)
    assert process.returncode == 0, process.stderr
    assert outputs["runs"] == "3000" and outputs["baseline-found"] == "true"
    assert "| --min-alpha | 0.6 |" in step_summary and "### Baseline comparison" in step_summary
    merged = orjson.loads((tmp_path / "all.json").read_bytes())["provenance"]
    assert [item["name"] for item in merged["inputs"]] == [f"acceptance-{shard}.jsonl" for shard in range(3)]
    # A shard downloaded twice (two artifacts of one shard) is refused, not counted twice.
    (tmp_path / "shards" / "again").mkdir()  # as download-artifact would lay out a second copy
    (tmp_path / "shards" / "again" / "shard-0.json").write_bytes(
        (tmp_path / "shards" / "acceptance-shard-0" / "shard-0.json").read_bytes()
    )
    process, outputs, _ = run_action(tmp_path, **merge)
    assert process.returncode == 2 and outputs["exit-code"] == "2"
    assert "its runs would count twice" in process.stderr


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "nothing to audit: give paths (logs) or summaries"),
        ({"paths": "a.jsonl", "summaries": "a.json"}, "give either paths (logs to audit) or summaries"),
        ({"summaries": "a.json", "p_field": "spec.p"}, "p-field applies to logs (paths)"),
    ],
)
def test_misuse_is_an_annotation_and_exit_2(tmp_path: Path, inputs: dict[str, str], message: str) -> None:
    process, outputs, _ = run_action(tmp_path, **inputs)
    assert process.returncode == 2
    assert f"::error title=specaccept action::{message}" in process.stdout
    assert outputs == {"exit-code": "2"}


def test_inputs_are_values_never_shell(tmp_path: Path) -> None:
    process, _, _ = run_action(tmp_path, paths="$(touch${IFS}pwned) `touch pwned`", baseline="x\n::error::forged")
    assert process.returncode == 2  # no such input files
    assert not (tmp_path / "pwned").exists()
    assert "x%0A::error::forged" in process.stdout  # the warning naming the baseline cannot start a command
    assert not any(line.startswith("::error::forged") for line in process.stdout.splitlines())


def _action() -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load(ACTION.read_text())
    return data


def test_the_action_passes_every_input_to_the_script_and_splices_none_into_shell() -> None:
    action = _action()
    steps = action["runs"]["steps"]  # type: ignore[index]
    audit = next(step for step in steps if step.get("id") == "audit")
    assert audit["run"] == 'bash "$GITHUB_ACTION_PATH/scripts/github-action.sh"'
    passed = {name for name in audit["env"] if name.startswith("INPUT_")}
    read = set(re.findall(r"\bINPUT_[A-Z_]+", SCRIPT.read_text()))
    declared = {"INPUT_" + name.upper().replace("-", "_") for name in action["inputs"]}  # type: ignore[attr-defined]
    assert passed == read == declared - {"INPUT_ARTIFACT_NAME", "INPUT_PYTHON_VERSION"}  # those two are the action's
    for name, value in audit["env"].items():
        if name.startswith("INPUT_"):
            assert value == "${{ inputs." + name[6:].lower().replace("_", "-") + " }}"
    for step in steps:
        assert "${{" not in step.get("run", ""), f"{step['name']}: an expression spliced into a script"
    install = next(step for step in steps if "pip install" in step.get("run", ""))
    assert install["env"]["SPECACCEPT_SOURCE"] == "${{ github.action_path }}"  # the action's own checkout
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"].startswith("always()")  # a failing run's summary is kept too


def _check_jsonschema(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_action_and_the_workflow_follow_the_actions_schemas(tmp_path: Path) -> None:
    for schema, path in (("vendor.github-actions", ACTION), ("vendor.github-workflows", WORKFLOW)):
        result = _check_jsonschema(schema, path)
        assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "action.yml"  # the validator does check: a composite run step needs a shell
    broken.write_text(ACTION.read_text().replace("      shell: bash\n", "", 1))
    assert _check_jsonschema("vendor.github-actions", broken).returncode == 1


def test_the_example_workflow_uses_the_action_bootstraps_the_baseline_and_merges_shards() -> None:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    scripts = [step.get("run", "") for job in jobs.values() for step in job["steps"]]
    assert not any("pip install" in script for script in scripts)  # the action installs specaccept itself
    shard_steps, merge_steps = jobs["shard"]["steps"], jobs["acceptance"]["steps"]
    assert jobs["acceptance"]["needs"] == "shard" and len(jobs["shard"]["strategy"]["matrix"]["shard"]) > 1
    shard_audit = next(step for step in shard_steps if str(step.get("uses", "")).endswith("/specaccept@main"))
    download = next(step for step in merge_steps if str(step.get("uses", "")).startswith("actions/download-artifact@"))
    artifact = shard_audit["with"]["artifact-name"].replace("${{ matrix.shard }}", "*")
    assert download["with"]["pattern"] == artifact
    merge = next(step for step in merge_steps if str(step.get("uses", "")).endswith("/specaccept@main"))
    assert merge["with"]["summaries"] == f"{download['with']['path']}/*/*.json"
    restore = next(step for step in merge_steps if str(step.get("uses", "")).startswith("actions/cache/restore@"))
    save = next(step for step in merge_steps if str(step.get("uses", "")).startswith("actions/cache/save@"))
    assert restore["with"]["path"] == save["with"]["path"] == merge["with"]["baseline"]
    assert restore["with"]["restore-keys"] and save["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert "refs/heads/main" in save["if"]
    # The stand-in benchmark writes logs the shard step then audits.
    stand_in = next(step for step in shard_steps if step.get("name") == "Acceptance logs")
    assert "acceptance-{os.environ['SHARD']}.jsonl" in stand_in["run"]
    assert shard_audit["with"]["paths"] == "acceptance-${{ matrix.shard }}.jsonl"


def test_the_pre_commit_manifest_is_valid() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(HOOKS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_pre_commit_hook_runs_as_pre_commit_runs_it(tmp_path: Path) -> None:
    """The entry, the user's args, then the staged files that `files` matches: exit 1 blocks the commit."""
    (hook,) = yaml.safe_load(HOOKS.read_text())
    assert hook["language"] == "python"  # pre-commit installs this repository (its pyproject) into a venv
    staged = ["logs/a.jsonl", "logs/b.jsonl.gz", "logs/c.parquet", "README.md", "logs/notes.json"]
    matched = [name for name in staged if re.search(hook["files"], name)]
    assert matched == ["logs/a.jsonl", "logs/b.jsonl.gz", "logs/c.parquet"]
    (tmp_path / "logs").mkdir()
    for name, seed in zip(matched, range(3)):
        simulate(tmp_path / name, 0.8, seed=seed, runs=500)
    entry = [os.path.join(BIN, hook["entry"].split()[0]), *hook["entry"].split()[1:]]

    def commit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*entry, *args, *matched], cwd=tmp_path, capture_output=True, text=True, check=False)

    passed = commit("--min-alpha", "0.7")
    assert passed.returncode == 0, passed.stderr
    blocked = commit("--min-alpha", "0.9")
    assert blocked.returncode == 1
    assert "gate failed: alpha = " in blocked.stderr
