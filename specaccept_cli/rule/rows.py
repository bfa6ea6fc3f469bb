"""Rows of any rule -> their accepted lengths: the row contract of docs/rules.md, for every reader.

A row names its rule in its `rule` field (a name or alias of `registry.RULES`); `--rule NAME` names it for
rows without one, and a row without either is `standard`. `standard` rows keep the readers' own (p, q, r)
path; every other row is checked against its rule here (`contract.step_problem`: the missing field named
with its rule, the first bad value with its place), its fields gathered into `ChainSteps` / `TreeSteps`
per rule, and the whole block's steps of a rule recomputed at once by the rule's vectorized path.

What a reader gets back for such a row is its drafted length (a chain's k, a tree's depth) and its accepted
length (a tree's accepted depth), which it carries in the batch as a stand-in run (see `stand_in_tokens`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from specaccept_cli.rule.batch import RULE_FIELD, FieldSpec, FloatArray, IntArray, RunBatch
from specaccept_cli.rule.contract import TOKEN_FIELDS, missing_field_problem, missing_fields, step_problem
from specaccept_cli.rule.registry import DEFAULT_RULE, RULES, Rule, rule_named
from specaccept_cli.rule.steps import ChainSteps, TreeSteps, offsets_of
from specaccept_cli.rule.validate import describe_value, length_problem

STANDARD = rule_named(DEFAULT_RULE)
# One row's step as it was read: its fields' values, its per-step parameters, its nodes' parents (trees).
Step = tuple[dict[str, list[object]], dict[str, float], list[int] | None]


def known_rules() -> str:
    return ", ".join(rule.name for rule in RULES)


def row_rule(value: object, default: Rule) -> Rule | str:
    """The rule a row's `rule` value names (absent or null: `default`), or why it names none."""
    if value is None:
        return default
    if type(value) is not str:
        return f"'{RULE_FIELD}' is {describe_value(value)}, not a rule name (known: {known_rules()})"
    try:
        return rule_named(value)
    except KeyError:
        return f"'{RULE_FIELD}' is {describe_value(value)}, not a rule this audit knows (known: {known_rules()})"


def names_other_rule(name: str) -> bool:
    """Whether `FieldSpec.rule` (the rule of rows without one) is another rule than `standard`."""
    return row_rule(name, STANDARD) is not STANDARD


def is_standard(value: object) -> bool:
    """Whether a row's `rule` value (None when absent) leaves it to the standard (p, q, r) path."""
    return value is None or (type(value) is str and row_rule(value, STANDARD) is STANDARD)


def _way_out(rule: Rule, missing: str, fields: FieldSpec) -> str:
    option = {"p": "--p-field", "q": "--q-field", "r": "--r-field"}.get(missing)
    if missing in ("draft_tokens", "target_tokens"):
        option = f"--{missing.replace('_', '-')}-field"
    return missing_field_problem(rule, missing, option)


def _path_of(name: str, fields: FieldSpec) -> tuple[str, ...]:
    dotted = {"p": fields.p, "q": fields.q, "r": fields.r}.get(name, name)
    if name == "draft_tokens" and fields.draft_tokens:
        dotted = fields.draft_tokens
    if name == "target_tokens" and fields.target_tokens:
        dotted = fields.target_tokens
    return tuple(dotted.split("."))


