"""`--rule-field NAME`: the field naming a row's verification rule, for rows whose own `rule` field means
something else (a team, a routing rule). Every path reads it: the compiled and the pure JSONL readers, gzip,
stdin, `--jobs 2`, Parquet (a struct column), `report`; `--rule-field none` ignores every row's rule field."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specaccept_cli.read.jsonl import parse_block
from specaccept_cli.read.jsonl_fast import fast_batch
from specaccept_cli.rule.batch import FieldSpec
from tests.helpers import expected_accepted, invoke, per_run, random_rows, run_process
from tests.read.test_rule_rows import EVERY_RULES_SCHEMA, mixed_rows, records_without_source, write


def moved(rows: list[dict[str, object]], where: str = "meta.verifier") -> list[dict[str, object]]:
    """The rows with their rule moved to `where` and a `rule` field of their own that names no rule."""
    out = []
    for index, row in enumerate(rows):
        rest = {key: value for key, value in row.items() if key != "rule"}
        if "." in where:
            outer, inner = where.split(".")
            rest[outer] = {inner: row["rule"], "team": index % 3}
        else:
            rest[where] = row["rule"]
        out.append({**rest, "rule": f"team-{index % 3}"})
    return out


def accepted_of(stdout: bytes) -> list[object]:
    return [run["accepted"] for run in per_run(stdout)]


def test_without_rule_field_the_rows_own_rule_is_an_error_naming_the_way_out(tmp_path: Path) -> None:
    path = write(tmp_path / "teams.jsonl", moved(mixed_rows()))
    done = run_process("audit", str(path), "-o", "jsonl")
    assert done.returncode == 2 and b"teams.jsonl:1: 'rule' is 'team-0'" in done.stderr
    assert b"--rule-field NAME" in done.stderr and b"Traceback" not in done.stderr


@pytest.mark.parametrize("where", ["meta.verifier", "verifier"])
def test_rule_field_reads_every_rows_rule_on_every_jsonl_path(tmp_path: Path, where: str) -> None:
    rows = mixed_rows()
    wanted = [row["accepted"] for row in rows]
    path = write(tmp_path / "teams.jsonl", moved(rows, where))
    packed = tmp_path / "teams.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    outputs = []
    for source, extra, env in (
        (path, (), None),
        (path, ("--jobs", "2"), None),
        (packed, (), None),
        (path, (), {"SPECACCEPT_NO_EXTENSIONS": "1"}),  # the pure readers
    ):
        done = run_process("audit", str(source), "-o", "jsonl", "--rule-field", where, *extra, env=env)
        assert done.returncode in (0, 1), done.stderr
        assert accepted_of(done.stdout) == wanted
        outputs.append([{k: v for k, v in run.items() if k != "source"} for run in per_run(done.stdout)])
    piped = run_process("audit", "-", "-o", "jsonl", "--rule-field", where, input=path.read_bytes())
    assert accepted_of(piped.stdout) == wanted
    assert all(output == outputs[0] for output in outputs)
    summaries = [
        orjson.loads(run_process("audit", str(path), "-o", "json", "--rule-field", where, *extra).stdout)
        for extra in ((), ("--jobs", "2"))
    ]
    assert summaries[0]["rules"] == summaries[1]["rules"] and sum(summaries[0]["rules"].values()) == len(rows)
    assert summaries[0]["rules"]["block"] == sum(row["rule"] == "block" for row in rows)


def test_rule_field_none_reads_every_row_as_rule_says(tmp_path: Path) -> None:
    rows = random_rows(300, seed=4)
    teams = [{**row, "rule": "routing-b"} for row in rows]  # a field of the rows' own, no verification rule
    path = write(tmp_path / "teams.jsonl", teams)
    for env in (None, {"SPECACCEPT_NO_EXTENSIONS": "1"}):
        done = run_process("audit", str(path), "-o", "jsonl", "--rule-field", "none", env=env)
        assert done.returncode in (0, 1), done.stderr
        assert accepted_of(done.stdout) == expected_accepted(rows)
    greedy = run_process("audit", str(path), "-o", "jsonl", "--rule-field", "none", "--rule", "greedy-draft")
    wanted = [sum(1 for _ in iter_prefix(row)) for row in rows]
    assert accepted_of(greedy.stdout) == wanted
    assert accepted_of(greedy.stdout) != expected_accepted(rows)  # the rule changed, so the lengths did


def iter_prefix(row: dict[str, object]) -> list[int]:
    """`greedy-draft`'s kept positions: r <= p while it holds."""
    kept = []
    for j, (p, r) in enumerate(zip(row["p"], row["r"])):  # type: ignore[call-overload]
        if not r <= p:
            break
        kept.append(j)
    return kept


