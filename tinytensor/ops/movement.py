"""Movement ops: reshape, permute, expand, indexing, concatenation, triangles.

They move or select elements without arithmetic, so each VJP moves the gradient back the same way:
reshape it back, transpose it back, scatter it back (adding where an index repeats).
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from ..backend import get_array_module, is_cupy_array
from ..function import Function
from ..tensor import Tensor, devices_mismatch_error
from ._checks import check_distinct_dims, check_int, check_tensor, index_tensor, sizes
from ._util import normalize_dim, zero_of


def _shape_arg(shape):
    """`reshape(2, 3)` and `reshape((2, 3))` both mean (2, 3) (entries are checked by the op)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(shape)


class Reshape(Function):
    """z = x with a new shape;  dL/dx = g reshaped back."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # the input shape
    may_alias = True  # a view when the strides allow it, as torch.reshape

    def forward(self, x, shape=()):
        self.shape = x.shape
        return x.reshape(shape)

    def backward(self, g):
        return g.reshape(self.shape)


class Permute(Function):
    """z = x with dimensions reordered by `dims`;  dL/dx = g permuted by the inverse order."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # the inverse order
    may_alias = True

    def forward(self, x, dims=(), inverse=None):
        # the inverse permutation, unless the caller knows it (a transpose is its own);
        # plain Python is ~5x cheaper than np.argsort on a short tuple
        if inverse is None:
            inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
        self.inverse = inverse
        return x.transpose(dims)

    def backward(self, g):
        return g.transpose(self.inverse)


class Expand(Function):
    """z = x broadcast to `shape` (a view);  dL/dx = g summed back by the engine."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    broadcasts = True
    may_alias = True

    def forward(self, x, shape=()):
        return get_array_module(x).broadcast_to(x, shape)

    def backward(self, g):
        return g


def _has_arrays(index) -> bool:
    return builtins.any(hasattr(i, "shape") for i in index)


class GetItem(Function):
    """z = x[index];  dL/dx = g scattered into zeros at `index`, duplicates adding up."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    may_alias = True  # basic indexing gives a view; integer/bool arrays give a copy

    def forward(self, x, index=()):
        # x[0] of a 1-D x: a 0-d view with a trailing Ellipsis, as PyTorch (not a copy)
        if not (index and index[-1] is Ellipsis) and not builtins.any(i is Ellipsis for i in index):
            index = (*index, Ellipsis)
        self.shape, self.dtype, self.index = x.shape, x.dtype, index
        return x[index]

    def backward(self, g):
        xp = get_array_module(g)
        gx = xp.zeros(self.shape, dtype=self.dtype)
        if not _has_arrays(self.index):  # basic indexing selects each element at most once
            gx[self.index] = g
        elif is_cupy_array(gx):
            import cupyx

            cupyx.scatter_add(gx, self.index, g)
        else:
            np.add.at(gx, self.index, g)
        return gx


