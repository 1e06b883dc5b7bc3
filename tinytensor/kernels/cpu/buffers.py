"""Output arrays for the kernels, page-aligned so that a kernel's loads and stores never alias.

With glibc's heap (allocator.py keeps freed buffers there), two arrays of n bytes allocated one
after the other lie n + 16 bytes apart (the chunk header). The tensors of a Transformer have
sizes that are multiples of 1 MiB, so an output allocated right after its input starts 16 bytes
*ahead* of it modulo 1 MiB. The CPU's store-to-load alias check compares only the low address
bits, so every store to out[i] then looks like it could feed the load of x[i + 4] of the next
iteration, and the vectorized loop stalls on it. Measured on one core, a GELU-sized streaming
kernel over 1M float32 (one exp, one division): 1.4 ms with the output 0 or 4 KiB·k bytes from
the input, 5.4 ms with it 1 MiB·k + 16 bytes ahead; NumPy's own add: 0.49 against 0.64 ms.

So large outputs start on a page boundary: any two of them are then a whole number of pages
apart, where nothing aliases. Small arrays keep np.empty (the padding and the extra calls would
cost more than they save).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

PAGE = 4096
ALIGN_FROM_BYTES = 1 << 16  # smaller arrays: np.empty


def empty(shape, dtype):
    """np.empty(shape, dtype), starting on a page boundary when it is large."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < ALIGN_FROM_BYTES:
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + PAGE, np.uint8)
    start = -address(raw) % PAGE
    # one constructor (0.33 µs) where a slice, a view and a reshape cost 0.6
    return np.ndarray(shape, dtype, raw, start)


def address(array) -> int:
    """The address of a writable array's first byte.

    NOTE: not `array.ctypes.data`, which builds a ctypes helper object: 1.4 µs in a loop and
    9-14 µs inside a training step (cold caches), against 0.4 µs here. Config A of
    benchmarks/gpt_step.py makes ~150 large outputs per step; `empty` took 2.7 ms of a 55 ms
    step with ctypes.data, 2.0 ms with this (one timed run each, 2 threads)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(array))


def empty_like(x):
    """An uninitialized C-contiguous array of x's shape and dtype (see `empty`)."""
    if x.nbytes < ALIGN_FROM_BYTES:  # the small arrays' shortcut: an op on 16x16 is a few µs
        return np.empty(x.shape, x.dtype)
    return empty(x.shape, x.dtype)
