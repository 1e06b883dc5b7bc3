"""The whole attention block of one (batch·head) in one kernel pair, `prange` over batch·heads.

For one head, with scale τ and a mask `allowed` (Nq, Nk) shared by every head:
    forward:  P = softmax_rows(τ·Q·Kᵀ, keys where `allowed`),  O = P·V
    backward: dV = Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ∘ (dP - rowsum(dP ∘ P)),
              dQ = τ·dS·K,  dK = τ·dSᵀ·Q
A row with no allowed key gives P = 0 and O = 0 (the NumPy path's rule) and no gradient.

NOTE: each head's matrices are small (GPT: 64x64x32), below OpenBLAS's threading threshold, so
NumPy's batched matmul runs them one after the other on one core. Here one `prange` iteration
owns one head's outputs (no atomics, no races: the same result run to run), and the products are
axpy loops whose inner loop runs over a contiguous row (a score row from a per-head Kᵀ copy, an
output row from V's rows), which LLVM vectorizes. Each query row only visits the keys between its
first and last allowed one: for a causal mask that halves the work.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .dispatch import pick, twin_jit
from .scalar_math import fast_exp


@njit(inline="always")
def _key_span(allowed, use_mask, i, nk):
    """[lo, hi): the span of keys between row i's first and last allowed key (empty if none)."""
    if not use_mask:
        return 0, nk
    lo = 0
    while lo < nk and not allowed[i, lo]:
        lo += 1
    hi = nk
    while hi > lo and not allowed[i, hi - 1]:
        hi -= 1
    return lo, hi


@twin_jit
def _attention_forward(q, k, v, scale, allowed, use_mask, p, o):
    heads, nq, d = q.shape
    nk, dv = v.shape[1], v.shape[2]
    zero, minus_inf = q.dtype.type(0.0), q.dtype.type(-np.inf)
    for h in prange(heads):
        kt = np.empty((d, nk), q.dtype)  # Kᵀ: a score row is then axpys over contiguous rows
        for j in range(nk):
            for c in range(d):
                kt[c, j] = k[h, j, c]
        for i in range(nq):
            lo, hi = _key_span(allowed, use_mask, i, nk)
            n = hi - lo
            # NOTE: loops run over slices from 0, never over range(lo, hi): with an index of
            # unknown sign numba checks for negative indices per element, which blocks
            # vectorization (14x slower axpys, measured)
            p_row, o_row = p[h, i], o[h, i]
            for j in range(nk):
                p_row[j] = zero
            for e in range(dv):
                o_row[e] = zero
            p_span, allowed_span = p_row[lo:hi], allowed[i, lo:hi] if use_mask else allowed[0]
            for c in range(d):  # S row = Q row · Kᵀ, over the key span only
                q_ic = q[h, i, c]
                kt_span = kt[c, lo:hi]
                for j in range(n):
                    p_span[j] += q_ic * kt_span[j]
            for j in range(n):  # NOTE: selects, not branches, so that the loop vectorizes
                s = p_span[j] * scale
                p_span[j] = s if not use_mask or allowed_span[j] else minus_inf
            m = minus_inf
            for j in range(n):
                m = p_span[j] if p_span[j] > m else m
            if m == -np.inf:  # every key masked (or -inf scores): P = 0 and O = 0, not NaN
                for j in range(n):
                    p_span[j] = zero
                continue
            for j in range(n):  # masked keys: exp(-inf) = 0 exactly
                p_span[j] = fast_exp(p_span[j] - m)
            total = 0.0
            for j in range(n):
                total += p_span[j]
            inv = q.dtype.type(1.0 / total)
            for j in range(n):
                p_span[j] *= inv
            for j in range(n):  # O row = Σ_j P[i, j]·V[j]: axpys over V's contiguous rows
                p_ij = p_span[j]
                v_row = v[h, lo + j]
                for e in range(dv):
                    o_row[e] += p_ij * v_row[e]


