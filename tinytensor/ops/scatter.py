"""Writing into chosen positions: scatter, scatter_add, index_add, index_fill (PyTorch's).

`index` says where along `dim` each element goes; the other coordinates are the element's own,
so `out[i][index[i][j]] = src[i][j]` for dim = 1 (index may be smaller than src and x along the
other dims, as in PyTorch). The in-place forms (`scatter_`, ...) are Tensor methods that run
these out of place and write back (tinytensor/inplace.py).
"""

from __future__ import annotations

import numpy as np

from ..backend import get_array_module, is_cupy_array
from ..function import Function
from ..tensor import Tensor
from ._util import normalize_dim


def _positions(index, dim):
    """(coordinates in the output, coordinates in src) for every element of `index`."""
    xp = get_array_module(index)
    grids = list(xp.indices(index.shape, sparse=True))
    src_at = tuple(grids)
    grids[dim] = index
    return tuple(grids), src_at


def _add_at(target, where, values):
    if is_cupy_array(target):
        import cupyx

        cupyx.scatter_add(target, where, values)
    else:
        np.add.at(target, where, values)


class Scatter(Function):
    """z = x with z[..index..] = src;  dL/dx = g zeroed where written,  dL/dsrc = g[..index..]."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, src, index=None, dim=0):
        self.out_at, self.src_at = _positions(index, dim)
        self.src_shape = src.shape
        out = x.copy()
        out[self.out_at] = src[self.src_at]
        return out

    def backward(self, g):
        gx = gsrc = None
        if self.needs_input_grad[0]:
            gx = g.copy()
            gx[self.out_at] = 0
        if self.needs_input_grad[1]:
            gsrc = get_array_module(g).zeros(self.src_shape, g.dtype)
            gsrc[self.src_at] = g[self.out_at]
        return gx, gsrc


class ScatterAdd(Function):
    """z = x, then z[..index..] += src (duplicates add up);  dL/dx = g,  dL/dsrc = g[..index..]."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, src, index=None, dim=0):
        self.out_at, self.src_at = _positions(index, dim)
        self.src_shape = src.shape
        out = x.copy()
        _add_at(out, self.out_at, src[self.src_at])
        return out

    def backward(self, g):
        gsrc = None
        if self.needs_input_grad[1]:
            gsrc = get_array_module(g).zeros(self.src_shape, g.dtype)
            gsrc[self.src_at] = g[self.out_at]
        return g, gsrc


class IndexAdd(Function):
    """z = x, then z[index[i]] += alpha·src[i] along dim;  dL/dx = g,  dL/dsrc = alpha·g[index]."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, src, index=None, dim=0, alpha=1):
        self.where = (slice(None),) * dim + (index,)
        self.alpha = alpha
        out = x.copy()
        _add_at(out, self.where, src * alpha if alpha != 1 else src)
        return out

    def backward(self, g):
        gsrc = None
        if self.needs_input_grad[1]:
            gsrc = g[self.where]
            gsrc = gsrc * self.alpha if self.alpha != 1 else gsrc
        return g, gsrc


class IndexFill(Function):
    """z = x with the slices `index` along dim set to value;  dL/dx = g zeroed there."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    linear_part = {"value": 0.0}  # affine: the replay fills zeros (the constant has no gradient)

    def forward(self, x, index=None, dim=0, value=0.0):
        self.where = (slice(None),) * dim + (index,)
        out = x.copy()
        out[self.where] = value
        return out

    def backward(self, g):
        gx = g.copy()
        gx[self.where] = 0
        return gx


# ---- the public functions: arguments checked here, at the boundary -------------------------


def _index_array(op, index, x, dim, *, along_only=False, wrap_negative=False):
    """The index as a backend array, checked: an integer tensor, in range along dim. Negative
    indices are an error, as in PyTorch's scatter/index_add, except where PyTorch wraps them
    (`wrap_negative`: index_fill takes -1 as the last slice)."""
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer tensor, got {_describe(index)}")
    arr = index._array
    n = x.shape[dim] if x.ndim else 1
    lowest = -n if wrap_negative else 0
    if arr.size and (int(arr.min()) < lowest or int(arr.max()) >= n):
        bad = int(arr.min()) if int(arr.min()) < lowest else int(arr.max())
        raise IndexError(
            f"{op}: index {bad} is out of range for dim {dim} of size {n} "
            f"(tensor shape {tuple(x.shape)})"
        )
    if along_only:
        if index.ndim > 1:
            raise IndexError(f"{op}: index must be 0-d or 1-d, got shape {tuple(index.shape)}")
        return arr.reshape(-1)
    if index.ndim != max(x.ndim, 1):
        raise RuntimeError(
            f"{op}: index has {index.ndim} dims but the tensor has {x.ndim}; they must match"
        )
    return arr


