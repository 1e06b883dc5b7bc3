"""The attention block between its two matrix products: scale, mask, softmax (forward), and the
softmax VJP (backward), row by row over (batch·heads·queries), in place on the scores.

    forward:  P = softmax_rows(τ·S, keys where `allowed`),  rows that may attend to nothing: 0
    backward: dS = P ∘ (dP - rowsum(dP ∘ P)), written over dP
NOTE: masked keys get exactly 0 (their score is set to -inf, whose exp is 0); a row with no
allowed key gives zeros, not NaN (the same rule as the NumPy path in ops/attention.py).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from . import buffers
from .dispatch import JIT_OPTIONS, parallel_for, pick, twin_jit
from .mkl_blas import NO_TRANS, ROW_MAJOR, TRANS, gemm_functions
from .scalar_math import fast_exp, max_of

_NO_MASK = np.ones((1, 1), np.bool_)  # the mask argument of kernels told not to read one
_NO_MASK.flags.writeable = False


@numba.njit(**JIT_OPTIONS)
def _softmax_row(s, scale, allowed, use_mask, end):
    """One row of raw scores s (Nk,) -> softmax(scale·s) in place; `allowed` is the row's mask
    (read only with `use_mask`: a mask that allows exactly each row's key span needs none) and
    `end` its key span: keys from `end` on are all masked (half the row when causal), so they
    are set to 0 without being read (the products may leave them unwritten).

    NOTE: with scale > 0 the scaling goes into the exp's argument: max(scale·s) is scale·max(s)
    exactly (rounding is monotonic), so the result is the scale-first computation's, one pass
    fewer. exp and the sum in separate loops: together they did not vectorize (1.6 against
    1.1 ms for 8192 causal rows of 128, one core).
    """
    nk = s.shape[0]
    zero = s.dtype.type(0.0)
    for j in range(end, nk):
        s[j] = zero
    if not scale > 0:  # zero, negative or NaN: scale first (rare; the max must be of scale·s)
        for j in range(end):
            s[j] *= scale
        scale = s.dtype.type(1.0)
    if use_mask:  # after any scaling: -inf·0 would be NaN
        for j in range(end):
            s[j] = s[j] if allowed[j] else s.dtype.type(-np.inf)
    m = max_of(s, end)
    if m == -np.inf:  # every key masked (or -inf scores): zeros, not NaN
        for j in range(end):
            s[j] = 0.0
        return
    shift = m * scale
    for j in range(end):  # masked keys hold -inf: fast_exp gives them exactly 0, no branch
        s[j] = fast_exp(s[j] * scale - shift)
    total = 0.0
    for j in range(end):
        total += s[j]
    inv = s.dtype.type(1.0 / total)
    for j in range(end):
        s[j] *= inv


@numba.njit(**JIT_OPTIONS)
def _softmax_vjp_row(p, dp):
    """One row: dp <- p ∘ (dp - Σ dp ∘ p)."""
    acc = 0.0
    for j in range(p.shape[0]):
        acc += dp[j] * p[j]
    acc_t = p.dtype.type(acc)
    for j in range(p.shape[0]):
        dp[j] = p[j] * (dp[j] - acc_t)


@twin_jit
def _masked_softmax(s, scale, allowed, use_mask, ends):
    heads, nq, nk = s.shape
    for row in prange(heads * nq):
        h, i = row // nq, row % nq
        _softmax_row(s[h, i], scale, allowed[i if use_mask else 0], use_mask, ends[i])


@twin_jit
def _softmax_vjp_inplace(p, dp):
    heads, nq, nk = p.shape
    for row in prange(heads * nq):
        h, i = row // nq, row % nq
        _softmax_vjp_row(p[h, i], dp[h, i])


@numba.njit(**JIT_OPTIONS, parallel=True)
def _heads_forward(q, k, v, scale, allowed, use_mask, ends, p, out):
    for h in prange(q.shape[0]):
        np.dot(q[h], k[h].T, p[h])
        for i in range(p.shape[1]):
            _softmax_row(p[h, i], scale, allowed[i if use_mask else 0], use_mask, ends[i])
        np.dot(p[h], v[h], out[h])


@numba.njit(**JIT_OPTIONS, parallel=True)
def _heads_backward(q, k, v, p, g, scale, dq, dk, dv, ds):
    for h in prange(q.shape[0]):
        np.dot(p[h].T, g[h], dv[h])
        np.dot(g[h], v[h].T, ds[h])
        for i in range(p.shape[1]):
            _softmax_vjp_row(p[h, i], ds[h, i])
        np.dot(ds[h], k[h], dq[h])
        np.dot(ds[h].T, q[h], dk[h])
        for i in range(dq.shape[1]):
            for j in range(dq.shape[2]):
                dq[h, i, j] *= scale
        for i in range(dk.shape[1]):
            for j in range(dk.shape[2]):
                dk[h, i, j] *= scale


def mask_fits(s, allowed):
    """The fused forward covers no mask or one (Nq, Nk) mask shared by every batch and head.

    NOTE: it is taken at one thread too: with exp built from exponent bits (no table lookup,
    scalar_math.py) this kernel beats NumPy's five passes over the scores there as well (GPT
    config A's (16, 4, 64, 64) causal scores, one thread, alternating runs on an AVX-512 Xeon:
    1.1-1.6 ms against 1.6-2.0 ms, the kernel ahead in every pair).
    """
    if s.size == 0:  # no queries or no keys: the reference handles the empty edge cases
        return False
    return allowed is None or (
        allowed.shape == s.shape[-2:] and allowed.dtype == np.bool_ and allowed.flags.c_contiguous
    )


def masked_softmax_(s, scale, allowed):
    """Turns the raw scores s (..., Nq, Nk) into probabilities, in place; returns s."""
    s3 = s.reshape(-1, s.shape[-2], s.shape[-1])
    ends = key_spans(allowed, s.shape[-2], s.shape[-1])
    use_mask = needs_mask(allowed, ends)
    mask = allowed if use_mask else _NO_MASK
    pick(_masked_softmax, s.size)(s3, s.dtype.type(scale), mask, use_mask, ends)
    return s


def key_spans(allowed, nq, nk):
    """For each query row, 1 + the index of its last allowed key (0 if none; nk without a mask):
    the keys a row's softmax and products need (the lower triangle when causal)."""
    if allowed is None:
        ends = np.empty(nq, np.int64)  # NOTE: np.full is a Python function: 3x the time
        ends.fill(nk)
        return ends
    last = nk - np.argmax(allowed[:, ::-1], axis=1)
    return np.where(allowed.any(axis=1), last, 0).astype(np.int64)


