"""Verify steps of any rule as flat columns cut by offsets (Arrow's list layout), and one step as plain lists.

A chain step is k drafted positions, index j being drafted position j + 1 (0-based arrays); a tree step is
its drafted nodes in the order the verifier tried siblings, each with `parent`, the index of its parent in
the same step (-1 for a child of the last verified token, so a node of depth 1). Each rule reads the
columns it names (`registry.Rule.fields`) and the per-step parameters it names (`Rule.params`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field

from specaccept_cli.rule.batch import FloatArray, IntArray
from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH

Column = npt.NDArray[Any]  # float64 for probabilities and coins, int64 for token ids
# One step as the scalar routines take it: per-position (or per-node) values, and per-step parameters.
StepFields = Mapping[str, Sequence[float]]
StepParams = Mapping[str, float]


class ChainSteps(Struct):
    """Chain steps: step s's positions are columns[name][offsets[s]:offsets[s + 1]]."""

    offsets: IntArray
    columns: dict[str, Column]
    params: dict[str, FloatArray] = field(default_factory=dict)  # one value per step

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def step(self, index: int) -> tuple[dict[str, list[float]], dict[str, float]]:
        """Step `index` as the scalar routines take it (for tests and `check --explain`)."""
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return (
            {name: values[start:end].tolist() for name, values in self.columns.items()},
            {name: float(values[index]) for name, values in self.params.items()},
        )


class TreeSteps(Struct):
    """Tree steps: step s's nodes are offsets[s]:offsets[s + 1]; `parent` is local to its step (-1: depth 1)."""

    offsets: IntArray
    parent: IntArray
    columns: dict[str, Column]
    params: dict[str, FloatArray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def step(self, index: int) -> tuple[list[int], dict[str, list[float]], dict[str, float]]:
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return (
            self.parent[start:end].tolist(),
            {name: values[start:end].tolist() for name, values in self.columns.items()},
            {name: float(values[index]) for name, values in self.params.items()},
        )


def offsets_of(lengths: Sequence[int]) -> IntArray:
    """[0, l0, l0 + l1, ...] as int64."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, dtype=np.int64), out=offsets[1:])
    return offsets


def step_param(params: StepParams, name: str, default: float | None) -> float:
    """A per-step parameter, or its default; a rule's parameter without a default is a required field."""
    value = params.get(name, default)
    if value is None:
        raise KeyError(name)
    return float(value)


def param_column(params: Mapping[str, FloatArray], name: str, default: float | None, steps: int) -> FloatArray:
    """A per-step parameter column, or its default repeated."""
    if name in params:
        return np.asarray(params[name], dtype=np.float64)
    if default is None:
        raise KeyError(name)
    return np.full(steps, float(default))


def tree_problem(parent: Sequence[int]) -> str | None:
    """Why a step's parent indices are not a tree in tried order, or None.

    A parent is listed before its children (so every walk ends); -1 marks a node of depth 1. A tree deeper
    than the longest draft a run may have is refused as an overlong chain is: its depth is the run's capacity,
    which the summary's (capacity, accepted) counts are square in.
    """
    depth: list[int] = []
    for index, value in enumerate(parent):
        if not -1 <= value < index:
            return f"nodes[{index}].parent = {value} is not -1 or the index of an earlier node"
        depth.append(1 if value < 0 else depth[value] + 1)
        if depth[-1] > MAX_DRAFT_LENGTH:
            limit = MAX_DRAFT_LENGTH
            return f"nodes[{index}] lies at depth {depth[-1]}: a tree is no deeper than the {limit} a run may be"
    return None