def _describe(value):
    return f"{value.dtype} tensor" if isinstance(value, Tensor) else type(value).__name__


def _check_fits(op, index, other, name, skip=None):
    """PyTorch's rule: index no larger than src in any dim, nor than x outside `dim`."""
    for d, (i, s) in enumerate(zip(index.shape, other.shape, strict=True)):
        if i > s and d != skip:
            raise RuntimeError(
                f"{op}: index has size {i} in dim {d}, larger than {name}'s size {s} "
                f"(index {tuple(index.shape)}, {name} {tuple(other.shape)})"
            )


def _value_tensor(op, value, like):
    if isinstance(value, Tensor):
        return value.to(like.dtype) if value.dtype != like.dtype else value
    if isinstance(value, (bool, int, float, np.number)):
        xp = get_array_module(like._array)
        return Tensor._wrap(xp.full(like.shape, value, like.dtype), False, None)
    raise TypeError(f"{op}: src/value must be a tensor or a number, got {type(value).__name__}")


def scatter(x, dim, index, src=None, *, value=None, reduce=None):
    """out[i][index[i][j]] = src[i][j] along dim (PyTorch's scatter); `value=` for a number."""
    if reduce is not None:
        if reduce not in ("add", "sum"):
            raise ValueError(f"scatter: reduce must be 'add' (or 'sum'), got {reduce!r}")
        return scatter_add(x, dim, index, src if src is not None else value)
    d = normalize_dim(dim, x.ndim, "scatter")
    idx = _index_array("scatter", index, x, d)
    if src is None and value is None:
        raise TypeError("scatter: pass src (a tensor) or value (a number)")
    src = _value_tensor("scatter", src if src is not None else value, x)
    if src.ndim != index.ndim:
        raise RuntimeError(f"scatter: src has {src.ndim} dims but index has {index.ndim}")
    _check_fits("scatter", index, x, "the tensor", skip=d)
    _check_fits("scatter", index, src, "src")
    return Scatter.apply(x, src, index=idx, dim=d)


def scatter_add(x, dim, index, src):
    """out = x with out[i][index[i][j]] += src[i][j] along dim; duplicate indices add up."""
    d = normalize_dim(dim, x.ndim, "scatter_add")
    idx = _index_array("scatter_add", index, x, d)
    src = _value_tensor("scatter_add", src, x)
    if src.ndim != index.ndim:
        raise RuntimeError(f"scatter_add: src has {src.ndim} dims but index has {index.ndim}")
    _check_fits("scatter_add", index, x, "the tensor", skip=d)
    _check_fits("scatter_add", index, src, "src")
    return ScatterAdd.apply(x, src, index=idx, dim=d)


def index_add(x, dim, index, source, *, alpha=1):
    """out = x with out[index[i]] += alpha·source[i] along dim (PyTorch's index_add)."""
    d = normalize_dim(dim, x.ndim, "index_add")
    idx = _index_array("index_add", index, x, d, along_only=True)
    if not isinstance(source, Tensor):
        raise TypeError(f"index_add: source must be a tensor, got {type(source).__name__}")
    expected = x.shape[:d] + (idx.shape[0],) + x.shape[d + 1 :]
    if tuple(source.shape) != expected:
        raise RuntimeError(
            f"index_add: source has shape {tuple(source.shape)}, expected {expected} "
            f"(the tensor's shape with dim {d} = len(index))"
        )
    source = source.to(x.dtype) if source.dtype != x.dtype else source
    return IndexAdd.apply(x, source, index=idx, dim=d, alpha=alpha)


def index_fill(x, dim, index, value):
    """out = x with the slices `index` along dim filled with value (a number or 0-d tensor)."""
    d = normalize_dim(dim, x.ndim, "index_fill")
    idx = _index_array("index_fill", index, x, d, along_only=True, wrap_negative=True) % max(
        x.shape[d] if x.ndim else 1, 1
    )
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise IndexError(f"index_fill: value must be a number or 0-d tensor, got {value.shape}")
        value = value.item()
    return IndexFill.apply(x, index=idx, dim=d, value=value)
