"""Exercise 1: the VJP of ReLU.  Read 01_relu.md first.

Write `ReLU.backward` below, then check it:
    python examples/exercises/check.py relu
"""

import numpy as np

import tinytensor as tt


class ReLU(tt.Function):
    """z = max(x, 0), elementwise."""

    def forward(self, x):
        self.x = x  # kept for backward
        return np.maximum(x, 0)

    def backward(self, g):
        """g = dL/dz, shaped like z. Return dL/dx: shaped like x, with x's dtype."""
        raise NotImplementedError(
            "ReLU.backward is yours to write: derive dL/dx in 01_relu.md, then replace this "
            "`raise` with your code"
        )
