"""Row validation shared by every source: what makes a (p, q, r) row valid, and what to say when not.

A valid row: p, q, r are equal-length lists of finite numbers with 0 <= p <= 1,
0 < q <= 1 and 0 <= r <= 1. This module holds the scalar checks and the wording
(numpy-free, so `check` stays fast); `batch.find_bad_runs` runs them over a batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# The longest draft a run may have. Real drafts are a few to a few dozen tokens; the summary keeps a
# (k + 1) x (k + 1) histogram, so an absurd k (a corrupt length) would cost memory quadratic in it.
MAX_DRAFT_LENGTH = 1024

# A JSONL line longer than this is a bad row by default (--max-line-bytes); it is never held in memory.
DEFAULT_MAX_LINE_BYTES = 64 << 20


# A reported count above this cannot be a token count (and would not fit the int64 arrays).
MAX_COUNT = 2**53


def count_problem(name: str, value: object) -> str | None:
    """Message for a value that should be a non-negative whole count (a reported accepted length), or None."""
    if (type(value) is int or (type(value) is float and value.is_integer())) and 0 <= value <= MAX_COUNT:
        return None
    shown = "missing or null" if value is None else json_value(value)
    return f"'{name}' is {shown}, not a non-negative count"


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """ "; did you mean 'x'?" naming the known names closest to a name that was not found (a typo), or ""."""
    import difflib  # only on this error path

    closest = difflib.get_close_matches(name, known, n=3, cutoff=0.75)
    return f"; did you mean {' or '.join(repr(key) for key in closest)}?" if closest else ""


def length_problem(k: int) -> str | None:
    """Message for a run whose draft is longer than any real one, or None."""
    if k <= MAX_DRAFT_LENGTH:
        return None
    return f"draft of {k} tokens is longer than the {MAX_DRAFT_LENGTH} a run may have"


def describe_value(value: object) -> str:
    """A short, single-line rendering of a value from the data for an error message."""
    if isinstance(value, float):
        text = repr(value)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    else:
        text = repr(value) if isinstance(value, (int, str)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def json_value(value: object) -> str:
    """A value from the data as a message names it: `null`, `true`, `0.5`, `the string '0.5'`, `an array`.

    Numbers, strings and literals show themselves; containers only their kind (their text could be long).
    """
    if value is None or isinstance(value, (bool, int, float)):
        return describe_value(value)
    if isinstance(value, str):
        return f"the string {describe_value(value)}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _range_problem(field: str, value: float) -> str | None:
    """Why one value is out of bounds for its field, or None when it is fine."""
    if not math.isfinite(value):
        return "is not a finite number"
    if field == "q":
        if value == 0:
            return "is zero: a drafted token always has q > 0"
        if not 0 < value <= 1:
            return "is out of range (q must be in (0, 1])"
        return None
    if not 0 <= value <= 1:
        return f"is out of range ({field} must be in [0, 1])"
    return None


def value_problem(field: str, index: int, value: float, name: str | None = None) -> str | None:
    """Message for value `index` of a field, or None when it is valid. `name` is the user's field path."""
    problem = _range_problem(field, value)
    if problem is None:
        return None
    return f"{name or field}[{index}] = {describe_value(value)} {problem}"
