"""Exercise 14: second order, the VJP of a backward.  Read 14_second_order.md first.

Write `TanhBackward.backward` below, then `SoftmaxBackward.backward` (part 2 of the .md), and
check them:
    python examples/exercises/check.py second_order
"""

import numpy as np

import tinytensor as tt


class TanhBackward(tt.Function):
    """gx = gy·(1 - y²) with y = tanh(x), elementwise: tanh's backward, as an op of (x, gy)."""

    def forward(self, x, gy):
        self.y, self.gy = np.tanh(x), gy  # kept for backward
        return gy * (1 - self.y * self.y)

    def backward(self, g):
        """g = dL/dgx, shaped like gx. Return (dL/dx, dL/dgy): gy is an input too."""
        raise NotImplementedError(
            "TanhBackward.backward is yours to write: derive both gradients in part 1 of "
            "14_second_order.md, then replace this `raise` with your code"
        )


class SoftmaxBackward(tt.Function):
    """gx = softmax's VJP of gy at x along `dim` (exercise 8's answer), as an op of (x, gy)."""

    def forward(self, x, gy, dim=-1):
        # NOTE: the forward of this op is the backward of exercise 8: solve that one first.
        e = np.exp(x - x.max(axis=dim, keepdims=True))
        p = e / e.sum(axis=dim, keepdims=True)
        s = (gy * p).sum(axis=dim, keepdims=True)  # one number per row
        self.p, self.gy, self.s, self.dim = p, gy, s, dim  # kept for backward
        return p * (gy - s)

    def backward(self, g):
        """g = dL/dgx, shaped like gx. Return (dL/dx, dL/dgy), without building a Jacobian."""
        raise NotImplementedError(
            "SoftmaxBackward.backward is yours to write: derive it in part 2 of "
            "14_second_order.md, then replace this `raise` with your code"
        )
