"""Audits on a Dask cluster: the same core on many machines, the same bytes as one process.

The input is cut into shares: a Parquet file into its row groups, a large uncompressed JSONL
file (local or in object storage) into newline-aligned byte ranges, anything else (compressed
JSONL, small files) is one share. Each share is one task that runs the one-process core on it
(`pipeline.summarise`, or for a byte range the parallel reader's `parse_range`) and sends back a
`Part`: a `Summary` (pickled, a few tens of KB however many runs), not its runs.

Parts are added in an ordered tree (`fan_in` at a time): first the shares of each source, then
the sources, so the driver holds one part at the end, never all of them, and the kept errors and
the order of groups are those of one process. Two things make the sum exact, not only close:

- a byte range numbers its lines from 1; a part carries how many lines it covered, and the part
  after it is shifted by that count when they are added (the parallel reader's rule);
- a share that fails stops what follows it, as one process stops reading: in skip mode a source
  abandoned part-way (`ended`) takes nothing from its later shares; in fail mode the first error
  in input order (`error`) is the one raised, whatever the order the tasks finished in.

Per-run output and quarantine (`sink`, `quarantine`), and windows of runs (placed by each run's
position in the whole input, which no task knows), take another road: the shares' results, with
their runs (no tokens) or only each run's (k, accepted), are taken on the driver in input order, a
bounded window ahead (`_in_order`), and added there as one process adds them.

Dask is an optional extra, imported only here and only when a cluster is used.
"""

from __future__ import annotations

import contextlib
import io
from collections import deque
from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, Unpack

import numpy as np
import numpy.typing as npt
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.errors import ExtraMissing, InputError, OneProcessOnly, SpecacceptError, UsageError
from specaccept_cli.pipeline.local import summarise_here
from specaccept_cli.pipeline.parallel import (
    TASKS_PER_WORKER,
    Work,
    default_jobs,
    evaluate_source,
    newline_aligned_ranges,
    parse_range,
    restored_error,
    skipped_input,
)
from specaccept_cli.pipeline.request import ReadOptions, ReadRequest, as_request
from specaccept_cli.read.formats import Kind, by_name
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.read.sources import Source, expand_inputs, open_source
from specaccept_cli.rule.batch import FieldSpec, IntArray, RunBatch
from specaccept_cli.rule.vectorized import BatchOutcome
from specaccept_cli.summary.evaluate import Evaluated, Plan, RunColumns, RunSink, add_up
from specaccept_cli.summary.state import Summary
from specaccept_cli.summary.windows import WindowTally

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "FAN_IN",
    "RANGE_BYTES",
    "SHARE_ROWS",
    "Part",
    "Share",
    "connect",
    "local_cluster",
    "summarise",
    "summarise_share",
]

FAN_IN = 8  # parts added by one reduction task
# An uncompressed JSONL file larger than this is cut into byte ranges of about this size: large
# enough that a task's fixed cost (tens of ms) is small beside its parsing (seconds), small enough
# that a terabyte of logs makes thousands of tasks for a cluster to balance.
RANGE_BYTES = 64 << 20
# Consecutive Parquet row groups are one share until they hold this many rows: writers that flush
# small row groups (streaming writers, DuckDB's 122,880 rows) do not make a task of each.
SHARE_ROWS = 250_000

_NO_TOKENS = np.zeros(0, dtype=np.float64)


class Share(Struct, frozen=True):
    """One task's share of the input: a source (for Parquet, maybe some of its row groups), or a byte range of it."""

    source: Source
    byte_range: tuple[int, int] | None = None
    payloads: bool = False  # per-request payloads: read whole, their runs' order sent back for windows of runs


class Part(Struct, frozen=True):
    """What a task, or an addition of tasks, sends back.

    `lines`: lines covered by byte-range shares, whose line numbers start at 1 (see `_add`);
    `ended`: the source was abandoned in this part (skip mode), so its later shares are not counted;
    `error`: fail mode's first error; nothing after it counts.
    """

    summary: Summary
    lines: int = 0
    ended: bool = False
    error: InputError | None = None
    # Only when per-run output or quarantine is asked for (see `_in_order`): the share's runs
    # (their lines, counts and extras; no tokens) and the raw lines of its skipped rows.
    runs: tuple[PerRun, ...] = ()
    quarantined: bytes = b""
    # Only for windows of runs: each run's (k, accepted), in order, 2 bytes each.
    sequence: tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]] | None = None


