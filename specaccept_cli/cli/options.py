"""Options more than one command takes, each defined once, and their checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

FC = TypeVar("FC", bound=Callable[..., Any])

FIELD_HELP = {
    "p": "target model's probabilities of the drafted tokens (e.g. spec.target_p)",
    "q": "draft model's probabilities of the drafted tokens (e.g. spec.draft_q)",
    "r": "uniform draws of the accept test (e.g. spec.uniform)",
}


OptionGroups = tuple[tuple[str, tuple[str, ...]], ...]  # (section title, the options' parameter names)
FIRST_OPTIONS = "Options a first run needs"


class GroupedCommand(click.Command):
    """A command whose `--help` lists its options in sections (Click's own `HelpFormatter.section`, as it
    writes its one "Options" section): the few a first run needs, then one section per kind of option.

    An option no section names is listed under "Other options", so none can go missing from the help;
    `--help` itself ends the first section.
    """

    def __init__(self, *args: Any, option_groups: OptionGroups = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.option_groups = option_groups

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {}
        help_option = self.get_help_option(ctx)
        closing = None if help_option is None else help_option.get_help_record(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None and param.name is not None and param is not help_option:
                records[param.name] = record
        sections = [
            (title, [records.pop(name) for name in names if name in records]) for title, names in self.option_groups
        ]
        sections = [(title, rows) for title, rows in sections if rows]
        if records or not sections:
            sections.append(("Other options", list(records.values())))
        if closing is not None:  # with the first options: where a new reader looks
            sections[0][1].append(closing)
        # Every section's help starts in one column (a term longer than that has its help on the next line).
        width = min(max(len(term) for _, rows in sections for term, _ in rows), HELP_TERM_WIDTH)
        for title, rows in sections:
            with formatter.section(title):
                formatter.write_dl([(term.ljust(width), text) for term, text in rows], col_max=HELP_TERM_WIDTH)


HELP_TERM_WIDTH = 30  # Click's own cap on the option column of --help


def check_field_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A dotted field path (or a tuple of them, for a repeatable option): no empty part."""
    if value is None:
        return value
    values = value if isinstance(value, tuple) else (value,)
    for item in values:
        if item is None:  # an optional path that was not given
            continue
        if not item or any(part == "" for part in item.split(".")):
            raise click.BadParameter(f"{item!r} is not a dotted field path like 'spec.target_p'")
    return value


def field_option(name: str) -> Callable[[FC], FC]:
    return click.option(
        f"--{name}-field",
        default=name,
        show_default=True,
        callback=check_field_path,
        help=f"Dotted path of the list of the {FIELD_HELP[name]}.",
    )


class FiniteFloat(click.FloatRange):
    """A float in a range; unlike click.FloatRange, nan and inf are refused (nan compares false to any bound).

    Named "number", so a typo reads "'abc' is not a valid number", not "... a valid float range".
    """

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class WholeNumber(click.IntRange):
    """click.IntRange named "integer": a typo reads "'abc' is not a valid integer", not "... integer range"."""

    name = "integer"


