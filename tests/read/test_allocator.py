"""The allocator tuning for block buffers (`read.allocator`), checked in a fresh process on glibc."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, sys

class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(name, ctypes.c_size_t) for name in names.split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def mapped_after_a_block():
    before = libc.mallinfo2().hblks
    block = bytes(600 << 10)  # a fresh 600 KiB buffer, as a block read is
    during = libc.mallinfo2().hblks
    del block
    return during - before

untuned = mapped_after_a_block()
from specaccept_cli.read.allocator import keep_block_memory
first, again = keep_block_memory(), keep_block_memory()
print(untuned, first, again, mapped_after_a_block())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_block_buffers_come_from_the_heap_once_tuned() -> None:
    """Untuned, a 600 KiB buffer is a fresh mmap (its pages faulted in one by one); tuned, it is heap memory."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    if done.returncode != 0 and "mallinfo2" in done.stderr:
        pytest.skip("not glibc 2.33 or later")
    assert done.returncode == 0, done.stderr
    untuned, first, again, tuned = done.stdout.split()
    assert (untuned, first, again, tuned) == ("1", "True", "True", "0")
