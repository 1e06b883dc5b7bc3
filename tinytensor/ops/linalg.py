"""Matrix products: matmul (1-D, 2-D, batched with broadcast batch dims) and fused linear."""

from __future__ import annotations

import math

from .. import amp
from ..amp import cast_for_matmul
from ..function import Function
from ..kernels.cpu.dispatch import MIN_PRODUCT_MULTIPLY_ADDS, kernels_for
from ..tensor import Tensor
from ._checks import check_tensor
from ._util import binary_operands


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
        if x.ndim == 2 and y.ndim == 2 and x.size * y.shape[1] < MIN_PRODUCT_MULTIPLY_ADDS:
            return x.dot(y)  # a small 2-D product: none of the pool's tests (0.1 µs of 2)
        rows = _rows_of(x, y)
        pool = _pooled(rows, y) if rows is not None else None
        if pool:  # (..., k) @ (k, n) as one (rows, k) @ (k, n) product on the kernels' pool
            return pool.product(rows, y).reshape(x.shape[:-1] + y.shape[1:])
        if x.ndim == 2 and y.ndim == 2:
            return _product(x, y)  # (a transposed x: the pool's product of x.T, transposed)
        return x @ y

    def backward(self, g):
        x, y = self.x, self.y
        needs = self.needs_input_grad
        # the pool's products take arrays; under create_graph (Tensors) the lines below run
        rows = _rows_of(x, y) if g.__class__ is not Tensor else None
        if rows is not None and g.flags["C_CONTIGUOUS"]:
            g2 = g.reshape(rows.shape[0], g.shape[-1])
            gx = gy = None
            if needs[0]:
                pool = _pooled(g2, y.T)
                gx = (pool.product(g2, y.T) if pool else g2 @ y.T).reshape(x.shape)
            if needs[1]:
                pool = _pooled_transposed(rows, g2)
                gy = pool.transposed_product(rows, g2)[0] if pool else rows.T @ g2
            return gx, gy
        arrays = g.__class__ is not Tensor
        if y.ndim == 2 and x.ndim >= 2 and not (arrays and _small(x, y)):
            # (..., k) @ (k, n): one 2-D product each way, not a batch of them
            times = _product if arrays else _recorded_product
            g2 = g.reshape(-1, g.shape[-1])
            gx = times(g2, _swap(y)).reshape(x.shape) if needs[0] else None
            gy = times(_swap(x.reshape(-1, x.shape[-1])), g2) if needs[1] else None
            return gx, gy
        x2 = x if x.ndim > 1 else x[None, :]
        y2 = y if y.ndim > 1 else y[:, None]
        if y.ndim == 1:
            g = g[..., None]
        if x.ndim == 1:
            g = g[..., None, :]
        gx = gy = None
        if needs[0]:
            gx = g @ _swap(y2)
            if x.ndim == 1:
                gx = gx[..., 0, :]
        if needs[1]:
            gy = _swap(x2) @ g
            if y.ndim == 1:
                gy = gy[..., 0]
        return gx, gy


def _product(a, b):
    """a @ b of 2-D arrays, on the kernels' pool where it takes it: a's rows, or, for a
    transposed view a = cᵀ (a weight gradient's xᵀ), the pool's cᵀ-product (so that products
    on views run on every thread too; NumPy's @ runs OpenBLAS on one while the pool is on)."""
    if a.flags["C_CONTIGUOUS"]:
        pool = _pooled(a, b)
        if pool:
            return pool.product(a, b)
    elif a.T.flags["C_CONTIGUOUS"] and b.flags["C_CONTIGUOUS"]:
        pool = _pooled_transposed(a.T, b)
        if pool:
            return pool.transposed_product(a.T, b)[0]
    return a.dot(b)


def _small(x, y):
    """A 2-D product under the pool's size: NumPy's @ at once (the 16x16 case's dispatch)."""
    return x.ndim == 2 and x.size * y.shape[1] < MIN_PRODUCT_MULTIPLY_ADDS


def _recorded_product(a, b):
    return a @ b


def _rows_of(x, y):
    """x as (rows, k) when x @ y is a (..., k) @ (k, n) product, not small, of arrays that a view
    flattens, else None: then the NumPy path runs (batched y, vectors, other layouts)."""
    if y.ndim != 2 or x.ndim < 2 or x.size * y.shape[1] < MIN_PRODUCT_MULTIPLY_ADDS:
        return None  # the cheap tests first: small products pay no dispatch
    if x.flags["C_CONTIGUOUS"] and type(x) is type(y):
        return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])  # (-1, 0) would be ambiguous
    return None


def _pooled(a, b):
    """The kernels' product module if a @ b (2-D) runs split over the kernels' thread pool, else
    None (NumPy's @): see kernels/cpu/gemm.py for why the products share that pool."""
    if a.shape[0] * a.shape[1] * b.shape[1] < MIN_PRODUCT_MULTIPLY_ADDS:
        return None  # the cheap test first: small products pay no dispatch
    pool = kernels_for("gemm", a)
    if pool and pool.fits(b, a.dtype) and pool.takes(a.shape[0], a.shape[1], b.shape[1], a.dtype):
        return pool
    return None


