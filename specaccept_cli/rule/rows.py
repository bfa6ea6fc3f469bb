"""Rows of any rule -> their accepted lengths: the row contract of docs/rules.md, for every reader.

A row names its rule in its rule field (`rule`, or `--rule-field`; a name or alias of `registry.RULES`);
`--rule NAME` names it for rows without one, and a row without either is `standard`. `standard` rows keep
the readers' own (p, q, r) path. The other rows of a block are gathered per rule a column at a time
(`RuleRows`: each field of every row into one flat column, or straight from a reader's columns), checked
column by column, and the whole block's steps of a rule recomputed at once by the rule's vectorized path.
`row_step` reads one row on its own (`contract.step_problem`: the missing field named with its rule, the
first bad value with its place); it is asked only about the rows whose shape is unusual or whose values a
column check doubts, so every message is its own, and it is the reference the columns are tested against.

What a reader gets back for such a row is its drafted length (a chain's k, a tree's depth) and its accepted
length (a tree's accepted depth), which it carries in the batch as a stand-in run (see `stand_in_tokens`).
"""

from __future__ import annotations

import array
import math
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from msgspec import Struct

from specaccept_cli.errors import Problem, Reason, Why
from specaccept_cli.rule.batch import RULE_FIELD, FieldSpec, FloatArray, IntArray, RunBatch
from specaccept_cli.rule.contract import TOKEN_FIELDS, missing_field_problem, missing_fields, step_problem
from specaccept_cli.rule.registry import DEFAULT_RULE, RULES, Rule, rule_named
from specaccept_cli.rule.steps import ChainSteps, TreeSteps, offsets_of
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH, describe_value, length_problem

STANDARD = rule_named(DEFAULT_RULE)
# One row's step as it was read: its fields' values, its per-step parameters, its nodes' parents (trees).
Step = tuple[dict[str, list[object]], dict[str, float], list[int] | None]


def known_rules() -> str:
    return ", ".join(rule.name for rule in RULES)


def row_rule(value: object, default: Rule, field: str = RULE_FIELD) -> Rule | str:
    """The rule a row's rule value (its `field`'s) names (absent or null: `default`), or why it names none."""
    if value is None:
        return default
    if type(value) is not str:
        words = f"'{field}' is {describe_value(value)}, not a rule name (known: {known_rules()})"
        return Problem(words, _no_rule(field))
    try:
        return rule_named(value)
    except KeyError:
        words = f"'{field}' is {describe_value(value)}, not a rule this audit knows (known: {known_rules()})"
        return Problem(words, _no_rule(field))


def _no_rule(field: str) -> Why:
    """A rule field naming no rule: the field may mean something else (the way out names another, or none)."""
    return Why(Reason.NOT_A_RULE, about=field)


def rule_value(obj: Mapping[str, Any], fields: FieldSpec) -> object:
    """A row's rule value: its rule field's (a dotted path reaches inside objects), None when absent or ignored."""
    if fields.rule_field is None:
        return None
    if fields.rule_field in obj:
        return obj[fields.rule_field]
    return _lookup(obj, tuple(fields.rule_field.split(".")))


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
    return missing_field_problem(rule, missing, option, fields.rule_field)


def field_path(name: str, fields: FieldSpec) -> tuple[str, ...]:
    """Where a row keeps a rule's field: the field options (`--p-field`, ...) point at it, else its own name."""
    dotted = {"p": fields.p, "q": fields.q, "r": fields.r}.get(name, name)
    if name == "draft_tokens" and fields.draft_tokens:
        dotted = fields.draft_tokens
    if name == "target_tokens" and fields.target_tokens:
        dotted = fields.target_tokens
    return tuple(dotted.split("."))


def rule_keys(rule: Rule, fields: FieldSpec) -> tuple[str, ...]:
    """Every field path `row_step` may read from a row of `rule`: its fields, the lists it may carry, its
    parameters, and a tree's `nodes`."""
    names = ("nodes",) if rule.kind == "tree" else (*rule.fields, *rule.optional)
    paths = ["nodes"] if rule.kind == "tree" else [".".join(field_path(name, fields)) for name in names]
    return (*paths, *(param.name for param in rule.params))


