"""`specaccept diff` and `specaccept merge`: work on saved summaries."""

from __future__ import annotations

import click

from specaccept_cli.cli.options import comparison_options, github_option, output_option
from specaccept_cli.cli.output import conclude_checks, printing_to_stdout, write_file, write_stdout


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
    from specaccept_cli.checks import compare
    from specaccept_cli.summary.estimates import estimate
    from specaccept_cli.summary.files import json_bytes, read_summary_file, summary_of

    baseline = estimate(summary_of(read_summary_file(baseline_path), baseline_path))
    current = estimate(summary_of(read_summary_file(current_path), current_path))
    comparison = compare(baseline, current, max_drop, significance)

    from specaccept_cli.views import terminal as render
    from specaccept_cli.views.markdown import markdown_report

    if output == "json":
        data = {
            "schema": "specaccept.comparison/1",
            "baseline_file": baseline_path,
            "current_file": current_path,
            **comparison.to_dict(),
        }
        write_stdout(json_bytes(data))
    elif output == "markdown":
        write_stdout(markdown_report(None, None, (), comparison).encode())
    else:
        with printing_to_stdout():
            render.QuietPipeConsole().print(render.comparison_view(comparison))
    markdown = markdown_report(None, None, (), comparison) if github else None
    conclude_checks((), comparison, markdown, "", f"baseline {baseline_path}; current {current_path}")


@click.command(short_help="Merge shard summaries into the summary of all of them.")
@click.argument("summaries", nargs=-1, required=True, metavar="SUMMARY.json...", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    help="Where to write the merged summary (stdout by default); written atomically.",
)
def merge(summaries: tuple[str, ...], output_path: str) -> None:
    """Merge summaries of shards into exactly the summary of all of them.

    Counters add, and every estimate is recomputed from the sum. Summaries with
    `groups` merge group by group.

    \b
    Example:
      specaccept merge shard-*.json -o all.json
    """
    from specaccept_cli.summary.files import json_bytes, merge_summaries, read_summary_file

    merged = merge_summaries([(path, read_summary_file(path)) for path in summaries])
    data = json_bytes(merged)
    if output_path == "-":
        write_stdout(data)
    else:
        write_file(output_path, data)
