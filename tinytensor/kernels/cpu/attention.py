"""The attention block between its two matrix products: scale, mask, softmax (forward), and the
softmax VJP (backward), row by row over (batch·heads·queries), in place on the scores.

    forward:  P = softmax_rows(τ·S, keys where `allowed`),  rows that may attend to nothing: 0
    backward: dS = P ∘ (dP - rowsum(dP ∘ P)), written over dP
NOTE: masked keys get exactly 0 without an exp; a row with no allowed key gives zeros, not NaN
(the same rule as the NumPy path in ops/attention.py).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from .dispatch import JIT_OPTIONS, parallel_for, pick, twin_jit
from .scalar_math import fast_exp


@numba.njit(**JIT_OPTIONS)
def _softmax_row(s, scale, allowed, use_mask):
    """One row of scores s (Nk,) -> its probabilities, in place; `allowed` is the row's mask."""
    nk = s.shape[0]
    m = s.dtype.type(-np.inf)
    for j in range(nk):
        v = s[j] * scale
        if use_mask and not allowed[j]:
            v = s.dtype.type(-np.inf)
        s[j] = v
        m = v if v > m else m
    if m == -np.inf:  # every key masked (or -inf scores): zeros, not NaN
        for j in range(nk):
            s[j] = 0.0
        return
    zero = s.dtype.type(0.0)
    for j in range(nk):  # masked keys: 0 without an exp (half the row when causal)
        s[j] = fast_exp(s[j] - m) if not use_mask or allowed[j] else zero
    total = 0.0
    for j in range(nk):
        total += s[j]
    inv = s.dtype.type(1.0 / total)
    for j in range(nk):
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
def _masked_softmax(s, scale, allowed, use_mask):
    heads, nq, nk = s.shape
    for row in prange(heads * nq):
        h, i = row // nq, row % nq
        _softmax_row(s[h, i], scale, allowed[i if use_mask else 0], use_mask)


@twin_jit
def _softmax_vjp_inplace(p, dp):
    heads, nq, nk = p.shape
    for row in prange(heads * nq):
        h, i = row // nq, row % nq
        _softmax_vjp_row(p[h, i], dp[h, i])


@numba.njit(**JIT_OPTIONS, parallel=True)
def _heads_forward(q, k, v, scale, allowed, use_mask, p, out):
    for h in prange(q.shape[0]):
        np.dot(q[h], k[h].T, p[h])
        for i in range(p.shape[1]):
            _softmax_row(p[h, i], scale, allowed[i if use_mask else 0], use_mask)
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
    use_mask = allowed is not None
    mask = allowed if use_mask else np.ones((1, 1), np.bool_)
    pick(_masked_softmax, s.size)(s3, s.dtype.type(scale), mask, use_mask)
    return s


def softmax_vjp_(p, dp):
    """dp ← p ∘ (dp - rowsum(dp ∘ p)), in place; returns dp."""
    shape3 = (-1, p.shape[-2], p.shape[-1])
    pick(_softmax_vjp_inplace, p.size)(p.reshape(shape3), dp.reshape(shape3))
    return dp


def heads_worth_threads(q, k, v, allowed):
    """Whether the whole block (both products and the softmax) should run head by head over the
    kernels' pool, each head's products one single-threaded BLAS call: NumPy runs a batch of
    small products on one thread, and OpenBLAS runs one thread anyway while the pool splits the
    large products (gemm.py). Needs no mask or one (Nq, Nk) mask, and no empty dims."""
    if q.ndim < 3 or 0 in q.shape or 0 in k.shape or 0 in v.shape:
        return False
    heads = q.size // (q.shape[-1] * q.shape[-2])
    if allowed is not None and not (
        allowed.shape == (q.shape[-2], k.shape[-2])
        and allowed.dtype == np.bool_
        and allowed.flags.c_contiguous
    ):
        return False
    return heads >= 2 and parallel_for(heads * q.shape[-2] * k.shape[-2])


def heads_forward(q, k, v, scale, allowed):
    """(O, P) for q (..., Nq, d), k (..., Nk, d), v (..., Nk, dv), one head per pool task; the
    inputs are made C-contiguous (the heads of a (B, T, H, d) projection are strided views)."""
    q3, k3, v3 = (_contiguous3(t) for t in (q, k, v))
    p = np.empty((q3.shape[0], q3.shape[1], k3.shape[1]), q.dtype)
    out = np.empty((q3.shape[0], q3.shape[1], v3.shape[2]), q.dtype)
    use_mask = allowed is not None
    mask = allowed if use_mask else np.ones((1, 1), np.bool_)
    _heads_forward(q3, k3, v3, q.dtype.type(scale), mask, use_mask, p, out)
    return out.reshape(q.shape[:-1] + v.shape[-1:]), p, (q3, k3, v3)


def heads_backward(saved, p, g, scale):
    """(dQ, dK, dV) of `heads_forward`, as (heads, N, d) arrays; `saved` is its (q3, k3, v3)."""
    q3, k3, v3 = saved
    g3 = _contiguous3(g)
    dq, dk, dv = np.empty_like(q3), np.empty_like(k3), np.empty_like(v3)
    ds = np.empty_like(p)
    _heads_backward(q3, k3, v3, p, g3, q3.dtype.type(scale), dq, dk, dv, ds)
    return dq, dk, dv


def _contiguous3(t):
    return np.ascontiguousarray(t).reshape(-1, t.shape[-2], t.shape[-1])
