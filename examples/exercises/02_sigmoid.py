"""Exercise 2: the VJP of the sigmoid.  Read 02_sigmoid.md first.

Write `Sigmoid.backward` below, then check it:
    python examples/exercises/check.py sigmoid
"""

import numpy as np

import tinytensor as tt


class Sigmoid(tt.Function):
    """z = σ(x) = 1 / (1 + e⁻ˣ), elementwise."""

    def forward(self, x):
        # NOTE: e^(-|x|) never overflows; for x < 0, σ(x) = eˣ / (1 + eˣ) is the same number.
        e = np.exp(-np.abs(x))
        self.z = np.where(x >= 0, 1 / (1 + e), e / (1 + e))  # kept for backward
        return self.z

    def backward(self, g):
        """g = dL/dz, shaped like z. Return dL/dx (hint: write σ' with the saved output z)."""
        raise NotImplementedError(
            "Sigmoid.backward is yours to write: derive dL/dx in 02_sigmoid.md, then replace "
            "this `raise` with your code"
        )
