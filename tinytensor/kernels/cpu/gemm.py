"""Matrix products on the kernels' thread pool, so that one pool runs every parallel loop.

Why not OpenBLAS's own threads: after each product they spin, waiting for the next one, on the
cores the fused kernels' pool wants next, and that pool's OpenMP threads spin on the cores
OpenBLAS wants. Two pools on the same cores take turns by the scheduler's time slices: the GPT
step (config A, 2 cores) took 310 ms with both pools spinning, 100-128 ms with the kernels' pool
asleep between kernels (a 50-140 µs wake-up per kernel, and the kernels barely faster than on
one thread), and 93-117 ms with one pool for both. So while the fused kernels are on, OpenBLAS
runs one thread (threads.py) and the products worth threads are split here into blocks, each a
single-threaded BLAS call run by the same pool: MKL's where the `mkl` extra is installed
(mkl_blas.py; then on one thread too), else OpenBLAS through numba's np.dot (SciPy's BLAS).

The result does not depend on the thread count, on any CPU, by construction: which products
come here, and how each is cut into blocks, depend on the shapes alone. The thread count only
decides which thread runs which block (one thread runs them all, one after the other), so every
thread count makes the same BLAS calls on the same memory. A BLAS promises nothing more: MKL and
OpenBLAS pick their kernels, and with them the order of each dot product's sum, by CPU and by
the call's size (an AMD EPYC's MKL rounded a 512-row block of a 1024-row product differently
from the whole, by 4e-5 at k = 512), so a product here is NumPy's only within float rounding.

- a @ b: the rows of a in `row_blocks(rows)` blocks, each starting at a multiple of ROW_ALIGN
  (MKL_ROW_ALIGN for MKL): a power of two, so two or four threads get equal shares.
- aᵀ @ b (weight gradients) sums over the rows of a and b. With MKL: TRANSPOSED_BLOCKS blocks
  of the result's rows or columns (its longer side), each one product over all the rows; with
  OpenBLAS: TRANSPOSED_CHUNKS row chunks, each a partial product, added in chunk order. The
  column sums of a (a bias gradient) come from the same pass.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from . import buffers
from .dispatch import JIT_OPTIONS, MIN_PRODUCT_MULTIPLY_ADDS, parallel_for, twin_jit
from .mkl_blas import NO_TRANS, ROW_MAJOR, TRANS, gemm_functions

MIN_BLOCK_ROWS = 128  # fewer rows per BLAS call: packing the other operand costs more
# Blocks of at least 256 rows where the rows allow: one thread running a product's blocks one
# after the other took 0.97-1.03x the unsplit call's time in 256-row or larger blocks, and
# 1.05-1.11x in 128-row ones (MKL, float32, (512-2048) x (128-512) x (128-1024), one core).
TARGET_BLOCK_ROWS = 256
MAX_ROW_BLOCKS = 16  # so up to 16 threads share one product
ROW_ALIGN = 48  # a multiple of every row group OpenBLAS's x86 kernels use (4, 8, 16, 24)
# MKL's blocks start at multiples of 16 rows instead: 48 split the GPT steps' 1024 rows 480/544
# over two threads, and the second thread ran 6% longer than an even split
MKL_ROW_ALIGN = 16
MIN_MULTIPLY_ADDS = 1 << 21  # below ~2M multiply-adds one thread beats starting the pool
TRANSPOSED_CHUNKS = 4  # partial products of aᵀ @ b (OpenBLAS): fixed, so results reproduce
MIN_CHUNK_ROWS = 64
# MKL's aᵀ @ b goes in blocks of the result's rows or columns instead, each one product over a's
# rows: no partial products to add afterwards (a single-threaded pass over 4x the weight
# gradient). The products themselves measured level with the chunks' (within the noise) and with
# PyTorch's mm. Fixed, so the result does not depend on the thread count.
TRANSPOSED_BLOCKS = 4
COLUMN_ALIGN = 16  # blocks start at multiples of 16 columns (64 bytes of float32)


@numba.njit(**JIT_OPTIONS, inline="always")
def _row_block(blk, blocks, rows, align):
    """Rows [r0, r1) of block `blk` of `blocks` (or columns: `_transposed_product_mkl`): starts
    at multiples of `align`, the last ends at `rows`."""
    r0 = blk * rows // blocks // align * align
    r1 = (blk + 1) * rows // blocks // align * align if blk + 1 < blocks else rows
    return r0, r1


@numba.njit(**JIT_OPTIONS, inline="always")
def _add_row_to_rows(out, row, r0, r1):
    for i in range(r0, r1):
        for j in range(out.shape[1]):
            out[i, j] += row[j]


@numba.njit(**JIT_OPTIONS, inline="always")
def _add_column_sums(a, r0, r1, c0, c1, sums):
    """sums[c0:c1] += Σ a[r0:r1, c0:c1] over the rows, in a local float64 accumulator: adding
    into `sums` itself did not vectorize (1024x768 float32, one core: 1.6 ms against 0.24)."""
    acc = np.zeros(c1 - c0)
    for i in range(r0, r1):
        row = a[i, c0:c1]
        for j in range(c1 - c0):
            acc[j] += row[j]
    for j in range(c1 - c0):
        sums[c0 + j] += acc[j]


@twin_jit
def _rows_product(a, b, bias, out, blocks, align):
    for blk in prange(blocks):
        r0, r1 = _row_block(blk, blocks, a.shape[0], align)
        np.dot(a[r0:r1], b, out[r0:r1])
        if bias is not None:
            _add_row_to_rows(out, bias, r0, r1)


@twin_jit
def _rows_product_mkl(gemm, a, b, b_transposed, bias, out, blocks, align):
    """As `_rows_product` with MKL's gemm; b is C-ordered, holding bᵀ when b_transposed."""
    rows, inner = a.shape
    cols = out.shape[1]
    size = a.itemsize
    for blk in prange(blocks):
        r0, r1 = _row_block(blk, blocks, rows, align)
        trans_b = TRANS if b_transposed else NO_TRANS
        gemm(ROW_MAJOR, NO_TRANS, trans_b, r1 - r0, cols, inner, 1.0,
             a.ctypes.data + r0 * inner * size, inner, b.ctypes.data, b.shape[1],
             0.0, out.ctypes.data + r0 * cols * size, cols)  # fmt: skip
        if bias is not None:
            _add_row_to_rows(out, bias, r0, r1)


