"""`specaccept plan`: how many requests a CI run needs for its baseline comparison to see a given drop."""

from __future__ import annotations

import click

from specaccept_cli.cli.options import FiniteFloat, output_option
from specaccept_cli.cli.output import printing_to_stdout, write_stdout
from specaccept_cli.verdict.checks import DEFAULT_MAX_DROP


@click.command(short_help="The requests a CI run needs to detect a drop from a baseline.")
@click.option(
    "--baseline",
    "baseline_path",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=False),
    metavar="PATH",
    help="The summary JSON the CI run will be compared with (its per-request spread stands in for the run's).",
)
@click.option(
    "--drop",
    required=True,
    type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
    metavar="FRACTION",
    help="The relative drop to detect (0.02: alpha falls by 2% of its value).",
)
@click.option(
    "--max-drop",
    type=FiniteFloat(0.0, 1.0, max_open=True),
    default=DEFAULT_MAX_DROP,
    show_default=True,
    metavar="FRACTION",
    help="The --max-drop the CI run's comparison will tolerate (below --drop).",
)
@click.option(
    "--significance",
    type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
    default=0.01,
    show_default=True,
    metavar="P",
    help="The --significance the CI run's comparison will use.",
)
@output_option(("table", "json"), "table: one line per metric; json: the plan object.")
def plan(baseline_path: str, drop: float, max_drop: float, significance: float, output: str) -> None:
    """Print how many requests a CI run needs so that `audit --baseline` flags a true drop of --drop
    with 80% power, at --max-drop and --significance.

    The run is assumed to vary from request to request as the baseline does (the baseline's
    cluster-robust standard error, scaled by its requests), moved to the dropped value: the
    i.i.d. part as the i.i.d. model moves it, the spread between requests by (1 - drop)^2; the
    test's Student t quantiles count its degrees of freedom. A baseline summarised over runs (no
    request field) plans in runs, which holds only for a replayed prompt set.

    \b
    Example:
      specaccept plan --baseline main.json --drop 0.05
      specaccept audit pr.jsonl --baseline main.json
    """
    from specaccept_cli.errors import UsageError
    from specaccept_cli.summary.estimates import estimate
    from specaccept_cli.summary.files import json_bytes, read_summary_file, summary_of
    from specaccept_cli.verdict.checks import POWER, plan_requests

    if not max_drop < drop:
        raise UsageError(f"--drop {drop:g} must exceed --max-drop {max_drop:g}: a tolerated drop is never flagged")
    numbers = estimate(summary_of(read_summary_file(baseline_path), baseline_path))
    plans = plan_requests(numbers, drop, max_drop, significance)
    if output == "json":
        data = {
            "schema": "specaccept.plan/1",
            "baseline_file": baseline_path,
            "drop": drop,
            "max_drop": max_drop,
            "significance": significance,
            "power": POWER,
            "clustering": numbers.clustering.to_dict(),
            "metrics": [item.to_dict() for item in plans],
            **{item.metric: item.to_dict() for item in plans},
        }
        write_stdout(json_bytes(data), "json")
        return
    lines = []
    for item in plans:
        each = item.requests_needed_each_side
        if item.requests_needed is None:
            reason = "no value" if item.baseline is None else "no number suffices: the baseline alone is too noisy"
            if each is not None:
                reason += f"; a baseline and a run of {each:,} {item.units} each would do"
            lines.append(f"{item.label}: {reason} (baseline of {item.baseline_units:,} {item.units})")
        else:
            lines.append(
                f"{item.label}: {item.requests_needed:,} {item.units} to flag a {drop:.2%} drop with "
                f"{POWER:.0%} power (baseline {item.baseline:.6g} from {item.baseline_units:,} {item.units})"
            )
    lines.append(
        f"for: specaccept audit ... --baseline {baseline_path} --max-drop {max_drop:g} --significance {significance:g}"
    )
    if numbers.clustering.over_runs:
        lines.append("the baseline is over runs (no request field): these counts hold only for a replayed prompt set")
    with printing_to_stdout():
        click.echo("\n".join(lines))