PerRun = tuple[RunBatch, BatchOutcome, RunColumns]


class Job(Struct, frozen=True):
    """What every task needs besides its share: the request as workers get it, and what to send back."""

    request: ReadRequest  # `ReadRequest.for_workers()`: no inputs, no quarantine
    keep_runs: bool = False  # send per-run results and quarantined lines back (per-run output)
    keep_sequence: bool = False  # send each run's (k, accepted) back (windows of runs)


# --- work done in a task (pure functions of their arguments) ---------------------------------------


def plan_shares(source: Source, request: ReadRequest, range_bytes: int, share_rows: int = SHARE_ROWS) -> list[Share]:
    """How to cut one source into shares; a source that cannot be opened is one share (its task reports it).

    Server output is refused: Prometheus scrapes form one series across files, read in order in one
    process, which independent tasks cannot reproduce.
    """
    try:
        with open_source(source, request.input_format) as opened:
            entry = by_name(opened.format)
            if entry.kind is Kind.INTERVALS:  # a series across files: one process reads them in order
                raise OneProcessOnly(source.name, opened.format)
            if not entry.splittable:  # payloads: one request per line, read whole by one task
                return [Share(source, payloads=entry.kind is Kind.REQUESTS)]
            if opened.format == "parquet":
                return _row_group_shares(source, share_rows)
            location = source.remote or source.path
            if opened.compression is None and location is not None and (source.size or 0) > range_bytes:
                ranges = newline_aligned_ranges(location, source.size or 0, range_bytes)
                return [Share(source, byte_range) for byte_range in ranges]
    except (InputError, OSError):
        pass
    return [Share(source)]


def _row_group_shares(source: Source, share_rows: int) -> list[Share]:
    """Runs of consecutive row groups holding at least `share_rows` rows each (the last may hold fewer)."""
    import pyarrow.parquet as pq

    with contextlib.ExitStack() as stack:
        file: Any = source.path
        if source.remote is not None:
            file = stack.enter_context(source.remote.open_random())
        try:
            metadata = pq.ParquetFile(file).metadata
            rows = [metadata.row_group(index).num_rows for index in range(metadata.num_row_groups)]
        except Exception:  # a damaged footer: the whole-file task reports it as one process would
            return [Share(source)]
    bounds = [0]
    held = 0
    for index, count in enumerate(rows[:-1]):
        held += count
        if held >= share_rows:
            bounds.append(index + 1)
            held = 0
    if len(bounds) == 1:
        return [Share(source)]
    return [Share(replace(source, row_groups=span)) for span in zip(bounds, [*bounds[1:], len(rows)])]


def summarise_share(share: Share, job: Job) -> Part:
    """One share through the one-process core; its errors come back as values, in input order.

    An I/O error of the worker's own (a file gone from a shared disk, a dropped connection to the
    store) is an error of the source, named as such: an OSError arriving at the driver would read
    as a lost cluster.
    """
    try:
        return _summarise_share(share, job)
    except OSError as exc:
        error = InputError(share.source.name, None, f"cannot read: {exc.strerror or exc}")
        if job.request.on_error == "fail":
            return Part(Summary(), error=error)
        policy = ErrorPolicy("skip")
        policy.source_failed(error)
        return Part(skipped_input(policy), ended=True)


def _summarise_share(share: Share, job: Job) -> Part:
    if share.byte_range is not None:
        return _summarise_range(share, job)
    if share.payloads:
        return _summarise_payloads(share, job)
    runs: list[PerRun] = []
    sequence = _Sequence()
    quarantine = io.BytesIO() if job.keep_runs else None

    def keep(batch: RunBatch, outcome: BatchOutcome, columns: RunColumns) -> None:
        if job.keep_runs:
            runs.append((replace(batch, p=_NO_TOKENS, q=_NO_TOKENS, r=_NO_TOKENS), outcome, columns))
        if job.keep_sequence:
            sequence.add(outcome.k, outcome.accepted)

    # A share may lack a field that other shares have: only the whole input can miss one.
    request = replace(job.request, inputs=(share.source,), jobs=1, quarantine=quarantine, require_fields=False)
    try:
        summary = summarise_here(request, sink=keep if job.keep_runs or job.keep_sequence else None)
    except InputError as error:
        return Part(Summary(), error=error, runs=tuple(runs))
    kept = quarantine.getvalue() if quarantine is not None else b""
    return Part(summary, 0, summary.skipped_sources > 0, None, tuple(runs), kept, sequence.arrays(job.keep_sequence))


