"""`specaccept diff` and `specaccept merge`: work on saved summaries."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from msgspec.structs import replace

from specaccept_cli.cli.hints import GATE_OPTIONS, hinted, warning_text
from specaccept_cli.cli.options import (
    check_output_path,
    comparison_options,
    gate_options,
    github_option,
    output_option,
)
from specaccept_cli.cli.output import (
    conclude_findings,
    describe_inputs,
    printing_to_stdout,
    refuse_outputs_that_are_inputs,
    write_file,
    write_stdout,
)
from specaccept_cli.text import shown_name

if TYPE_CHECKING:
    from specaccept_cli.summary.state import Summary
    from specaccept_cli.verdict import GateSpec


@click.command(short_help="Compare two saved summaries, as audit --baseline does.")
@click.argument("baseline_path", metavar="BASELINE.json", type=click.Path(dir_okay=False))
@click.argument("current_path", metavar="CURRENT.json", type=click.Path(dir_okay=False))
@comparison_options
@output_option(
    ("table", "json", "markdown"), "table: Rich view; json: the comparison object; markdown: a GitHub table."
)
@github_option
def diff(
    baseline_path: str, current_path: str, max_drop: float, significance: float, output: str, github: bool
) -> None:
    """Compare two saved summaries as `audit --baseline` does; exit 1 when a metric regressed.

    \b
    Example:
      specaccept diff main.json pr.json --max-drop 0.02 --significance 0.01
    """
    from specaccept_cli.summary.files import json_bytes, read_summary_file, summary_of
    from specaccept_cli.verdict import GateSpec, conclude

    refuse_outputs_that_are_inputs([], [baseline_path, current_path])
    baseline = summary_of(read_summary_file(baseline_path), shown_name(baseline_path))
    current = summary_of(read_summary_file(current_path), shown_name(current_path))
    # The comparison is over the totals: no group is estimated (1: the largest, and the rest together, cheaply).
    findings = conclude(current, baseline, GateSpec(max_drop=max_drop, significance=significance), max_groups=1)
    comparison = findings.comparison
    assert comparison is not None, "a baseline was given"

    from specaccept_cli.views import terminal as render
    from specaccept_cli.views.markdown import markdown_report

    notes = [warning_text(warning) for warning in comparison.warnings]
    if output == "json":
        data = {
            "schema": "specaccept.comparison/1",
            "baseline_file": shown_name(baseline_path),
            "current_file": shown_name(current_path),
            **comparison.to_dict(warning_text),
        }
        write_stdout(json_bytes(data), "json")
    elif output == "markdown":
        write_stdout(markdown_report(None, comparison, notes=notes).encode())
    else:
        with printing_to_stdout():
            render.QuietPipeConsole().print(render.comparison_view(comparison))
    markdown = markdown_report(None, comparison, notes=notes) if github else None
    # The comparison's own verdict: what else the current summary shows is the audit's to judge.
    only_comparison = replace(findings, verdict=findings.entries("baseline"))
    context = f"baseline {baseline_path}; current {current_path}"
    conclude_findings(only_comparison, markdown, "", context, comparison.warnings)


@click.command(short_help="Merge shard summaries into the summary of all of them.")
@click.argument("summaries", nargs=-1, required=True, metavar="SUMMARY.json...", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    metavar="PATH",
    callback=check_output_path,
    help="Where to write the merged summary (stdout by default); written atomically. A path, not a format.",
)
@gate_options
@github_option
def merge(
    summaries: tuple[str, ...],
    output_path: str,
    min_alpha: float | None,
    min_tokens_per_pass: float | None,
    min_acceptance_rate: float | None,
    github: bool,
) -> None:
    """Merge summaries of shards into the summary of all of them.

    Counters add, and every estimate is recomputed from the sum. Summaries with
    `groups` merge group by group. Windows of time (--time-field) merge exactly;
    windows of runs are appended in the order given, which equals one audit of
    all the inputs only when each shard but the last fills whole windows. The
    same file twice, two summaries of the same input, or summaries made with
    different fields or options are refused (exit 2). The gates apply to the
    merged total, as `audit`'s do to its logs (exit 1).

    \b
    Example:
      specaccept merge shard-*.json -o all.json --min-alpha 0.6 --github
    """
    from specaccept_cli.summary.files import json_bytes, merged_summary, read_summary_file, summary_object

    _refuse_the_same_file_twice(summaries)
    refuse_outputs_that_are_inputs([("-o", output_path)], list(summaries), stdout=output_path == "-")
    merged, provenance = merged_summary([(shown_name(path), read_summary_file(path)) for path in summaries])
    # Only written: each group's object made and turned to bytes one at a time (`summary_object`).
    data = json_bytes(summary_object(merged, provenance=provenance, groups_as_bytes=True))
    if output_path == "-":
        write_stdout(data, "json")
    else:
        write_file(output_path, data)
    from specaccept_cli.verdict import GateSpec

    spec = GateSpec(
        min_alpha=min_alpha, min_tokens_per_pass=min_tokens_per_pass, min_acceptance_rate=min_acceptance_rate
    )
    if github or spec.thresholds:
        _conclude_merge(merged, spec, github, describe_inputs(list(summaries)))


def _conclude_merge(merged: Summary, spec: GateSpec, github: bool, where: str) -> None:
    """The gates on the merged total, and with --github its report: what `audit` does after its output."""
    from specaccept_cli.verdict import conclude
    from specaccept_cli.views.markdown import markdown_report

    # Gates and the report are over the total: no group is estimated (1: the largest, the rest together).
    findings = conclude(merged, spec=spec, max_groups=1)
    markdown = markdown_report(findings, words=hinted, gate_names=GATE_OPTIONS) if github else None
    # The gates alone exit 1: the merged shards' other checks were each audit's to judge.
    conclude_findings(replace(findings, verdict=findings.entries("gate")), markdown, where, where)


def _refuse_the_same_file_twice(paths: tuple[str, ...]) -> None:
    """`merge x.json x.json` (or a link to it) would count x's runs twice, whatever x recorded of its inputs."""
    import os

    from specaccept_cli.errors import InputError

    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue  # reading it reports the problem, naming the file
        file = (info.st_dev, info.st_ino)
        if file in seen:
            again = "again" if seen[file] == path else f"again (as {seen[file]})"
            raise InputError(path, None, f"given {again}: its runs would count twice")
        seen[file] = path