def needs_mask(allowed, ends):
    """Whether the softmax must read the mask: not when every row allows exactly its key span
    [0, end) (a causal mask), which the spans already give."""
    return allowed is not None and not np.array_equal(allowed.sum(axis=1), ends)


def softmax_vjp_(p, dp):
    """dp ← p ∘ (dp - rowsum(dp ∘ p)), in place; returns dp."""
    shape3 = (-1, p.shape[-2], p.shape[-1])
    pick(_softmax_vjp_inplace, p.size)(p.reshape(shape3), dp.reshape(shape3))
    return dp


@numba.njit(**JIT_OPTIONS, inline="always")
def _head(t, b, h):
    """The address of head (b, h) of a (B, H, N, d) array, and the leading dimension of its rows."""
    return t.ctypes.data + b * t.strides[0] + h * t.strides[1], t.strides[2] // t.itemsize


# B·H·Nq·Nk from which the block goes head by head: below, NumPy's two batched products and the
# fused softmax cost less than BLAS calls per head (a generation step's one query per head over
# 128 keys, 8 heads: 45 against 58 µs, one thread; (1, 4, 64, 64): 176 against 192 µs; from
# (16, 4, 64, 64) on the heads path is ahead, 1620 against 1787 µs)
HEADS_MIN_SCORES = 1 << 15
QUERY_BLOCK = 32  # query rows per product in the forward: each block's keys end at its span


@twin_jit
def _heads_forward_mkl(gemm, q, k, v, scale, allowed, use_mask, ends, p, out):
    """`_heads_forward` on (B, H, N, d) views of any row strides, through MKL's gemm, which
    takes each head's rows where they are (leading dimension = the row stride): the heads of a
    (B, N, H, d) projection need no copy, and `out` is written in that layout too. The queries
    go in blocks of QUERY_BLOCK rows whose products stop at the block's last allowed key:
    causal attention skips the upper triangle's blocks (5/8 of the work at N = 128)."""
    batch, heads, nq, d = q.shape
    nk, dv = k.shape[2], v.shape[3]
    size = q.itemsize
    for bh in prange(batch * heads):
        b, h = bh // heads, bh % heads
        (q0, ldq), (k0, ldk) = _head(q, b, h), _head(k, b, h)
        (v0, ldv), (o0, ldo) = _head(v, b, h), _head(out, b, h)
        p0 = p.ctypes.data + bh * nq * nk * size
        for r0 in range(0, nq, QUERY_BLOCK):
            rows = min(QUERY_BLOCK, nq - r0)
            span = 0
            for i in range(r0, r0 + rows):
                span = max(span, ends[i])
            if span == 0:  # no allowed key in the block: zero rows, as the reference gives
                for i in range(r0, r0 + rows):
                    p[bh, i, :] = 0.0
                    out[b, h, i, :] = 0.0
                continue
            pb, qb, ob = p0 + r0 * nk * size, q0 + r0 * ldq * size, o0 + r0 * ldo * size
            gemm(ROW_MAJOR, NO_TRANS, TRANS, rows, span, d, 1.0, qb, ldq, k0, ldk, 0.0, pb, nk)
            for i in range(r0, r0 + rows):
                _softmax_row(p[bh, i], scale, allowed[i if use_mask else 0], use_mask, ends[i])
            gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, rows, dv, span, 1.0, pb, nk, v0, ldv, 0.0, ob, ldo)