def test_the_fast_paths_take_standard_blocks_beside_another_rule_field() -> None:
    """The compiled reader declines rows holding the rule field's key, not a `rule` key of the rows' own."""
    rows = random_rows(40, seed=2)
    own = b"\n".join(orjson.dumps({**row, "rule": "team-a"}) for row in rows)
    assert fast_batch(own, 1, "log", FieldSpec(), 1 << 20) is None  # `rule` names no standard rule
    ignored = fast_batch(own, 1, "log", FieldSpec(rule_field=None), 1 << 20)
    assert ignored is not None and len(ignored) == 40 and ignored.rules is None
    tagged = b"\n".join(orjson.dumps({**row, "rule": "team-a", "verifier": "standard"}) for row in rows)
    taken = fast_batch(tagged, 1, "log", FieldSpec(rule_field="verifier"), 1 << 20)
    assert taken is not None and len(taken) == 40 and "verifier" not in taken.extras
    other = b"\n".join(orjson.dumps({**row, "verifier": "greedy-draft"}) for row in rows)
    assert fast_batch(other, 1, "log", FieldSpec(rule_field="verifier"), 1 << 20) is None
    batch, errors = parse_block(other, 1, "log", FieldSpec(rule_field="verifier"))
    assert not errors and batch.rules == ["greedy-draft"] * 40


def test_a_missing_field_names_the_rule_field_in_its_way_out(tmp_path: Path) -> None:
    path = write(tmp_path / "log.jsonl", [{"verifier": "block", "p": [0.5], "q": [0.5], "r": [0.1]}])
    done = run_process("audit", str(path), "--rule-field", "verifier")
    assert done.returncode == 2 and b"rule 'block' needs 'residual'" in done.stderr
    assert b"in a 'verifier' field or with --rule NAME" in done.stderr


SCHEMA = pa.schema(
    [
        *(field for field in EVERY_RULES_SCHEMA if field.name != "rule"),
        ("rule", pa.string()),
        ("meta", pa.struct([("verifier", pa.string()), ("team", pa.int64())])),
    ]
)


def test_parquet_reads_the_rule_field_inside_a_struct(tmp_path: Path) -> None:
    rows = mixed_rows()
    teams = moved(rows)
    path = tmp_path / "teams.parquet"
    pq.write_table(pa.Table.from_pylist(teams, schema=SCHEMA), path, row_group_size=61)
    wanted = [row["accepted"] for row in rows]
    from_jsonl = invoke(
        "audit", str(write(tmp_path / "teams.jsonl", teams)), "-o", "jsonl", "--rule-field", "meta.verifier"
    )
    for extra in ((), ("--jobs", "2")):
        done = invoke("audit", str(path), "-o", "jsonl", "--rule-field", "meta.verifier", *extra)
        assert done.exit_code in (0, 1), done.stderr
        assert accepted_of(done.stdout_bytes) == wanted
        assert records_without_source(done.stdout_bytes) == records_without_source(from_jsonl.stdout_bytes)
    piped = run_process("audit", "-", "-o", "jsonl", "--rule-field", "meta.verifier", input=path.read_bytes())
    assert accepted_of(piped.stdout) == wanted
    refused = invoke("audit", str(path), "-o", "jsonl")
    assert refused.exit_code == 2 and "'rule' is 'team-0'" in refused.stderr
    ignored = invoke("audit", str(path), "-o", "jsonl", "--rule-field", "none", "--on-error", "skip")
    assert ignored.exit_code in (0, 1)  # every row `standard`: the rows of other rules lack p, q or r


def test_report_takes_rule_field(tmp_path: Path) -> None:
    rows = mixed_rows()
    path = write(tmp_path / "teams.jsonl", moved(rows))
    page = tmp_path / "report.html"
    done = run_process("report", str(path), "--rule-field", "meta.verifier", "-o", str(page))
    assert done.returncode in (0, 1), done.stderr
    assert page.read_text().count("tree-target-cdf") >= 1


def test_parquet_and_jsonl_refuse_and_skip_the_same_rows(tmp_path: Path) -> None:
    """Bad rows of other rules (a value out of range, a missing field, an unknown rule, an integer rule value):
    the same first error and, with --on-error skip, the same runs left, from a Parquet file as from JSONL."""
    from tests.read.test_rule_rows import write_parquet

    rows = mixed_rows()
    spoiled = [dict(row) for row in rows]
    for index, row in enumerate(spoiled):
        if index % 17 == 3 and row["rule"] == "block":
            row["residual"] = None
        elif index % 13 == 5 and isinstance(row.get("p"), list) and row["p"]:
            row["p"] = [1.5, *row["p"][1:]]  # type: ignore[index]
        elif index % 29 == 7:
            row["rule"] = "nope"
        elif index % 31 == 11 and isinstance(row.get("q"), list) and row["q"]:
            row["q"] = [0.0, *row["q"][1:]]  # type: ignore[index]
    jsonl, parquet = write(tmp_path / "bad.jsonl", spoiled), write_parquet(tmp_path / "bad.parquet", spoiled)
    first = [run_process("audit", str(path), "-o", "jsonl") for path in (jsonl, parquet)]
    assert all(done.returncode == 2 for done in first)
    messages = [done.stderr.decode().split(":", 2)[2] for done in first]
    assert messages[0] == messages[1] and "Traceback" not in messages[0]
    skipped = [run_process("audit", str(path), "-o", "jsonl", "--on-error", "skip") for path in (jsonl, parquet)]
    records = [records_without_source(done.stdout) for done in skipped]
    assert records[0] == records[1] and 0 < len(records[0]) < len(rows)
    kept_lines = [record["line"] for record in records[0]]
    assert all(rows[line - 1]["accepted"] == record["accepted"] for line, record in zip(kept_lines, records[0]))
