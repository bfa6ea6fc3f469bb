"""Numbers as every view shows them: one formatter, a dash where there is no value."""

from __future__ import annotations

MISSING = "—"


def number(value: float | None, spec: str = ".4f") -> str:
    """`value` in the format `spec` (".4f" for rates, "+.2%" for a change, ...), or MISSING when there is none."""
    return MISSING if value is None else format(value, spec)


def interval(bounds: tuple[float, float] | None) -> str:
    return MISSING if bounds is None else f"[{number(bounds[0])}, {number(bounds[1])}]"