def _lookup(obj: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = obj
    for key in path:
        if type(value) is not dict:
            return None
        value = value.get(key)
    return value


class RuleRows:
    """The non-standard rows of one block, gathered per rule, recomputed all at once (`accepted`)."""

    def __init__(self, fields: FieldSpec) -> None:
        self.fields = fields
        self.default = rule_named(fields.rule)
        self._steps: dict[str, list[Step]] = {}
        self.order: list[tuple[str, int]] = []  # (rule name, index among that rule's rows), in input order

    def add(self, obj: dict[str, Any], rule: Rule) -> str | None:
        """Take a row of `rule` (not `standard`), or say what is wrong with it (the row is then not taken)."""
        params: dict[str, float] = {}
        for param in rule.params:
            value = obj.get(param.name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    return f"'{param.name}' is {describe_value(value)}, not a finite number"
                params[param.name] = float(value)
        parent: list[int] | None = None
        found: dict[str, list[object]] = {}
        if rule.kind == "tree":
            nodes = obj.get("nodes")
            if nodes is None:
                return _way_out(rule, "nodes", self.fields)
            if type(nodes) is not list or any(type(node) is not dict for node in nodes):
                return f"'nodes' is {describe_value(nodes)}, not a list of objects (rule '{rule.name}')"
            if not nodes:
                return f"'nodes' is empty: a tree step of rule '{rule.name}' drafts at least one node"
            parent = []
            for index, node in enumerate(nodes):
                value = node.get("parent")
                if type(value) is not int:
                    return f"nodes[{index}].parent is {describe_value(value)}, not a node index (-1 for depth 1)"
                parent.append(value)
            for name in rule.fields:
                if any(name not in node for node in nodes):
                    missing = next(index for index, node in enumerate(nodes) if name not in node)
                    return f"nodes[{missing}] has no '{name}': " + _way_out(rule, name, self.fields)
                found[name] = [node[name] for node in nodes]
        else:
            for name in (*rule.fields, *rule.optional):
                value = _lookup(obj, _path_of(name, self.fields))
                if value is None:
                    if name in rule.optional:
                        continue
                    return _way_out(rule, name, self.fields)
                if type(value) is not list:
                    return f"'{name}' is {describe_value(value)}, not a list (rule '{rule.name}')"
                found[name] = value
            if "target_tokens" in found and len(found["target_tokens"]) == len(found["draft_tokens"]) + 1:
                found["target_tokens"] = found["target_tokens"][:-1]  # the bonus position's token
            length = len(found[rule.fields[0]])
            problem = length_problem(length)
            if problem is not None:
                return problem
        needed = missing_fields(rule, {*found, *params})  # a parameter without a default (typical's epsilon)
        if needed:
            return _way_out(rule, needed[0], self.fields)
        problem = step_problem(rule, found, params, parent)  # type: ignore[arg-type]
        if problem is not None:
            return problem
        steps = self._steps.setdefault(rule.name, [])
        self.order.append((rule.name, len(steps)))
        steps.append((found, params, parent))
        return None

    def drop_last(self) -> None:
        """Forget the row taken last (the reader found it bad for another reason)."""
        name, _ = self.order.pop()
        self._steps[name].pop()

    def __len__(self) -> int:
        return len(self.order)

    def accepted(self) -> tuple[IntArray, IntArray, list[str]]:
        """(drafted length, accepted length, rule name) of every row taken, in input order.

        A chain's drafted length is its k; a tree's is its depth (its deepest node's), which its accepted
        depth never exceeds.
        """
        drafted: dict[str, IntArray] = {}
        accepted: dict[str, IntArray] = {}
        for name, rows in self._steps.items():
            rule = rule_named(name)
            steps, depth = _steps_of(rule, rows)
            drafted[name] = depth
            accepted[name] = rule.accepted(steps)
        k = np.array([drafted[name][index] for name, index in self.order], dtype=np.int64)
        a = np.array([accepted[name][index] for name, index in self.order], dtype=np.int64)
        return k, a, [name for name, _ in self.order]


def _column(name: str, values: list[object]) -> np.ndarray[Any, Any]:
    if name in TOKEN_FIELDS:
        return np.array(values, dtype=np.int64)
    return np.array([math.nan if value is None else value for value in values], dtype=np.float64)


def _steps_of(rule: Rule, rows: list[Step]) -> tuple[ChainSteps | TreeSteps, IntArray]:
    """One rule's rows as its steps' columns, and each step's drafted length (k, or a tree's depth)."""
    lengths = [len(found[rule.fields[0]]) for found, _, _ in rows]
    offsets = offsets_of(lengths)
    columns = {name: _column(name, [value for found, _, _ in rows for value in found[name]]) for name in rule.fields}
    params: dict[str, FloatArray] = {}
    for param in rule.params:
        if any(param.name in step_params for _, step_params, _ in rows) or param.default is None:
            params[param.name] = np.array(
                [step_params.get(param.name, param.default) for _, step_params, _ in rows], dtype=np.float64
            )
    if rule.kind == "chain":
        return ChainSteps(offsets, columns, params), np.asarray(lengths, dtype=np.int64)
    parents = [parent or [] for _, _, parent in rows]
    depths = np.array([_depth(parent) for parent in parents], dtype=np.int64)
    flat = np.array([index for parent in parents for index in parent], dtype=np.int64)
    return TreeSteps(offsets, flat, columns, params), depths


def _depth(parent: list[int]) -> int:
    """The depth of a step's deepest node (parents come before their children: `steps.tree_problem`)."""
    depths: list[int] = []
    for value in parent:
        depths.append(1 if value < 0 else depths[value] + 1)
    return max(depths, default=0)


def stand_in_tokens(k: IntArray, accepted: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(p, q, r) for runs of k drafted tokens of which the first `accepted` are kept, under the seed's rule.

    p = 1 on the kept positions and 0 after, q = 1, r = 0.5: the seed's rule gives back exactly `accepted`,
    so the summary's (k, accepted) counts and every per-run record follow the row's own rule. These are not
    the row's values: a batch's `rules` column marks such runs, and nothing p/q- or r-based is taken from them.
    """
    total = int(k.sum())
    starts = np.repeat(offsets_of(k.tolist())[:-1], k)
    position = np.arange(total, dtype=np.int64) - starts
    p = (position < np.repeat(accepted, k)).astype(np.float64)
    return p, np.ones(total), np.full(total, 0.5)


def interleave(
    standard: RunBatch,
    lines: IntArray,
    k: IntArray,
    accepted: IntArray,
    extras: dict[str, list[object]],
    rules: list[str],
) -> RunBatch:
    """One batch in input (line) order: the `standard` runs as read, and the other rules' runs as stand-ins."""
    if not rules:
        return standard
    p, q, r = stand_in_tokens(k, accepted)
    all_lines = np.concatenate([standard.lines, lines])
    order = np.argsort(all_lines, kind="stable")
    lengths = np.concatenate([standard.k, k])[order]
    starts = np.concatenate([standard.offsets[:-1], standard.offsets[-1] + offsets_of(k.tolist())[:-1]])[order]
    offsets = offsets_of(lengths.tolist())
    take = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64)
    index = order.tolist()
    names = [DEFAULT_RULE] * len(standard) + rules
    return RunBatch(
        source=standard.source,
        lines=all_lines[order],
        offsets=offsets,
        p=np.concatenate([standard.p, p])[take],
        q=np.concatenate([standard.q, q])[take],
        r=np.concatenate([standard.r, r])[take],
        extras={name: [(values + extras[name])[i] for i in index] for name, values in standard.extras.items()},
        rules=[names[i] for i in index],
    )