def _summarise_payloads(share: Share, job: Job) -> Part:
    """A file of per-request payloads, as one process reads it; each request's runs in order go back for windows."""
    request = replace(job.request, inputs=(share.source,), jobs=1, require_fields=False)
    policy = ErrorPolicy(request.on_error)
    sequence = _Sequence()

    def evaluated() -> Iterator[Evaluated]:
        for result in evaluate_source(share.source, request, policy, keep_runs=False):
            if job.keep_sequence and result.sequence is not None:
                sequence.add(*result.sequence)
            yield result

    try:
        summary = add_up(policy.guard(evaluated()), None, request.plan.group_by)
    except InputError as error:
        return Part(Summary(), error=error)
    return Part(
        summary + skipped_input(policy),
        0,
        policy.skipped_sources > 0,
        None,
        (),
        b"",
        sequence.arrays(job.keep_sequence),
    )


class _Sequence:
    """Runs' (k, accepted) gathered in order, shipped as two compact arrays (k <= MAX_DRAFT_LENGTH)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[IntArray, IntArray]] = []

    def add(self, k: IntArray, accepted: IntArray) -> None:
        self.pieces.append((k, accepted))

    def arrays(self, wanted: bool) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]] | None:
        if not wanted:
            return None
        if not self.pieces:
            return np.zeros(0, dtype=np.uint16), np.zeros(0, dtype=np.uint16)
        k = np.concatenate([piece[0] for piece in self.pieces]).astype(np.uint16)
        accepted = np.concatenate([piece[1] for piece in self.pieces]).astype(np.uint16)
        return k, accepted


def _summarise_range(share: Share, job: Job) -> Part:
    """A byte range of a plain JSONL file, its lines numbered from 1 (the part before it shifts them)."""
    source, request = share.source, job.request
    assert share.byte_range is not None
    location = source.remote or str(source.path)
    start, end = share.byte_range
    quarantine = io.BytesIO() if job.keep_runs else None
    policy = ErrorPolicy(request.on_error, quarantine)
    runs: list[PerRun] = []
    sequence = _Sequence()
    count = 0

    def evaluated() -> Iterator[Evaluated]:
        nonlocal count
        origin, count, results = parse_range(Work(source.name, request, job.keep_runs), location, start, end)
        for result, parts in results:
            for part in parts:
                error = restored_error(part)
                if error.line is not None:
                    error.line -= origin - 1
                policy(error)
            if result.batch is not None and result.outcome is not None:
                batch = replace(result.batch, lines=result.batch.lines - (origin - 1))
                runs.append((batch, result.outcome, result.columns))
            if job.keep_sequence and result.sequence is not None:
                sequence.add(*result.sequence)
            yield result

    try:
        summary = add_up(policy.guard(evaluated()), None, request.plan.group_by)
    except InputError as error:
        return Part(Summary(), error=error, runs=tuple(runs))
    kept = quarantine.getvalue() if quarantine is not None else b""
    ended = policy.skipped_sources > 0
    return Part(
        summary + skipped_input(policy), count, ended, None, tuple(runs), kept, sequence.arrays(job.keep_sequence)
    )


def add_parts(parts: Sequence[Part], within_source: bool) -> Part:
    """Parts in input order, added; see the module's docstring for `lines`, `ended` and `error`.

    Across sources, line numbers are each source's own (nothing is shifted) and a source that
    ended does not end the next one.
    """
    total = parts[0]
    for part in parts[1:]:
        if total.error is not None or (within_source and total.ended):
            break
        total = _add(total, part) if within_source else Part(total.summary + part.summary, error=part.error)
    return total


def _add(left: Part, right: Part) -> Part:
    right = _shifted(right, left.lines)
    return Part(left.summary + right.summary, left.lines + right.lines, right.ended, right.error)


def _shifted(part: Part, shift: int) -> Part:
    """A part of a source whose earlier parts covered `shift` lines: its line numbers, made the file's."""
    if not shift:
        return part
    error = part.error
    if error is not None and error.line is not None:
        error = InputError(error.source, error.line + shift, error.message, error.raw, error.why)
    rows = (row if row.line is None else row._replace(line=row.line + shift) for row in part.summary.errors)
    runs = tuple((replace(batch, lines=batch.lines + shift), outcome, columns) for batch, outcome, columns in part.runs)
    return replace(part, summary=replace(part.summary, errors=tuple(rows)), error=error, runs=runs)