def _pooled_transposed(a, b):
    """As `_pooled`, for aᵀ @ b over the rows of a and b (both C-contiguous)."""
    if a.shape[0] * a.shape[1] * b.shape[1] < MIN_PRODUCT_MULTIPLY_ADDS:
        return None
    pool = kernels_for("gemm", a, b)
    if pool and pool.takes(a.shape[0], a.shape[1], b.shape[1], a.dtype):
        return pool
    return None


class Linear(Function):
    """z = x Wᵀ + b  (x: (..., in), W: (out, in), b: (out,));
    dL/dx = g W,  dL/dW = gᵀx summed over batch dims,  dL/db = Σ g over batch dims."""

    def forward(self, x, weight, bias=None):
        self.x, self.weight = x, weight
        # NOTE: one (N, in) @ (in, out) GEMM over all batch rows: NumPy runs a batched (B, T, in)
        # operand as B small GEMMs, ~25% slower at GPT sizes. Same products, same rounding.
        x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
        w_t = weight.T
        # (_pooled's own first test, without its call: a decoded token's products are small)
        small = x2.size * w_t.shape[1] < MIN_PRODUCT_MULTIPLY_ADDS
        pool = None if small else _pooled(x2, w_t)
        if pool and (bias is None or kernels_for("gemm", bias)):
            z = pool.product(x2, w_t, bias)
        else:
            z = x2.dot(w_t)  # 2-D dot: matmul's BLAS call, ~0.5 µs less dispatch when small
            if bias is not None:
                z += bias
        return z if x.ndim == 2 else z.reshape(x.shape[:-1] + w_t.shape[1:])

    def backward(self, g):
        needs = self.needs_input_grad
        x = self.x
        g2 = g.reshape(-1, g.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        want_gb = len(needs) > 2 and needs[2]
        if g.__class__ is Tensor:  # create_graph: the same products, recorded (no pool)
            return (
                (g2 @ self.weight).reshape(x.shape) if needs[0] else None,
                g2.transpose(0, 1) @ x2 if needs[1] else None,
                g2.sum(0) if want_gb else None,
            )
        gx = gw = gb = None
        if needs[0]:
            pool = _pooled(g2, self.weight)
            gx = (pool.product(g2, self.weight) if pool else g2 @ self.weight).reshape(x.shape)
        pool = _pooled_transposed(g2, x2) if needs[1] else None
        if pool:
            gw, gb = pool.transposed_product(g2, x2, want_column_sums=want_gb)
        elif needs[1]:
            gw = g2.T @ x2
        if want_gb and gb is None:
            gb = g2.sum(axis=0)
        return gx, gw, gb


def _matmul_error(x, y):
    return ValueError(
        f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} are not aligned: the last dim "
        f"of the first ({x.shape[-1] if x.ndim else '-'}) must equal the "
        f"{'only' if y.ndim == 1 else 'second-to-last'} dim of the second"
    )


def matmul(x, y):
    check_tensor(x, "matmul"), check_tensor(y, "matmul", "other")  # as torch: no Python numbers
    if x._array.dtype != y._array.dtype:
        x, y = binary_operands(x, y, "matmul")
    if amp._autocast_dtype is not None:  # (tested inline: the call cost ~0.2 µs of a 16x16 @)
        x, y = cast_for_matmul(x, y)
    a, b = x._array, y._array
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dim, got {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise _matmul_error(x, y)
    try:
        return MatMul.apply(x, y)
    except ValueError:  # batch dims that do not broadcast
        raise ValueError(
            f"matmul: batch dims of shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast"
        ) from None


def linear(x, weight, bias=None):
    """y = x Wᵀ + b with W of shape (out_features, in_features), as `torch.nn.functional.linear`."""
    check_tensor(x, "linear"), check_tensor(weight, "linear", "weight")
    if bias is not None:
        check_tensor(bias, "linear", "bias")
    if amp._autocast_dtype is not None:
        x, weight, bias = cast_for_matmul(x, weight, bias)
    x_shape, w_shape = x._array.shape, weight._array.shape  # arrays' shapes: no properties
    if len(w_shape) != 2 or not x_shape or x_shape[-1] != w_shape[1]:
        raise ValueError(
            f"linear: input of shape {tuple(x_shape)} does not fit weight of shape "
            f"{tuple(w_shape)} (expected input (..., {w_shape[-1]}))"
        )
    if bias is None:
        return Linear.apply(x, weight)
    if bias._array.shape != (w_shape[0],):
        raise ValueError(f"linear: bias shape {tuple(bias.shape)} != ({w_shape[0]},)")
    return Linear.apply(x, weight, bias)
