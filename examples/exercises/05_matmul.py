"""Exercise 5: the VJP of a matrix product.  Read 05_matmul.md first.

Write `MatMul.backward` below, then `BatchedMatMul.backward` (the last section of the .md),
and check them:
    python examples/exercises/check.py matmul
"""

import tinytensor as tt


class MatMul(tt.Function):
    """z = x @ y for matrices x (m, k) and y (k, n)."""

    def forward(self, x, y):
        self.x, self.y = x, y  # kept for backward
        return x @ y

    def backward(self, g):
        """g = dL/dz, shape (m, n). Return (dL/dx of shape (m, k), dL/dy of shape (k, n)).

        `self.needs_input_grad[i]` says whether input i needs its gradient; you may return None
        for an input that does not (and skip computing it)."""
        raise NotImplementedError(
            "MatMul.backward is yours to write: see 05_matmul.md, then replace this `raise`"
        )


class BatchedMatMul(tt.Function):
    """z = x @ y for stacks of matrices x (..., m, k) and y (..., k, n): one product per batch
    index, the batch dims (...) broadcasting like NumPy's (a (k, n) weight is shared by every
    batch)."""

    def forward(self, x, y):
        self.x, self.y = x, y  # kept for backward
        return x @ y

    def backward(self, g):
        """g = dL/dz, shape (batch..., m, n). Return (dL/dx, dL/dy), shaped like x and y."""
        raise NotImplementedError(
            "BatchedMatMul.backward is yours to write: see the last section of 05_matmul.md, "
            "then replace this `raise`"
        )
