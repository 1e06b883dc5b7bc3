"""Ordering: sort, argsort, topk, nonzero. Values carry gradients (through gather: each value
sends its gradient back to the position it came from); indices never do."""

from __future__ import annotations

from collections import namedtuple

from ..backend import get_array_module
from ..tensor import Tensor
from ._util import normalize_dim
from .movement import gather

SortResult = namedtuple("sort", ["values", "indices"])  # torch.return_types.sort
TopkResult = namedtuple("topk", ["values", "indices"])


def _order(a, axis, descending):
    """Stable argsort along axis; descending keeps equal elements in their original order."""
    xp = get_array_module(a)
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable")
    # NOTE: sort the reversed array stably, map back and reverse: descending values, and among
    # equal ones the earlier element first (as PyTorch's stable descending sort)
    n = a.shape[axis]
    reversed_order = xp.argsort(xp.flip(a, axis), axis=axis, kind="stable")
    return xp.flip(n - 1 - reversed_order, axis)


def _check_sortable(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.dtype.kind == "b":
        raise TypeError(f"{op}: bool tensors cannot be ordered; convert with .int() first")


def argsort(x, dim=-1, descending=False, stable=False):
    _check_sortable("argsort", x)
    if x.ndim == 0:
        return Tensor._wrap(get_array_module(x._array).zeros((), "int64"), False, None)
    axis = normalize_dim(dim, x.ndim, "argsort")
    return Tensor._wrap(_order(x._array, axis, descending).astype("int64"), False, None)


def sort(x, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along dim; ties keep their order (a stable sort, always)."""
    _check_sortable("sort", x)
    if x.ndim == 0:
        return SortResult(x * 1, argsort(x))
    indices = argsort(x, dim, descending)
    return SortResult(gather(x, dim, indices), indices)


def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's argument name
    """The k largest (or smallest) elements along dim and their indices, largest first."""
    _check_sortable("topk", x)
    axis = normalize_dim(dim, x.ndim, "topk")
    n = x.shape[axis] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__} {k!r}")
    if not 0 <= k <= n:
        raise ValueError(f"topk: k must be an int in [0, {n}] for dim {dim} of size {n}, got {k!r}")
    if x.ndim == 0:
        return TopkResult(x * 1, argsort(x))
    order = _order(x._array, axis, descending=largest)
    keep = [slice(None)] * x.ndim
    keep[axis] = slice(0, k)
    indices = Tensor._wrap(order[tuple(keep)].astype("int64"), False, None)
    return TopkResult(gather(x, axis, indices), indices)


def nonzero(x, *, as_tuple=False):
    """Indices of the non-zero elements: (n, ndim) int64, or one 1-d tensor per dim."""
    if not isinstance(x, Tensor):
        raise TypeError(f"nonzero: expected a Tensor, got {type(x).__name__}")
    xp = get_array_module(x._array)
    if x.ndim == 0:  # as PyTorch: one (empty) coordinate row if the scalar is non-zero
        count = int(bool(x._array))
        if as_tuple:
            return (Tensor._wrap(xp.zeros(count, "int64"), False, None),)
        return Tensor._wrap(xp.zeros((count, 0), "int64"), False, None)
    found = xp.nonzero(x._array)
    if as_tuple:
        return tuple(Tensor._wrap(i.astype("int64"), False, None) for i in found)
    return Tensor._wrap(xp.stack(found, axis=1).astype("int64"), False, None)


def argwhere(x):
    return nonzero(x)
