"""Solution to exercise 11: the VJP of LayerNorm."""

import numpy as np

import tinytensor as tt


class LayerNorm(tt.Function):
    """y = x̂·w + b with x̂ = (x - μ)·r, r = 1/√(σ² + eps); μ, σ² over the last dim."""

    def forward(self, x, weight, bias, eps=1e-5):
        centered = x - x.mean(axis=-1, keepdims=True)
        self.r = 1 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps)
        self.xhat, self.weight = centered * self.r, weight  # kept for backward
        return self.xhat * weight + bias

    def backward(self, g):
        """dL/dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ∘x̂)), ĝ = g·w;  dL/dw = Σ g∘x̂;  dL/db = Σ g."""
        xhat = self.xhat
        rows = tuple(range(g.ndim - 1))  # every dim but the normalized one
        gw = (g * xhat).sum(axis=rows)
        gb = g.sum(axis=rows)
        gh = g * self.weight
        gx = self.r * (
            gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
        )
        return gx, gw, gb
