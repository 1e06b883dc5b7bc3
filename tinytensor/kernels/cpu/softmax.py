"""Softmax, log-softmax and cross-entropy over the last dim of a (rows, C) array, row-parallel.

NOTE: each row subtracts its max before exp (no overflow); sums accumulate in float64. A row of
all -inf gives NaN, as NumPy's reference and PyTorch do. Cross-entropy makes one pass over the
logits forward (keeping only each row's log-sum-exp) and one backward, where it writes
softmax(z) - q straight into the gradient: the (rows, C) log-probabilities are never stored.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from . import buffers
from .dispatch import pick, twin_jit
from .scalar_math import fast_exp, max_of


@twin_jit
def _softmax_forward(x, p):
    rows, c = x.shape
    for i in prange(rows):
        m_t = max_of(x[i], c)
        for j in range(c):  # NOTE: exp and sum in separate loops: each vectorizes on its own
            p[i, j] = fast_exp(x[i, j] - m_t)
        s = 0.0
        for j in range(c):
            s += p[i, j]
        inv = x.dtype.type(1.0 / s)
        for j in range(c):
            p[i, j] *= inv


@twin_jit
def _softmax_backward(p, g, gx):
    rows, c = p.shape
    for i in prange(rows):
        s = 0.0
        for j in range(c):
            s += g[i, j] * p[i, j]
        s_t = p.dtype.type(s)
        for j in range(c):
            gx[i, j] = p[i, j] * (g[i, j] - s_t)


@twin_jit
def _log_softmax_forward(x, z):
    rows, c = x.shape
    for i in prange(rows):
        m_t = max_of(x[i], c)
        for j in range(c):
            z[i, j] = fast_exp(x[i, j] - m_t)
        s = 0.0
        for j in range(c):
            s += z[i, j]
        log_s = x.dtype.type(math.log(s))
        for j in range(c):
            z[i, j] = (x[i, j] - m_t) - log_s


@twin_jit
def _log_softmax_backward(z, g, gx):
    rows, c = z.shape
    for i in prange(rows):
        s = 0.0
        for j in range(c):
            s += g[i, j]
        s_t = z.dtype.type(s)
        for j in range(c):
            gx[i, j] = g[i, j] - fast_exp(z[i, j]) * s_t


@twin_jit
def _cross_entropy_forward(z, target, ignore_index, eps, stats):
    rows, c = z.shape
    kept = 0
    bad = 0
    for i in prange(rows):
        t = target[i]
        # NOTE: & rather than `and`: branches around prange's reductions break numba's parfor
        counted = t != ignore_index
        ok = counted & (t >= 0) & (t < c)
        kept += ok
        bad += counted != ok  # an id out of range: the caller raises; its row reads nothing
        m_t = max_of(z[i], c)
        s = 0.0
        total = 0.0
        for j in range(c):  # no probabilities stored: only their sum is needed
            s += fast_exp(z[i, j] - m_t)
            total += z[i, j]
        row_lse = m_t + math.log(s)
        stats[1, i] = row_lse
        # (conditional expressions, not statements: see the NOTE above)
        smoothing = eps * (total / c - row_lse) if eps != 0.0 else 0.0
        stats[0, i] = -(1.0 - eps) * (z[i, t] - row_lse) - smoothing if ok else 0.0
    # NOTE: summed after the parallel loop, in row order: the same sum at any thread count (and
    # a third reduction inside prange made numba's parfor fail: "unexpected cycle in lookup")
    loss_sum = 0.0
    for i in range(rows):
        loss_sum += stats[0, i]
    return kept, bad, loss_sum


@twin_jit
def _cross_entropy_backward(z, target, ignore_index, lse, eps, scale, gz):
    rows, c = z.shape
    smooth = z.dtype.type(eps / c)
    hit = z.dtype.type(1.0 - eps)
    for i in prange(rows):
        if target[i] == ignore_index:  # (every other id is in range: forward raised otherwise)
            for j in range(c):
                gz[i, j] = 0.0
            continue
        row_lse, k = z.dtype.type(lse[i]), z.dtype.type(scale[i])
        for j in range(c):
            gz[i, j] = (fast_exp(z[i, j] - row_lse) - smooth) * k
        gz[i, target[i]] -= hit * k


def _rows(x):
    return x if x.ndim == 2 else x.reshape(-1, x.shape[-1])


def softmax_forward(x):
    """softmax over the last dim."""
    p = buffers.empty_like(x)
    if x.ndim == 2:  # NOTE: no _rows calls for the usual (rows, C): a tenth of a 16x16 softmax
        pick(_softmax_forward, x.size)(x, p)
    else:
        pick(_softmax_forward, x.size)(_rows(x), _rows(p))
    return p


def softmax_backward(p, g):
    """p·(g - Σ g·p) over the last dim."""
    gx = buffers.empty_like(p)
    pick(_softmax_backward, p.size)(_rows(p), _rows(g), _rows(gx))
    return gx


def log_softmax_forward(x):
    z = buffers.empty_like(x)
    if x.ndim == 2:  # as in softmax_forward
        pick(_log_softmax_forward, x.size)(x, z)
    else:
        pick(_log_softmax_forward, x.size)(_rows(x), _rows(z))
    return z


def log_softmax_backward(z, g):
    """g - exp(z)·Σ g over the last dim."""
    gx = buffers.empty_like(z)
    pick(_log_softmax_backward, z.size)(_rows(z), _rows(g), _rows(gx))
    return gx


def cross_entropy_forward(z, target, ignore_index, eps):
    """Per-row losses -(1-ε)·log p[target] - ε·mean(log p) (0 where the target is
    `ignore_index`) and each row's log-sum-exp, as one (2, rows) float64 array, for logits z
    (rows, C) and int64 targets (rows,). Also returns how many rows count, how many ids are out
    of range (neither in [0, C) nor `ignore_index`: their rows are not computed, the caller
    raises) and the sum of the losses, in float64 (so the mean needs no pass of its own).
    NOTE: one array for both (and no mask of kept rows: backward tests the ids again): an
    allocation costs 0.2-0.3 µs of a 16x16 cross-entropy's 6."""
    stats = np.empty((2, z.shape[0]), np.float64)
    kernel = pick(_cross_entropy_forward, z.size)
    kept, bad, loss_sum = kernel(z, target, ignore_index, float(eps), stats)
    return stats, kept, bad, loss_sum


def cross_entropy_backward(z, target, ignore_index, lse, eps, scale):
    """(softmax(z) - q)·scale per row, 0 on the rows of `ignore_index`; scale: (rows,) float64."""
    gz = buffers.empty_like(z)
    pick(_cross_entropy_backward, z.size)(z, target, ignore_index, lse, float(eps), scale, gz)
    return gz
