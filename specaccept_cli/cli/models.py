"""`specaccept simulate` and `specaccept expect`: the i.i.d. model, as data and as numbers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from specaccept_cli.cli.destinations import opened, target, write_to
from specaccept_cli.cli.options import FiniteFloat, WholeNumber, check_output_path, cost_ratio_option, output_option
from specaccept_cli.cli.output import binary_stdout, printing_to_stdout, write_stdout
from specaccept_cli.errors import SpecacceptError
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH

if TYPE_CHECKING:
    from specaccept_cli.rule.registry import Rule
    from specaccept_cli.simulate import Requests


def _requests(runs_text: str | None, alpha_beta: str | None, k_follows_alpha: bool) -> Requests | None:
    """`--requests`, `--request-alpha-beta` and `--k-follows-alpha`, checked together."""
    from specaccept_cli.simulate import Requests

    if runs_text is None:
        if alpha_beta is not None or k_follows_alpha:
            raise click.UsageError("--request-alpha-beta and --k-follows-alpha need --requests")
        return None
    low, high = _parse_k_range(runs_text, "50-500", "--requests", limit=10**6, what="number of runs")
    if low < 1:
        raise click.BadParameter("a request holds at least one run", param_hint="--requests")
    beta = None
    if alpha_beta is not None:
        try:
            a, b = (float(item) for item in alpha_beta.split(","))
        except ValueError:
            a = b = -1.0
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            raise click.BadParameter(
                f"{alpha_beta!r} is not two positive numbers like 7,3", param_hint="--request-alpha-beta"
            )
        beta = (a, b)
    if k_follows_alpha and beta is None:
        raise click.UsageError("--k-follows-alpha needs --request-alpha-beta (alphas that differ by request)")
    return Requests((low, high), beta, k_follows_alpha)


@click.command(short_help="Write honest synthetic logs with a known alpha.")
@click.option("--runs", type=WholeNumber(min=0), required=True, help="Number of drafted runs.")
@click.option("--alpha", type=FiniteFloat(0.0, 1.0), default=None, help="Per-token acceptance probability.")
@click.option(
    "--alpha-by-position",
    "alpha_by_position_text",
    metavar="A1,A2,...",
    default=None,
    help="Acceptance probability of draft position 1, 2, ... (the last repeats); instead of --alpha.",
)
@click.option("--k", "k_text", metavar="K|LOW-HIGH", help="Draft length, or a range drawn uniformly.")
@click.option("--seed", type=WholeNumber(min=0), default=None, help="Seed for a reproducible log.")
@click.option(
    "--rule",
    "rule",
    metavar="NAME",
    default=None,
    callback=lambda context, param, value: _rule_option(context, param, value),
    help="Decode two small real models under this verification rule (docs/rules.md) instead of --alpha.",
)
@click.option(
    "--tree",
    "tree_text",
    metavar="WxD",
    default=None,
    help="With a tree rule: whole trees of W children per node (the top-k), D levels deep, e.g. 2x3.",
)
@click.option(
    "--requests",
    "requests_text",
    metavar="N|LOW-HIGH",
    default=None,
    help="Group runs into requests of this many runs (uniform in a range); rows get a request_id.",
)
@click.option(
    "--request-alpha-beta",
    "request_alpha_beta",
    metavar="A,B",
    default=None,
    help="With --requests: each request's alpha is drawn from Beta(A, B) (easy and hard prompts).",
)
@click.option(
    "--k-follows-alpha",
    is_flag=True,
    help="With --requests: a request's draft length grows with its alpha (an adaptive drafter).",
)
@click.option(
    "-o",
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    metavar="PATH",
    callback=check_output_path,
    help="JSONL (stdout by default; .gz compresses) or Parquet (.parquet). A path, not a format.",
)
def simulate(
    runs: int,
    alpha: float | None,
    alpha_by_position_text: str | None,
    k_text: str,
    seed: int | None,
    rule: Rule | None,
    tree_text: str | None,
    requests_text: str | None,
    request_alpha_beta: str | None,
    k_follows_alpha: bool,
    output_path: str,
) -> None:
    """Write honest synthetic logs: each token passes independently with probability ALPHA.

    With --alpha-by-position the probability depends on the token's position in the draft.
    With --requests runs come in requests, each with its own alpha (--request-alpha-beta).
    With --rule NAME, two small real models decode under that rule and each row is a verify step in the
    rule's row contract, with the accepted length the decoder decided (--tree WxD for tree rules).

    \b
    Examples:
      specaccept simulate --runs 1000 --alpha 0.8 --k 4 --seed 1 -o logs.jsonl
      specaccept simulate --runs 1000 --alpha-by-position 0.9,0.7,0.5 --k 4 -o falling.jsonl
      specaccept simulate --runs 1000 --rule block --k 4 --seed 1 -o block.jsonl
      specaccept simulate --runs 1000 --rule tree-target-cdf --tree 2x3 --seed 1 -o sglang.jsonl
    """
    from specaccept_cli import simulate as sim

    name = output_path.lower()
    if name.endswith((".bz2", ".xz", ".zst", ".zstd")):
        raise click.BadParameter(
            "simulate writes JSONL, gzip-compressed JSONL (.gz) or Parquet (.parquet)", param_hint="-o"
        )
    if rule is not None or tree_text is not None:
        _simulate_rule(runs, rule, tree_text, k_text, seed, output_path)
        return
    if k_text is None:
        raise click.UsageError("Missing option '--k'.")
    if (alpha is None) == (alpha_by_position_text is None):
        raise click.UsageError("give exactly one of --alpha and --alpha-by-position")
    alpha_by_position = None
    if alpha_by_position_text is not None:
        try:
            alpha_by_position = sim.parse_alpha_list(alpha_by_position_text)
        except ValueError:
            raise click.BadParameter(
                f"{alpha_by_position_text!r} is not a list of probabilities like 0.9,0.7,0.5",
                param_hint="--alpha-by-position",
            ) from None
    k_low, k_high = _parse_k_range(k_text, "1-8")
    requests = _requests(requests_text, request_alpha_beta, k_follows_alpha)
    chunks = sim.simulate(runs, alpha or 0.0, k_low, k_high, seed, alpha_by_position, requests)
    _write_log(output_path, lambda out: sim.write_jsonl(chunks, out), lambda raw: sim.write_parquet(chunks, raw))


def _write_log(output_path: str, jsonl: Callable[[Any], int], parquet: Callable[[Any], int]) -> None:
    """A simulated log to stdout (JSONL), or to a file: Parquet by its suffix, JSONL (gzip by .gz) otherwise."""
    if output_path == "-":
        out = binary_stdout("json")
        jsonl(out)
        out.flush()
        return
    try:
        if output_path.lower().endswith((".parquet", ".pq")):
            with opened(target(output_path)) as raw:
                parquet(raw)
        else:
            write_to(output_path, jsonl)
    except OSError as exc:
        raise SpecacceptError(f"cannot write {output_path}: {exc.strerror or exc}") from None


def _simulate_rule(
    runs: int, rule: Rule | None, tree_text: str | None, k_text: str | None, seed: int | None, output_path: str
) -> None:
    """`simulate --rule NAME`: rows from the rule's decoder (`rule/decoders.py`), in its row contract."""
    from specaccept_cli import simulate as sim

    context = click.get_current_context()
    given = [
        option
        for option, value in (
            ("--alpha", "alpha"),
            ("--alpha-by-position", "alpha_by_position_text"),
            ("--requests", "requests_text"),
            ("--request-alpha-beta", "request_alpha_beta"),
            ("--k-follows-alpha", "k_follows_alpha"),
        )
        if context.params.get(value) not in (None, False)
    ]
    if rule is None:
        raise click.UsageError("--tree needs --rule with a tree rule (tree-residual, tree-target-cdf, ...)")
    if given:
        raise click.UsageError(f"--rule decodes real models, whose acceptance follows from them: leave out {given[0]}")
    tree = None
    if rule.kind == "tree":
        if tree_text is None:
            raise click.UsageError(f"rule '{rule.name}' verifies trees: give their shape with --tree (e.g. 2x3)")
        if k_text is not None:
            raise click.UsageError("--tree sets the depth of a tree: leave out --k")
        try:
            tree = sim.parse_tree_shape(tree_text)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--tree") from None
        from specaccept_cli.rule.decoders import tree_nodes

        if tree_nodes(*tree) > sim.MAX_TREE_NODES:
            raise click.BadParameter(
                f"a {tree_text} tree has {tree_nodes(*tree):,} nodes; at most {sim.MAX_TREE_NODES:,}",
                param_hint="--tree",
            )
        k_low = k_high = 0
    else:
        if tree_text is not None:
            raise click.UsageError(f"rule '{rule.name}' verifies chains: leave out --tree")
        if k_text is None:
            raise click.UsageError("Missing option '--k'.")
        k_low, k_high = _parse_k_range(k_text, "1-8")
    chunks = sim.simulate_rule(rule.name, runs, seed, k_low=k_low, k_high=k_high, tree=tree)
    _write_log(
        output_path, lambda out: sim.write_rule_jsonl(chunks, out), lambda raw: sim.write_rule_parquet(chunks, raw)
    )


