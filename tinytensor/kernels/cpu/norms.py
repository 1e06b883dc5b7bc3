"""LayerNorm and RMSNorm over the last dim, forward and backward, one pass per row.

Rows are independent, so `prange` spreads them over the threads. The weight/bias gradients sum
over rows: each of a fixed number of row chunks adds into its own partial row (in float64), and
the partials are added in chunk order, so the result does not depend on the thread count or the
schedule. Statistics accumulate in float64 and are stored in the input's dtype.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from . import buffers
from .dispatch import pick, twin_jit

REDUCE_CHUNKS = 64  # partial sums for the weight gradients: fixed, so results are reproducible


def _chunks(rows):
    return max(1, min(REDUCE_CHUNKS, rows))


@twin_jit
def _layer_norm_forward(x, w, b, eps, y, stats):
    rows, n = x.shape
    for i in prange(rows):
        s = 0.0
        for j in range(n):
            s += x[i, j]
        mu = s / n
        ss = 0.0
        for j in range(n):
            d = x[i, j] - mu
            ss += d * d
        r = 1.0 / np.sqrt(ss / n + eps)
        stats[0, i], stats[1, i] = mu, r
        mu_t, r_t = x.dtype.type(mu), x.dtype.type(r)
        for j in range(n):
            h = (x[i, j] - mu_t) * r_t
            if w is not None:
                h = h * w[j]
            if b is not None:
                h = h + b[j]
            y[i, j] = h


@twin_jit
def _layer_norm_backward(x, w, g, stats, gx, gw_parts, gb_parts, want_gx):
    rows, n = x.shape
    chunks = gw_parts.shape[0]
    for c in prange(chunks):
        for i in range(c * rows // chunks, (c + 1) * rows // chunks):
            mu, r = stats[0, i], stats[1, i]
            s1 = 0.0
            s2 = 0.0
            for j in range(n):
                xhat = (x[i, j] - mu) * r
                gw_parts[c, j] += g[i, j] * xhat
                gb_parts[c, j] += g[i, j]
                gh = g[i, j] * w[j] if w is not None else g[i, j]
                s1 += gh
                s2 += gh * xhat
            if want_gx:
                a, bb = x.dtype.type(s1 / n), x.dtype.type(s2 / n)
                for j in range(n):
                    xhat = (x[i, j] - mu) * r
                    gh = g[i, j] * w[j] if w is not None else g[i, j]
                    gx[i, j] = r * (gh - a - xhat * bb)


@twin_jit
def _rms_norm_forward(x, w, eps, y, rstd):
    rows, n = x.shape
    for i in prange(rows):
        ss = 0.0
        for j in range(n):
            ss += x[i, j] * x[i, j]
        r = x.dtype.type(1.0 / np.sqrt(ss / n + eps))
        rstd[i] = r
        for j in range(n):
            h = x[i, j] * r
            y[i, j] = h * w[j] if w is not None else h


@twin_jit
def _rms_norm_backward(x, w, g, rstd, gx, gw_parts, want_gx):
    rows, n = x.shape
    chunks = gw_parts.shape[0]
    for c in prange(chunks):
        for i in range(c * rows // chunks, (c + 1) * rows // chunks):
            r = rstd[i]
            s2 = 0.0
            for j in range(n):
                xhat = x[i, j] * r
                gw_parts[c, j] += g[i, j] * xhat
                gh = g[i, j] * w[j] if w is not None else g[i, j]
                s2 += gh * xhat
            if want_gx:
                bb = x.dtype.type(s2 / n)
                for j in range(n):
                    gh = g[i, j] * w[j] if w is not None else g[i, j]
                    gx[i, j] = r * (gh - x[i, j] * r * bb)


def layer_norm_forward(x, weight, bias, eps):
    """y = (x - μ)·r·w + b per row of x (..., n); returns y and `stats` (2, rows): each row's μ
    and r (one array: an allocation is 0.2 µs of a one-token layer_norm)."""
    x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    y = buffers.empty_like(x2)
    stats = np.empty((2, x2.shape[0]), x.dtype)
    pick(_layer_norm_forward, x2.size)(x2, weight, bias, eps, y, stats)
    return (y if x.ndim == 2 else y.reshape(x.shape)), stats


def layer_norm_backward(x, weight, g, stats, want_gx):
    """(dL/dx or None, dL/dw, dL/db) of `layer_norm_forward`."""
    n = x.shape[-1]
    x2, g2 = x.reshape(-1, n), g.reshape(-1, n)
    chunks = _chunks(x2.shape[0])
    gw_parts, gb_parts = np.zeros((chunks, n)), np.zeros((chunks, n))
    gx = buffers.empty_like(x2) if want_gx else x2[:0]
    pick(_layer_norm_backward, x2.size)(x2, weight, g2, stats, gx, gw_parts, gb_parts, want_gx)
    gw, gb = gw_parts.sum(axis=0).astype(x.dtype), gb_parts.sum(axis=0).astype(x.dtype)
    return (gx.reshape(x.shape) if want_gx else None), gw, gb


def rms_norm_forward(x, weight, eps):
    """y = x·r·w per row, r = 1/√(mean(x²) + eps); returns y, r (rows,)."""
    x2 = x.reshape(-1, x.shape[-1])
    y, rstd = buffers.empty_like(x2), np.empty(x2.shape[0], x.dtype)
    pick(_rms_norm_forward, x2.size)(x2, weight, eps, y, rstd)
    return y.reshape(x.shape), rstd


def rms_norm_backward(x, weight, g, rstd, want_gx):
    """(dL/dx or None, dL/dw) of `rms_norm_forward`."""
    n = x.shape[-1]
    x2, g2 = x.reshape(-1, n), g.reshape(-1, n)
    gw_parts = np.zeros((_chunks(x2.shape[0]), n))
    gx = buffers.empty_like(x2) if want_gx else x2[:0]
    pick(_rms_norm_backward, x2.size)(x2, weight, g2, rstd, gx, gw_parts, want_gx)
    return (gx.reshape(x.shape) if want_gx else None), gw_parts.sum(axis=0).astype(x.dtype)