def query_blocks(ends):
    """The backward's query blocks, widest first: rows (first row, rows, key span). They are the
    forward's blocks of QUERY_BLOCK rows, a block's span the largest of its rows' `ends`, except
    that consecutive blocks with the same span go as one (without a mask: one block, as MKL is
    slower on several sums of 32 rows than on one of 128). Widest first: its products write
    every row of dK and dV that the others add to (see the kernel)."""
    starts = np.arange(0, len(ends), QUERY_BLOCK)
    spans = np.maximum.reduceat(ends, starts)
    first = np.r_[True, spans[1:] != spans[:-1]]
    rows = np.diff(np.r_[starts[first], len(ends)])
    blocks = np.stack([starts[first], rows, spans[first]], axis=1).astype(np.int64)
    return blocks[np.argsort(-blocks[:, 2], kind="stable")]


@twin_jit
def _heads_backward_mkl(gemm, q, k, v, p, g, tau, ends, blocks, dq, dk, dv, ds):
    """`_heads_backward` on strided (B, H, N, d) views through MKL's gemm (see the forward), in
    query blocks (`query_blocks`): block b's products stop at its key span s_b, past which its
    P is 0 (so is its dS, and the keys there get nothing from it):

        dV[:s_b] += P_bᵀ g_b          dS_b = P_b ∘ (dP_b - rowsum(dP_b ∘ P_b)),  dP_b = g_b V[:s_b]ᵀ
        dQ_b = τ·dS_b K[:s_b]         dK[:s_b] += τ·dS_bᵀ Q_b
    τ (tau) rides on the products' alpha. The widest block comes first and writes dK and dV up
    to its span (beta = 0), the others add to them (beta = 1), and their rows past it (keys no
    query sees) are 0: no pass that zeroes them first (about 0.5 ms of 6 at config B's shape)."""
    batch, heads, nq, d = q.shape
    nk, dvn = k.shape[2], v.shape[3]
    size = q.itemsize
    reach = blocks[0, 2]  # the widest span: keys from here on get no gradient
    for bh in prange(batch * heads):
        b, h = bh // heads, bh % heads
        (q0, ldq), (k0, ldk), (v0, ldv) = _head(q, b, h), _head(k, b, h), _head(v, b, h)
        (g0, ldg), (dq0, lddq) = _head(g, b, h), _head(dq, b, h)
        (dk0, lddk), (dv0, lddv) = _head(dk, b, h), _head(dv, b, h)
        p0 = p.ctypes.data + bh * nq * nk * size
        s0 = ds.ctypes.data + bh * nq * nk * size
        for j in range(reach, nk):
            dk[b, h, j, :] = 0.0
            dv[b, h, j, :] = 0.0
        for n in range(blocks.shape[0]):
            r0, rows, span = blocks[n, 0], blocks[n, 1], blocks[n, 2]
            if span == 0:  # no allowed key in the block: P = 0, so no gradient from its rows
                for i in range(r0, r0 + rows):
                    dq[b, h, i, :] = 0.0
                continue
            pb, sb, gb = p0 + r0 * nk * size, s0 + r0 * nk * size, g0 + r0 * ldg * size
            qb, dqb = q0 + r0 * ldq * size, dq0 + r0 * lddq * size
            beta = 0.0 if n == 0 else 1.0  # the widest writes dK[:reach] and dV[:reach]
            gemm(ROW_MAJOR, TRANS, NO_TRANS, span, dvn, rows, 1.0, pb, nk, gb, ldg, beta, dv0, lddv)
            gemm(ROW_MAJOR, NO_TRANS, TRANS, rows, span, dvn, 1.0, gb, ldg, v0, ldv, 0.0, sb, nk)
            for i in range(r0, r0 + rows):  # keys from ends[i] on are masked: P = 0, so dS = 0
                end = ends[i]
                _softmax_vjp_row(p[bh, i, :end], ds[bh, i, :end])
                ds[bh, i, end:span] = 0.0
            gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, rows, d, span, tau, sb, nk, k0, ldk, 0.0, dqb, lddq)
            gemm(ROW_MAJOR, TRANS, NO_TRANS, span, d, rows, tau, sb, nk, qb, ldq, beta, dk0, lddk)


