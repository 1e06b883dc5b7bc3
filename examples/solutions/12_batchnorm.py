"""Solution to exercise 12: the VJP of BatchNorm in training mode."""

import numpy as np

import tinytensor as tt


class BatchNorm(tt.Function):
    """y = x̂·w + b with x̂ = (x - μ)·r, r = 1/√(σ² + eps); μ, σ² (biased) over the batch,
    for x (N, C): every channel is normalized with its own batch statistics."""

    def forward(self, x, weight, bias, eps=1e-5):
        centered = x - x.mean(axis=0, keepdims=True)
        self.r = 1 / np.sqrt((centered * centered).mean(axis=0, keepdims=True) + eps)
        self.xhat, self.weight = centered * self.r, weight  # kept for backward
        return self.xhat * weight + bias

    def backward(self, g):
        """LayerNorm's VJP with the roles of the dims swapped: means over the batch (dim 0).
        dL/dx = r·(ĝ - mean₀(ĝ) - x̂·mean₀(ĝ∘x̂)), ĝ = g·w;  dL/dw = Σ₀ g∘x̂;  dL/db = Σ₀ g."""
        xhat = self.xhat
        gh = g * self.weight
        gx = self.r * (
            gh - gh.mean(axis=0, keepdims=True) - xhat * (gh * xhat).mean(axis=0, keepdims=True)
        )
        return gx, (g * xhat).sum(axis=0), g.sum(axis=0)
