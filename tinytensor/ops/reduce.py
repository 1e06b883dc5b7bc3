"""Reductions: sum, mean, var, max/min, logsumexp, and the index-valued argmax/argmin."""

from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from ..backend import get_array_module
from ..function import Function
from ..tensor import Tensor
from ._checks import check_tensor
from ._util import normalize_dim, normalize_dims

MaxMin = namedtuple("MaxMin", ["values", "indices"])  # what max(dim)/min(dim) return, as PyTorch


def _sum(x, axes, keepdim):
    """x.sum(axis=axes, keepdims=keepdim). NOTE: NumPy's add.reduce directly: ndarray.sum is a
    Python wrapper around it, a quarter of a 16x16 sum's time."""
    if x.__class__ is np.ndarray:
        return np.add.reduce(x, axis=axes, keepdims=keepdim)
    return x.sum(axis=axes, keepdims=keepdim)


def _restore_dims(g, axes, keepdim):
    """Puts back the reduced axes (size 1) so that `g` broadcasts against the input."""
    return g if keepdim else get_array_module(g).expand_dims(g, axes)


class Sum(Function):
    """z = Σ x over `axes`;  dL/dx = g broadcast back over those axes."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # shapes and axes

    def forward(self, x, axes=(), keepdim=False):
        self.shape, self.axes, self.keepdim = x.shape, axes, keepdim
        return _sum(x, axes, keepdim)

    def backward(self, g):
        g = _restore_dims(g, self.axes, self.keepdim)
        return get_array_module(g).broadcast_to(g, self.shape)


class Mean(Function):
    """z = mean of x over `axes` (n elements each);  dL/dx = g / n broadcast back."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # shapes, axes and the count

    def forward(self, x, axes=(), keepdim=False):
        self.shape, self.axes, self.keepdim = x.shape, axes, keepdim
        self.count = 1
        for a in axes:
            self.count *= x.shape[a]
        if self.count and x.dtype.itemsize >= 4:
            # NOTE: what NumPy's mean computes (the same pairwise sum, then one division), without
            # its Python wrapper, a third of a small mean's time; float16 keeps NumPy's float32
            # accumulator, and an empty mean its warning
            return _sum(x, axes, keepdim) / self.count
        return x.mean(axis=axes, keepdims=keepdim)

    def backward(self, g):
        g = _restore_dims(g, self.axes, self.keepdim) * (1.0 / self.count)
        return get_array_module(g).broadcast_to(g, self.shape)


class Var(Function):
    """z = Σ(x - x̄)² / (n - correction);  dL/dx = g·2(x - x̄) / (n - correction)."""

    def forward(self, x, axes=(), keepdim=False, correction=1):
        self.axes, self.keepdim = axes, keepdim
        n = 1
        for a in axes:
            n *= x.shape[a]
        self.denominator = builtins.max(n - correction, 0)
        self.centered = x - x.mean(axis=axes, keepdims=True)
        squares = (self.centered * self.centered).sum(axis=axes, keepdims=keepdim)
        return squares / self.denominator if self.denominator else squares * float("nan")

    def composite(self, x):
        centered = x - mean(x, self.axes, keepdim=True)
        squares = sum(centered * centered, self.axes, keepdim=self.keepdim)
        return squares / self.denominator if self.denominator else squares * float("nan")

    def backward(self, g):
        g = _restore_dims(g, self.axes, self.keepdim)
        # n ≤ correction: the variance is nan, and so is its gradient (as PyTorch)
        scale = 2.0 / self.denominator if self.denominator else float("nan")
        return g * self.centered * scale


