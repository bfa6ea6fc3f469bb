"""Domain exceptions. The core raises these; `cli.py` turns them into one line and an exit status."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

MAX_KEPT_ERRORS = 20  # the first input problems a summary keeps, in input order; the rest are only counted


class Reason(Enum):
    """What is wrong, as a type: the command line keys the way out it adds (`cli.ways_out`) on it, never on
    the words, so a reworded message keeps its way out. Each says what its `Why` carries."""

    MISSING_FIELD = "missing-field"  # about: the field path not found (a row's key, a Parquet column)
    WRONG_FIELD = "wrong-field"  # about: the field whose value (or Parquet column) is of another type
    NOT_A_RULE = "not-a-rule"  # about: the rule field, whose value names no rule
    NOT_AN_OBJECT = "not-an-object"  # a JSONL line that is JSON, but not an object
    NOT_JSON = "not-json"  # a JSONL line that is no JSON
    CUT = "cut"  # lines: the whole lines read before a compressed stream broke off
    NOTHING_OF_FORMAT = "nothing-of-format"  # about: the format, none of whose lines the source holds
    NOT_A_SUMMARY = "not-a-summary"  # a file read as a summary that is none at all (not a damaged one)
    PARQUET_FOLLOWED = "parquet-followed"  # a Parquet file given to follow
    CLUSTERED_ENGINE = "clustered-engine"  # engine output given a cluster field
    BROKEN_PARQUET = "broken-parquet"  # no Parquet file, or one whose data cannot be decoded
    ABSENT_FIELD = "absent-field"  # about: an extra field (a group or cluster field, ...) no row has


class Why(NamedTuple):
    """An error's reason and the data its way out needs; `named`: the words already say what to do."""

    reason: Reason
    about: str | None = None
    lines: int | None = None
    named: bool = False


class Problem(str):
    """A problem's words with its `Why`. Row parsers pass problems on as strings (kept, sorted in line order)
    before an `InputError` is made of them, which takes its `why` from here; the words are the message's."""

    why: Why

    def __new__(cls, words: str, why: Why) -> Problem:
        problem = super().__new__(cls, words)
        problem.why = why
        return problem

    def __reduce__(self) -> tuple[type[Problem], tuple[str, Why]]:
        return type(self), (str(self), self.why)


class SpecacceptError(Exception):
    """Base for every error a user can cause; never shown as a traceback.

    `why` is None where no way out is keyed on the error (its words say what to do, or none is needed).
    """

    why: Why | None = None


class InputError(SpecacceptError):
    """A row or a source that cannot be read: names the source, the line (or Parquet row) and why.

    `line` is 1-based (a JSONL line number or a Parquet row number) or None when the
    problem is the source as a whole (a missing file, a corrupt stream). Errors are
    values as much as exceptions: parsers return them, and the error policy decides
    whether to raise one (fail) or count it (skip).
    """

    def __init__(
        self, source: str, line: int | None, message: str, raw: bytes | None = None, why: Why | None = None
    ) -> None:
        if why is None and isinstance(message, Problem):
            why = message.why
        message = str(message)  # plain words, wherever they are written
        super().__init__(message)
        self.source = source
        self.line = line
        self.message = message
        self.raw = raw  # the offending input line, when there is one (for quarantine files)
        self.why = why

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.message}"

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int | None, str, bytes | None, Why | None]]:
        """Pickled with its fields (its `why` too), so an error raised on a worker (a process pool, a Dask
        cluster) arrives whole, and gets the way out it gets in one process."""
        return type(self), (self.source, self.line, self.message, self.raw, self.why)


class UsageError(SpecacceptError):
    """A bad option value or combination found after Click's own parsing (its `why` from a `Problem`'s words)."""

    def __init__(self, message: str = "") -> None:
        super().__init__(str(message))
        if isinstance(message, Problem):
            self.why = message.why


class WorkerDied(SpecacceptError):
    """A worker process of the pool reading `source` died (the out-of-memory killer, most likely).

    The words name no option: the command line adds how to read on one process.
    """

    def __init__(self, source: str) -> None:
        super().__init__(f"{source}: a worker process died (out of memory?)")
        self.source = source

    def __reduce__(self) -> tuple[type[WorkerDied], tuple[str]]:
        return type(self), (self.source,)


class OneProcessOnly(UsageError):
    """Input that must be read in one process (server output: Prometheus scrapes form one series) was
    given to a cluster. The command line adds how to read without one."""

    def __init__(self, source: str, fmt: str) -> None:
        super().__init__(f"{source} is {fmt} output: server metrics are read in one process")
        self.source = source
        self.fmt = fmt

    def __reduce__(self) -> tuple[type[OneProcessOnly], tuple[str, str]]:
        """Pickled with its fields: raised in a cluster's task, it arrives whole at the driver."""
        return type(self), (self.source, self.fmt)


class ExtraMissing(UsageError):
    """What was asked needs an optional dependency that is not installed (`pip install 'specaccept[extra]'`)."""

    def __init__(self, needs: str, extra: str) -> None:
        super().__init__(f"{needs} needs the '{extra}' extra: pip install 'specaccept[{extra}]'")
        self.needs = needs
        self.extra = extra

    def __reduce__(self) -> tuple[type[ExtraMissing], tuple[str, str]]:
        return type(self), (self.needs, self.extra)


class OutputError(SpecacceptError):
    """Results could not be written (a full disk, a closed stdout): the run did not deliver its output."""


class ChecksFailed(SpecacceptError):
    """Gates or a baseline comparison failed (exit status 1); one message per failed check.

    Not a user mistake: the command's normal output has been printed already.
    """

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


# What a reader does with a bad row it found: raise it (fail) or count it (skip); see `read.policy`.
OnError = Callable[[InputError], None]


class SkippedRow(NamedTuple):
    """One input problem kept in a summary: where (`line` is None for a whole source) and what.

    A NamedTuple, not a Struct like the other records: this module loads for every command, `check`
    included, and `check` otherwise never imports msgspec.
    """

    source: str
    line: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "message": self.message}
