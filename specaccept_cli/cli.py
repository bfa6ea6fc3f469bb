"""Click commands: parse, call the core, print once, map errors to exit codes.

Exit status: 0 ok, 1 a gate failed, 2 usage or input error, 130 interrupted.
Heavy modules (numpy, pyarrow, rich) are imported inside the commands that need
them, so `specaccept check` starts about as fast as click itself.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any, NoReturn

import click

from specaccept_cli import __version__
from specaccept_cli.errors import InputError, SpecacceptError
from specaccept_cli.text import visible

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_INTERRUPTED = 130


def _error_line(message: str) -> None:
    click.echo(f"specaccept: {visible(message)}", err=True)


def _quiet_broken_pipe() -> NoReturn:
    """stdout was closed by the reader (`| head`): stop quietly, like other Unix filters."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - no real stdout to redirect
        pass
    raise SystemExit(EXIT_OK)


class SpecacceptGroup(click.Group):
    """The one place where domain errors become messages and exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InputError as exc:
            _error_line(str(exc))
            ctx.exit(EXIT_INPUT)
        except SpecacceptError as exc:
            _error_line(str(exc))
            ctx.exit(EXIT_INPUT)
        except KeyboardInterrupt:
            _error_line("interrupted")
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _quiet_broken_pipe()


@click.group(cls=SpecacceptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specaccept")
def cli() -> None:
    """Audit speculative-decoding acceptance logs with the exact accept-prefix rule.

    Token i of a draft is kept iff r[i] <= min(1, p[i]/q[i]); the scan stops at the
    first rejection, and a target pass emits a + 1 tokens.
    """


FIELD_HELP = {
    "p": "target model's probabilities of the drafted tokens (e.g. spec.target_p)",
    "q": "draft model's probabilities of the drafted tokens (e.g. spec.draft_q)",
    "r": "uniform draws of the accept test (e.g. spec.uniform)",
}


def _field_option(name: str) -> Any:
    return click.option(
        f"--{name}-field",
        default=name,
        show_default=True,
        callback=_check_field_path,
        help=f"Dotted path of the list of the {FIELD_HELP[name]}.",
    )


def _check_field_path(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    values = value if isinstance(value, tuple) else (value,)
    for item in values:
        if not item or any(part == "" for part in item.split(".")):
            raise click.BadParameter(f"{item!r} is not a dotted field path like 'spec.target_p'")
    return value


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


@cli.command()
@click.argument("inputs", nargs=-1, metavar="[INPUT]...")
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json", "jsonl", "csv"]),
    default="table",
    show_default=True,
    help="table: Rich view; json: the summary; jsonl/csv: one record per run, streamed.",
)
@click.option(
    "--format",
    "input_format",
    type=click.Choice(["auto", "jsonl", "parquet"]),
    default="auto",
    show_default=True,
    help="Input format; auto goes by extension, then by content (PAR1 magic means Parquet).",
)
@_field_option("p")
@_field_option("q")
@_field_option("r")
@click.option(
    "--id-field",
    "id_fields",
    multiple=True,
    callback=_check_field_path,
    help="Carry this field (dotted path) into per-run records. Repeatable.",
)
@click.option(
    "--max-rows", type=click.IntRange(min=0), default=20, show_default=True, help="Runs shown in the table view."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Processes parsing JSONL in parallel (default: the number of usable CPU cores; 1: no worker processes).",
)
def audit(
    inputs: tuple[str, ...],
    output: str,
    input_format: str,
    p_field: str,
    q_field: str,
    r_field: str,
    id_fields: tuple[str, ...],
    max_rows: int,
    quiet: bool,
    jobs: int | None,
) -> None:
    """Recompute accepted lengths for every run in INPUT... and summarise them.

    INPUT is a JSONL file (optionally gzip/bz2/xz/zstd-compressed), a Parquet file,
    a directory of Parquet shards, or - for stdin (the default when stdin is a pipe).

    \b
    Examples:
      specaccept audit logs.jsonl.gz
      zcat logs.jsonl.gz | specaccept audit - -o json
      specaccept audit shards/ -o jsonl --id-field request_id | head
    """
    from specaccept_cli.batch import FieldSpec
    from specaccept_cli.parallel import default_jobs, evaluate_source
    from specaccept_cli.pipeline import summarise_evaluated
    from specaccept_cli.sources import STDIN, expand_inputs

    paths = list(inputs)
    if not paths:
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise click.UsageError("no input: give a file or directory, or pipe rows into stdin (or use -)")
        paths = [STDIN]
    if paths.count(STDIN) > 1:
        raise click.UsageError("stdin (-) can be read only once")
    fields = FieldSpec(p=p_field, q=q_field, r=r_field, extras=tuple(dict.fromkeys(id_fields)))

    def fail(error: InputError) -> None:
        raise error

    sources = expand_inputs(paths)

    workers = jobs or default_jobs()

    def evaluated(progress: Any, keep_runs: bool) -> Any:
        for source in sources:
            yield from evaluate_source(
                source,
                fields,
                fail,
                input_format,  # type: ignore[arg-type]
                progress=progress,
                jobs=workers,
                keep_runs=keep_runs,
            )

    from rich.console import Console

    from specaccept_cli import render

    stderr = Console(stderr=True)
    show_progress = not quiet and stderr.is_terminal

    def run(sink: Any = None) -> Any:
        if show_progress:
            with render.RichProgress(stderr, sources) as progress:
                return summarise_evaluated(evaluated(progress, sink is not None), sink)
        return summarise_evaluated(evaluated(None, sink is not None), sink)

    if output in ("jsonl", "csv"):
        from specaccept_cli.records import CsvWriter, JsonlWriter

        writer = (JsonlWriter if output == "jsonl" else CsvWriter)(_stdout(), fields.extras)
        run(writer.write)
        writer.close()
        return
    if output == "json":
        summary = run()
        out = _stdout()
        out.write(render.summary_json(summary))
        out.flush()
        return
    preview = render.RunPreview(max_rows)

    def keep(batch: Any, outcome: Any) -> None:
        preview.add(batch.source, batch.lines.tolist(), outcome.k.tolist(), outcome.accepted.tolist())

    summary = run(keep)
    console = Console()
    if max_rows:
        console.print(render.runs_table(preview))
    console.print(render.summary_view(summary))


def _parse_list(text: str, name: str) -> list[float]:
    """`0.9,0.2,0.8` or `[0.9, 0.2, 0.8]`; `""` and `[]` are an empty draft."""
    import json
    import math

    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError as exc:
            raise click.BadParameter(f"not a JSON array: {exc}", param_hint=f"--{name}") from None
        if not isinstance(items, list):
            raise click.BadParameter("not a JSON array", param_hint=f"--{name}")
    else:
        items = [] if not stripped else [item.strip() for item in stripped.split(",")]
    values = []
    for index, item in enumerate(items):
        try:
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise ValueError
            value = float(item)
        except (ValueError, OverflowError):
            raise click.BadParameter(f"item {index} ({item!r}) is not a number", param_hint=f"--{name}") from None
        if not math.isfinite(value):
            raise click.BadParameter(f"item {index} ({item!r}) is not a finite number", param_hint=f"--{name}")
        values.append(value)
    return values


@cli.command()
@click.option("--p", "p_text", required=True, metavar="LIST", help="Target probabilities of the drafted tokens.")
@click.option("--q", "q_text", required=True, metavar="LIST", help="Draft probabilities of the drafted tokens.")
@click.option("--r", "r_text", required=True, metavar="LIST", help="Uniform draws, one per token.")
@click.option("--explain", is_flag=True, help="Show the test token by token and what stopped the run.")
def check(p_text: str, q_text: str, r_text: str, explain: bool) -> None:
    """Accepted length of one drafted run; prints the number alone.

    LIST is comma-separated numbers or a JSON array; "" or [] is an empty draft.

    \b
    Example:
      specaccept check --p 0.9,0.2,0.8 --q 0.5,0.8,0.4 --r 0.1,0.5,0.2   # -> 1
    """
    from specaccept_cli.rule import accept_prefix
    from specaccept_cli.validate import value_problem

    p, q, r = _parse_list(p_text, "p"), _parse_list(q_text, "q"), _parse_list(r_text, "r")
    if not len(p) == len(q) == len(r):
        raise click.UsageError(f"--p, --q and --r have different lengths ({len(p)}, {len(q)}, {len(r)})")
    for name, values in (("p", p), ("q", q), ("r", r)):
        for index, value in enumerate(values):
            problem = value_problem(name, index, value)
            if problem is not None:
                raise click.BadParameter(problem, param_hint=f"--{name}")
    accepted = accept_prefix(p, q, r)
    click.echo(accepted)
    if explain:
        from rich.console import Console

        from specaccept_cli.render import explain_table

        Console().print(explain_table(p, q, r, accepted))


@cli.command()
@click.option("--runs", type=click.IntRange(min=0), required=True, help="Number of drafted runs.")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0), required=True, help="Per-token acceptance probability.")
@click.option("--k", "k_text", required=True, metavar="K|LOW-HIGH", help="Draft length, or a range drawn uniformly.")
@click.option("--seed", type=int, default=None, help="Seed for a reproducible log.")
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="JSONL (stdout by default; .gz compresses) or Parquet (.parquet).",
)
def simulate(runs: int, alpha: float, k_text: str, seed: int | None, output_path: str) -> None:
    """Write honest synthetic logs: each token passes independently with probability ALPHA.

    \b
    Example:
      specaccept simulate --runs 1000 --alpha 0.8 --k 4 --seed 1 -o logs.jsonl
    """
    from specaccept_cli import simulate as sim

    try:
        k_low, k_high = sim.parse_k_range(k_text)
    except ValueError:
        raise click.BadParameter(f"{k_text!r} is not a draft length (4) or range (1-8)", param_hint="--k") from None
    chunks = sim.simulate(runs, alpha, k_low, k_high, seed)
    if output_path.endswith((".parquet", ".pq")):
        sim.write_parquet(chunks, output_path)
        return
    if output_path == "-":
        out = _stdout()
        sim.write_jsonl(chunks, out)
        out.flush()
        return
    _write_atomically(output_path, lambda handle: sim.write_jsonl(chunks, handle))


def _write_atomically(path: str, write: Any) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    import gzip
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".specaccept-", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; the result should look like any new file
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.endswith(".gz"):
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
                    write(packed)
            else:
                write(raw)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main() -> None:
    cli(prog_name="specaccept")
