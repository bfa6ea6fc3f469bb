"""`audit`'s command line: every option it takes (`report` and `watch` share them), and `AuditOptions`,
the options as Click parsed them. The command itself, reading and showing, is `cli/audit.py`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

import click
from msgspec import Struct

from specaccept_cli.cli.live import DEFAULT_EVERY, alert_option, every_option
from specaccept_cli.cli.options import (
    FIRST_OPTIONS,
    FiniteFloat,
    OptionGroups,
    WholeNumber,
    check_field_path,
    comparison_options,
    cost_ratio_option,
    field_option,
    gate_options,
    github_option,
    output_option,
    window_options,
)
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from specaccept_cli.read.policy import Mode
    from specaccept_cli.read.sources import Format
    from specaccept_cli.summary.rule_figures import TreeShape

Command = TypeVar("Command", bound=Callable[..., None])
DEFAULT_MAX_ROWS = 10  # runs the first screen shows: all of a small log, the first of a large one
NO_RULE_FIELD = "none"  # `--rule-field none`: no row names its rule, each is --rule's
MAX_ROWS = 10_000  # a preview held in memory stays a preview: every run streams out through -o jsonl or csv


# How `audit --help` (and `report --help`) sections the options: the eight a first audit needs, then each
# kind. A name a command does not take is passed over, so `report` shares the list.
AUDIT_OPTION_GROUPS: OptionGroups = (
    (FIRST_OPTIONS, ("output", "full", "max_rows", "id_fields", "on_error", "min_alpha", "baseline", "summary_out")),
    (
        "Input",
        (
            "summaries",
            "input_format",
            "p_field",
            "q_field",
            "r_field",
            "draft_tokens_field",
            "target_tokens_field",
            "max_line_bytes",
            "quarantine",
            "allow_empty",
            "storage_options",
        ),
    ),
    (
        "What to compute",
        (
            "rule",
            "rule_field",
            "tree",
            "group_by",
            "max_groups",
            "cluster_field",
            "cost_ratio",
            "show_conventions",
            "reported_field",
            "time_field",
            "window",
            "sampler_significance",
        ),
    ),
    (
        "Gates and baselines (exit 1 when one fails)",
        (
            "min_tokens_per_pass",
            "min_acceptance_rate",
            "max_mismatches",
            "check_sampler",
            "check_drift",
            "max_errors",
            "strict_bounds",
            "max_drop",
            "significance",
        ),
    ),
    ("Output", ("html_path", "github", "quiet")),
    ("Live (a stream that never ends)", ("follow", "every", "alert")),
    ("Engines and clusters", ("draft_length", "keep_duplicate_lines", "jobs", "scheduler")),
)


class FormatChoice(click.Choice[str]):
    """`--format`'s choices, from the table of formats (`read.formats`), looked up when first needed."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        from specaccept_cli.read.formats import choices

        return choices()

    @choices.setter
    def choices(self, value: object) -> None:
        del value  # the table is the one list