# --- the driver -----------------------------------------------------------------------------------


def summarise(
    request: ReadRequest | Sequence[str] | Sequence[Source] | str,
    fields: FieldSpec | None = None,
    plan: Plan | None = None,
    *,
    client: Client | None = None,
    fan_in: int = FAN_IN,
    range_bytes: int = RANGE_BYTES,
    share_rows: int = SHARE_ROWS,
    sink: RunSink | None = None,
    **options: Unpack[ReadOptions],
) -> Summary:
    """`pipeline.summarise` on a Dask cluster: the same summary, byte for byte, for the same request.

    `client`: a `distributed.Client`; None: a client for the request's `scheduler` address, else
    the current default client. Raises the first `InputError` of the input in fail mode, as one
    process does; a worker that dies raises a `SpecacceptError`. With `sink` or a `quarantine`,
    per-run results (no tokens) and the raw lines of skipped rows come back to this process share
    by share, in input order, a few shares ahead (`_in_order`), and so do the runs' (k, accepted)
    with windows of runs; otherwise only summaries travel, added on the workers.
    """
    request = as_request(request, fields, plan, options)
    if fan_in < 2:
        raise ValueError("fan_in must be at least 2")
    if client is None and request.scheduler is not None:
        with connect(request.scheduler) as connected:
            return _summarise(request, connected, fan_in, range_bytes, share_rows, sink)
    return _summarise(request, client, fan_in, range_bytes, share_rows, sink)


def _summarise(
    request: ReadRequest,
    client: Client | None,
    fan_in: int,
    range_bytes: int,
    share_rows: int,
    sink: RunSink | None,
) -> Summary:
    sources = expand_inputs(request.inputs, request.storage)
    if any(source.is_stdin for source in sources):
        raise UsageError("a cluster cannot read this process's stdin: give files or URLs")
    plan = request.plan
    if not sources:
        return add_up((), None, plan.group_by, plan.windows)
    cluster: Any = client if client is not None else _default_client()  # distributed is only partly typed
    quarantine = request.quarantine
    # No task sees the input's first row: the request field that clusters the runs is found here, once.
    from specaccept_cli.pipeline.clusters import detected_field

    reading, plan, detection = detected_field(sources, request.reading, plan)
    request = replace(request, fields=reading.fields, plan=plan)
    # Windows of runs are placed by each run's position in the whole input, which no task knows:
    # their runs come back in order too, and are placed here (as `add_up` places them).
    run_windows = plan.windows is not None and plan.windows.time_field is None
    keep_runs = sink is not None or quarantine is not None
    job = Job(request.for_workers(), keep_runs, run_windows)
    with _cluster_errors():
        _check_workers(cluster)
        plans: list[list[Share]] = cluster.gather(
            cluster.map(
                plan_shares, sources, request=job.request, range_bytes=range_bytes, share_rows=share_rows, pure=False
            )
        )
        if keep_runs or run_windows:
            return detection.with_ids(_in_order(cluster, plans, job, sink, quarantine), detection.run_id)
        per_source = []
        for shares in plans:
            tasks = cluster.map(summarise_share, shares, job=job, pure=False)
            per_source.append(_tree(cluster, tasks, fan_in, within_source=True))
        part: Part = _tree(cluster, per_source, fan_in, within_source=False).result()
    if part.error is not None:
        raise part.error
    return detection.with_ids(part.summary, detection.run_id)  # the first runs' ids, read ahead here