def head_by_head(q, k, v, allowed):
    """Whether the whole block (both products and the softmax) runs here head by head, each
    head's products single-threaded BLAS calls: over the kernels' pool when that is worth it
    (NumPy runs a batch of small products on one thread, and OpenBLAS runs one thread anyway
    while the pool splits the large products, gemm.py), and on one thread too with MKL, which
    reads the heads without copies. Needs no mask or one (Nq, Nk) mask, and no empty dims."""
    d = q.shape[-1] if q.ndim >= 3 else 0
    # the scores' count first (a decoding step's one query stops here): a call per head costs
    # more below HEADS_MIN_SCORES; no queries or keys count 0
    if not d or q.size // d * k.shape[-2] < HEADS_MIN_SCORES or 0 in v.shape:
        return False
    heads = q.size // (d * q.shape[-2])
    if allowed is not None and not (
        allowed.shape == (q.shape[-2], k.shape[-2])
        and allowed.dtype == np.bool_
        and allowed.flags.c_contiguous
    ):
        return False
    if _strided_gemm(q, k, v) is not None:
        return True
    return heads >= 2 and parallel_for(heads * q.shape[-2] * k.shape[-2])


def heads_forward(q, k, v, scale, allowed):
    """(O, P, saved) for q (..., Nq, d), k (..., Nk, d), v (..., Nk, dv), one head per pool task.

    With MKL, (B, H, N, d) inputs are read where they are and O is a (B, H, Nq, dv) view of a
    (B, Nq, H, dv) array (what the model's transpose back wants); otherwise the inputs are made
    C-contiguous first (the heads of a (B, N, H, d) projection are strided views)."""
    ends = key_spans(allowed, q.shape[-2], k.shape[-2])
    use_mask = needs_mask(allowed, ends)
    mask = allowed if use_mask else _NO_MASK
    gemm = _strided_gemm(q, k, v)
    if gemm is not None:
        batch, heads, nq, nk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        p = buffers.empty((batch * heads, nq, nk), q.dtype)
        out = _heads_last_but_one(batch, heads, nq, v.shape[3], q.dtype)
        kernel = pick(_heads_forward_mkl, p.size)
        kernel(gemm, q, k, v, q.dtype.type(scale), mask, use_mask, ends, p, out)
        return out, p, ("strided", gemm, q, k, v, ends)
    q3, k3, v3 = (_contiguous3(t) for t in (q, k, v))
    p = buffers.empty((q3.shape[0], q3.shape[1], k3.shape[1]), q.dtype)
    out = buffers.empty((q3.shape[0], q3.shape[1], v3.shape[2]), q.dtype)
    _heads_forward(q3, k3, v3, q.dtype.type(scale), mask, use_mask, ends, p, out)
    saved = ("contiguous", q3, k3, v3, (q.shape, k.shape, v.shape))
    return out.reshape(q.shape[:-1] + v.shape[-1:]), p, saved


def heads_backward(saved, p, g, scale):
    """(dQ, dK, dV) of `heads_forward`, shaped as q, k, v; `saved` is what the forward returned."""
    if saved[0] == "strided":
        _, gemm, q, k, v, ends = saved
        if g.strides[-1] != g.itemsize:
            g = np.ascontiguousarray(g)
        dq = _heads_last_but_one(*q.shape, q.dtype)
        dk = _heads_last_but_one(*k.shape, k.dtype)
        dv = _heads_last_but_one(*v.shape, v.dtype)
        ds = buffers.empty_like(p)
        kernel = pick(_heads_backward_mkl, p.size)
        blocks = query_blocks(ends)
        kernel(gemm, q, k, v, p, g, q.dtype.type(scale), ends, blocks, dq, dk, dv, ds)
        return dq, dk, dv
    _, q3, k3, v3, shapes = saved
    g3 = _contiguous3(g)
    dq, dk, dv = (buffers.empty_like(t) for t in (q3, k3, v3))
    ds = buffers.empty_like(p)
    _heads_backward(q3, k3, v3, p, g3, q3.dtype.type(scale), dq, dk, dv, ds)
    return tuple(d.reshape(shape) for d, shape in zip((dq, dk, dv), shapes))


def _strided_gemm(q, k, v):
    """MKL's gemm for this dtype when q, k, v are (B, H, N, d) views with contiguous rows (MKL
    reads each head in place), else None."""
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return None
    if any(t.strides[3] != t.itemsize or t.strides[2] % t.itemsize for t in (q, k, v)):
        return None
    return gemm_functions().get(q.dtype)


def _heads_last_but_one(batch, heads, n, d, dtype):
    """A (B, H, N, d) view of a fresh (B, N, H, d) array."""
    return buffers.empty((batch, n, heads, d), dtype).transpose(0, 2, 1, 3)


def _contiguous3(t):
    return np.ascontiguousarray(t).reshape(-1, t.shape[-2], t.shape[-1])
