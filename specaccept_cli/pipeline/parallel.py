"""JSONL on several cores: a process pool AROUND the pure `parse_blocks`, results consumed in input order.

Two ways to cut the input into independent tasks:

- a regular, uncompressed file is cut into newline-aligned byte ranges (a few blocks each); a
  worker opens the file, reads its own range with `iter_text_blocks` and numbers its lines from a
  provisional origin. The parent learns each range's line count from its result and shifts line numbers
  by the count of all earlier ranges, so line numbers stay exact without anyone reading the file twice;
- any other stream (stdin, gzip/bz2/xz/zstd) is cut by `iter_text_blocks` in the parent, which sends
  a few blocks at a time (each as its text, with the number of its first line) to a worker.

Workers apply the rule too and send back only per-run results (line, k, accepted, extras), or only a
`Summary` when nothing per run is needed: the tokens never cross a process boundary. Results are taken
in submission order, at most a few tasks ahead, so errors reach `on_error` in input order (in fail mode
the first bad row of the input is the one reported), per-run output keeps input order, and memory stays
bounded whatever the input's size.
"""

from __future__ import annotations

import gc
import os
import signal
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Future
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import numpy as np
from msgspec import Struct
from msgspec.structs import replace

from specaccept_cli.errors import InputError, OnError, WorkerDied
from specaccept_cli.pipeline.clusters import ClusterDetection
from specaccept_cli.pipeline.request import ReadRequest
from specaccept_cli.pipeline.servers import EngineReading, server_output
from specaccept_cli.read.allocator import keep_block_memory
from specaccept_cli.read.jsonl import BLOCK_BYTES, Lines, iter_text_blocks, parse_blocks
from specaccept_cli.read.policy import ErrorPolicy
from specaccept_cli.read.sources import (
    OpenSource,
    ProgressHook,
    Source,
    expand_inputs,
    open_source,
    read_opened,
)
from specaccept_cli.read.storage import RemoteObject, open_seekable
from specaccept_cli.summary.evaluate import Evaluated, evaluate_batch, evaluate_batches
from specaccept_cli.summary.intervals import closing_parts
from specaccept_cli.summary.state import Summary
from specaccept_cli.threads import signals_stay_with_main

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

