"""GELU forward and backward (exact and tanh), elementwise and split over threads in blocks.

tanh form: z = x/2·(1 + t), t = tanh(√(2/π)(x + 0.044715x³));
           dz/dx = ½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²).
exact:     z = x·Φ(x), dz/dx = Φ(x) + x·φ(x); float32 Φ and φ vectorize (scalar_math.py).
The forward keeps 1 + t (tanh form) or Φ (exact) for the backward. NOTE: 1 + t cancels in the
negative tail (t -> -1) if computed from tanh, so it is computed as 2/(1 + exp(-2u)) (one exp, one
division: 1.4-1.5x faster than a rational tanh plus the tail's exp, one core, page-aligned arrays),
and the backward uses 1 - t² = (2 - (1 + t))·(1 + t), so neither pass subtracts nearly equal
numbers.
"""

from __future__ import annotations

import math

from numba import prange

from . import buffers
from .dispatch import pick, twin_jit
from .scalar_math import fast_exp, normal_cdf, normal_pdf

# NOTE: flat prange loops (no blocks of indices): LLVM vectorizes those in both twins.


@twin_jit
def _gelu_tanh_forward(x, z, opt):
    k0 = x.dtype.type(math.sqrt(2.0 / math.pi))
    a = x.dtype.type(0.044715)
    half = x.dtype.type(0.5)
    one = x.dtype.type(1.0)
    two = x.dtype.type(2.0)
    for i in prange(x.shape[0]):
        v = x[i]
        u = k0 * (v + a * v * v * v)
        # 1 + tanh(u) = 2 / (1 + exp(-2u)): one exp and one division, no cancellation in
        # either tail (exp(-2u) overflows to inf for u < -44, giving 0 as it should)
        o = two / (one + fast_exp(-(u + u)))
        opt[i] = o
        z[i] = half * v * o


@twin_jit
def _gelu_tanh_backward(x, opt, g, gx):
    k0 = x.dtype.type(math.sqrt(2.0 / math.pi))
    a3 = x.dtype.type(3 * 0.044715)
    half = x.dtype.type(0.5)
    one = x.dtype.type(1.0)
    two = x.dtype.type(2.0)
    for i in prange(x.shape[0]):
        v, o = x[i], opt[i]
        inner = k0 * (a3 * v * v + one)
        # ½(1 + t) = ½·o and 1 - t² = (2 - o)·o, with o = 1 + t kept accurate in both tails
        gx[i] = g[i] * (half * o + half * v * ((two - o) * o) * inner)


@twin_jit
def _gelu_exact_forward(x, z, cdf):
    for i in prange(x.shape[0]):
        c = normal_cdf(x[i])
        if cdf is not None:  # (None: nothing to keep; numba compiles the test away)
            cdf[i] = c
        z[i] = x[i] * c


@twin_jit
def _gelu_exact_backward(x, cdf, g, gx):
    for i in prange(x.shape[0]):
        v = x[i]
        gx[i] = g[i] * (cdf[i] + v * normal_pdf(v))


def gelu_forward(x, approximate, keep=True):
    """(z, saved): saved is 1 + tanh(...) for "tanh", Φ(x) for "none". Without `keep` (no
    backward will read it: under no_grad) the exact form skips Φ's array and its stores, and
    returns None for it (16x16: ~0.5 µs of 2-4).

    NOTE: the tanh form always keeps 1 + t: without that store, reassociation folds ½·2/(1 + e)
    into 1/(1 + e), which rounds z differently (1 ulp); the exact form's z = x·Φ is the same."""
    z = buffers.empty_like(x)
    exact = approximate != "tanh"
    saved = buffers.empty_like(x) if keep or not exact else None
    kernel = _gelu_exact_forward if exact else _gelu_tanh_forward
    pick(kernel, x.size)(x.reshape(-1), z.reshape(-1), None if saved is None else saved.reshape(-1))
    return z, saved


def gelu_backward(x, saved, g, approximate):
    gx = buffers.empty_like(x)
    kernel = _gelu_tanh_backward if approximate == "tanh" else _gelu_exact_backward
    pick(kernel, x.size)(x.reshape(-1), saved.reshape(-1), g.reshape(-1), gx.reshape(-1))
    return gx