class SetItem(Function):
    """z = x with z[index] = v (the op behind `x[index] = v`);
    dL/dx = g with g[index] = 0,  dL/dv = g[index] summed back to v's shape."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, v, index=()):
        self.index, self.v_shape = index, v.shape
        out = x.copy()
        out[index] = v
        return out

    def backward(self, g):
        gx = gv = None
        if self.needs_input_grad[0]:
            gx = g.copy()
            gx[self.index] = 0
        if self.needs_input_grad[1]:
            gv = g[self.index]
            if gv.shape != self.v_shape:  # v was broadcast into the selected region
                lead = gv.ndim - len(self.v_shape)
                gv = gv.sum(axis=tuple(range(lead))) if lead > 0 else gv
                axes = tuple(i for i, n in enumerate(self.v_shape) if n == 1 and gv.shape[i] != 1)
                gv = gv.sum(axis=axes, keepdims=True).reshape(self.v_shape)
        return gx, gv


class Gather(Function):
    """z[i][j] = x[i][index[i][j]] along `dim` (PyTorch's gather);  dL/dx = scatter-add of g.

    The integer index is an input (without gradient), so that a drawn graph shows it."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, index, axis=0):
        xp = get_array_module(x)
        self.shape, self.dtype, self.index, self.axis = x.shape, x.dtype, index, axis
        return xp.take_along_axis(x, index, axis=axis)

    def backward(self, g):
        xp = get_array_module(g)
        gx = xp.zeros(self.shape, dtype=self.dtype)
        grids = list(xp.indices(self.index.shape, sparse=True))
        grids[self.axis] = self.index
        if is_cupy_array(gx):
            import cupyx

            cupyx.scatter_add(gx, tuple(grids), g)
        else:
            np.add.at(gx, tuple(grids), g)
        return gx, None


class Cat(Function):
    """z = [x₁, x₂, ...] joined along `axis`;  dL/dxᵢ = the slice of g that xᵢ became."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # the axis and where each input ends

    def forward(self, *xs, axis=0):
        if self.needs_input_grad:  # NOTE: no node, nothing to keep: 0.3 µs of a small cat
            self.axis = axis
            ends, end = [], 0
            for x in xs:  # where each input ends along the axis (a loop: cumsum costs µs here)
                end += x.shape[axis]
                ends.append(end)
            self.bounds = ends[:-1]
        # NOTE: the axis by position: NumPy's keyword parsing is 0.1-0.2 µs of a small cat
        return get_array_module(xs[0]).concatenate(xs, axis)

    def backward(self, g):
        return tuple(get_array_module(g).split(g, self.bounds, axis=self.axis))


class Stack(Function):
    """z = [x₁, x₂, ...] stacked along a new `axis`;  dL/dxᵢ = g[..., i, ...]."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # the axis

    def forward(self, *xs, axis=0):
        self.axis = axis
        return get_array_module(xs[0]).stack(xs, axis=axis)

    def backward(self, g):
        xp = get_array_module(g)
        return tuple(xp.take(g, i, axis=self.axis) for i in range(g.shape[self.axis]))


class Triangle(Function):
    """z = lower (tril) or upper (triu) triangle of the last two dims;  dL/dx = same of g."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, diagonal=0, upper=False):
        xp = get_array_module(x)
        self.keep = (xp.triu if upper else xp.tril)(xp.ones(x.shape[-2:], dtype=bool), diagonal)
        # NOTE: where, not x * mask: -inf · 0 would be NaN (triu of a -inf mask must give 0s)
        return xp.where(self.keep, x, zero_of(x))

    def backward(self, g):
        return get_array_module(g).where(self.keep, g, zero_of(g))


# ---- functional API -----------------------------------------------------------------------


def reshape(x, *shape):
    shape = sizes(shape, "reshape", allow_minus_one=True)
    try:  # NOTE: NumPy infers a -1 and checks the sizes; only a failure pays for our message
        return Reshape.apply_unary(x, shape)
    except ValueError:
        raise ValueError(
            f"reshape: cannot view a tensor of shape {x.shape} as shape {shape}"
        ) from None


view = reshape


def permute(x, *dims):
    dims = tuple(normalize_dim(d, x.ndim, "permute") for d in _shape_arg(dims))
    if sorted(dims) != list(range(x.ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of the {x.ndim} dims of {x.shape}")
    return Permute.apply_unary(x, dims)


def reverse_dims(x):
    """x.T: every dim reversed. NOTE: not permute(*reversed(range(ndim))), whose checks and
    inverse cost 9 µs of a 3 µs op; a reversal is its own inverse."""
    dims = tuple(range(x._array.ndim - 1, -1, -1))
    return Permute.apply_unary(x, dims, dims)


_SWAPS: dict = {}  # (ndim, dim0, dim1) of int dims checked once -> transpose's permutation


def transpose(x, dim0, dim1):
    ndim = x._array.ndim
    ints = dim0.__class__ is int and dim1.__class__ is int  # (a bool would hash as 0 or 1)
    # NOTE: the permutation of a swap already made: a third of a small transpose's overhead
    dims = _SWAPS.get((ndim, dim0, dim1)) if ints else None
    if dims is None:
        d0, d1 = normalize_dim(dim0, ndim, "transpose"), normalize_dim(dim1, ndim, "transpose")
        dims = list(range(ndim))
        dims[d0], dims[d1] = d1, d0
        dims = tuple(dims)
        if ints:
            _SWAPS[ndim, dim0, dim1] = dims
    return Permute.apply_unary(x, dims, dims)  # a swap undoes itself


def expand(x, *size):
    size = sizes(size, "expand", allow_minus_one=True)
    if len(size) < x.ndim:
        raise ValueError(f"expand: shape {size} has fewer dims than the tensor's {x.shape}")
    lead = len(size) - x.ndim
    if -1 in size[:lead]:  # as PyTorch: -1 keeps an existing dim; a new leading dim has none
        raise ValueError(f"expand: -1 is not allowed for the new leading dims of {size}")
    sizes_ = size
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes_))
    for i, n in enumerate(x.shape):
        if n != 1 and n != shape[i + lead]:
            raise ValueError(f"expand: cannot expand shape {x.shape} to {sizes_}")
    return Expand.apply_unary(x, shape)


def squeeze(x, dim=None):
    if dim is None:
        shape = tuple(n for n in x.shape if n != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = [normalize_dim(d, x.ndim, "squeeze") for d in dims]
        check_distinct_dims(dim, axes, "squeeze")
        dims = set(axes)
        shape = tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1))
    return Reshape.apply_unary(x, shape)


def unsqueeze(x, dim):
    d = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    return Reshape.apply_unary(x, x.shape[:d] + (1,) + x.shape[d:])


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return Reshape.apply_unary(x, (1,))
    s, e = normalize_dim(start_dim, x.ndim, "flatten"), normalize_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ValueError(
            f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
            f"(a tensor with {x.ndim} dims)"
        )
    shape = x.shape[:s] + (math.prod(x.shape[s : e + 1]),) + x.shape[e + 1 :]
    return Reshape.apply_unary(x, shape)


def normalize_index(index, op="getitem"):
    """Turns an index into one NumPy accepts: Tensors become arrays; floats are refused."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if isinstance(i, Tensor):
            if i.dtype.kind not in "iub":
                raise IndexError(
                    f"{op}: tensors used as indices must be integer or bool, got {i.dtype}"
                )
            i = i._array
        elif isinstance(i, (float, np.floating)):
            raise IndexError(f"{op}: index {i!r} is a float; indices must be integers")
        elif isinstance(i, list):
            i = np.asarray(i)
            if i.dtype.kind not in "iub":
                raise IndexError(f"{op}: index list must hold integers or bools, got {i.dtype}")
        elif hasattr(i, "dtype") and i.dtype.kind not in "iub":
            raise IndexError(f"{op}: index arrays must be integer or bool, got {i.dtype}")
        out.append(i)
    return tuple(out)


def getitem(x, index):
    # NOTE: ints and slices alone (x[1:5, ::2], x[:, -1]) need none of _checked_index's work:
    # that common case costs 1 µs less (16x16 under no_grad: 3.3 -> 2.3 µs)
    items = index if index.__class__ is tuple else (index,)
    for i in items:
        if i.__class__ is not slice and i.__class__ is not int:
            index = _checked_index(x, index)
            break
    else:
        index = (*items, Ellipsis)  # what GetItem.forward would append
    try:
        return GetItem.apply_unary(x, index)
    except IndexError as e:
        raise IndexError(f"getitem: {e} (tensor shape {x.shape})") from None


def _checked_index(x, index):
    """`index` normalized (normalize_index), its arrays on x's device."""
    index = normalize_index(index)
    for i in index:
        if (
            hasattr(i, "shape")
            and type(i) is not type(x._array)
            and not isinstance(i, (np.ndarray, np.integer, np.bool_))  # NumPy scalars: host ints
        ):
            raise devices_mismatch_error("getitem", (x,))
    if is_cupy_array(x._array):  # NumPy index arrays must live on the GPU too
        index = tuple(
            get_array_module(x._array).asarray(i) if hasattr(i, "shape") else i for i in index
        )
    return index


def setitem(x, index, value):
    """x with x[index] = value, out of place (Tensor.__setitem__ writes it back in place)."""
    try:
        return SetItem.apply(x, value, index=index)
    except (IndexError, ValueError) as e:
        raise type(e)(f"__setitem__: {e} (tensor shape {x.shape})") from None


def gather(x, dim, index):
    """out[i][j] = x[i][index[i][j]] for dim = 1 (and likewise for any dim), as torch.gather:
    index has x's number of dims, is no larger than x outside `dim`, and holds indices in
    [0, x.shape[dim]) (a negative index is an error, as in PyTorch, not NumPy's wrap-around)."""
    check_tensor(x, "gather")
    index_tensor(index, "gather")
    axis = normalize_dim(dim, x.ndim, "gather")
    if index.ndim != x.ndim:
        raise ValueError(
            f"gather: index of shape {tuple(index.shape)} must have as many dims as the tensor "
            f"{tuple(x.shape)}"
        )
    crop = None
    if index.shape != x.shape:
        for d, (i, n) in enumerate(zip(index.shape, x.shape, strict=True)):
            if d != axis and i > n:
                raise ValueError(
                    f"gather: index shape {tuple(index.shape)} is larger than the tensor's "
                    f"{tuple(x.shape)} in dim {d}"
                )
            if d != axis and i < n:  # PyTorch reads only x[:i0, :i1, ...] outside `dim`
                crop = tuple(
                    slice(None) if e == axis else slice(0, j) for e, j in enumerate(index.shape)
                )
    n = x.shape[axis] if x.ndim else 1
    a = index._array
    if a.size:
        # NOTE: NumPy's take_along_axis raises for an index >= n itself, so one reduction finds
        # the negatives it would wrap around; on a GPU nothing is checked, so both ends are.
        low = int(a.min())
        high = int(a.max()) if low < 0 or is_cupy_array(a) else None
        if low < 0 or (high is not None and high >= n):
            bad = low if low < 0 else high
            raise _gather_range_error(bad, dim, n, x.shape)
    if crop is not None:
        x = GetItem.apply_unary(x, crop)
    try:
        return Gather.apply(x, index, axis=axis)
    except IndexError:
        raise _gather_range_error(int(a.max()), dim, n, x.shape) from None


def _gather_range_error(bad, dim, n, shape):
    return IndexError(
        f"gather: index {bad} is out of range for dim {dim} of size {n} (tensor shape "
        f"{tuple(shape)})"
    )


def _check_same_device(tensors, op):
    kind = tensors[0]._array.__class__
    for t in tensors:
        if t._array.__class__ is not kind:
            raise devices_mismatch_error(op, tensors)


def _tensor_list(tensors, op):
    """The tensors of cat/stack (the list or tuple itself); a Tensor or a number in their place
    is a TypeError (list(tensor) would quietly split it into rows)."""
    if tensors.__class__ is not list and tensors.__class__ is not tuple:
        if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
            raise TypeError(
                f"{op}: tensors must be a list or tuple of Tensors, got {type(tensors).__name__}"
            )
    for t in tensors:
        if t.__class__ is not Tensor and not isinstance(t, Tensor):
            i = next(i for i, t in enumerate(tensors) if not isinstance(t, Tensor))
            raise TypeError(
                f"{op}: expected Tensor as element {i} of tensors, got {type(t).__name__} {t!r:.40}"
            )
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of tensors")
    return tensors


def cat(tensors, dim=0):
    """Joins tensors along an existing dim; all other dims must match."""
    tensors = _tensor_list(tensors, "cat")
    axis = normalize_dim(dim, tensors[0]._array.ndim, "cat")
    # NOTE: NumPy checks the shapes and Function.apply the devices; only a failure pays for a
    # message of ours
    try:
        return Cat.apply(*tensors, axis=axis)
    except ValueError:
        ref = tensors[0].shape
        for t in tensors:
            if t.ndim != len(ref) or t.shape[:axis] + t.shape[axis + 1 :] != (
                ref[:axis] + ref[axis + 1 :]
            ):
                raise ValueError(
                    f"cat: shapes {[tuple(t.shape) for t in tensors]} differ outside dim {dim}"
                ) from None
        raise


concat = concatenate = cat


def stack(tensors, dim=0):
    """Stacks equal-shaped tensors along a new dim."""
    tensors = _tensor_list(tensors, "stack")
    _check_same_device(tensors, "stack")
    if builtins.any(t.shape != tensors[0].shape for t in tensors):
        raise ValueError(f"stack: shapes differ: {[tuple(t.shape) for t in tensors]}")
    return Stack.apply(*tensors, axis=normalize_dim(dim, tensors[0].ndim + 1, "stack"))


def split(x, split_size_or_sections, dim=0):
    """Pieces of `split_size` along `dim` (the last may be smaller), or of the given sizes."""
    axis = normalize_dim(dim, x.ndim, "split")
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (list, tuple)):
        pieces_sizes = sizes((split_size_or_sections,), "split")
        if builtins.sum(pieces_sizes) != n:
            raise ValueError(
                f"split: sizes {list(pieces_sizes)} do not add up to {n} (dim {dim} of {x.shape})"
            )
    else:
        step = check_int(split_size_or_sections, "split", "split_size")
        if step <= 0 and not (step == 0 and n == 0):
            raise ValueError(f"split: split_size must be positive, got {step}")
        pieces_sizes = [builtins.min(step, n - i) for i in range(0, n, step)] if step else [0]
    pieces, start = [], 0
    for size in pieces_sizes:
        index = (slice(None),) * axis + (slice(start, start + size),)
        pieces.append(GetItem.apply_unary(x, index))
        start += size
    return tuple(pieces)