def _lookup(obj: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = obj
    for key in path:
        if type(value) is not dict:
            return None
        value = value.get(key)
    return value


def row_step(obj: Mapping[str, Any], rule: Rule, fields: FieldSpec) -> Step | str:
    """One row of `rule` (not `standard`) checked and gathered on its own: its step, or what is wrong with it.

    The reference for `RuleRows`, which checks a block's rows column by column and asks this only of the rows
    whose shape is not the usual one or whose columns hold a doubtful value: its message is the one users see.
    """
    params: dict[str, float] = {}
    for param in rule.params:
        value = obj.get(param.name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
                return f"'{param.name}' is {describe_value(value)}, not a finite number"
            params[param.name] = float(value)
    parent: list[int] | None = None
    found: dict[str, list[object]] = {}
    if rule.kind == "tree":
        nodes = obj.get("nodes")
        if nodes is None:
            return _way_out(rule, "nodes", fields)
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
                return f"nodes[{missing}] has no '{name}': " + _way_out(rule, name, fields)
            found[name] = [node[name] for node in nodes]
    else:
        for name in (*rule.fields, *rule.optional):
            value = _lookup(obj, field_path(name, fields))
            if value is None:
                if name in rule.optional:
                    continue
                return _way_out(rule, name, fields)
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
        return _way_out(rule, needed[0], fields)
    problem = step_problem(rule, found, params, parent)  # type: ignore[arg-type]
    if problem is not None:
        return problem
    return found, params, parent


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a double
        return False


class Gathered(Struct):
    """One rule's rows of a block read column-wise by a reader that has columns (Parquet): for the rows `ok`,
    each field's values (token ids int64, else float64, a null residual NaN) and lengths, and each parameter per
    row (its default where null); the other rows are left to `row_step`, read from their row objects."""

    ok: npt.NDArray[np.bool_]
    lengths: IntArray  # of the rows ok
    columns: dict[str, npt.NDArray[Any]]
    params: dict[str, FloatArray]  # the parameters some row carries (or that have no default)


class RuleRows:
    """The non-standard rows of one block, gathered per rule into flat columns, checked column by column
    (`check`) and recomputed all at once (`accepted`).

    A reader `add`s each row (a row whose shape is not the usual one is read by `row_step` there and then,
    and refused with its message), `check`s the block (the rows a vectorized check doubts are read by
    `row_step`: the bad ones are refused with its message, so every message is the per-row one), `drop`s the
    rows it refuses for reasons of its own, then takes the `accepted` lengths.
    """

    def __init__(self, fields: FieldSpec) -> None:
        self.fields = fields
        self.default = rule_named(fields.rule)
        self._columns: dict[str, _Columns] = {}
        self.order: list[str] = []  # the rule of each row taken, in input order
        self._dropped: set[int] = set()
        # `row_rule` of the values seen (a log names a handful): absent or null, and names
        self.named: dict[object, Rule | str] = {None: self.default}
        self.field = fields.rule_field or RULE_FIELD

    def rule_of(self, value: object) -> Rule | str:
        """`row_rule` of a row's `rule` value, remembered per name."""
        if value is not None and type(value) is not str:
            return row_rule(value, self.default, self.field)
        found = self.named.get(value)
        if found is None:
            found = self.named[value] = row_rule(value, self.default, self.field)
        return found

    def add(
        self,
        rows: Sequence[Mapping[str, Any]],
        rules: Sequence[Rule],
        gather: Callable[[Rule, list[int]], Gathered | None] | None = None,
    ) -> list[str | None]:
        """Take a block's rows of other rules than `standard` (`rules[i]` is row i's), each rule's rows a column
        at a time; for each row, None (taken) or what is wrong with its shape (not taken). The rows taken are
        numbered in the order given, for `check` and `drop`.

        `gather(rule, places)` reads a rule's rows (by their places in `rows`) from a reader's columns, or gives
        None; `rows[i]` is then only asked for the rows it leaves (a reader may make them on demand)."""
        by_rule: dict[str, list[int]] = {}
        if rules and all(rule is rules[0] for rule in rules):  # a block of one rule, the usual case
            by_rule[rules[0].name] = list(range(len(rules)))
        else:
            for place, rule in enumerate(rules):
                by_rule.setdefault(rule.name, []).append(place)
        problems: list[str | None] = [None] * len(rows)
        local: list[int] = [0] * len(rows)  # each row's index among its rule's rows
        for name, places in by_rule.items():
            columns = self._columns.get(name)
            if columns is None:
                columns = self._columns[name] = _Columns(rule_named(name), self.fields)
            found = gather(columns.rule, places) if gather is not None and not columns.lengths else None
            if found is not None:
                gathered = columns.take_gathered(found, rows, places)
            else:
                gathered = columns.take([rows[place] for place in places])
            if None not in gathered and len(places) == len(rows):  # every row gathered: their local indices
                local = cast(list[int], gathered)
                continue
            for place, index in zip(places, gathered):
                if index is not None:
                    local[place] = index
                    continue
                step = row_step(rows[place], columns.rule, self.fields)
                if isinstance(step, str):
                    problems[place] = step
                else:
                    local[place] = columns.put_step(step, rows[place])
        taken = [place for place, problem in enumerate(problems) if problem is None] if any(problems) else None
        if taken is None:
            taken = list(range(len(rows)))
        numbers = np.full(len(rows), -1, dtype=np.int64)
        numbers[taken] = np.arange(len(self.order), len(self.order) + len(taken), dtype=np.int64)
        for name, places in by_rule.items():
            columns = self._columns[name]
            kept = places if len(taken) == len(rows) else [place for place in places if problems[place] is None]
            numbered = np.zeros(len(columns.lengths), dtype=np.int64)
            numbered[: len(columns.index)] = columns.index
            numbered[[local[place] for place in kept]] = numbers[kept]
            columns.index = numbered.tolist()
        self.order += (
            [rules[0].name] * len(rows)
            if len(by_rule) == 1 and len(taken) == len(rows)
            else [rules[place].name for place in taken]
        )
        return problems

    def __len__(self) -> int:
        return len(self.order) - len(self._dropped)

    def check(self) -> dict[int, str]:
        """What is wrong with each bad row taken (by its place among the rows taken); those rows are dropped."""
        problems: dict[int, str] = {}
        for columns in self._columns.values():
            for row, problem in columns.check().items():
                problems[columns.index[row]] = problem
        self._dropped.update(problems)
        return problems

    def drop(self, index: int) -> None:
        """Forget row `index` of the rows taken (the reader found it bad for another reason)."""
        self._dropped.add(index)

    def accepted(self) -> tuple[IntArray, IntArray, list[str]]:
        """(drafted length, accepted length, rule name) of every row taken and not dropped, in input order.

        A chain's drafted length is its k; a tree's is its depth (its deepest node's), which its accepted
        depth never exceeds. `check` must have been called.
        """
        drafted = np.zeros(len(self.order), dtype=np.int64)
        accepted = np.zeros(len(self.order), dtype=np.int64)
        keep = np.ones(len(self.order), dtype=bool)
        keep[list(self._dropped)] = False
        for name, columns in self._columns.items():
            index = np.asarray(columns.index, dtype=np.int64)
            kept = keep[index]
            if not kept.any():
                continue
            steps, depth = columns.steps(kept)
            drafted[index[kept]] = depth
            accepted[index[kept]] = rule_named(name).accepted(steps)
        names = self.order
        return drafted[keep], accepted[keep], [names[i] for i in np.flatnonzero(keep).tolist()]


_INT_FIELDS = TOKEN_FIELDS | {"parent"}
_UNIT_FIELDS = frozenset({"p", "r", "coin"})


class _Columns:
    """One rule's rows of a block as flat columns (Arrow's list layout): gathered row by row with no look at
    their values (`take`), then converted and checked a column at a time (`check`)."""

    def __init__(self, rule: Rule, fields: FieldSpec) -> None:
        self.rule, self.fields = rule, fields
        self.tree = rule.kind == "tree"
        self.names = rule.fields
        wanted = (*rule.fields, *rule.optional)
        self.paths = [field_path(name, fields) for name in wanted]
        # The fields as plain keys when no option points at a dotted path (the common case: one dict look-up).
        self.keys = [path[0] for path in self.paths] if all(len(path) == 1 for path in self.paths) else None
        self.required = len(rule.fields)
        self.pair = (
            (rule.fields.index("draft_tokens"), rule.fields.index("target_tokens"))
            if "target_tokens" in rule.fields
            else None
        )
        self.residual = rule.fields.index("residual") if "residual" in rule.fields else -1
        self.flat: list[list[object]] = [[] for _ in rule.fields]
        self.parent: list[object] = []
        self.params: list[list[object]] = [[] for _ in rule.params]
        self.given = [False] * len(rule.params)  # whether some row carries the parameter (else its default)
        self.lengths: list[int] = []
        self.objects: list[Mapping[str, Any]] = []  # the rows `take` and `put_step` took, after the head's
        self.index: list[int] = []  # each row's place among the rows `RuleRows` took
        self.arrays: dict[str, npt.NDArray[Any]] = {}
        self.param_arrays: dict[str, FloatArray] = {}
        # The first rows, read column-wise (`take_gathered`): their values, before those of `flat`.
        self.head: Gathered | None = None
        self.head_rows = 0
        self.head_objects: tuple[Sequence[Mapping[str, Any]], list[int]] = ((), [])  # where its rows are

    def take(self, rows: list[Mapping[str, Any]]) -> list[int | None]:
        """Gather the rows of the usual shape (their fields lists of one length, their parameters numbers or
        absent), a column at a time; for each row its index among this rule's rows, or None for a row of
        another shape (`row_step` reads it)."""
        count = len(rows)
        ok = np.ones(count, dtype=bool)
        params = [[row.get(param.name) for row in rows] for param in self.rule.params]
        for place, (param, column) in enumerate(zip(self.rule.params, params)):
            kinds = set(map(type, column))
            if not kinds <= {float, int, type(None)}:
                ok &= [type(value) is float or type(value) is int or value is None for value in column]
            if type(None) in kinds:
                if param.default is None:
                    ok &= [value is not None for value in column]
                column[:] = [param.default if value is None else value for value in column]
            if kinds - {type(None)}:
                self.given[place] = True
        values: list[list[object]]
        if self.tree:
            nodes = [row.get("nodes") for row in rows]
            lengths = np.array([len(item) if type(item) is list else 0 for item in nodes], dtype=np.int64)
            ok &= lengths > 0
            parent, values = self._nodes(nodes, ok)
        else:
            if self.keys is not None:
                found = [[row.get(key) for row in rows] for key in self.keys]
            else:
                found = [[_lookup(row, path) for row in rows] for path in self.paths]
            for place, column in enumerate(found):
                kinds = set(map(type, column))
                if kinds != {list} and (kinds != {list, type(None)} or place < self.required):
                    ok &= [type(value) is list or (value is None and place >= self.required) for value in column]
            values = found[: self.required]
            sizes = [[len(value) if type(value) is list else -1 for value in column] for column in values]
            if self.pair is not None:
                draft, target = self.pair
                bonus = np.flatnonzero(np.asarray(sizes[target]) == np.asarray(sizes[draft]) + 1).tolist()
                for row in bonus:
                    values[target][row] = cast(list[object], values[target][row])[:-1]  # the bonus position's token
                    sizes[target][row] -= 1
            lengths = np.asarray(sizes[0], dtype=np.int64)
            ok &= lengths <= MAX_DRAFT_LENGTH
            for size in sizes[1:]:
                ok &= np.asarray(size, dtype=np.int64) == lengths
            for column in found[self.required :]:  # an optional field (sample-match's p), held to its contract
                ok &= [value is None or _optional_fits(value, int(length)) for value, length in zip(column, lengths)]
            parent = []
        taken = np.flatnonzero(ok).tolist()
        if not taken:
            return [None] * count
        whole = len(taken) == count
        if self.tree:
            kept_lengths = lengths if whole else lengths[ok]
            self.parent += parent
        else:
            kept_lengths = lengths if whole else lengths[ok]
            values = values if whole else [[column[row] for row in taken] for column in values]
            values = [list(chain.from_iterable(cast(list[list[object]], column))) for column in values]
        for flat, column in zip(self.flat, values):
            flat += column
        if self.residual >= 0:
            flat = self.flat[self.residual]
            ends = (len(flat) - int(kept_lengths.sum()) + np.cumsum(kept_lengths))[kept_lengths > 0] - 1
            for end in ends.tolist():
                if flat[end] is None:
                    flat[end] = math.nan  # the last position's residual: null, as no position follows
        for flat, column in zip(self.params, params):
            flat += column if whole else [column[row] for row in taken]
        first = len(self.lengths)
        self.lengths += kept_lengths.tolist()
        self.objects += rows if whole else [rows[row] for row in taken]
        local: list[int | None] = [None] * count
        for index, row in enumerate(taken):
            local[row] = first + index
        return local

    def _nodes(self, nodes: list[Any], ok: npt.NDArray[np.bool_]) -> tuple[list[object], list[list[object]]]:
        """The parents and fields of the nodes of the rows `ok` (cleared for a row holding a node that is not
        an object or lacks a field)."""
        while True:
            flat = list(chain.from_iterable(item for item, good in zip(nodes, ok.tolist()) if good))
            try:
                return [node["parent"] for node in flat], [[node[name] for node in flat] for name in self.names]
            except (KeyError, TypeError):
                pass
            for row in np.flatnonzero(ok).tolist():
                try:
                    for node in nodes[row]:
                        node["parent"]
                        for name in self.names:
                            node[name]
                except (KeyError, TypeError):
                    ok[row] = False

    def take_gathered(
        self, gathered: Gathered, rows: Sequence[Mapping[str, Any]], places: list[int]
    ) -> list[int | None]:
        """The rows a reader read column-wise (`rows[place]` for each of `places`: this rule's first), as `take`;
        a row object is made only for a row `check` doubts."""
        self.head, self.head_rows = gathered, int(gathered.ok.sum())
        self.lengths += gathered.lengths.tolist()
        taken = np.flatnonzero(gathered.ok)
        self.head_objects = (rows, np.asarray(places, dtype=np.int64)[taken].tolist())
        local: list[int | None] = [None] * len(places)
        for index, row in enumerate(taken.tolist()):
            local[row] = index
        return local

    def put_step(self, step: Step, obj: Mapping[str, Any]) -> int:
        """A row `row_step` read and found valid: its index among this rule's rows."""
        found, params, parent = step
        for place, param in enumerate(self.rule.params):
            self.given[place] |= param.name in params
        for flat, name in zip(self.flat, self.names):
            flat += found[name]
        if self.residual >= 0 and found["residual"] and found["residual"][-1] is None:
            self.flat[self.residual][-1] = math.nan
        for flat, param in zip(self.params, self.rule.params):
            flat.append(params.get(param.name, param.default))
        self.parent += parent or []
        self.lengths.append(len(found[self.names[0]]))
        self.objects.append(obj)
        return len(self.lengths) - 1

    def check(self) -> dict[int, str]:
        """Convert every column, and ask `row_step` about each row holding a doubtful value: the bad ones."""
        offsets = offsets_of(self.lengths)
        head, first = self.head, self.head_rows
        rest = offsets[first:] - offsets[first]  # the rows gathered from `flat`
        doubted: set[int] = set()
        unheld: set[int] = set()  # rows holding a value the arrays cannot (a string, a null, a boolean)
        for name, values in zip(self.names, self.flat):
            converted, unreadable = _as_array(name, values, rest)
            if head is not None:
                converted = np.concatenate([head.columns[name].astype(converted.dtype), converted])
            self.arrays[name] = converted
            unheld |= {row + first for row in unreadable}
            doubted |= _rows_of(np.flatnonzero(bad_values(name, converted, offsets)), offsets)
        if self.tree:
            parent, unreadable = _as_array("parent", self.parent, rest)
            if head is not None:
                parent = np.concatenate([head.columns["parent"], parent])
            unheld |= {row + first for row in unreadable}
            self.arrays["parent"] = parent
            local = np.arange(parent.shape[0], dtype=np.int64) - np.repeat(offsets[:-1], self.lengths)
            invalid = (parent < -1) | (parent >= local)
            doubted |= _rows_of(np.flatnonzero(invalid), offsets)
            # A tree deeper than a run may be (`steps.tree_problem` words it): its depth is the run's capacity.
            deep = _depths(np.where(invalid, -1, parent), offsets) > MAX_DRAFT_LENGTH
            doubted.update(np.flatnonzero(deep).tolist())
        rows = np.arange(len(self.lengths) - first + 1, dtype=np.int64)
        for param, values, given in zip(self.rule.params, self.params, self.given):
            converted, unreadable = _as_array(param.name, values, rows)
            if head is not None:
                default = math.nan if param.default is None else param.default
                column = head.params.get(param.name, np.full(first, default))
                converted = np.concatenate([column, converted])
                given = given or param.name in head.params
            unheld |= {row + first for row in unreadable}
            bad = ~np.isfinite(converted)
            if param.minimum is not None:
                bad |= ~(converted >= param.minimum)
            doubted.update(np.flatnonzero(bad).tolist())
            if given or param.default is None:
                self.param_arrays[param.name] = converted
        problems: dict[int, str] = {}
        for row in sorted(doubted | unheld):
            if row < first:
                source, at = self.head_objects
                obj = source[at[row]]
            else:
                obj = self.objects[row - first]
            step = row_step(obj, self.rule, self.fields)
            if isinstance(step, str):
                problems[row] = step
            elif row in unheld:  # pragma: no cover - a value the arrays cannot hold is one `row_step` refuses
                problems[row] = _unheld(self.rule)
        return problems

    def steps(self, kept: npt.NDArray[np.bool_]) -> tuple[ChainSteps | TreeSteps, IntArray]:
        """The kept rows' steps (`check` converted the columns), and each one's drafted length (k, a tree's depth)."""
        lengths = np.asarray(self.lengths, dtype=np.int64)
        columns = dict(self.arrays)
        params = dict(self.param_arrays)
        if not kept.all():
            positions = np.repeat(kept, lengths)
            columns = {name: values[positions] for name, values in columns.items()}
            params = {name: values[kept] for name, values in params.items()}
            lengths = lengths[kept]
        offsets = offsets_of(lengths.tolist())
        if not self.tree:
            return ChainSteps(offsets, columns, params), lengths
        parent = columns.pop("parent")
        return TreeSteps(offsets, parent, columns, params), _depths(parent, offsets)


def _unheld(rule: Rule) -> str:  # pragma: no cover - see `_Columns.check`
    return f"a value of rule '{rule.name}' is not one a column can hold"


def _as_array(name: str, values: list[object], offsets: IntArray) -> tuple[npt.NDArray[Any], set[int]]:
    """A column's values as int64 (token ids, parents) or float64, and the rows holding a value that is not
    one (a string, a null, a list, a boolean, a number beyond the type); their values stand as 0 there."""
    code, dtype = ("q", np.int64) if name in _INT_FIELDS else ("d", np.float64)
    unreadable: set[int] = set()
    try:
        buffer = array.array(code, cast(list[int], values))
    except (TypeError, OverflowError):
        buffer = array.array(code)
        bounds = offsets.tolist()
        for row in range(len(bounds) - 1):
            part = values[bounds[row] : bounds[row + 1]]
            try:
                buffer.extend(array.array(code, cast(list[int], part)))
            except (TypeError, OverflowError):
                unreadable.add(row)
                buffer.extend(array.array(code, [0] * len(part)))
    converted = np.frombuffer(buffer, dtype=dtype) if len(buffer) else np.zeros(0, dtype=dtype)
    suspects = np.flatnonzero((converted == 0) | (converted == 1)).tolist()  # array() takes booleans as 0 and 1
    if suspects and bool in set(map(type, map(values.__getitem__, suspects))):
        booleans = [index for index in suspects if type(values[index]) is bool]
        unreadable |= _rows_of(np.asarray(booleans, dtype=np.int64), offsets)
    return converted, unreadable


def _optional_fits(value: object, length: int) -> bool:
    """Whether an optional probability field present on a row is plainly valid: a list of `length` floats in
    [0, 1]; anything else leaves the row to `row_step`, which words why (or takes it: an integer 0 or 1)."""
    if type(value) is not list or len(value) != length:
        return False
    return all(type(item) is float and 0.0 <= item <= 1.0 for item in value)


def bad_values(name: str, values: npt.NDArray[Any], offsets: IntArray) -> npt.NDArray[np.bool_]:
    """Where a value may be out of its field's range (`contract.step_problem` decides: this never misses one)."""
    if name in TOKEN_FIELDS:
        bad: npt.NDArray[np.bool_] = values < 0
        return bad
    if name == "q":
        bad = ~((values > 0.0) & (values <= 1.0))
        return bad
    if name in _UNIT_FIELDS:
        bad = ~((values >= 0.0) & (values <= 1.0))
        return bad
    finite: npt.NDArray[np.bool_] = np.isfinite(values) & (values >= 0.0)
    if name == "residual":
        last = np.zeros(values.shape[0], dtype=bool)
        ends = offsets[1:][np.diff(offsets) > 0]
        last[ends - 1] = True
        bad = ~(finite | (last & np.isnan(values)))
        return bad
    if name == "entropy":
        return ~finite
    return np.zeros(values.shape[0], dtype=bool)


def _rows_of(positions: npt.NDArray[np.int64], offsets: IntArray) -> set[int]:
    """The rows holding these positions of a flat column."""
    if not positions.shape[0]:
        return set()
    rows: list[int] = (np.searchsorted(offsets, positions, side="right") - 1).tolist()
    return set(rows)


def _depths(parent: IntArray, offsets: IntArray) -> IntArray:
    """Each tree step's depth (its deepest node's). Pointer jumping: each round adds the distance to the node
    an ancestor pointer reaches and doubles how far it reaches, so a tree of depth D takes log2(D) numpy
    rounds, linear in the nodes each (a level at a time was quadratic in a deep tree). Parents must be valid
    (-1 or an earlier node of the step: `check` doubts the others)."""
    lengths = np.diff(offsets)
    if not lengths.shape[0]:
        return np.zeros(0, dtype=np.int64)
    nodes = np.arange(parent.shape[0], dtype=np.int64)
    root = parent < 0
    up = np.where(root, nodes, np.repeat(offsets[:-1], lengths) + parent)  # a root points at itself
    distance = (~root).astype(np.int64)  # to the node `up` names: 0 at a root
    while True:
        further = up[up]
        if np.array_equal(further, up):
            break
        distance = distance + distance[up]
        up = further
    return np.maximum.reduceat(distance + 1, offsets[:-1]).astype(np.int64)  # every tree step has a node


# --- the reference: `row_step`'s steps gathered one by one (tests compare the columns with it) ----


def _reference_column(name: str, values: list[object]) -> np.ndarray[Any, Any]:
    if name in TOKEN_FIELDS:
        return np.array(values, dtype=np.int64)
    return np.array([math.nan if value is None else value for value in values], dtype=np.float64)


def reference_steps(rule: Rule, rows: list[Step]) -> tuple[ChainSteps | TreeSteps, IntArray]:
    """One rule's rows as its steps' columns, and each step's drafted length (k, or a tree's depth)."""
    lengths = [len(found[rule.fields[0]]) for found, _, _ in rows]
    offsets = offsets_of(lengths)
    columns = {
        name: _reference_column(name, [value for found, _, _ in rows for value in found[name]]) for name in rule.fields
    }
    params: dict[str, FloatArray] = {}
    for param in rule.params:
        if any(param.name in step_params for _, step_params, _ in rows) or param.default is None:
            params[param.name] = np.array(
                [step_params.get(param.name, param.default) for _, step_params, _ in rows], dtype=np.float64
            )
    if rule.kind == "chain":
        return ChainSteps(offsets, columns, params), np.asarray(lengths, dtype=np.int64)
    parents = [parent or [] for _, _, parent in rows]
    depths = np.array([_reference_depth(parent) for parent in parents], dtype=np.int64)
    flat = np.array([index for parent in parents for index in parent], dtype=np.int64)
    return TreeSteps(offsets, flat, columns, params), depths


def _reference_depth(parent: list[int]) -> int:
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