@twin_jit
def _attention_backward(
    q, k, v, p, g, scale, allowed, use_mask, dq, dk, dv, need_dq, need_dk, need_dv
):
    heads, nq, d = q.shape
    nk, dv_dim = v.shape[1], v.shape[2]
    zero = q.dtype.type(0.0)
    need_ds = need_dq or need_dk
    for h in prange(heads):
        vt = np.empty((dv_dim, nk), q.dtype)  # Vᵀ: a dP row is then axpys over contiguous rows
        if need_ds:
            for j in range(nk):
                for e in range(dv_dim):
                    vt[e, j] = v[h, j, e]
        if need_dq:
            dq[h] = zero
        if need_dk:
            dk[h] = zero
        if need_dv:
            dv[h] = zero
        ds = np.empty(nk, q.dtype)
        for i in range(nq):
            lo, hi = _key_span(allowed, use_mask, i, nk)
            n = hi - lo
            p_span, g_row = p[h, i, lo:hi], g[h, i]  # NOTE: loops from 0, as in the forward
            if need_dv:  # dV[j] += P[i, j]·dO[i]
                for j in range(n):
                    p_ij = p_span[j]
                    dv_row = dv[h, lo + j]
                    for e in range(dv_dim):
                        dv_row[e] += p_ij * g_row[e]
            if not need_ds:
                continue
            ds_span = ds[:n]
            for j in range(n):
                ds_span[j] = zero
            for e in range(dv_dim):  # dP row = dO row · Vᵀ
                g_ie = g_row[e]
                vt_span = vt[e, lo:hi]
                for j in range(n):
                    ds_span[j] += g_ie * vt_span[j]
            acc = 0.0
            for j in range(n):
                acc += ds_span[j] * p_span[j]
            acc_t = q.dtype.type(acc)
            for j in range(n):  # dS = P ∘ (dP - rowsum(dP ∘ P)), over dP
                ds_span[j] = p_span[j] * (ds_span[j] - acc_t)
            if need_dq:  # dQ[i] = Σ_j dS[i, j]·K[j]  (τ applied once per head below)
                dq_row = dq[h, i]
                for j in range(n):
                    ds_j = ds_span[j]
                    k_row = k[h, lo + j]
                    for c in range(d):
                        dq_row[c] += ds_j * k_row[c]
            if need_dk:  # dK[j] += dS[i, j]·Q[i]
                q_row = q[h, i]
                for j in range(n):
                    ds_j = ds_span[j]
                    dk_row = dk[h, lo + j]
                    for c in range(d):
                        dk_row[c] += ds_j * q_row[c]
        # τ after the sums, as the reference scales the products (dQ = (dS·K)·τ)
        if need_dq:
            dq[h] *= scale
        if need_dk:
            dk[h] *= scale


def _mask_args(allowed):
    use_mask = allowed is not None
    return (allowed if use_mask else np.ones((1, 1), np.bool_)), use_mask


def mask_fits(allowed, n_queries, n_keys):
    """The kernels take no mask, or one C-contiguous bool (Nq, Nk) mask shared by every head;
    returns that mask as (Nq, Nk) (leading 1-dims dropped), or False when it does not fit."""
    if allowed is None:
        return None
    if (
        type(allowed) is not np.ndarray
        or allowed.dtype != np.bool_
        or allowed.shape[-2:] != (n_queries, n_keys)
        or any(n != 1 for n in allowed.shape[:-2])
    ):
        return False
    allowed = allowed.reshape(n_queries, n_keys)
    return allowed if allowed.flags.c_contiguous else False


def attention_forward(q, k, v, scale, allowed):
    """(O, P) for q (BH, Nq, D), k (BH, Nk, D), v (BH, Nk, Dv), all C-contiguous, one dtype;
    `allowed` None or a C-contiguous bool (Nq, Nk)."""
    heads, nq, _ = q.shape
    nk, dv = v.shape[1], v.shape[2]
    p = np.empty((heads, nq, nk), q.dtype)
    o = np.empty((heads, nq, dv), q.dtype)
    mask, use_mask = _mask_args(allowed)
    pick(_attention_forward, p.size)(q, k, v, q.dtype.type(scale), mask, use_mask, p, o)
    return o, p


def attention_backward(q, k, v, p, g, scale, allowed, needs=(True, True, True)):
    """(dQ, dK, dV) from the saved q, k, v, P and the output gradient g (BH, Nq, Dv); a gradient
    not in `needs` (dq, dk, dv) is skipped and returned as None."""
    need_dq, need_dk, need_dv = (bool(n) for n in needs)

    def grad_like(x, needed):  # NOTE: a skipped gradient gets a 0-row stand-in the kernel ignores
        return np.empty(x.shape if needed else (x.shape[0], 0, x.shape[2]), x.dtype)

    dq, dk, dv = grad_like(q, need_dq), grad_like(k, need_dk), grad_like(v, need_dv)
    mask, use_mask = _mask_args(allowed)
    pick(_attention_backward, p.size)(
        q, k, v, p, g, q.dtype.type(scale), mask, use_mask, dq, dk, dv, need_dq, need_dk, need_dv
    )
    return (dq if need_dq else None, dk if need_dk else None, dv if need_dv else None)
