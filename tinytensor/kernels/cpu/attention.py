"""The attention block between its two matrix products: scale, mask, softmax (forward), and the
softmax VJP (backward), row by row over (batch·heads·queries), in place on the scores.

    forward:  P = softmax_rows(τ·S, keys where `allowed`),  rows that may attend to nothing: 0
    backward: dS = P ∘ (dP - rowsum(dP ∘ P)), written over dP
NOTE: masked keys get exactly 0 without an exp; a row with no allowed key gives zeros, not NaN
(the same rule as the NumPy path in ops/attention.py).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .dispatch import pick, twin_jit
from .scalar_math import fast_exp


@twin_jit
def _masked_softmax(s, scale, allowed, use_mask):
    heads, nq, nk = s.shape
    for row in prange(heads * nq):
        h, i = row // nq, row % nq
        m = s.dtype.type(-np.inf)
        for j in range(nk):
            v = s[h, i, j] * scale
            if use_mask and not allowed[i, j]:
                v = s.dtype.type(-np.inf)
            s[h, i, j] = v
            m = v if v > m else m
        if m == -np.inf:  # every key masked (or -inf scores): zeros, not NaN
            for j in range(nk):
                s[h, i, j] = 0.0
            continue
        zero = s.dtype.type(0.0)
        for j in range(nk):  # masked keys: 0 without an exp (half the row when causal)
            s[h, i, j] = fast_exp(s[h, i, j] - m) if not use_mask or allowed[i, j] else zero
        total = 0.0
        for j in range(nk):
            total += s[h, i, j]
        inv = s.dtype.type(1.0 / total)
        for j in range(nk):
            s[h, i, j] *= inv


@twin_jit
def _softmax_vjp_inplace(p, dp):
    heads, nq, nk = p.shape
    for row in prange(heads * nq):
        h, i = row // nq, row % nq
        acc = 0.0
        for j in range(nk):
            acc += dp[h, i, j] * p[h, i, j]
        acc_t = p.dtype.type(acc)
        for j in range(nk):
            dp[h, i, j] = p[h, i, j] * (dp[h, i, j] - acc_t)


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