def _parse_k_range(
    text: str, example: str, param_hint: str = "--k", limit: int = MAX_DRAFT_LENGTH, what: str = "draft length"
) -> tuple[int, int]:
    """`4` -> (4, 4), `1-8` -> (1, 8): one count or an inclusive range, at most `limit` (draft lengths by default)."""
    low_text, dash, high_text = text.strip().partition("-")
    try:
        low = int(low_text)
        high = int(high_text) if dash else low
        valid = 0 <= low <= high
    except ValueError:
        valid = False
    if not valid:
        raise click.BadParameter(f"{text!r} is not a {what} (4) or range ({example})", param_hint=param_hint)
    if high > limit:  # also bounds how many k one call lists
        raise click.BadParameter(f"{param_hint} goes up to {limit}", param_hint=param_hint)
    return low, high


def _parse_k_list(text: str) -> list[int]:
    """`4`, `2,4,8`, `1-10` or a mix (`1-3,8`) -> draft lengths in the order given, duplicates dropped."""
    ks: list[int] = []
    for item in text.split(","):
        low, high = _parse_k_range(item.strip(), "1-10")
        ks += range(low, high + 1)
    return list(dict.fromkeys(ks))


# Significant digits of the calculator's JSON: (1 - 0.8^2) / 0.2 is 1.7999999999999998 in floating point, and a
# calculator that prints that reads as wrong. Twelve digits keep every figure a closed form can mean while the
# last bits of rounding error (about 1e-16 relative) go.
EXPECT_DIGITS = 12