def chunk(x, chunks, dim=0):
    if check_int(chunks, "chunk", "chunks") <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks}")
    n = x.shape[normalize_dim(dim, x.ndim, "chunk")]
    return split(x, builtins.max(1, -(-n // chunks)), dim)


def tril(x, diagonal=0):
    if x.ndim < 2:
        raise ValueError(f"tril: expected at least 2 dims, got shape {x.shape}")
    check_int(diagonal, "tril", "diagonal")
    return Triangle.apply(x, diagonal=diagonal, upper=False)


def triu(x, diagonal=0):
    if x.ndim < 2:
        raise ValueError(f"triu: expected at least 2 dims, got shape {x.shape}")
    check_int(diagonal, "triu", "diagonal")
    return Triangle.apply(x, diagonal=diagonal, upper=True)


def repeat_interleave(x, repeats: int, dim: int):
    """Each slice along `dim` repeated `repeats` times in place (e.g. K/V heads for GQA)."""
    check_int(repeats, "repeat_interleave", "repeats", minimum=0)
    d = normalize_dim(dim, x.ndim, "repeat_interleave")
    shape = x.shape[: d + 1] + (repeats,) + x.shape[d + 1 :]
    expanded = expand(unsqueeze(x, d + 1), shape)
    return reshape(expanded, x.shape[:d] + (x.shape[d] * repeats,) + x.shape[d + 1 :])
