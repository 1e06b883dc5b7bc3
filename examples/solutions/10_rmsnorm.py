"""Solution to exercise 10: the VJP of RMSNorm."""

import numpy as np

import tinytensor as tt


class RMSNorm(tt.Function):
    """y = x̂·w with x̂ = x·r, r = 1/√(mean(x²) + eps), over the last dim."""

    def forward(self, x, weight, eps=1e-6):
        self.r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
        self.xhat, self.weight = x * self.r, weight  # kept for backward
        return self.xhat * weight

    def backward(self, g):
        """dL/dx = r·(ĝ - x̂·mean(ĝ∘x̂)) with ĝ = g·w;  dL/dw = Σ over rows of g∘x̂."""
        xhat = self.xhat
        gw = None
        if self.needs_input_grad[1]:
            gw = (g * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
        gh = g * self.weight
        gx = self.r * (gh - xhat * (gh * xhat).mean(axis=-1, keepdims=True))
        return gx, gw
