"""The unit of data flowing through the pipeline: a columnar batch of drafted runs."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from msgspec import Struct, field

from specaccept_cli.rule.validate import MAX_DRAFT_LENGTH, length_problem, value_problem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
FieldPath = tuple[str, ...]

FIELDS = ("p", "q", "r")
RULE_FIELD = "rule"  # the field of a row's verification rule by default (docs/rules.md, "The row contract")
STANDARD_RULE = "standard"


def parse_field_path(dotted: str) -> FieldPath:
    """`spec.target_p` -> ("spec", "target_p"). Empty segments are a usage error upstream."""
    return tuple(dotted.split("."))


class FieldSpec(Struct, frozen=True):
    """Where each column lives in a row, as dotted paths (`--p-field spec.target_p`)."""

    p: str = "p"
    q: str = "q"
    r: str = "r"
    extras: tuple[str, ...] = ()  # carried through per run (--id-field, later --group-by ...)
    counts: tuple[str, ...] = ()  # extras that must be non-negative whole counts (--reported-field)
    times: tuple[str, ...] = ()  # extras that must be moments in time (--time-field)
    # Greedy logs: token-id lists instead of (p, q, r); a token is kept iff it equals the target's.
    draft_tokens: str | None = None
    target_tokens: str | None = None
    # The verification rule of rows without a `rule` field (`--rule`; docs/rules.md, "The row contract").
    rule: str = STANDARD_RULE
    # The field naming a row's verification rule (`--rule-field`, a dotted path); None: no row names its rule.
    rule_field: str | None = RULE_FIELD

    @property
    def rule_key(self) -> str | None:
        """The top-level key under which a row names its rule (the rule field's first part), or None."""
        return None if self.rule_field is None else self.rule_field.split(".", 1)[0]

    @property
    def greedy(self) -> bool:
        return self.draft_tokens is not None


class RunBatch(Struct):
    """Runs in input order, as flat token arrays cut by `offsets` (Arrow's list layout).

    Run j's tokens are p[offsets[j]:offsets[j+1]] (likewise q, r). `lines` holds each
    run's 1-based JSONL line or Parquet row, so every result can point back at its input.

    Greedy logs (temperature 0) are the same rule with degenerate distributions: the
    target puts all its mass on its argmax and the draft on its token, so p = 1 where
    they agree and 0 where not, q = 1, and r (never logged) stands at 0.5. `greedy`
    marks such batches, so nothing r- or p/q-based is computed from them.
    """

    source: str
    lines: IntArray
    offsets: IntArray
    p: FloatArray
    q: FloatArray
    r: FloatArray
    extras: dict[str, list[object]] = field(default_factory=dict)
    greedy: bool = False
    # Extra fields that no row of this batch has (a typo?): for each, the dotted keys that row had where
    # the field was looked for. A source that checks its fields up front (Parquet's schema) leaves it empty.
    absent: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Each run's verification rule (its canonical name), when a run of the batch is not `standard`: such a run
    # holds stand-in tokens that give its own rule's accepted length (`rule.rows.stand_in_tokens`), nothing
    # p/q- or r-based. None: every run is a `standard` (or greedy) one.
    rules: list[str] | None = None

    def __len__(self) -> int:
        return int(self.lines.shape[0])

    @property
    def k(self) -> IntArray:
        return np.diff(self.offsets)

    def select(self, keep: npt.NDArray[np.bool_]) -> RunBatch:
        """The runs where `keep` is true (used to drop rows reported as bad)."""
        lengths = np.diff(self.offsets)
        token_keep = np.repeat(keep, lengths)
        offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(lengths[keep], out=offsets[1:])
        index = np.flatnonzero(keep).tolist()
        rules = None if self.rules is None else [self.rules[i] for i in index]
        return RunBatch(
            source=self.source,
            lines=self.lines[keep],
            offsets=offsets,
            p=self.p[token_keep],
            q=self.q[token_keep],
            r=self.r[token_keep],
            extras={name: [values[i] for i in index] for name, values in self.extras.items()},
            greedy=self.greedy,
            absent=self.absent,
            rules=None if rules is None or all(name == STANDARD_RULE for name in rules) else rules,
        )

    @property
    def standard_runs(self) -> npt.NDArray[np.bool_] | None:
        """Which runs are `standard` ones (real p, q, r), or None when all are."""
        if self.rules is None:
            return None
        return np.array([name == STANDARD_RULE for name in self.rules], dtype=bool)


def absent_from_both(
    first: dict[str, tuple[str, ...]], second: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """The extra fields absent from two parts of the input (see `RunBatch.absent`), with keys to suggest."""
    return {name: keys or second[name] for name, keys in first.items() if name in second}


def bad_token_mask(p: FloatArray, q: FloatArray, r: FloatArray) -> npt.NDArray[np.bool_]:
    """True where any of a token's three values is invalid (NaN compares false: caught)."""
    good = (p >= 0) & (p <= 1) & (q > 0) & (q <= 1) & (r >= 0) & (r <= 1)
    return ~good


def find_bad_runs(
    offsets: IntArray, p: FloatArray, q: FloatArray, r: FloatArray, names: tuple[str, str, str] = FIELDS
) -> list[tuple[int, str]]:
    """(run index, message) for every run holding an invalid value or too many tokens, naming the first problem."""
    lengths = np.diff(offsets)
    too_long = np.flatnonzero(lengths > MAX_DRAFT_LENGTH).tolist()
    problems = [(run, length_problem(int(lengths[run])) or "") for run in too_long]
    bad = bad_token_mask(p, q, r)
    if not bad.any():
        return problems
    token_index = np.flatnonzero(bad)
    run_index = np.searchsorted(offsets, token_index, side="right") - 1
    seen = {run for run, _ in problems}
    for token, run in zip(token_index.tolist(), run_index.tolist()):
        if run in seen:
            continue
        seen.add(run)
        position = token - int(offsets[run])
        for kind, values, name in zip(FIELDS, (p, q, r), names):
            message = value_problem(kind, position, float(values[token]), name)
            if message is not None:
                problems.append((run, message))
                break
    return problems


def greedy_batch(
    source: str,
    lines: IntArray,
    offsets: IntArray,
    matches: npt.NDArray[np.bool_],
    extras: dict[str, list[object]],
    absent: dict[str, tuple[str, ...]] | None = None,
) -> RunBatch:
    """A batch of greedy runs from per-token match flags (see RunBatch)."""
    n = matches.shape[0]
    return RunBatch(
        source=source,
        lines=lines,
        offsets=offsets,
        p=matches.astype(np.float64),
        q=np.ones(n),
        r=np.full(n, 0.5),
        extras=extras,
        greedy=True,
        absent=absent or {},
    )
