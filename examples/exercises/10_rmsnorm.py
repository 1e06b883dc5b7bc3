"""Exercise 10: the VJP of RMSNorm.  Read 10_rmsnorm.md first.

Write `RMSNorm.backward` below, then check it:
    python examples/exercises/check.py rmsnorm
"""

import numpy as np

import tinytensor as tt


class RMSNorm(tt.Function):
    """y = x̂·w with x̂ = x·r, r = 1/√(mean(x²) + eps), over the last dim."""

    def forward(self, x, weight, eps=1e-6):
        self.r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
        self.xhat, self.weight = x * self.r, weight  # kept for backward
        return self.xhat * weight

    def backward(self, g):
        """g = dL/dy, shaped like x (..., D). Return (dL/dx shaped like x, dL/dw of shape (D,))."""
        raise NotImplementedError(
            "RMSNorm.backward is yours to write: derive it in 10_rmsnorm.md, then replace this "
            "`raise` with your code"
        )
