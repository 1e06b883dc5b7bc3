"""Keeps freed NumPy buffers in the process (glibc malloc) instead of handing them back each op.

Every op allocates fresh result arrays, and a training step frees them all again. With glibc's
defaults, buffers of a few MB are mmap'ed and munmap'ed, or trimmed off the top of the heap, on
every op, so the next step touches brand-new pages: each 4 KiB page costs a kernel page fault
(zeroed by the kernel). For the example char-GPT that was ~18,000 faults and ~20% of every step
in system time. `keep_freed_memory()` raises two glibc thresholds so that freed buffers are
reused from the heap:

- M_MMAP_THRESHOLD = 32 MiB (glibc's ceiling): blocks below it come from the heap, not mmap;
- M_TRIM_THRESHOLD = 1 GiB: up to this much free memory at the top of the heap is kept.

The cost is that the process keeps up to ~1 GiB of freed memory instead of returning it to the
OS. Results do not change (only where buffers live). Set TINYTENSOR_KEEP_FREED_MEMORY=0 to keep
glibc's defaults; explicit MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ / GLIBC_TUNABLES
settings are respected (nothing is changed then). Not glibc (macOS, Windows, musl): no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1  # from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # the largest value glibc accepts on 64-bit
TRIM_THRESHOLD = 2**30

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory() -> bool:
    """Sets the two glibc malloc thresholds above; True if they were set."""
    if os.environ.get("TINYTENSOR_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if not sys.platform.startswith("linux") or any(k in os.environ for k in _USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - raises AttributeError unless this is glibc
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # NOTE: mmap threshold first: setting either one turns off glibc's dynamic adjustment.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
