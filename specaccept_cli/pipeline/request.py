"""`ReadRequest`: what to read and how, in one frozen value that every reading path takes.

The front door (`pipeline.summarise`), the Dask driver and its tasks (`pipeline.distributed`)
and the pool workers (`pipeline.parallel`) all take the same request, so a setting added here
reaches every path at once instead of being passed on by hand three times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, TypedDict

from msgspec import Struct, field
from msgspec.structs import force_setattr, replace

from specaccept_cli.read.policy import Mode
from specaccept_cli.read.sources import Format, Reading, Source
from specaccept_cli.read.storage import Storage
from specaccept_cli.rule.batch import FieldSpec
from specaccept_cli.rule.validate import DEFAULT_MAX_LINE_BYTES
from specaccept_cli.summary.evaluate import Plan

__all__ = ["ReadOptions", "ReadRequest", "as_request"]


class ReadRequest(Struct, frozen=True):
    """Everything one summary is read with.

    `inputs`: paths, directories of Parquet shards, s3:// or gs:// URLs, "-" for stdin, or `Source`s
    already resolved. `jobs`: processes parsing JSONL (None: every usable core; 1: this process);
    the result is the same whatever the number. `scheduler`: a Dask scheduler address
    (`tcp://host:port`, or `local[:N]` for a cluster on this machine) that `pipeline.distributed.summarise`
    reads on when it is given no client.
    `on_error="skip"` leaves bad rows and unreadable sources out, counts them in the summary and
    copies their raw lines to `quarantine`; "fail" raises the first as an `InputError`.
    `input_format` names the format instead of sniffing it; `max_line_bytes` is the longest
    JSONL line read (a longer one is a bad row); `draft_length` is a server's draft length k
    when its metrics lines do not carry it (it tightens their bounds); `keep_duplicate_lines` counts
    a vLLM metrics line that repeats a recent one exactly (by default a log shipper's duplicate:
    dropped, and counted apart); `storage` holds the options for object storage. An extra field that
    no row has is a `UsageError` (a typo), unless `require_fields` is false: a share of a larger input
    may lack what others have.

    Picklable except for `quarantine`, which stays in the process that writes it
    (`for_workers` is the request a task is sent).
    """

    inputs: Sequence[str | Source] = ()  # kept as a tuple
    fields: FieldSpec = field(default_factory=FieldSpec)
    plan: Plan = field(default_factory=Plan)
    jobs: int | None = 1
    scheduler: str | None = None
    on_error: Mode = "fail"
    quarantine: IO[bytes] | None = None
    input_format: Format = "auto"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    draft_length: int | None = None
    storage: Storage | None = None
    require_fields: bool = True
    keep_duplicate_lines: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.inputs, str | Source):  # one path is a request for that path, not for its letters
            force_setattr(self, "inputs", (self.inputs,))
        else:
            force_setattr(self, "inputs", tuple(self.inputs))

    @property
    def reading(self) -> Reading:
        """How the rows of any source are read (the part of the request the readers need)."""
        return Reading(self.fields, self.input_format, self.max_line_bytes)

    def for_workers(self) -> ReadRequest:
        """The request a task is sent: without the inputs (each task names its own share) and the quarantine."""
        return replace(self, inputs=(), quarantine=None)


class ReadOptions(TypedDict, total=False):
    """`ReadRequest`'s settings besides inputs, fields and plan, as keywords of `summarise(paths, ...)`."""

    jobs: int | None
    scheduler: str | None
    on_error: Mode
    quarantine: IO[bytes] | None
    input_format: Format
    max_line_bytes: int
    draft_length: int | None
    storage: Storage | None
    require_fields: bool
    keep_duplicate_lines: bool


def as_request(
    request: ReadRequest | Sequence[str | Source] | str,
    fields: FieldSpec | None,
    plan: Plan | None,
    options: ReadOptions,
) -> ReadRequest:
    """The request itself, or one made of inputs and settings (the convenience `summarise(paths, ...)` offers)."""
    if isinstance(request, ReadRequest):
        if fields is not None or plan is not None or options:
            raise TypeError("give a ReadRequest alone, or inputs with fields, plan and settings: not both")
        return request
    return ReadRequest(
        tuple(request) if not isinstance(request, str) else (request,), fields or FieldSpec(), plan or Plan(), **options
    )
