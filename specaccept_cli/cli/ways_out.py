"""The way out of an input error: the option, the command or the input form that fixes it.

The core says what is wrong with the input, in words a library user reads too; the command line adds
here what to do about it on the command line, the one place besides `hints.py` that names options.
Nothing heavy is imported: the error boundary runs this for every command, `check` included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from specaccept_cli.errors import InputError, SpecacceptError

# ctx.meta key: the field path each field option of the running command names ({"p": "--p-field", ...}).
FIELD_OPTIONS = "specaccept.field_options"

# The core's wording of each error a way out answers (tests/cli/test_ways_out.py raises every one for real).
_FIELD = re.compile(
    r"^(?:missing (?:field|column) '(?P<missing>[^']+)'"
    r"|field '[^']*' is .*\(looking for '(?P<inside>[^']+)'\)"
    r"|'(?P<wrong>[^']+)' is .*, not a list of (?:numbers|token ids)"
    r"|column '(?P<column>[^']+)' (?:is|holds) .*, not (?:a list of numbers|numbers|token ids))"
)
_NO_ROW_HAS = re.compile(r"^no row has the field '(?P<name>[^']+)'")
_CLUSTERED_ENGINE = re.compile(r"so a cluster field has nothing to cluster")
_BROKEN_PARQUET = re.compile(r"^(?:is not a Parquet file|cannot read Parquet data)")
_NOT_OBJECT = re.compile(r"^row is .*, not a JSON object$")
_NOT_JSON = re.compile(r"^invalid JSON at column ")
_CUT = re.compile(r"^compressed stream is truncated or corrupt after (?P<lines>[\d,]+) lines?\b")
_NO_ITEMS = re.compile(r"^no (?P<format>\S+) (?:metrics lines|payloads) among its ")
_NOT_A_SUMMARY = re.compile(  # a file that is no summary at all (a corrupt one says what is wrong with it)
    r"^(?:not a JSON summary|(?:not a usable summary: )?not a specaccept\.summary/\S+ object)"
)
_PARQUET_FOLLOWED = re.compile(r"^is Parquet: only text")
_NOT_A_RULE = re.compile(r"^'(?P<field>[^']+)' is .*, not a rule (?:name|this audit knows) \(known: ")
# A message that already says what to do (an option, another input, an install): no second way out after it.
_NAMES_ITS_WAY_OUT = re.compile(r"--|\binstead\b|pip install|\bgive\b")

ONE_OBJECT_PER_LINE = "the input must hold one JSON object per line (JSONL)"
SKIP = "--on-error skip reads past bad rows and counts them"
NO_DRAFT_PROBABILITIES = (
    "--rule greedy-draft for rows of a server that verifies without draft probabilities "
    "(vLLM's EAGLE, MTP and n-gram drafts keep a token iff r <= p)"
)


def field_options(fields: Mapping[str, str]) -> dict[str, str]:
    """{field path: the option that names it}, for the way out of a missing field (first part too)."""
    options: dict[str, str] = {}
    for option, path in fields.items():
        options.setdefault(path, option)
        options.setdefault(path.split(".", 1)[0], option)
    return options


def way_out(error: SpecacceptError, meta: Mapping[str, object]) -> str | None:
    """What to do about `error` on the command line, or None where its words already say it."""
    if not isinstance(error, InputError):
        absent = _NO_ROW_HAS.match(str(error))
        known = meta.get(FIELD_OPTIONS)
        if absent is None or not isinstance(known, dict) or known.get(absent.group("name")) is None:
            return None
        if "did you mean" in str(error):  # the nearest key is the way out, named already
            return None
        # An extra field no row has (a typo, most likely): the option that named it, spelt as given.
        option, name = known[absent.group("name")], absent.group("name")
        named = option if " " in option else f"{option} {name}"
        return f"{named} names a field no row has: give one of the row's keys (a dotted path reaches inside)"
    message = error.message
    field = _FIELD.match(message)
    if field is not None:
        path = field.group("missing") or field.group("inside") or field.group("wrong") or field.group("column")
        known = meta.get(FIELD_OPTIONS)
        option = known.get(path) if isinstance(known, dict) else None
        if option is not None:
            role = option.removeprefix("--").removesuffix("-field").replace("-", " ")
            fix = f"name the field that holds {role} with {option} NAME (a dotted path reaches inside objects)"
            if option == "--q-field" and field.group("missing"):  # a server that verifies without q logs none
                fix += f", or {NO_DRAFT_PROBABILITIES}"
            return fix
        return None  # an extra field of the command's own: its message names the option already
    not_a_rule = _NOT_A_RULE.match(message)
    if not_a_rule is not None:
        field_name = not_a_rule.group("field")
        return (
            f"if the rows' '{field_name}' means something else, --rule-field NAME names the field that holds the "
            f"verification rule (--rule-field none: rows name none, each is --rule's); {SKIP}"
        )
    if _NOT_OBJECT.match(message):
        return f"{ONE_OBJECT_PER_LINE}; {SKIP}"
    if _NOT_JSON.match(message):
        return f"{ONE_OBJECT_PER_LINE}; {SKIP}"
    cut = _CUT.match(message)
    if cut is not None:
        lines = cut.group("lines")
        whole = "line" if lines == "1" else f"{lines} lines"
        return f"--on-error skip keeps the {whole} before the cut and counts the rest as one skipped source"
    found = _NO_ITEMS.match(message)
    if found is not None:
        return "--format auto detects what the file holds; --format names another form (audit --help lists them)"
    if _NOT_A_SUMMARY.match(message):
        return "a summary file is what audit --summary-out (or -o json) writes"
    if _PARQUET_FOLLOWED.match(message):
        return "audit it without --follow"
    if _CLUSTERED_ENGINE.search(message):
        return "audit it without --cluster-field"
    if _BROKEN_PARQUET.match(message):
        return "--on-error skip reads the other sources and counts this one as skipped"
    if error.line is not None and not _NAMES_ITS_WAY_OUT.search(message):
        return SKIP
    return None


def with_way_out(error: SpecacceptError, meta: Mapping[str, object]) -> str:
    """The error's line and its way out: "where: what is wrong; what to do"."""
    fix = way_out(error, meta)
    return str(error) if fix is None else f"{error}; {fix}"
