"""What to do with a bad row or an unreadable source: stop (`fail`) or count it and go on (`skip`).

Parsers return their errors as values; the policy is the `on_error` callback that
receives them in input order. In `fail` mode the first error is raised. In `skip`
mode every error is counted, the first MAX_KEPT_ERRORS are kept for the summary,
and the raw input of each skipped row can be copied to a quarantine stream.

Two kinds of problem reach the policy:
- a row (`InputError.line` is a line or row number): the row is skipped, counted in
  `skipped_rows`, and its raw bytes go to quarantine;
- a source (`line` is None, or the source failed part-way): the reader of that source
  cannot go on, so the rest of it is abandoned, counted in `skipped_sources`, and the
  audit goes on with the next source. Rows read before the failure stay counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Literal, TypeVar

from specaccept_cli.errors import MAX_KEPT_ERRORS, InputError, SkippedRow

Mode = Literal["fail", "skip"]
Item = TypeVar("Item")  # what a source yields: RunBatches, or blocks already evaluated elsewhere


class ErrorPolicy:
    """The `on_error` callback of the readers, and the tally of everything skipped."""

    def __init__(self, mode: Mode = "fail", quarantine: IO[bytes] | None = None) -> None:
        self.mode = mode
        self.quarantine = quarantine
        self.skipped_rows = 0
        self.skipped_sources = 0
        self.errors: list[SkippedRow] = []

    def __call__(self, error: InputError) -> None:
        """A bad row: raise it (fail) or count it and keep its raw line (skip)."""
        if self.mode == "fail":
            raise error
        self.skipped_rows += 1
        self._keep(error)
        if self.quarantine is not None and error.raw is not None:
            self.quarantine.write(error.raw + b"\n")

    def source_failed(self, error: InputError) -> None:
        """A source that cannot be read (further): raise it (fail) or count it (skip)."""
        if self.mode == "fail":
            raise error
        self.skipped_sources += 1
        self._keep(error)

    def _keep(self, error: InputError) -> None:
        if len(self.errors) < MAX_KEPT_ERRORS:
            self.errors.append(SkippedRow(error.source, error.line, error.message))

    @property
    def skipped(self) -> int:
        """Everything skipped: rows, plus one per abandoned source (what --max-errors counts)."""
        return self.skipped_rows + self.skipped_sources

    def guard(self, batches: Iterable[Item]) -> Iterator[Item]:
        """The batches of one source; a source-level failure ends this source, not the audit (skip)."""
        try:
            yield from batches
        except InputError as error:
            self.source_failed(error)
