"""The way out of an input error: the option, the command or the input form that fixes it.

The core says what is wrong with the input, in words a library user reads too; the command line adds
here what to do about it on the command line, the one place besides `hints.py` that names options.
Nothing heavy is imported: the error boundary runs this for every command, `check` included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from specaccept_cli.errors import InputError, Reason, SpecacceptError

# ctx.meta key: the field path each field option of the running command names ({"p": "--p-field", ...}).
FIELD_OPTIONS = "specaccept.field_options"

# A message that already says what to do (an option, another input, an install): no second way out after it.
# The one check left on words: whether a bad row without a way out of its own gets the plain `--on-error skip`.
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
    """What to do about `error` on the command line, or None where its words already say it.

    Keyed on the reason the core gives the error (`errors.Why`), never on its words (tests/cli/test_ways_out.py
    checks that every error it raises carries one).
    """
    why = error.why
    reason = None if why is None else why.reason
    if not isinstance(error, InputError):
        if why is None or reason is not Reason.ABSENT_FIELD or why.named or why.about is None:
            return None  # a nearest key ("did you mean") is the way out, named already
        known = meta.get(FIELD_OPTIONS)
        option = known.get(why.about) if isinstance(known, dict) else None
        if option is None:
            return None
        # An extra field no row has (a typo, most likely): the option that named it, spelt as given.
        named = option if " " in option else f"{option} {why.about}"
        return f"{named} names a field no row has: give one of the row's keys (a dotted path reaches inside)"
    if why is not None and reason in (Reason.MISSING_FIELD, Reason.WRONG_FIELD):
        known = meta.get(FIELD_OPTIONS)
        option = known.get(why.about) if isinstance(known, dict) else None
        if option is not None:
            role = option.removeprefix("--").removesuffix("-field").replace("-", " ")
            fix = f"name the field that holds {role} with {option} NAME (a dotted path reaches inside objects)"
            if option == "--q-field" and reason is Reason.MISSING_FIELD:  # a server verifying without q logs none
                fix += f", or {NO_DRAFT_PROBABILITIES}"
            return fix
        return None  # an extra field of the command's own: its message names the option already
    if why is not None and reason is Reason.NOT_A_RULE:
        return (
            f"if the rows' '{why.about}' means something else, --rule-field NAME names the field that holds the "
            f"verification rule (--rule-field none: rows name none, each is --rule's); {SKIP}"
        )
    if reason in (Reason.NOT_AN_OBJECT, Reason.NOT_JSON):
        return f"{ONE_OBJECT_PER_LINE}; {SKIP}"
    if why is not None and reason is Reason.CUT and why.lines is not None:
        whole = "line" if why.lines == 1 else f"{why.lines} lines"
        return f"--on-error skip keeps the {whole} before the cut and counts the rest as one skipped source"
    if reason is Reason.NOTHING_OF_FORMAT:
        return "--format auto detects what the file holds; --format names another form (audit --help lists them)"
    if reason is Reason.NOT_A_SUMMARY:
        return "a summary file is what audit --summary-out (or -o json) writes"
    if reason is Reason.PARQUET_FOLLOWED:
        return "audit it without --follow"
    if reason is Reason.CLUSTERED_ENGINE:
        return "audit it without --cluster-field"
    if reason is Reason.BROKEN_PARQUET:
        return "--on-error skip reads the other sources and counts this one as skipped"
    if error.line is not None and not _NAMES_ITS_WAY_OUT.search(error.message):
        return SKIP
    return None


def with_way_out(error: SpecacceptError, meta: Mapping[str, object]) -> str:
    """The error's line and its way out: "where: what is wrong; what to do"."""
    fix = way_out(error, meta)
    return str(error) if fix is None else f"{error}; {fix}"
