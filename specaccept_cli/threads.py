"""Threads that never take the signals meant for the main thread.

A signal sent to the process (Ctrl-C's SIGINT, SIGTERM, SIGHUP) goes to any one of its threads that does
not block it. Python handles it only in the main thread, and a main thread blocked in a read (a Parquet
stream spooled from stdin, a quiet pipe) is woken only if the signal reaches it: delivered to another
thread (pyarrow's, jemalloc's, a batch thread), the signal is noted and the process waits on, for ever.
Threads inherit the signal mask of the thread that starts them, so everything that starts threads (the
pyarrow import, the pools that run batches, the prefetch thread) does it inside `signals_stay_with_main`:
the ending signals blocked meanwhile, then unblocked in the main thread alone (one arriving meanwhile is
handled right after).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextmanager
def signals_stay_with_main() -> Iterator[None]:
    """Threads started inside block the ending signals, so that only the main thread receives them."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield  # no masks (Windows), or a thread that blocks them already (it was started like this)
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
