"""The diagonal as a view (PyTorch's `diagonal`, writable like any view) and `trace`."""

from __future__ import annotations

from ..backend import get_array_module
from ..function import Function
from ._util import normalize_dim


def _diagonal_view(x, offset, dim1, dim2):
    """A writable strided view of x's diagonal, moved to the last dim (NumPy's own is
    read-only). Element i is x[..., i, i + offset] for offset >= 0."""
    xp = get_array_module(x)
    start = [slice(None)] * x.ndim
    if offset >= 0:
        start[dim2] = slice(offset, None)
    else:
        start[dim1] = slice(-offset, None)
    shifted = x[tuple(start)]
    length = max(0, min(shifted.shape[dim1], shifted.shape[dim2]))
    keep = [d for d in range(x.ndim) if d not in (dim1, dim2)]
    shape = tuple(x.shape[d] for d in keep) + (length,)
    strides = tuple(x.strides[d] for d in keep) + (x.strides[dim1] + x.strides[dim2],)
    return xp.lib.stride_tricks.as_strided(shifted, shape, strides)


class Diagonal(Function):
    """z = the diagonal of x over (dim1, dim2) at `offset`, appended as the last dim (a view);
    dL/dx = zeros with g written onto that diagonal."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # shape, dtype and the diagonal's arguments
    may_alias = True

    def forward(self, x, offset=0, dim1=0, dim2=1):
        self.shape, self.dtype, self.args = x.shape, x.dtype, (offset, dim1, dim2)
        return _diagonal_view(x, offset, dim1, dim2)

    def backward(self, g):
        gx = get_array_module(g).zeros(self.shape, self.dtype)
        _diagonal_view(gx, *self.args)[...] = g
        return gx


def diagonal(x, offset=0, dim1=0, dim2=1):
    if x.ndim < 2:
        raise RuntimeError(f"diagonal: needs at least 2 dims, got shape {tuple(x.shape)}")
    d1, d2 = normalize_dim(dim1, x.ndim, "diagonal"), normalize_dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal: dim1 and dim2 are the same dim ({dim1}, {dim2})")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"diagonal: offset must be an int, got {offset!r}")
    return Diagonal.apply(x, offset=offset, dim1=d1, dim2=d2)


def trace(x):
    """Sum of the main diagonal of a 2-D tensor."""
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a 2-D tensor, got shape {tuple(x.shape)}")
    return diagonal(x).sum()
