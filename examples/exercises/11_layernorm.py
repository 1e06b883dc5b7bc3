"""Exercise 11: the VJP of LayerNorm.  Read 11_layernorm.md first.

Write `LayerNorm.backward` below, then check it:
    python examples/exercises/check.py layernorm
"""

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
        """g = dL/dy, shaped like x (..., D). Return (dL/dx, dL/dw, dL/db), shaped like x, w, b."""
        raise NotImplementedError(
            "LayerNorm.backward is yours to write: derive it in 11_layernorm.md, then replace "
            "this `raise` with your code"
        )