def _in_order(
    client: Any, plans: list[list[Share]], job: Job, sink: RunSink | None, quarantine: IO[bytes] | None
) -> Summary:
    """Shares run on the cluster, a bounded window ahead; their results are taken here in input order.

    The same sums as the tree (a left fold is one of its shapes), with the runs handed to `sink`
    and skipped lines to `quarantine` as one process hands them: so per-run output streams, and
    memory holds a window of shares, not the input.
    """
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    window = TASKS_PER_WORKER * workers
    shares = ((index, share) for index, source_shares in enumerate(plans) for share in source_shares)
    pending: deque[tuple[int, Any]] = deque()
    total = Summary() if job.request.plan.group_by is None else Summary(group_by=job.request.plan.group_by, groups={})
    spec = job.request.plan.windows
    by_runs = WindowTally.empty(spec) if spec is not None and spec.time_field is None else None
    current, lines, ended = -1, 0, False

    def take() -> None:
        nonlocal total, current, lines, ended, by_runs
        index, future = pending.popleft()
        if index != current:
            current, lines, ended = index, 0, False
        if ended:
            return
        part = _shifted(future.result(), lines)
        for batch, outcome, columns in part.runs:
            if sink is not None:
                sink(batch, outcome, columns)
        if by_runs is not None and part.sequence is not None:
            by_runs = by_runs.extended(part.sequence[0].astype(np.int64), part.sequence[1].astype(np.int64))
        if quarantine is not None and part.quarantined:
            quarantine.write(part.quarantined)
        if part.error is not None:
            raise part.error
        # A share's own windows of runs start at its first run: they are placed here instead.
        total = total + (part.summary if by_runs is None else replace(part.summary, windows=None))
        lines, ended = lines + part.lines, part.ended

    for index, share in shares:
        pending.append((index, client.submit(summarise_share, share, job, pure=False)))
        if len(pending) >= window:
            take()
    while pending:
        take()
    return total if by_runs is None else replace(total, windows=by_runs)


def _worker_version() -> str:
    from specaccept_cli.version import __version__

    return __version__


def _check_workers(client: Any) -> None:
    """Workers must run this specaccept: another version could count differently (or not at all)."""
    from specaccept_cli.version import __version__

    try:
        found: dict[str, str] = client.run(_worker_version)
    except (ImportError, AttributeError) as exc:  # a worker without the package cannot even load the function
        raise SpecacceptError(
            f"the Dask workers cannot run specaccept ({exc}): install specaccept {__version__} on them"
        ) from None
    others = sorted({version for version in found.values() if version != __version__})
    if others:
        raise SpecacceptError(
            f"the Dask workers run specaccept {', '.join(others)}, this is {__version__}: "
            "install the same version on both"
        )


def _tree(client: Any, level: list[Any], fan_in: int, within_source: bool) -> Any:
    """Futures of parts -> one future of their ordered sum, added `fan_in` at a time on the workers."""
    while len(level) > 1:
        level = [
            client.submit(add_parts, level[start : start + fan_in], within_source, pure=False)
            for start in range(0, len(level), fan_in)
        ]
    return level[0]


def _default_client() -> Any:
    distributed = _import_distributed()
    try:
        return distributed.get_client()
    except ValueError:
        raise UsageError("no Dask client: pass client=, or start one (distributed.Client(...))") from None


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ExtraMissing("a Dask cluster", "dask") from None
    return distributed


@contextlib.contextmanager
def _cluster_errors() -> Iterator[None]:
    """A cluster's own failures as one line each: a worker that died, a lost connection to the scheduler."""
    distributed = _import_distributed()
    try:
        yield
    except distributed.KilledWorker as exc:
        raise SpecacceptError(
            f"a Dask worker died while running a task ({_task_name(exc)}); out of memory? see the workers' logs"
        ) from None
    except (OSError, TimeoutError, distributed.CancelledError) as exc:
        raise SpecacceptError(f"lost the Dask cluster: {exc or type(exc).__name__}") from None


def _task_name(exc: Any) -> str:
    key = exc.args[0] if exc.args else "?"
    return str(key[0] if isinstance(key, tuple) else key)