class Std(Var):
    """z = √var(x);  dL/dx = g·(x - x̄) / ((n - correction)·z).

    NOTE: 0 where z = 0 (constant data), as PyTorch, rather than the chain rule's ∞·0 = nan.
    """

    def forward(self, x, axes=(), keepdim=False, correction=1):
        xp = get_array_module(x)
        self.z = xp.sqrt(super().forward(x, axes, keepdim=True, correction=correction))
        self.keepdim = keepdim
        return self.z if keepdim else xp.squeeze(self.z, axis=axes)

    def composite(self, x):
        var = Var.composite(self, x)
        positive = var > 0  # NOTE: constant rows: z = 0 with gradient 0, as backward gives
        return var.where(positive, 1.0).sqrt().where(positive, 0.0)

    def backward(self, g):
        xp = get_array_module(g)
        g = _restore_dims(g, self.axes, self.keepdim)
        safe = xp.where(self.z == 0, 1, self.z)
        scale = 1.0 / self.denominator if self.denominator else float("nan")
        return xp.where(self.z == 0, 0, g * self.centered * scale / safe)


class _Extreme(Function):
    """Shared by Max and Min: z = extreme of x over `axes`; the gradient goes to the elements
    that attain it.  NOTE: ties split the gradient evenly between them."""

    reducer = None  # "max" or "min"
    constants = ("share",)  # piecewise constant in x: its derivative is 0 (create_graph)

    def forward(self, x, axes=(), keepdim=False):
        xp = get_array_module(x)
        self.axes, self.keepdim = axes, keepdim
        z = getattr(xp, self.reducer)(x, axis=axes, keepdims=True)
        hits = x == z
        self.share = hits / hits.sum(axis=axes, keepdims=True).astype(x.dtype)
        return z if keepdim else xp.squeeze(z, axis=axes)

    def backward(self, g):
        return _restore_dims(g, self.axes, self.keepdim) * self.share


class Max(_Extreme):
    """z = max of x over `axes`;  dL/dx = g on the maxima (ties share it evenly)."""

    reducer = "max"


class Min(_Extreme):
    """z = min of x over `axes`;  dL/dx = g on the minima (ties share it evenly)."""

    reducer = "min"


class LogSumExp(Function):
    """z = log Σ exp(x) over `axes`;  dL/dx = g·softmax(x).

    NOTE: computed as m + log Σ exp(x - m) with m the max, so large inputs do not overflow.
    """

    def forward(self, x, axes=(), keepdim=False):
        xp = get_array_module(x)
        self.axes, self.keepdim, self.x = axes, keepdim, x
        m = x.max(axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)  # all -inf rows: avoid inf - inf
        z = xp.log(xp.exp(x - m).sum(axis=axes, keepdims=True)) + m
        self.z = z
        return z if keepdim else xp.squeeze(z, axis=axes)

    def composite(self, x):
        xp = get_array_module(x._array)
        m = x._array.max(axis=self.axes, keepdims=True)
        shift = Tensor._wrap(xp.where(xp.isfinite(m), m, 0), False, None)  # no gradient: Σ = 0
        z = sum((x - shift).exp(), self.axes, keepdim=True).log() + shift
        if self.keepdim:
            return z
        return z.reshape(tuple(n for i, n in enumerate(x.shape) if i not in self.axes))

    def backward(self, g):
        xp = get_array_module(g)
        return _restore_dims(g, self.axes, self.keepdim) * xp.exp(self.x - self.z)


class ArgExtreme(Function):
    """Index of the max or min along one dim (or of the flattened tensor). No gradient."""

    differentiable = False

    def forward(self, x, axis=None, keepdim=False, reducer="argmax"):
        out = getattr(get_array_module(x), reducer)(x, axis=axis, keepdims=keepdim)
        return out.astype("int64")


class AnyAll(Function):
    """Whether any/all elements are true. No gradient."""

    differentiable = False

    def forward(self, x, axes=None, keepdim=False, reducer="any"):
        return getattr(get_array_module(x), reducer)(x, axis=axes, keepdims=keepdim)


# ---- functional API -----------------------------------------------------------------------


def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001 - PyTorch's name
    """Σ over `dim` (all dims for None or ()); `dtype` casts the input first, as PyTorch."""
    check_tensor(x, "sum")
    if dtype is not None:
        x = x.to(dtype)
    return Sum.apply_unary(x, normalize_dims(dim, x._array.ndim, "sum"), keepdim)


