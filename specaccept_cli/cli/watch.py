"""`specaccept watch URL...`: a live audit of servers' /metrics, scraped every period."""

from __future__ import annotations

from typing import Any

import click

from specaccept_cli.cli.live import alert_option, every_option
from specaccept_cli.cli.options import (
    FIRST_OPTIONS,
    FiniteFloat,
    GroupedCommand,
    gate_options,
    github_option,
    output_option,
)

WATCH_OUTPUTS = ("table", "json", "markdown", "jsonl")


def parse_header(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    headers: list[tuple[str, str]] = []
    for item in value:
        name, sep, content = item.partition("=")
        if not sep or not name.strip() or any(c in name for c in "\r\n:") or any(c in content for c in "\r\n"):
            # The value may be a secret: the message names the header, never its value.
            raise click.BadParameter(f"expected KEY=VALUE on one line (header {name.strip()[:40]!r})")
        headers.append((name.strip(), content))
    return tuple(headers)


def check_urls(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Every URL checked as the option is parsed: one line naming it (without its password), exit 2."""
    from specaccept_cli.read.scrape import check_url

    for url in value:
        problem = check_url(url)
        if problem is not None:
            raise click.BadParameter(problem)
    return value


@click.command(
    cls=GroupedCommand,
    option_groups=(
        (FIRST_OPTIONS, ("every", "output", "min_alpha", "summary_out", "html_path", "alert", "headers", "quiet")),
        ("Scraping", ("timeout", "retries")),
        ("What to compute", ("group_by",)),
        ("Gates (exit 1 when one fails)", ("min_tokens_per_pass", "min_acceptance_rate", "significance")),
        ("Output", ("github",)),
    ),
    short_help="Scrape Prometheus endpoints and audit acceptance live.",
)
@click.argument("urls", nargs=-1, required=True, metavar="URL...", callback=check_urls)
@every_option("15s")
@click.option(
    "--timeout",
    type=FiniteFloat(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How long one scrape may take; a slow endpoint is retried with backoff, then counted as failing.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="Retries of a failed scrape within a period (waiting 0.5 s, then 1 s, ...).",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    callback=parse_header,
    help="An HTTP header for every scrape (Authorization=Bearer ...). Repeatable. Never printed.",
)
@click.option("--group-by", metavar="LABEL", default=None, help="Summarise each value of a label (model_name, engine).")
@output_option(WATCH_OUTPUTS, "stdout: interval records (jsonl), or the final summary as a table, JSON or markdown.")
@gate_options
@click.option(
    "--significance",
    type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True),
    default=0.01,
    show_default=True,
    help="Level of the drift test over the periods.",
)
@click.option("--summary-out", type=click.Path(dir_okay=False), metavar="PATH", help="Also write the final summary.")
@click.option(
    "--html", "html_path", type=click.Path(dir_okay=False), metavar="PATH", help="Also write the final HTML report."
)
@alert_option
@github_option
@click.option("-q", "--quiet", is_flag=True, help="No live view on the terminal.")
def watch(**options: Any) -> None:
    """Scrape each URL's Prometheus counters (vLLM's vllm:spec_decode_*, SGLang's gauges) every --every
    and show alpha, tokens per pass, the drift test and the gates live; Ctrl-C or SIGTERM ends the watch,
    prints the final summary of what happened while watching and applies the gates (exit 0 or 1; exit 2
    when no endpoint ever answered with a page that could be read).

    An endpoint that fails (refused, timed out, HTTP 500, not a scrape) is shown and counted, never fatal;
    the next good scrape counts the whole gap. A counter reset (a restarted server) counts from the
    restart, as Prometheus's increase() does.

    \b
    Examples:
      specaccept watch http://localhost:8000/metrics
      specaccept watch http://a:8000/metrics http://b:8000/metrics --group-by model_name -o jsonl
      specaccept watch https://vllm.internal/metrics --header "Authorization=Bearer $TOKEN" --min-alpha 0.6
    """
    from specaccept_cli.cli.audit import run_audit
    from specaccept_cli.cli.audit_options import AuditOptions
    from specaccept_cli.read.formats import of_driver

    run_audit(
        AuditOptions(
            inputs=(),
            output=options["output"],
            input_format=of_driver("scrape").name,
            draft_length=None,
            p_field="p",
            q_field="q",
            r_field="r",
            id_fields=(),
            group_by=options["group_by"],
            cluster_field=None,
            max_groups=20,
            cost_ratio=None,
            show_conventions=False,
            max_rows=0,
            quiet=options["quiet"],
            reported_field=None,
            max_mismatches=None,
            check_sampler=False,
            sampler_significance=0.001,
            draft_tokens_field=None,
            target_tokens_field=None,
            min_alpha=options["min_alpha"],
            min_tokens_per_pass=options["min_tokens_per_pass"],
            min_acceptance_rate=options["min_acceptance_rate"],
            summary_out=options["summary_out"],
            baseline=None,
            max_drop=0.02,
            significance=options["significance"],
            github=options["github"],
            on_error="skip",
            max_errors=None,
            allow_empty=True,
            quarantine=None,
            max_line_bytes=1 << 20,
            jobs=1,
            html_path=options["html_path"],
            follow=True,
            every=options["every"],
            alert=options["alert"],
            watch_urls=tuple(options["urls"]),
            headers=options["headers"],
            timeout=options["timeout"],
            retries=options["retries"],
        )
    )
