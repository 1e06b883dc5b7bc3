"""Exercise 12: the VJP of BatchNorm in training mode.  Read 12_batchnorm.md first.

Write `BatchNorm.backward` below, then check it:
    python examples/exercises/check.py batchnorm
"""

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
        """g = dL/dy, (N, C). Return (dL/dx of shape (N, C), dL/dw of shape (C,), dL/db (C,))."""
        raise NotImplementedError(
            "BatchNorm.backward is yours to write: derive it in 12_batchnorm.md, then replace "
            "this `raise` with your code"
        )
