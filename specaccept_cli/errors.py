"""Domain exceptions. The core raises these; `cli.py` turns them into one line and an exit status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

MAX_KEPT_ERRORS = 20  # the first input problems a summary keeps, in input order; the rest are only counted


class SpecacceptError(Exception):
    """Base for every error a user can cause; never shown as a traceback."""


class InputError(SpecacceptError):
    """A row or a source that cannot be read: names the source, the line (or Parquet row) and why.

    `line` is 1-based (a JSONL line number or a Parquet row number) or None when the
    problem is the source as a whole (a missing file, a corrupt stream). Errors are
    values as much as exceptions: parsers return them, and the error policy decides
    whether to raise one (fail) or count it (skip).
    """

    def __init__(self, source: str, line: int | None, message: str, raw: bytes | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.line = line
        self.message = message
        self.raw = raw  # the offending input line, when there is one (for quarantine files)

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.message}"

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int | None, str, bytes | None]]:
        """Pickled with its fields, so an error raised on a worker (a process pool, a Dask cluster) arrives whole."""
        return type(self), (self.source, self.line, self.message, self.raw)


class UsageError(SpecacceptError):
    """A bad option value or combination found after Click's own parsing."""


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