@twin_jit
def _transposed_product_mkl(gemm, a, b, out, column_sums, blocks, by_columns):
    """out = aᵀ @ b in blocks of out's rows (a's columns), or of its columns (b's) when
    `by_columns`, each one gemm over every row of a and b; the column sums of a come from the
    same blocks (float64 accumulators)."""
    rows, p = a.shape
    q = b.shape[1]
    size = a.itemsize
    for blk in prange(blocks):
        if by_columns:
            c0, c1 = _row_block(blk, blocks, q, COLUMN_ALIGN)
            gemm(ROW_MAJOR, TRANS, NO_TRANS, p, c1 - c0, rows, 1.0, a.ctypes.data, p,
                 b.ctypes.data + c0 * size, q, 0.0, out.ctypes.data + c0 * size, q)  # fmt: skip
        else:
            c0, c1 = _row_block(blk, blocks, p, COLUMN_ALIGN)
            gemm(ROW_MAJOR, TRANS, NO_TRANS, c1 - c0, q, rows, 1.0, a.ctypes.data + c0 * size, p,
                 b.ctypes.data, q, 0.0, out.ctypes.data + c0 * q * size, q)  # fmt: skip
        if column_sums is not None:
            s0, s1 = _row_block(blk, blocks, p, COLUMN_ALIGN)
            _add_column_sums(a, 0, rows, s0, s1, column_sums)


@twin_jit
def _transposed_product(a, b, parts, column_sums):
    rows = a.shape[0]
    chunks = parts.shape[0]
    for c in prange(chunks):
        r0, r1 = _row_block(c, chunks, rows, 1)
        np.dot(a[r0:r1].T, b[r0:r1], parts[c])
        if column_sums is not None:
            _add_column_sums(a, r0, r1, 0, a.shape[1], column_sums[c])


def fits(b, dtype) -> bool:
    """Whether the second operand can go to the kernel as it is: a NumPy array of `dtype`, C- or
    Fortran-contiguous (a transposed weight is Fortran-ordered)."""
    return (
        type(b) is np.ndarray
        and b.dtype == dtype
        and b.ndim == 2
        and (b.flags["C_CONTIGUOUS"] or b.flags["F_CONTIGUOUS"])
    )


def splits(rows: int, inner: int, cols: int) -> bool:
    """Whether a (rows, inner) @ (inner, cols) product is cut into blocks that threads can share.
    NOTE: the shapes alone decide, never the thread count: see the module's docstring."""
    return rows >= 2 * MIN_BLOCK_ROWS and rows * inner * cols >= MIN_MULTIPLY_ADDS


