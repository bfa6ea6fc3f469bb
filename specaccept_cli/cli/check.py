"""`specaccept check`: one drafted run, for quick shell checks.

It loads lazily and imports neither numpy, pyarrow nor rich (unless --explain): it must start
about as fast as click itself (`tests/test_startup.py`, `make bench`).
"""

from __future__ import annotations

import click

from specaccept_cli.cli.output import printing_to_stdout, write_stdout

# A number as JSON writes it (RFC 8259, section 6), in ASCII digits only: what a JSON array may hold,
# and so what the comma form accepts too (float() alone would also take "١٢", "+1", ".5" or "1_0").
_JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
# Spellings of NaN and the infinities (Python's JSON reader takes NaN and Infinity): refused as not finite.
_NOT_FINITE = r"[+-]?(?:nan|inf|infinity)"
_JSON_BLANKS = " \t\r\n"


def _parse_list(text: str, name: str) -> list[float]:
    """`0.9,0.2,0.8` or `[0.9, 0.2, 0.8]`; `""` and `[]` are an empty draft.

    Each item is a JSON number (blanks around it allowed, as in a JSON array): what a log's JSON would
    hold, so `check` and `audit` read the same values.
    """
    import math
    import re

    stripped = text.strip(_JSON_BLANKS)
    from_json = stripped.startswith("[")
    if from_json:
        import json  # only for this form: the comma form is the quick one

        try:
            items = json.loads(stripped)
        except (ValueError, RecursionError) as exc:
            raise click.BadParameter(f"not a JSON array: {exc}", param_hint=f"--{name}") from None
        if not isinstance(items, list):
            raise click.BadParameter("not a JSON array", param_hint=f"--{name}")
    else:
        items = [] if not stripped else [item.strip(_JSON_BLANKS) for item in stripped.split(",")]
    values = []
    for index, item in enumerate(items):
        # A JSON array holds numbers (not numeric strings); the comma form holds JSON numbers as text.
        if isinstance(item, bool) or not isinstance(item, (str, int, float)) or from_json == isinstance(item, str):
            raise click.BadParameter(f"item {index} ({item!r}) is not a number", param_hint=f"--{name}")
        if isinstance(item, str) and not re.fullmatch(_JSON_NUMBER, item, re.ASCII):
            finite = re.fullmatch(_NOT_FINITE, item, re.IGNORECASE)
            problem = "not a finite number" if finite else "not a number (write it as JSON does: 0.5, 1e-3)"
            raise click.BadParameter(f"item {index} ({item!r}) is {problem}", param_hint=f"--{name}")
        try:
            value = float(item)
        except OverflowError:  # an integer past a double, in a JSON array
            value = math.inf
        if not math.isfinite(value):
            raise click.BadParameter(f"item {index} ({item!r}) is not a finite number", param_hint=f"--{name}")
        values.append(value)
    return values


@click.command()
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
    from specaccept_cli.rule.scalar import accept_prefix
    from specaccept_cli.rule.validate import value_problem

    p, q, r = _parse_list(p_text, "p"), _parse_list(q_text, "q"), _parse_list(r_text, "r")
    if not len(p) == len(q) == len(r):
        raise click.UsageError(f"--p, --q and --r have different lengths ({len(p)}, {len(q)}, {len(r)})")
    for name, values in (("p", p), ("q", q), ("r", r)):
        for index, value in enumerate(values):
            problem = value_problem(name, index, value)
            if problem is not None:
                raise click.BadParameter(problem, param_hint=f"--{name}")
    accepted = accept_prefix(p, q, r)
    write_stdout(b"%d\n" % accepted)
    if explain:
        from specaccept_cli.views.terminal import QuietPipeConsole, explain_table

        with printing_to_stdout():
            QuietPipeConsole().print(explain_table(p, q, r, accepted))