def _rounded(row: dict[str, float]) -> dict[str, float]:
    """A calculator row with its computed figures at EXPECT_DIGITS significant digits (alpha and k as given)."""
    return {
        key: float(f"{value:.{EXPECT_DIGITS}g}") if key in ("tokens_per_pass", "speedup") else value
        for key, value in row.items()
    }


def _rule_option(context: click.Context, param: click.Parameter, value: str | None) -> Rule | None:
    """`--rule NAME`: a rule of the table (a name or an alias, any case), or a usage error naming them."""
    if value is None:
        return None
    from specaccept_cli.rule.registry import rule_named

    try:
        return rule_named(value)
    except KeyError as error:
        raise click.BadParameter(str(error.args[0]), ctx=context, param=param) from None


def _rule_note(rule: Rule, with_cost: bool = False) -> str | None:
    """What the figures mean under a rule other than the chain's closed form, for the table view; `with_cost`:
    what the best k marked means under the rule's own model."""
    if rule.model == "at-least-chain":
        note = (
            f"{rule.name}: it keeps at least this many tokens per pass at this alpha (never fewer than the chain "
            "rule on the same drafts); how many more depends on the two distributions, not on alpha alone."
        )
        if with_cost:
            note += (
                " The best k marked is the floor's: its decisions are joint, so its own best k is not known from "
                "alpha (its logs at each k give it)."
            )
        return note
    if rule.model == "tree":
        note = (
            f"{rule.name}: --alpha is read as the conditional acceptance rate at every depth and --k as the "
            "tree's depth; a real tree's rates differ by depth (its accepted-depth histogram gives them)."
        )
        if with_cost:
            # 1 + alpha + ... + alpha^k over 1 + k c: the chain's closed form is the tree's model at one rate.
            note += " The best k marked is the best depth by the tree's model, a draft pass per level."
        return note
    return None


@click.command(short_help="Tokens per pass (and speedup) the i.i.d. model expects.")
@click.option("--alpha", type=FiniteFloat(0.0, 1.0), required=True, help="Per-token acceptance probability.")
@click.option("--k", "k_text", required=True, metavar="K|K1,K2|LOW-HIGH", help="Draft length(s): 4, 2,4,8 or 1-10.")
@click.option(
    "--rule",
    "rule",
    metavar="NAME",
    callback=_rule_option,
    help="Verification rule (docs/rules.md): block gives a lower bound; a tree rule reads --alpha as the rate "
    "at every depth and --k as the depth.",
)
@cost_ratio_option
@output_option(("table", "json"), "table: Rich view; json: an object for one k, a list for several.")
def expect(alpha: float, k_text: str, rule: Rule | None, cost_ratio: float | None, output: str) -> None:
    """Tokens per target pass (and speedup) the i.i.d. model predicts: (1 - alpha^(k+1)) / (1 - alpha).

    \b
    Examples:
      specaccept expect --alpha 0.8 --k 4              # -> 3.3616
      specaccept expect --alpha 0.8 --k 1-10 --cost-ratio 0.05
      specaccept expect --rule block --alpha 0.8 --k 4 # at least 3.3616
    """
    from specaccept_cli.summary import formulas

    ks = _parse_k_list(k_text)
    rows = [formulas.expectation(alpha, k, cost_ratio) for k in ks]
    if output == "json":
        import orjson

        rounded: list[dict[str, object]] = [{**_rounded(row), **_rule_keys(rule)} for row in rows]
        write_stdout(
            orjson.dumps(rounded[0] if len(rounded) == 1 else rounded, option=orjson.OPT_APPEND_NEWLINE), "json"
        )
        return
    from rich.console import Group
    from rich.text import Text

    from specaccept_cli.views.terminal import QuietPipeConsole, expect_table

    best_k = None if cost_ratio is None else max(ks, key=lambda k: formulas.expected_speedup(alpha, k, cost_ratio))
    optimal = None if cost_ratio is None else formulas.optimal_k(alpha, cost_ratio)
    note = None if rule is None else _rule_note(rule, cost_ratio is not None)
    with printing_to_stdout():
        table = expect_table(rows, best_k, optimal)
        QuietPipeConsole().print(table if note is None else Group(table, Text(note, style="dim")))


def _rule_keys(rule: Rule | None) -> dict[str, object]:
    """The keys `--rule` adds to each JSON row: the rule's name, and `bound` where the figure is a lower bound."""
    if rule is None:
        return {}
    return {"rule": rule.name, **({"bound": "at least"} if rule.model == "at-least-chain" else {})}
