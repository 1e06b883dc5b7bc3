"""`xp` for Tensors: NumPy's names and signatures, computed by recorded (differentiable) ops.

An op's backward is written once, against `xp = get_array_module(g)`. In a first-order backward
`g` is an array and `xp` is NumPy or CuPy; under `create_graph=True` the engine hands the same
backward Tensors, `get_array_module` returns this module, and the same lines record a graph that
can be differentiated again (see higher_order.py). It holds what the ops' backwards use; arrays
among the arguments (masks, indices) are taken as constants.
"""

from __future__ import annotations

import sys

import numpy as np

from . import backend, ops
from .tensor import Tensor

_wrap = Tensor._wrap


def _t(a, like=None):
    """`a` as a Tensor: arrays and numbers as constants (numbers in `like`'s dtype)."""
    if a.__class__ is Tensor:
        return a
    if hasattr(a, "__array_namespace__"):
        return _wrap(a, False, None)
    if like is not None:
        xp = backend.get_array_module(like._array)
        return _wrap(xp.asarray(a, dtype=like._array.dtype), False, None)
    return _wrap(np.asarray(a), False, None)


# ---- elementwise ----------------------------------------------------------------------------


def exp(x):
    return ops.exp(x)


def log(x):
    return ops.log(x)


def sqrt(x):
    return ops.sqrt(x)


def sin(x):
    return ops.sin(x)


def cos(x):
    return ops.cos(x)


def tanh(x):
    return ops.tanh(x)


def abs(x):  # noqa: A001 - NumPy's name
    return ops.abs(x)


def sign(x):
    return ops.torch_extras.sign(x)


def where(condition, x, y):
    like = x if x.__class__ is Tensor else y
    return ops.where(_t(condition), _t(x, like), _t(y, like))


def isfinite(x):
    return _wrap(backend.get_array_module(x._array).isfinite(x._array), False, None)


# ---- shapes ---------------------------------------------------------------------------------


def reshape(x, shape):
    return ops.reshape(x, shape)


def transpose(x, axes=None):
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    return ops.permute(x, *axes)


def swapaxes(x, axis1, axis2):
    return ops.transpose(x, axis1, axis2)


def expand_dims(x, axis):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = x.ndim + len(axes)
    shape = list(x.shape)
    for a in sorted(a % ndim for a in axes):
        shape.insert(a, 1)
    return ops.reshape(x, tuple(shape))


def squeeze(x, axis=None):
    if axis is None:
        return ops.reshape(x, tuple(n for n in x.shape if n != 1))
    axes = {a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis)}
    return ops.reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


def broadcast_to(x, shape):
    return ops.expand(x, *shape)


def ascontiguousarray(x):
    return x


def split(x, indices, axis=0):
    bounds = [0, *indices, x.shape[axis]]
    index = [slice(None)] * x.ndim
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        index[axis] = slice(start, stop)
        pieces.append(x[tuple(index)])
    return pieces


def take(x, i, axis=0):
    index = [slice(None)] * x.ndim
    index[axis] = i
    return x[tuple(index)]


def flip(x, axis):
    return ops.torch_extras.flip(x, (axis,) if isinstance(axis, int) else tuple(axis))


# ---- reductions and products ----------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001 - NumPy's name
    return ops.sum(x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    return ops.mean(x, axis, keepdims)


def cumsum(x, axis):
    return ops.torch_extras.cumsum(x, axis)


def matmul(x, y):
    return ops.matmul(_t(x), _t(y))


def einsum(subscripts, *operands):
    return ops.torch_extras.einsum(subscripts, *(_t(o) for o in operands))


# ---- constants ------------------------------------------------------------------------------


def zeros_like(x):
    return _wrap(backend.get_array_module(x._array).zeros_like(x._array), False, None)


def ones_like(x):
    return _wrap(backend.get_array_module(x._array).ones_like(x._array), False, None)


def maximum(x, y):
    return ops.maximum(_t(x, y if y.__class__ is Tensor else None), _t(y, x))


backend.bind_tensor_namespace(Tensor, sys.modules[__name__])
