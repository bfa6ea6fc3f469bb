"""The row contract per rule: which fields a step must carry, and what to say when a value is not valid.

Readers check a row against its rule here before any recompute (see docs/rules.md, "The row contract"):
a missing field is named with the rule that needs it, and a bad value with its place (`p[2]` in a chain,
`nodes[2].coin` in a tree), in the wording `validate.py` uses for the seed's (p, q, r).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from specaccept_cli.rule.registry import Param, Rule
from specaccept_cli.rule.steps import StepFields, StepParams, tree_problem
from specaccept_cli.rule.validate import describe_value, value_problem

TOKEN_FIELDS = frozenset({"draft_tokens", "target_tokens", "token", "target_token"})
_UNIT_FIELDS = frozenset({"p", "q", "r", "coin"})  # probabilities and uniforms: in [0, 1] (q in (0, 1])


def missing_fields(rule: Rule, present: Collection[str]) -> list[str]:
    """The fields (and parameters without a default) the rule needs that a row does not have."""
    needed = [*rule.fields, *(param.name for param in rule.params if param.default is None)]
    return [name for name in needed if name not in present]


def missing_field_problem(rule: Rule, name: str, option: str | None = None, rule_field: str | None = "rule") -> str:
    """A row of `rule` without field `name`: the field, the rule, and the ways out (the row's rule named
    otherwise, in its `rule_field` or with --rule, or `option`, the reader's option that points at where the row
    keeps the field)."""
    where = f", or point {option} at where the row keeps it" if option else ""
    named = f"in a '{rule_field}' field or " if rule_field else ""
    return (
        f"rule '{rule.name}' needs '{name}': is this row another rule's? name its rule {named}with --rule NAME{where}"
    )


def _field_problem(name: str, value: object, last: bool) -> str | None:
    """Why one value of a field is invalid ("is out of range (...)"), or None; the caller adds its place."""
    if type(value) is float and name in _UNIT_FIELDS and (0.0 < value <= 1.0 if name == "q" else 0.0 <= value <= 1.0):
        return None  # the common case, decided without wording a message (NaN fails the comparison)
    if name in TOKEN_FIELDS:
        # below 2^63: the columns hold token ids as int64
        return None if type(value) is int and 0 <= value < 2**63 else "is not a token id (a whole number >= 0)"
    if name == "residual" and last and (value is None or (isinstance(value, float) and math.isnan(value))):
        return None  # the last position has no next one: its residual is null
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double
        return "is not a finite number"
    if name in _UNIT_FIELDS:
        message = value_problem("r" if name == "coin" else name, 0, number, name)
        if message is None:
            return None
        return message[len(f"{name}[0] = {describe_value(value)} ") :].replace("(r must", f"({name} must")
    if name in ("residual", "entropy") and not (math.isfinite(number) and number >= 0):
        return "is not a finite number >= 0"
    return None


def _param_problem(param: Param, value: object) -> str | None:
    name = param.name
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"'{name}' is {describe_value(value)}, not a finite number"
    if param.minimum is not None and value < param.minimum:
        return f"'{name}' is {describe_value(value)}, not >= {param.minimum:g}"
    return None


def step_problem(rule: Rule, fields: StepFields, params: StepParams, parent: Sequence[int] | None = None) -> str | None:
    """The first thing wrong with a step under its rule, or None: a missing field, unequal lengths, a bad value
    or parameter, a tree whose parents are not listed before their children. An optional field (sample-match's
    p) is held to the same when the step carries it: a value out of range there is a corrupt log as well."""
    missing = missing_fields(rule, {*fields, *params})
    if missing:
        return f"rule '{rule.name}' needs {', '.join(repr(name) for name in missing)}"
    checked = [*rule.fields, *(name for name in rule.optional if name in fields)]  # an optional one, when given
    lengths = {name: len(fields[name]) for name in checked}
    if rule.kind == "tree" and parent is not None:
        lengths["parent"] = len(parent)
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name} {length}" for name, length in lengths.items())
        return f"the fields of rule '{rule.name}' differ in length ({shown})"
    for name in checked:
        values = fields[name]
        for index, value in enumerate(values):
            problem = _field_problem(name, value, index == len(values) - 1)
            if problem is not None:
                place = f"nodes[{index}].{name}" if rule.kind == "tree" else f"{name}[{index}]"
                return f"{place} = {describe_value(value)} {problem}"
    for param in rule.params:
        if param.name in params:
            problem = _param_problem(param, params[param.name])
            if problem is not None:
                return problem
    if rule.kind == "tree" and parent is not None:
        return tree_problem(parent)
    return None
