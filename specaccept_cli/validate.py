"""Row validation shared by every source: what makes a (p, q, r) row valid, and what to say when not.

A valid row: p, q, r are equal-length lists of finite numbers with 0 <= p <= 1,
0 < q <= 1 and 0 <= r <= 1. This module holds the scalar checks and the wording
(numpy-free, so `check` stays fast); `batch.find_bad_runs` runs them over a batch.
"""

from __future__ import annotations

import math


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


def json_type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


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
