"""Solution to exercise 5: the VJP of a matrix product."""

import tinytensor as tt


class MatMul(tt.Function):
    """z = x @ y for matrices x (m, k) and y (k, n)."""

    def forward(self, x, y):
        self.x, self.y = x, y  # kept for backward
        return x @ y

    def backward(self, g):
        """dL/dx = g @ yᵀ (m, k);  dL/dy = xᵀ @ g (k, n)."""
        gx = g @ self.y.T if self.needs_input_grad[0] else None
        gy = self.x.T @ g if self.needs_input_grad[1] else None
        return gx, gy
