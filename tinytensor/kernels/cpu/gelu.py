"""GELU forward and backward (exact and tanh), elementwise and split over threads in blocks.

tanh form: z = x/2·(1 + t), t = tanh(√(2/π)(x + 0.044715x³));
           dz/dx = ½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²).
exact:     z = x·Φ(x), dz/dx = Φ(x) + x·φ(x), Φ from math.erf.
The forward keeps t (tanh form) or Φ (exact) for the backward, as the NumPy reference does.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from .dispatch import pick, twin_jit
from .scalar_math import fast_tanh

BLOCK = 4096  # elements per parallel task: large enough to vectorize, small enough to balance


@twin_jit
def _gelu_tanh_forward(x, z, t):
    n = x.shape[0]
    k0 = x.dtype.type(math.sqrt(2.0 / math.pi))
    a = x.dtype.type(0.044715)
    half = x.dtype.type(0.5)
    for blk in prange((n + BLOCK - 1) // BLOCK):
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            v = x[i]
            th = fast_tanh(k0 * (v + a * v * v * v))
            t[i] = th
            z[i] = half * v * (th + x.dtype.type(1.0))


@twin_jit
def _gelu_tanh_backward(x, t, g, gx):
    n = x.shape[0]
    k0 = x.dtype.type(math.sqrt(2.0 / math.pi))
    a3 = x.dtype.type(3 * 0.044715)
    half = x.dtype.type(0.5)
    one = x.dtype.type(1.0)
    for blk in prange((n + BLOCK - 1) // BLOCK):
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            v, th = x[i], t[i]
            inner = k0 * (a3 * v * v + one)
            gx[i] = g[i] * (half * (th + one) + half * v * (one - th * th) * inner)


@twin_jit
def _gelu_exact_forward(x, z, cdf):
    n = x.shape[0]
    for blk in prange((n + BLOCK - 1) // BLOCK):
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            c = 0.5 * (1.0 + math.erf(x[i] * (1.0 / math.sqrt(2.0))))
            cdf[i] = c
            z[i] = x[i] * c


@twin_jit
def _gelu_exact_backward(x, cdf, g, gx):
    n = x.shape[0]
    inv_sqrt_2pi = 1.0 / math.sqrt(2.0 * math.pi)
    for blk in prange((n + BLOCK - 1) // BLOCK):
        for i in range(blk * BLOCK, min(n, (blk + 1) * BLOCK)):
            v = x[i]
            gx[i] = g[i] * (cdf[i] + v * (math.exp(-0.5 * v * v) * inv_sqrt_2pi))


def gelu_forward(x, approximate):
    """(z, saved): saved is tanh(...) for "tanh", Φ(x) for "none"."""
    z, saved = np.empty_like(x), np.empty_like(x)
    kernel = _gelu_tanh_forward if approximate == "tanh" else _gelu_exact_forward
    pick(kernel, x.size)(x.reshape(-1), z.reshape(-1), saved.reshape(-1))
    return z, saved


def gelu_backward(x, saved, g, approximate):
    gx = np.empty_like(x)
    kernel = _gelu_tanh_backward if approximate == "tanh" else _gelu_exact_backward
    pick(kernel, x.size)(x.reshape(-1), saved.reshape(-1), g.reshape(-1), gx.reshape(-1))
    return gx