def row_blocks(rows: int) -> int:
    """How many row blocks a product that `splits` is cut into: a power of two, 2 to
    MAX_ROW_BLOCKS, blocks of TARGET_BLOCK_ROWS rows or more where there are enough rows."""
    blocks = 2
    while blocks < MAX_ROW_BLOCKS and rows // (2 * blocks) >= TARGET_BLOCK_ROWS:
        blocks *= 2
    return blocks


def takes(rows: int, inner: int, cols: int, dtype) -> bool:
    """Whether this module computes the product: whenever it `splits` (whatever the thread
    count, so that one thread makes the same calls as two), and with MKL any product but the
    smallest (MKL is faster than NumPy's OpenBLAS at any size but the smallest)."""
    # NOTE: not one row (a generation step's x·Wᵀ): NumPy's matrix-vector product reads W once
    # row by row, where MKL's gemm with a transposed W took 1.3-1.4x as long (1x256 @ 256x1024)
    if rows > 1 and dtype in gemm_functions() and rows * inner * cols >= MIN_PRODUCT_MULTIPLY_ADDS:
        return True
    return splits(rows, inner, cols)


def product(a, b, bias=None):
    """a @ b (+ bias on every row): a (m, k) C-contiguous, b (k, n) C- or F-contiguous."""
    rows = a.shape[0]
    out = buffers.empty((rows, b.shape[1]), a.dtype)
    blocks = row_blocks(rows) if splits(rows, a.shape[1], b.shape[1]) else 1
    twin = "parallel" if blocks > 1 and parallel_for(out.size) else "serial"
    gemm = gemm_functions().get(a.dtype)
    if gemm is None:  # OpenBLAS through np.dot
        getattr(_rows_product, twin)(a, b, bias, out, blocks, ROW_ALIGN)
        return out
    kernel = getattr(_rows_product_mkl, twin)
    if b.flags["C_CONTIGUOUS"]:
        kernel(gemm, a, b, False, bias, out, blocks, MKL_ROW_ALIGN)
    else:  # Fortran-ordered b: its transpose is C-ordered
        kernel(gemm, a, b.T, True, bias, out, blocks, MKL_ROW_ALIGN)
    return out


def transposed_product(a, b, want_column_sums=False):
    """(aᵀ @ b, Σ_rows a or None): a (m, p) and b (m, q), both C-contiguous."""
    gemm = gemm_functions().get(a.dtype)
    if gemm is not None:
        return _transposed_product_by_columns(gemm, a, b, want_column_sums)
    chunks = max(1, min(TRANSPOSED_CHUNKS, a.shape[0] // MIN_CHUNK_ROWS))
    parts = buffers.empty((chunks, a.shape[1], b.shape[1]), a.dtype)
    sums = np.zeros((chunks, a.shape[1])) if want_column_sums else None  # float64 partials
    kernel = _transposed_product.parallel if _on_the_pool(a, b) else _transposed_product.serial
    kernel(a, b, parts, sums)
    total = np.add.reduce(parts, axis=0)  # chunk by chunk, in order
    return total, (sums.sum(axis=0).astype(a.dtype) if want_column_sums else None)


def _on_the_pool(a, b) -> bool:
    """Whether aᵀ @ b's blocks run on the pool's threads (else one after the other)."""
    return splits(a.shape[0], a.shape[1], b.shape[1]) and parallel_for(a.shape[1] * b.shape[1])


def _transposed_product_by_columns(gemm, a, b, want_column_sums):
    """MKL's aᵀ @ b: blocks of the result's rows or columns, whichever it has more of, a fixed
    number whatever the thread count."""
    p, q = a.shape[1], b.shape[1]
    out = buffers.empty((p, q), a.dtype)
    sums = np.zeros(p) if want_column_sums else None
    # NOTE: splitting the longer side packs the other operand whole once per block: (1024,256)ᵀ
    # @ (1024,1024) in 4 blocks of out's 64 rows packed the 4 MB b four times (2.96 ms, 2 threads),
    # in 4 blocks of its 256 columns 2.10 ms; the other way round, rows win (2.82 against 4.03)
    by_columns = q > p
    blocks = max(1, min(TRANSPOSED_BLOCKS, (q if by_columns else p) // COLUMN_ALIGN))
    twin = _transposed_product_mkl
    kernel = twin.parallel if _on_the_pool(a, b) else twin.serial
    kernel(gemm, a, b, out, sums, blocks, by_columns)
    return out, (sums.astype(a.dtype) if want_column_sums else None)