def audit_options(command: Command) -> Command:
    """`command` with every option of `audit`, in the order `--help` lists them."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


_OPTIONS: list[Callable[[Command], Command]] = [
    click.argument("inputs", nargs=-1, metavar="[INPUT]..."),
    output_option(
        ("table", "json", "markdown", "jsonl", "csv"),
        "table: Rich view; json: the summary; markdown: GitHub tables; jsonl/csv: one record per run, streamed.",
    ),
    click.option(
        "--format",
        "input_format",
        type=FormatChoice(),
        default="auto",
        show_default=True,
        help="Input format (the table in docs/input.md); auto goes by extension, then by content (PAR1 magic means "
        "Parquet; server output holding vLLM, SGLang or llama.cpp metrics lines anywhere, or a Prometheus scrape "
        "(.prom), is read as engine metrics; JSON or SSE lines holding per-request payloads are read one request "
        "per cluster).",
    ),
    click.option(
        "--draft-length",
        type=click.IntRange(min=1, max=64),
        default=None,
        metavar="K",
        help="Engine metrics: the server's draft length (num_speculative_tokens) when its lines do not print it.",
    ),
    click.option(
        "--keep-duplicate-lines",
        is_flag=True,
        help="Engine metrics: count a vLLM metrics line that repeats a recent one exactly (time stamp and process "
        "included) instead of dropping it as a log shipper's duplicate.",
    ),
    field_option("p"),
    field_option("q"),
    field_option("r"),
    click.option(
        "--id-field",
        "id_fields",
        multiple=True,
        callback=check_field_path,
        help="Carry this field (dotted path) into per-run records. Repeatable.",
    ),
    click.option(
        "--group-by",
        "group_by",
        default=None,
        callback=check_field_path,
        help="Also summarise each value of this field (dotted path) apart.",
    ),
    click.option(
        "--cluster-field",
        "cluster_field",
        default=None,
        callback=check_field_path,
        help="Runs sharing this field's value (dotted path) are one request: intervals and tests are cluster-robust. "
        "Default: the first row's request_id, request.id, req_id or rid (or an engine payload's request id); "
        "none: intervals over runs, which hold only for a replayed prompt set.",
    ),
    click.option(
        "--max-groups",
        type=click.IntRange(min=0),
        default=1000,
        show_default=True,
        metavar="N",
        help="With --group-by: show and write the N largest groups, the rest together as 'other' (0: every group).",
    ),
    cost_ratio_option,
    click.option("--conventions", "show_conventions", is_flag=True, help="Show what each engine would report."),
    click.option(
        "--max-rows",
        type=WholeNumber(min=0, max=MAX_ROWS),
        default=DEFAULT_MAX_ROWS,
        show_default=True,
        metavar="N",
        help="Table view: show the first N runs with their accepted lengths (and the rows' request id or id, or "
        "each --id-field); 0: none. Given with -o json: adds them as first_runs. -o jsonl or csv writes every run.",
    ),
    click.option(
        "--full",
        is_flag=True,
        help="Table view: every table (acceptance, per position, histogram, audits, gates, comparison), not only "
        "the first screen.",
    ),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar."),
    click.option(
        "--reported-field",
        callback=check_field_path,
        help="Dotted path of the accepted count the server reported; recompute, flag and diagnose mismatches.",
    ),
    click.option(
        "--max-mismatches",
        type=WholeNumber(min=0),
        help="Gate: exit 1 when more runs than this disagree with their reported count.",
    ),
    click.option(
        "--check-sampler", is_flag=True, help="Test the sampler: calibration and uniformity of r; exit 1 on failure."
    ),
    click.option(
        "--sampler-significance",
        type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
        default=0.001,
        show_default=True,
        help="A sampler test fails when its p-value is below this.",
    ),
    click.option(
        "--rule",
        "rule",
        metavar="NAME",
        default="standard",
        show_default=True,
        callback=lambda context, param, value: _rule_name(context, param, value),
        help="The verification rule of rows without a 'rule' field (docs/rules.md); a row's own 'rule' wins.",
    ),
    click.option(
        "--rule-field",
        "rule_field",
        metavar="NAME",
        default="rule",
        show_default=True,
        callback=check_field_path,
        help="Dotted path of the field naming a row's verification rule; none: rows name none (each row is "
        "--rule's), for rows whose own 'rule' field means something else.",
    ),
    click.option(
        "--tree",
        "tree",
        metavar="TOPK,STEPS,DRAFT_TOKENS",
        callback=lambda context, param, value: _tree_shape(context, param, value),
        help="The engine's counts come from an EAGLE tree (SGLang's speculative_eagle_topk, speculative_num_steps, "
        "speculative_num_draft_tokens): per-depth rates from its accepted-depth histograms, no chain's alpha "
        "(docs/payloads.md).",
    ),
    click.option(
        "--draft-tokens-field",
        callback=check_field_path,
        help="Greedy logs: dotted path of the drafted token ids (instead of p, q, r).",
    ),
    click.option(
        "--target-tokens-field",
        callback=check_field_path,
        help="Greedy logs: dotted path of the target's argmax token ids (k, or k + 1 with the bonus).",
    ),
    gate_options,
    click.option(
        "--summary-out",
        type=click.Path(dir_okay=False, allow_dash=False),
        metavar="PATH",
        help="Also write the summary JSON to PATH (atomically), whatever -o is: a later baseline or merge input.",
    ),
    click.option(
        "--baseline",
        type=click.Path(dir_okay=False, allow_dash=False),
        metavar="PATH",
        help="Compare alpha and tokens per pass with this summary JSON; exit 1 on a significant drop.",
    ),
    comparison_options,
    github_option,
    click.option(
        "--on-error",
        type=click.Choice(["fail", "skip"]),
        default="fail",
        show_default=True,
        help="fail: stop at the first bad row (exit 2); skip: leave bad rows out, count them and list them on stderr.",
    ),
    click.option(
        "--max-errors",
        type=WholeNumber(min=0),
        default=None,
        metavar="N",
        help="With --on-error skip: exit 1 when more than N rows (or sources) were skipped.",
    ),
    click.option(
        "--strict-bounds",
        is_flag=True,
        help="Exit 1 when a gate or baseline comparison is inconclusive because the input only bounds the figure "
        "(engine totals; by default that warns).",
    ),
    click.option(
        "--allow-empty",
        is_flag=True,
        help="With --on-error skip: exit 0 even when every row was skipped (by default no valid run is exit 1).",
    ),
    click.option(
        "--quarantine",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        metavar="PATH",
        help="With --on-error skip: write the raw lines of skipped rows to PATH.",
    ),
    click.option(
        "--max-line-bytes",
        type=WholeNumber(min=1),
        default=DEFAULT_MAX_LINE_BYTES,
        show_default=True,
        metavar="N",
        help="A JSONL line longer than N bytes is a bad row (its bytes are never held in memory).",
    ),
    click.option(
        "-j",
        "--jobs",
        type=WholeNumber(min=1),
        default=None,
        help="Processes parsing JSONL in parallel (default: the number of usable CPU cores; 1: no worker processes).",
    ),
    click.option(
        "--scheduler",
        envvar="DASK_SCHEDULER_ADDRESS",
        metavar="ADDRESS",
        default=None,
        help="Run on a Dask cluster: tcp://HOST:PORT, or local[:N] for N worker processes here "
        "(needs specaccept[dask]).",
    ),
    click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="For s3:// and gs:// inputs: endpoint, region, anonymous, ... Repeatable. Never printed.",
    ),
    window_options,
    click.option(
        "--html",
        "html_path",
        type=click.Path(dir_okay=False, allow_dash=False),
        metavar="PATH",
        help="Also write a self-contained HTML report with plots to PATH (as `specaccept report` does).",
    ),
    click.option(
        "--follow",
        is_flag=True,
        help="Read a stream that never ends (stdin, or one file followed as tail -F does) and show an interval "
        "every --every; EOF, Ctrl-C or SIGTERM end it normally: the final summary is printed and the gates applied.",
    ),
    every_option(DEFAULT_EVERY),
    alert_option,
]


def _rule_name(context: click.Context, param: click.Parameter, value: str) -> str:
    """`--rule NAME`: the canonical name of a rule of the table (a name or an alias, any case), or a usage error."""
    from specaccept_cli.rule.registry import rule_named

    try:
        return rule_named(value).name
    except KeyError as error:
        raise click.BadParameter(str(error.args[0]), ctx=context, param=param) from None


def _tree_shape(context: click.Context, param: click.Parameter, value: str | None) -> TreeShape | None:
    """`--tree TOPK,STEPS,DRAFT_TOKENS`: three whole numbers, at least 1, with DRAFT_TOKENS - 1 nodes enough
    for STEPS levels (a tree of depth STEPS drafts at least STEPS nodes), or a usage error."""
    from specaccept_cli.summary.rule_figures import TreeShape

    if value is None:
        return None
    parts = value.split(",")
    if len(parts) != 3 or not all(part.strip().isdigit() for part in parts):
        raise click.BadParameter(
            f"{value!r} is not TOPK,STEPS,DRAFT_TOKENS (three whole numbers, e.g. 4,3,8)", ctx=context, param=param
        )
    topk, steps, draft_tokens = (int(part) for part in parts)
    if min(topk, steps) < 1 or draft_tokens - 1 < steps:
        raise click.BadParameter(
            f"{value!r}: TOPK and STEPS must be at least 1, and DRAFT_TOKENS - 1 nodes at least STEPS",
            ctx=context,
            param=param,
        )
    return TreeShape(topk, steps, draft_tokens)


class AuditOptions(Struct, frozen=True):
    """`audit`'s command line, as Click parsed it."""

    inputs: tuple[str, ...]
    output: Literal["table", "json", "markdown", "jsonl", "csv"] | None  # None: nothing on stdout (`report`)
    input_format: Format
    draft_length: int | None
    p_field: str
    q_field: str
    r_field: str
    id_fields: tuple[str, ...]
    group_by: str | None
    cluster_field: str | None
    max_groups: int
    cost_ratio: float | None
    show_conventions: bool
    max_rows: int
    quiet: bool
    reported_field: str | None
    max_mismatches: int | None
    check_sampler: bool
    sampler_significance: float
    draft_tokens_field: str | None
    target_tokens_field: str | None
    min_alpha: float | None
    min_tokens_per_pass: float | None
    min_acceptance_rate: float | None
    summary_out: str | None
    baseline: str | None
    max_drop: float
    significance: float
    github: bool
    on_error: Mode
    max_errors: int | None
    allow_empty: bool
    quarantine: str | None
    max_line_bytes: int
    jobs: int | None
    scheduler: str | None = None
    storage_options: tuple[str, ...] = ()
    time_field: str | None = None
    window: str | None = None
    check_drift: bool = False
    html_path: str | None = None
    full: bool = False
    follow: bool = False
    strict_bounds: bool = False
    every: int = 10
    alert: bool = False
    # `watch`: endpoints scraped instead of inputs read (a live audit of their counters)
    watch_urls: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 5.0
    retries: int = 2
    rule: str = "standard"  # the rule of rows without a `rule` field
    rule_field: str = "rule"  # the field naming a row's rule (`none`: no field does)
    tree: TreeShape | None = None  # the engine's counts come from this tree (--tree)
    keep_duplicate_lines: bool = False  # engine metrics: vLLM lines repeated exactly are counted, not dropped
