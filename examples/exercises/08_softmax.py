"""Exercise 8: the VJP of softmax.  Read 08_softmax.md first.

Write `Softmax.backward` below, then check it:
    python examples/exercises/check.py softmax
"""

import numpy as np

import tinytensor as tt


class Softmax(tt.Function):
    """p = softmax(x) along `dim`: p_i = e^(x_i) / Σ_j e^(x_j)."""

    def forward(self, x, dim=-1):
        # NOTE: subtracting the max changes nothing mathematically and keeps exp from overflowing.
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        self.p, self.dim = e / e.sum(axis=dim, keepdims=True), dim  # kept for backward
        return self.p

    def backward(self, g):
        """g = dL/dp, shaped like p. Return dL/dx, without building the Jacobian matrix."""
        raise NotImplementedError(
            "Softmax.backward is yours to write: derive it in 08_softmax.md, then replace this "
            "`raise` with your code"
        )
