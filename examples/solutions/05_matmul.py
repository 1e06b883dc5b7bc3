"""Solution to exercise 5: the VJPs of a matrix product and of a batched one."""

import tinytensor as tt


def _t(a):
    """The matrix transpose of the last two dims (batch dims stay in front)."""
    return a.swapaxes(-1, -2)


def _sum_to(a, shape):
    """Sums a (the broadcast batch shape) back to `shape`, as in exercise 3."""
    a = a.sum(axis=tuple(range(a.ndim - len(shape))))  # batch dims the input does not have
    stretched = tuple(i for i, n in enumerate(shape[:-2]) if n == 1 and a.shape[i] != 1)
    return a.sum(axis=stretched, keepdims=True)  # batch dims of size 1 in the input


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


class BatchedMatMul(tt.Function):
    """z = x @ y for stacks of matrices x (..., m, k) and y (..., k, n), batch dims
    broadcasting."""

    def forward(self, x, y):
        self.x, self.y = x, y  # kept for backward
        return x @ y

    def backward(self, g):
        """Per batch: dL/dx = g @ yᵀ, dL/dy = xᵀ @ g (transposing the last two dims only);
        then summed over the batch dims each input was broadcast along."""
        gx = _sum_to(g @ _t(self.y), self.x.shape) if self.needs_input_grad[0] else None
        gy = _sum_to(_t(self.x) @ g, self.y.shape) if self.needs_input_grad[1] else None
        return gx, gy