def output_option(choices: tuple[str, ...], help_text: str) -> Callable[[FC], FC]:
    """`-o/--output`: the form of what goes to stdout, table by default."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help=help_text,
    )


OUTPUT_FORMATS = ("table", "json", "markdown", "jsonl", "csv")


def check_output_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """`-o` of a command that writes a file: a path, never a format name (`-o json` is a format elsewhere).

    `merge a.json -o json` used to write a file named `json` and print nothing; a file of that
    name is still possible, spelled as a path (`./json`).
    """
    if value in OUTPUT_FORMATS:
        raise click.BadParameter(
            f"{value!r} is an output format in other commands; here -o takes a path (a file of that name: ./{value})"
        )
    return value


def cost_ratio_option(command: FC) -> FC:
    return click.option(
        "--cost-ratio",
        type=FiniteFloat(min=0.0),
        default=None,
        help="Draft step time / target step time: adds the speedup and the best k.",
    )(command)


def gate_options(command: FC) -> FC:
    gates = [
        ("--min-alpha", FiniteFloat(0.0, 1.0), "Exit 1 unless alpha (accepted / examined) is at least X."),
        ("--min-tokens-per-pass", FiniteFloat(min=1.0), "Exit 1 unless tokens per pass is at least X."),
        ("--min-acceptance-rate", FiniteFloat(0.0, 1.0), "Exit 1 unless accepted / drafted is at least X."),
    ]
    for name, kind, help_text in reversed(gates):
        command = click.option(name, type=kind, metavar="X", default=None, help=help_text)(command)
    return command


def comparison_options(command: FC) -> FC:
    from specaccept_cli.verdict.checks import DEFAULT_MAX_DROP, DEFAULT_SIGNIFICANCE

    options = [
        click.option(
            "--max-drop",
            type=FiniteFloat(0.0, 1.0, max_open=True),
            default=DEFAULT_MAX_DROP,
            show_default=True,
            metavar="FRACTION",
            help="Relative drop from the baseline tolerated before a metric can regress.",
        ),
        click.option(
            "--significance",
            type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
            default=DEFAULT_SIGNIFICANCE,
            show_default=True,
            metavar="P",
            help="A drop beyond --max-drop regresses only when its one-sided p-value is below P.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def github_option(command: FC) -> FC:
    return click.option(
        "--github",
        is_flag=True,
        help="GitHub Actions: append the markdown report to $GITHUB_STEP_SUMMARY; an ::error:: line per failed check.",
    )(command)


def bounded_duration(text: str) -> int:
    """`parse_duration`, at most 100 years (`summary.windows.MAX_WIDTH_SECONDS`); ValueError otherwise.

    A longer period means nothing to a log and overflowed the int64 window keys and the timers' C longs
    (`--every 100000000000000000000s` was an OverflowError traceback).
    """
    from specaccept_cli.summary.windows import MAX_WIDTH_SECONDS, parse_duration

    digits = text.strip()[:-1]
    seconds = parse_duration(text) if len(digits) <= 30 else MAX_WIDTH_SECONDS + 1  # no int() of 5,000 digits
    if seconds > MAX_WIDTH_SECONDS:
        raise ValueError(f"{shown_value(text)} is longer than 36500d (100 years), the longest duration taken")
    return seconds


def shown_value(text: str) -> str:
    """An option's value in a message, cut to 40 characters (a pasted megabyte stays one line)."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def check_window(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """--window within bounds at parse time: a number of runs up to MAX_WINDOW_RUNS, a duration up to 100 years.

    Which kind it must be depends on --time-field, so that is checked in `window_spec`.
    """
    from specaccept_cli.summary.windows import MAX_WIDTH_RUNS

    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        if len(text) > 19 or int(text) > MAX_WIDTH_RUNS:
            raise click.BadParameter(f"{shown_value(value)} runs: more than 10**18, the widest window taken")
        return value
    try:
        bounded_duration(value)
    except ValueError as exc:
        if "longer than" in str(exc):
            raise click.BadParameter(str(exc)) from None
    return value


def window_options(command: FC) -> FC:
    """Acceptance over the log: --time-field, --window, --check-drift."""
    options = [
        click.option(
            "--time-field",
            callback=check_field_path,
            metavar="FIELD",
            help="Dotted path of each run's time (epoch seconds or ms, ISO-8601, or a Parquet timestamp): "
            "windows of time instead of runs in input order.",
        ),
        click.option(
            "--window",
            metavar="WIDTH",
            callback=check_window,
            help="Window width: a duration (30s, 5m, 1h, 1d) with --time-field, else a number of runs. "
            "Default: about 25-50 windows over the log.",
        ),
        click.option(
            "--check-drift",
            is_flag=True,
            help="Exit 1 when the drift test finds alpha not constant over the log (p < --significance).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def window_spec(time_field: str | None, window: str | None) -> Any:
    """The `WindowSpec` of --time-field and --window (a usage error when WIDTH does not fit the kind)."""
    from specaccept_cli.summary.windows import WindowSpec

    if window is None:
        return WindowSpec(time_field)
    if time_field is not None:
        try:
            return WindowSpec(time_field, bounded_duration(window))
        except ValueError as exc:
            raise click.BadParameter(f"{exc} (with --time-field)", param_hint="--window") from None
    if not window.strip().isdigit() or int(window) < 1:
        raise click.BadParameter(
            f"{window!r} is not a number of runs (a duration like 5m needs --time-field)", param_hint="--window"
        )
    return WindowSpec(None, int(window))