def mean(x, dim=None, keepdim=False):
    if check_tensor(x, "mean")._array.dtype.kind != "f":
        raise TypeError(f"mean: expected a floating-point tensor, got {x.dtype}; use .float()")
    return Mean.apply_unary(x, normalize_dims(dim, x._array.ndim, "mean"), keepdim)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance; `correction=1` (or `unbiased=True`, the default) divides by n - 1."""
    check_tensor(x, "var")
    axes = normalize_dims(dim, x.ndim, "var")
    return Var.apply(x, axes=axes, keepdim=keepdim, correction=_correction(unbiased, correction))


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation √var; `correction` as in `var`."""
    check_tensor(x, "std")
    axes = normalize_dims(dim, x.ndim, "std")
    return Std.apply(x, axes=axes, keepdim=keepdim, correction=_correction(unbiased, correction))


def _check_not_empty(x, axes, op):
    """max/min/argmax/argmin have no identity: reducing a zero-length dim is an error (as
    PyTorch), not NumPy's 'zero-size array to reduction operation maximum'."""
    if builtins.any(x.shape[a] == 0 for a in axes) or (not axes and x._array.size == 0):
        raise ValueError(
            f"{op}: cannot reduce over a zero-length dimension of a tensor of shape {x.shape}"
        )


def _extreme(op, x, dim, keepdim, arg):
    check_tensor(x, op.reducer)
    if dim is None:
        _check_not_empty(x, tuple(range(x.ndim)), op.reducer)
        return op.apply(x, axes=tuple(range(x.ndim)), keepdim=False)
    axis = normalize_dim(dim, x.ndim, op.reducer)
    _check_not_empty(x, (axis,) if x.ndim else (), op.reducer)
    values = op.apply(x, axes=(axis,), keepdim=keepdim)
    return MaxMin(values, ArgExtreme.apply(x, axis=axis, keepdim=keepdim, reducer=arg))


def max(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """The maximum; with `dim`, a (values, indices) pair as in PyTorch."""
    return _extreme(Max, x, dim, keepdim, "argmax")


def min(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """The minimum; with `dim`, a (values, indices) pair as in PyTorch."""
    return _extreme(Min, x, dim, keepdim, "argmin")


def amax(x, dim=None, keepdim=False):
    axes = normalize_dims(dim, check_tensor(x, "amax").ndim, "amax")
    _check_not_empty(x, axes, "amax")
    return Max.apply_unary(x, axes, keepdim)


def amin(x, dim=None, keepdim=False):
    axes = normalize_dims(dim, check_tensor(x, "amin").ndim, "amin")
    _check_not_empty(x, axes, "amin")
    return Min.apply_unary(x, axes, keepdim)


def logsumexp(x, dim, keepdim=False):
    check_tensor(x, "logsumexp")
    return LogSumExp.apply(x, axes=normalize_dims(dim, x.ndim, "logsumexp"), keepdim=keepdim)


def argmax(x, dim=None, keepdim=False) -> Tensor:
    axis = None if dim is None else normalize_dim(dim, check_tensor(x, "argmax").ndim, "argmax")
    _check_not_empty(x, () if axis is None or not x.ndim else (axis,), "argmax")
    return ArgExtreme.apply(x, axis=axis, keepdim=keepdim and axis is not None, reducer="argmax")


def argmin(x, dim=None, keepdim=False) -> Tensor:
    axis = None if dim is None else normalize_dim(dim, check_tensor(x, "argmin").ndim, "argmin")
    _check_not_empty(x, () if axis is None or not x.ndim else (axis,), "argmin")
    return ArgExtreme.apply(x, axis=axis, keepdim=keepdim and axis is not None, reducer="argmin")


def any(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    check_tensor(x, "any")
    return AnyAll.apply(x, axes=normalize_dims(dim, x.ndim, "any"), keepdim=keepdim, reducer="any")


def all(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    check_tensor(x, "all")
    return AnyAll.apply(x, axes=normalize_dims(dim, x.ndim, "all"), keepdim=keepdim, reducer="all")
