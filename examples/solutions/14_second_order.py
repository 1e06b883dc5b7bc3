"""Solution to exercise 14: the VJPs of tanh's backward and of softmax's backward."""

import numpy as np

import tinytensor as tt


def _softmax_vjp(p, a, dim):
    """Exercise 8: the gradient a with respect to p = softmax(x), taken to x."""
    return p * (a - (a * p).sum(axis=dim, keepdims=True))


class TanhBackward(tt.Function):
    """gx = gy·(1 - y²) with y = tanh(x), elementwise: tanh's backward, as an op of (x, gy)."""

    def forward(self, x, gy):
        self.y, self.gy = np.tanh(x), gy  # kept for backward
        return gy * (1 - self.y * self.y)

    def backward(self, g):
        """dL/dgy = g·(1 - y²) (gx is linear in gy);
        dL/dx = g·gy·(-2y)·(1 - y²): d(1 - y²)/dy = -2y, times dy/dx = 1 - y²."""
        d = 1 - self.y * self.y
        gx = -2 * g * self.gy * self.y * d if self.needs_input_grad[0] else None
        ggy = g * d if self.needs_input_grad[1] else None
        return gx, ggy


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
        """gx = J·gy with J = diag(p) - ppᵀ symmetric: dL/dgy = J·g, softmax's VJP of g.
        x reaches gx through p, in the factor p and in s:
            dL/dp = g∘(gy - s) - (Σ g∘p)·gy,   then dL/dx = softmax's VJP of dL/dp."""
        p, dim = self.p, self.dim
        ggy = _softmax_vjp(p, g, dim) if self.needs_input_grad[1] else None
        gx = None
        if self.needs_input_grad[0]:
            gp = g * (self.gy - self.s) - (g * p).sum(axis=dim, keepdims=True) * self.gy
            gx = _softmax_vjp(p, gp, dim)
        return gx, ggy
