"""Matrix products: matmul (1-D, 2-D, batched with broadcast batch dims) and fused linear."""

from __future__ import annotations

from ..amp import cast_for_matmul
from ..function import Function
from ._checks import check_tensor


def _swap(a):
    return a.swapaxes(-1, -2)


class MatMul(Function):
    """z = x @ y;  dL/dx = g @ yᵀ,  dL/dy = xᵀ @ g.

    A 1-D x is a row (1, k) and a 1-D y a column (k, 1), as in NumPy; the engine sums the
    gradients over broadcast batch dims.
    """

    broadcasts = True

    def forward(self, x, y):
        self.x, self.y = x, y
        return x @ y

    def backward(self, g):
        x, y = self.x, self.y
        x2 = x if x.ndim > 1 else x[None, :]
        y2 = y if y.ndim > 1 else y[:, None]
        if y.ndim == 1:
            g = g[..., None]
        if x.ndim == 1:
            g = g[..., None, :]
        gx = gy = None
        if self.needs_input_grad[0]:
            gx = g @ _swap(y2)
            if x.ndim == 1:
                gx = gx[..., 0, :]
        if self.needs_input_grad[1]:
            gy = _swap(x2) @ g
            if y.ndim == 1:
                gy = gy[..., 0]
        return gx, gy


class Linear(Function):
    """z = x Wᵀ + b  (x: (..., in), W: (out, in), b: (out,));
    dL/dx = g W,  dL/dW = gᵀx summed over batch dims,  dL/db = Σ g over batch dims."""

    def forward(self, x, weight, bias=None):
        self.x, self.weight = x, weight
        # NOTE: one (N, in) @ (in, out) GEMM over all batch rows: NumPy runs a batched (B, T, in)
        # operand as B small GEMMs, ~25% slower at GPT sizes. Same products, same rounding.
        z = x.reshape(-1, x.shape[-1]) @ weight.T
        if bias is not None:
            z += bias
        return z.reshape(*x.shape[:-1], weight.shape[0])

    def backward(self, g):
        needs = self.needs_input_grad
        x = self.x
        g2 = g.reshape(-1, g.shape[-1])
        gx = (g2 @ self.weight).reshape(x.shape) if needs[0] else None
        gw = g2.T @ x.reshape(-1, x.shape[-1]) if needs[1] else None
        gb = g2.sum(axis=0) if len(needs) > 2 and needs[2] else None
        return gx, gw, gb


def _matmul_error(x, y):
    return ValueError(
        f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} are not aligned: the last dim "
        f"of the first ({x.shape[-1] if x.ndim else '-'}) must equal the "
        f"{'only' if y.ndim == 1 else 'second-to-last'} dim of the second"
    )


def matmul(x, y):
    from ._util import binary_operands

    check_tensor(x, "matmul"), check_tensor(y, "matmul", "other")  # as torch: no Python numbers
    x, y = cast_for_matmul(*binary_operands(x, y, "matmul"))
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dim, got {x.shape} and {y.shape}")
    if x.shape[-1] != y.shape[-2 if y.ndim > 1 else 0]:
        raise _matmul_error(x, y)
    try:
        return MatMul.apply(x, y)
    except ValueError:  # batch dims that do not broadcast
        raise ValueError(
            f"matmul: batch dims of shapes {tuple(x.shape)} and {tuple(y.shape)} do not broadcast"
        ) from None


def linear(x, weight, bias=None):
    """y = x Wᵀ + b with W of shape (out_features, in_features), as `torch.nn.functional.linear`."""
    check_tensor(x, "linear"), check_tensor(weight, "linear", "weight")
    if bias is not None:
        check_tensor(bias, "linear", "bias")
    x, weight, bias = cast_for_matmul(x, weight, bias)
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear: input of shape {tuple(x.shape)} does not fit weight of shape "
            f"{tuple(weight.shape)} (expected input (..., {weight.shape[-1]}))"
        )
    if bias is None:
        return Linear.apply(x, weight)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias shape {tuple(bias.shape)} != ({weight.shape[0]},)")
    return Linear.apply(x, weight, bias)