@contextlib.contextmanager
def connect(address: str, timeout: float = 10) -> Iterator[Client]:
    """A client for `address`: `tcp://host:port` (an existing scheduler) or `local[:N]`.

    `local[:N]` starts a cluster of N worker processes on this machine (default: one per usable
    core), for as long as the block runs. An unreachable scheduler is one line, not a traceback.
    """
    distributed = _import_distributed()
    with contextlib.ExitStack() as stack:
        if address == "local" or address.startswith("local:"):
            cluster = stack.enter_context(local_cluster(_local_workers(address)))
            yield stack.enter_context(distributed.Client(cluster))
            return
        _probe_scheduler(address, timeout)
        try:
            client = distributed.Client(address, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SpecacceptError(f"cannot reach the Dask scheduler at {address}: {reason}") from None
        yield stack.enter_context(client)


# A Dask peer's first message (its handshake: a few frames of msgpack) is announced by an 8-byte length.
_HANDSHAKE_MAX_BYTES = 1 << 20


def _probe_scheduler(address: str, timeout: float) -> None:
    """Check that a `tcp://` address answers like a Dask scheduler, within `timeout` seconds, before Dask tries.

    Dask's own client waits forever on a peer that accepts and stays silent (an HTTP server), fails in
    `struct` on a short answer and allocates whatever length a garbage answer announces (3 EiB). A Dask
    server speaks first: on accepting, it sends its handshake, an 8-byte little-endian length then that
    many bytes, which begin with the number of frames. Anything else is refused in one line. Other
    schemes (tls://, ucx://) are left to Dask.
    """
    import socket
    import struct

    scheme, _, location = address.rpartition("://")
    if scheme not in ("", "tcp"):
        return
    host, _, port_text = location.rpartition(":")
    if not port_text.isdigit():
        return  # Dask names the problem with the address itself
    host = host.strip("[]")
    where = f"the Dask scheduler at {address}"
    try:
        peer = socket.create_connection((host, int(port_text)), timeout=timeout)
    except TimeoutError:
        raise SpecacceptError(f"cannot reach {where}: no answer within {timeout:g} s") from None
    except OSError as exc:
        raise SpecacceptError(f"cannot reach {where}: {exc.strerror or exc}") from None
    with peer:
        try:
            length = struct.unpack("<Q", _receive(peer, 8))[0]
            if not 16 <= length <= _HANDSHAKE_MAX_BYTES:
                raise SpecacceptError(
                    f"{address} is not a Dask scheduler: its first message announces {length:,} bytes, not a handshake"
                )
            frames = struct.unpack("<Q", _receive(peer, 8))[0]
            if not 1 <= frames <= 64 or 8 * (frames + 1) > length:
                raise SpecacceptError(f"{address} is not a Dask scheduler: its first message is not Dask's framing")
        except TimeoutError:
            raise SpecacceptError(
                f"{address} is not a Dask scheduler: it accepted the connection but sent no Dask handshake within"
                f" {timeout:g} s"
            ) from None
        except EOFError:
            raise SpecacceptError(
                f"{address} is not a Dask scheduler: it closed the connection before a Dask handshake"
            ) from None
        except OSError as exc:
            raise SpecacceptError(f"cannot reach {where}: {exc.strerror or exc}") from None


def _receive(peer: Any, size: int) -> bytes:
    """Exactly `size` bytes from a socket (its timeout applies to each read); EOFError if it closes first."""
    data = b""
    while len(data) < size:
        piece = peer.recv(size - len(data))
        if not piece:
            raise EOFError
        data += piece
    return data


def local_cluster(workers: int, quiet: int = 40) -> Any:
    """A `LocalCluster` of `workers` single-threaded processes, reachable on loopback only.

    Its scheduler serves HTTP even without a dashboard: on a free port, since 8787 may belong to
    another cluster on the machine. `quiet`: the log level below which Dask says nothing (errors
    only by default: the audit's own messages are the ones that matter).
    """
    distributed = _import_distributed()
    return distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        silence_logs=quiet,
    )


def _local_workers(address: str) -> int:
    _, _, count = address.partition(":")
    if not count:
        return default_jobs()
    if not count.isdigit() or int(count) < 1:
        raise UsageError(f"local:N needs a number of workers, not {count!r}")
    return int(count)
