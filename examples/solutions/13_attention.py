"""Solution to exercise 13: the VJP of causal scaled dot-product attention."""

import math

import numpy as np

import tinytensor as tt


def _t(a):
    """The matrix transpose of the last two dims (batch dims stay in front)."""
    return a.swapaxes(-1, -2)


class CausalAttention(tt.Function):
    """O = P·V with P = softmax_rows(S), S = τ·Q·Kᵀ, τ = 1/√d, and S_ij = -∞ for j > i.

    Q, K: (..., T, d); V: (..., T, dv). Query i sees keys 0..i (itself and the past).
    """

    def forward(self, q, k, v):
        t, d = q.shape[-2], q.shape[-1]
        self.scale = 1 / math.sqrt(d)  # a Python float keeps float32 inputs float32
        s = (q @ _t(k)) * self.scale
        s = np.where(np.tri(t, t, dtype=bool), s, -np.inf)  # causal mask: keys j ≤ i
        # NOTE: the diagonal is never masked, so every row max is finite and no row is all -inf.
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        self.p = e / e.sum(axis=-1, keepdims=True)
        self.q, self.k, self.v = q, k, v  # kept for backward
        return self.p @ v

    def backward(self, g):
        """dV = Pᵀ·g;  dP = g·Vᵀ;  dS = P∘(dP - rowsum(dP∘P));  dQ = τ·dS·K;  dK = τ·dSᵀ·Q."""
        p = self.p
        dv = _t(p) @ g
        dp = g @ _t(self.v)
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))  # masked entries: p = 0, ds = 0
        dq = (ds @ self.k) * self.scale
        dk = (_t(ds) @ self.q) * self.scale
        return dq, dk, dv