# Sources that would make fewer blocks than this are read in-process: a pool is not worth starting.
MIN_PARALLEL_BLOCKS = 3
# Tasks in flight per worker: enough to keep every worker busy, few enough to keep memory flat.
TASKS_PER_WORKER = 2
# Blocks per task: about 4 MiB of input a task, large enough that sending tasks and their results between
# processes costs little, small enough that the last tasks leave no core idle for long.
TASK_BYTES = 4 << 20
BLOCKS_PER_TASK = max(1, TASK_BYTES // BLOCK_BYTES)

_NO_TOKENS = np.zeros(0, dtype=np.float64)


def default_jobs() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


# --- work done in a worker (pure functions of their arguments) ---------------------------------


Block = tuple[int, Lines]  # (number of the first line, lines), as iter_text_blocks yields them
Results = list[tuple[Evaluated, list[Any]]]  # per block: the result and its errors as portable parts


class Work(Struct, frozen=True):
    """What every task of one source needs besides its own lines, sent with each task.

    `request` is the request as workers get it (`ReadRequest.for_workers`): its fields, plan and
    line limit; `keep_runs` sends per-run results back (no tokens), else one folded result.
    """

    source: str  # the source's name, as errors show it
    request: ReadRequest
    keep_runs: bool = True
    block_bytes: int = BLOCK_BYTES


def _evaluate_blocks(blocks: Iterator[Block], work: Work) -> Results:
    """Parse and evaluate blocks in order; without per-run results, fold them into one (errors stay in order)."""
    results: Results = []
    request, keep_runs = work.request, work.keep_runs
    for batch, errors in parse_blocks(blocks, work.source, request.fields, request.max_line_bytes):
        result, more = evaluate_batch(batch, request.plan, keep_runs)
        if keep_runs and result.batch is not None:
            result = replace(result, batch=replace(result.batch, p=_NO_TOKENS, q=_NO_TOKENS, r=_NO_TOKENS))
        if more:  # rows the stage found bad, in line order with the parser's
            errors = sorted(errors + more, key=lambda error: error.line or 0)
        parts = [_portable(error) for error in errors]
        if results and not keep_runs:
            folded, folded_parts = results[-1]
            results[-1] = (folded + result, folded_parts + parts)
        else:
            results.append((result, parts))
    return results


class _RangeReader:
    """At most `length` bytes of a file from its current position (a byte range, read as a stream)."""

    def __init__(self, handle: BinaryIO, length: int) -> None:
        self.handle = handle
        self.remaining = length

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > self.remaining:
            size = self.remaining
        data = self.handle.read(size)
        self.remaining -= len(data)
        return data


class _WorkerError(Exception):
    """An InputError raised in a worker, as plain parts (see `_portable`); the parent raises the original."""


def _range_task(work: Work, location: str | RemoteObject, start: int, end: int) -> tuple[int, int, Results]:
    """`parse_range` in a worker: its InputErrors (and the file's OSErrors) cross back as `_WorkerError`."""
    try:
        return parse_range(work, location, start, end)
    except InputError as exc:
        raise _WorkerError(_portable(exc)) from None
    except OSError as exc:
        raise _WorkerError(_portable(InputError(work.source, None, f"cannot read: {exc.strerror or exc}"))) from None


def parse_range(work: Work, location: str | RemoteObject, start: int, end: int) -> tuple[int, int, Results]:
    """Parse the lines of bytes [start, end) of a file, numbered from a provisional origin.

    The origin is 1 for the range at the start of the file and 2 for any other, so that only the file's
    real first line is ever line 1 (where a byte order mark is tolerated). Returns (origin, number of
    lines in the range, results); the caller shifts line numbers by (real first line - origin).
    """
    origin = 1 if start == 0 else 2
    count = 0
    with open_seekable(location) as handle:
        handle.seek(start)
        reader = cast(BinaryIO, _RangeReader(handle, end - start))

        def blocks() -> Iterator[Block]:
            nonlocal count
            lines = iter_text_blocks(reader, work.source, work.block_bytes, work.request.max_line_bytes)
            for first_line, lines_in_block, block in lines:
                count += lines_in_block
                yield first_line + origin - 1, block

        results = _evaluate_blocks(blocks(), work)
    return origin, count, results


def _lines_task(work: Work, blocks: list[Block]) -> Results:
    return _evaluate_blocks(iter(blocks), work)


def _portable(error: InputError) -> tuple[type[InputError], tuple[Any, ...], dict[str, Any]]:
    """An error as plain parts: exceptions with extra constructor arguments do not survive pickling."""
    return type(error), error.args, dict(vars(error))


def restored_error(parts: tuple[type[InputError], tuple[Any, ...], dict[str, Any]]) -> InputError:
    kind, args, state = parts
    error = kind.__new__(kind)
    Exception.__init__(error, *args)
    vars(error).update(state)
    return error


def _start_worker(parent: int) -> None:
    """A worker's first act: let the parent handle interruptions, and never outlive it.

    Ctrl-C reaches the whole process group: the parent handles it, workers just stop when told.
    SIGTERM and SIGHUP get their default action back (a forked worker inherits whatever handler
    the parent set). A parent that dies without stopping its workers (SIGKILL, a crash) would leave
    them blocked on its pipe forever: on Linux the kernel kills them with it (PR_SET_PDEATHSIG),
    and a parent already gone before that was set is noticed by its pid.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    _die_with_parent()
    if os.getppid() != parent:
        os._exit(1)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent() -> None:
    """Ask Linux to send this process SIGKILL when its parent dies (nothing elsewhere: the pid check remains)."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no C library to ask: the pid check remains
        pass


# --- the parent's side --------------------------------------------------------------------------


def _shift(result: Evaluated, errors: list[InputError], shift: int) -> Evaluated:
    if shift == 0:
        return result
    for error in errors:
        if error.line is not None:
            error.line += shift
    if result.batch is None:
        return result
    return replace(result, batch=replace(result.batch, lines=result.batch.lines + shift))


def newline_aligned_ranges(path: Path | RemoteObject, size: int, block_bytes: int) -> list[tuple[int, int]]:
    """Cut [0, size) into ranges of about `block_bytes`, each ending just after a newline (or at the end)."""
    bounds = [0]
    with open_seekable(path) as handle:
        target = block_bytes
        while target < size:
            handle.seek(target - 1)
            position = target - 1
            while True:
                chunk = handle.read(1 << 16)
                if not chunk:
                    position = size
                    break
                found = chunk.find(b"\n")
                if found >= 0:
                    position += found + 1
                    break
                position += len(chunk)
            if position >= size:
                break
            bounds.append(position)
            target = position + block_bytes
    bounds.append(size)
    return list(pairwise(bounds))


class _Pool:
    """A process pool started on first use, with a bounded window of in-order results."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.executor: ProcessPoolExecutor | None = None

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        if self.executor is None:
            import multiprocessing  # here, not at the top: Parquet and one-process runs never need it
            from concurrent.futures import ProcessPoolExecutor

            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else None)
            self.executor = ProcessPoolExecutor(
                self.jobs, mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
            )
            gc.freeze()  # workers forked from here: their collector leaves the parent's objects (and pages) alone
            try:
                with warnings.catch_warnings():
                    # Python 3.12+ warns when forking beside other threads (here: a progress bar's refresh).
                    # A worker only runs the pool's task loop: it never takes a lock such a thread could hold.
                    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
                    return self.executor.submit(function, *args)
            finally:
                gc.unfreeze()
        return self.executor.submit(function, *args)

    @property
    def window(self) -> int:
        return self.jobs * TASKS_PER_WORKER

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None


def evaluate_sources(
    request: ReadRequest,
    progress: ProgressHook | None = None,
    *,
    keep_runs: bool = True,
    clusters: ClusterDetection | None = None,
) -> Iterator[Evaluated]:
    """Every source of the request, evaluated in input order, each under the request's error policy (a source
    that fails ends itself, not the audit); last, what the policy skipped, as a part of its own. Engine output
    is read as one series across the sources (`EngineReading`): the interval it ends with comes after the last
    source."""
    engine = EngineReading(request.draft_length, request.keep_duplicate_lines)
    policy = ErrorPolicy(request.on_error, request.quarantine)
    for source in expand_inputs(request.inputs, request.storage):
        results = evaluate_source(
            source, request, policy, progress, keep_runs=keep_runs, engine=engine, clusters=clusters
        )
        yield from policy.guard(results)
    end = closing_parts(engine.finish(), request.plan, policy, engine.labels, engine.last_source)
    yield from policy.guard(end)
    yield Evaluated(skipped_input(policy), 0)


def skipped_input(policy: ErrorPolicy) -> Summary:
    """What an error policy left out, as a summary to add to what was read."""
    return Summary(
        skipped_rows=policy.skipped_rows, skipped_sources=policy.skipped_sources, errors=tuple(policy.errors)
    )


def evaluate_source(
    source: Source,
    request: ReadRequest,
    on_error: OnError,
    progress: ProgressHook | None = None,
    *,
    keep_runs: bool = True,
    block_bytes: int = BLOCK_BYTES,
    blocks_per_task: int = BLOCKS_PER_TASK,
    engine: EngineReading | None = None,
    clusters: ClusterDetection | None = None,
) -> Iterator[Evaluated]:
    """Every valid run of one source, evaluated, in input order; JSONL on `request.jobs` processes.

    Gives exactly what the serial path gives (same runs, lines, errors and their order); Parquet and
    `jobs == 1` take the serial path. Without `keep_runs`, results may cover several blocks each.
    `clusters` decides, at the input's first row, which field clusters the runs when the plan names none.
    """
    jobs = default_jobs() if request.jobs is None else request.jobs
    plan = request.plan
    keep_block_memory()
    if progress is not None:
        progress.start_source(source)
    with open_source(source, request.input_format) as opened:
        served = server_output(
            opened, plan, on_error, engine or EngineReading(request.draft_length, request.keep_duplicate_lines)
        )
        if served is not None:  # server output: intervals or requests
            yield from served
            return
        if clusters is not None:
            opened, reading, plan = clusters.resolve(opened, request.reading, plan)
            request = replace(request, fields=reading.fields, plan=plan)
        if jobs > 1 and opened.format == "parquet":
            yield from _threaded(opened, request, jobs, keep_runs, on_error, progress)
        elif jobs > 1 and opened.format == "jsonl":
            work = Work(source.name, request.for_workers(), keep_runs, block_bytes)
            yield from _on_processes(opened, work, _Feed(on_error, progress, blocks_per_task), jobs)
        else:  # one process, one thread
            batches = read_opened(opened, request.reading, on_error, progress)
            yield from evaluate_batches(batches, plan, keep_runs, on_error)


def _on_processes(opened: OpenSource, work: Work, feed: _Feed, jobs: int) -> Iterator[Evaluated]:
    """JSONL on a pool of `jobs` processes: byte ranges of a regular file, blocks of any other stream."""
    pool = _Pool(jobs)
    try:
        if opened.regular_file:
            yield from _from_ranges(opened, work, feed, pool)
        else:
            yield from _from_stream(opened, work, feed, pool)
    except _WorkerError as exc:
        raise restored_error(exc.args[0]) from None
    except BrokenExecutor:  # the pool's workers died
        raise WorkerDied(work.source) from None
    finally:
        pool.close()


def _threaded(
    opened: OpenSource,
    request: ReadRequest,
    jobs: int,
    keep_runs: bool,
    on_error: OnError,
    progress: ProgressHook | None,
) -> Iterator[Evaluated]:
    """Parquet on several cores: the per-batch stage of each record batch on a pool of `jobs` threads.

    Arrow decodes without holding the GIL and numpy's loops over a batch's tokens release it, so threads
    share the cores without processes (nothing is copied or pickled, no memory is counted twice). The
    reader runs here, in the calling thread; each batch's reading errors are held with it and handed on,
    with the errors its stage finds, strictly in input order: what `evaluate_batches` gives, in the same order
    (in fail mode the first bad row of the input is the one reported). A file that fails to decode part
    way raises after every batch before the failure has been handed on.
    """
    from concurrent.futures import ThreadPoolExecutor

    held: list[InputError] = []
    batches = read_opened(opened, request.reading, held.append, progress)
    pending: deque[tuple[list[InputError], Future[tuple[Evaluated, list[InputError]]]]] = deque()

    def hand_on() -> Evaluated:
        errors, future = pending.popleft()
        result, more = future.result()
        for error in errors + more:
            on_error(error)
        return result

    with ThreadPoolExecutor(jobs, thread_name_prefix="specaccept-batch") as pool:
        try:
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except InputError:  # the file itself: what was read before it goes first, as in one thread
                    while pending:
                        yield hand_on()
                    for error in held:
                        on_error(error)
                    raise
                errors, held[:] = held[:], []
                with signals_stay_with_main():  # the pool starts its threads as work is submitted
                    submitted = pool.submit(evaluate_batch, batch, request.plan, keep_runs)
                pending.append((errors, submitted))
                if len(pending) >= TASKS_PER_WORKER * jobs:
                    yield hand_on()
            while pending:
                yield hand_on()
            for error in held:  # reported after the last batch
                on_error(error)
        finally:
            for _, future in pending:
                future.cancel()


class _Feed(Struct, frozen=True):
    """What stays in the parent while tasks run: where errors and progress go, and how many blocks a task takes."""

    on_error: OnError
    progress: ProgressHook | None
    blocks_per_task: int


def _from_ranges(opened: OpenSource, work: Work, feed: _Feed, pool: _Pool) -> Iterator[Evaluated]:
    source = opened.source
    assert source.path is not None
    size = source.path.stat().st_size
    ranges = newline_aligned_ranges(source.path, size, work.block_bytes * feed.blocks_per_task)
    path = str(source.path)
    if len(ranges) < MIN_PARALLEL_BLOCKS:
        tasks: Iterator[Any] = (_done(_range_task(work, path, start, end)) for start, end in ranges)
    else:
        tasks = (pool.submit(_range_task, work, path, start, end) for start, end in ranges)
    next_line = 1
    for (_, end), (origin, count, results) in zip(ranges, _in_order(tasks, pool.window)):
        for result, parts in results:
            errors = [restored_error(part) for part in parts]
            result = _shift(result, errors, next_line - origin)
            for error in errors:
                feed.on_error(error)
            if feed.progress is not None:
                feed.progress.advance(result.runs, end)
            yield result
        next_line += count


def _from_stream(opened: OpenSource, work: Work, feed: _Feed, pool: _Pool) -> Iterator[Evaluated]:
    position = opened.position()
    blocks = (
        (first_line, lines)
        for first_line, _, lines in iter_text_blocks(
            opened.jsonl_stream(), work.source, work.block_bytes, work.request.max_line_bytes
        )
    )
    broken: list[InputError] = []  # the stream's own failure (a cut or corrupt compressed stream)

    def tasks() -> Iterator[Future[Any]]:
        group: list[Block] = []
        try:
            for index, block in enumerate(blocks):
                # The first blocks are parsed here: a short input never starts the pool.
                if index < MIN_PARALLEL_BLOCKS - 1:
                    yield _done(_lines_task(work, [block]))
                    continue
                group.append(block)
                if len(group) == feed.blocks_per_task:
                    yield pool.submit(_lines_task, work, group)
                    group = []
        except InputError as error:  # raised after every row before the damage is evaluated
            broken.append(error)
        if group:
            yield pool.submit(_lines_task, work, group)

    for results in _in_order(tasks(), pool.window):
        for result, parts in results:
            for error in parts:
                feed.on_error(restored_error(error))
            if feed.progress is not None:
                feed.progress.advance(result.runs, position() if position is not None else None)
            yield result
    if broken:
        raise broken[0]


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def _in_order(tasks: Iterator[Future[Any]], window: int) -> Iterator[Any]:
    """Results of `tasks` in order, keeping at most `window` of them submitted ahead."""
    pending: deque[Future[Any]] = deque()
    for task in tasks:
        pending.append(task)
        if len(pending) >= window:
            yield pending.popleft().result()
        # Whatever is already finished goes out now: on a slow stream (a live log on stdin) results
        # must not wait for the window to fill.
        while pending and pending[0].done():
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
