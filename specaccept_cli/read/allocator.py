"""How this process's C allocator keeps memory it is given back, tuned for reading blocks.

Every JSONL block is a few fresh buffers of 512 KiB to 2 MiB (the bytes read, the block's text, the
parsed float64 lists). glibc's malloc serves buffers of that size from mmap at first and, later, from the
heap, which it trims whenever more than a megabyte or so lies free at its top: so most blocks ask the
kernel for fresh pages and fault every one of them in, about a tenth of the CPU time of a 1M-run audit
(`docs/performance.md`). Buffers below 8 MiB are therefore taken from the heap and up to 32 MiB of free
heap is kept: a bounded amount, never more than the process used at its peak. Only glibc has `mallopt`;
elsewhere nothing changes.
"""

from __future__ import annotations

import sys
from functools import cache

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 8 << 20
TRIM_THRESHOLD = 32 << 20


@cache
def keep_block_memory() -> bool:
    """Tune glibc's malloc for block buffers, once per process (forked workers inherit it); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to ask, or not glibc's (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
