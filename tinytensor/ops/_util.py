"""Small helpers shared by the op families: scalars as tensors, dims, error messages."""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..backend import get_array_module
from ..tensor import Tensor, _as_array

_NUMPY_ZEROS: dict = {}  # dtype -> a 0-d NumPy zero of it (never written: ufuncs only read it)


def zero_of(x):
    """A 0-d zero of array x's dtype on its device, as an operand of x's ufuncs (relu, where).

    NOTE: NumPy's are made once per dtype and shared: NumPy 2 resolves a Python scalar's dtype
    on every call (its "weak scalar" promotion), so np.maximum(x, 0) on 16x16 float32 took
    1.5 µs, np.maximum(x, zero) 0.9."""
    if x.__class__ is Tensor:  # a backward under create_graph: 0 takes x's dtype and device
        return 0
    if x.__class__ is not np.ndarray:
        return get_array_module(x).zeros((), x.dtype)
    zero = _NUMPY_ZEROS.get(x.dtype)
    if zero is None:
        zero = _NUMPY_ZEROS[x.dtype] = np.zeros((), x.dtype)
    return zero


def as_tensor_like(value, like: Tensor, op: str = "op", name: str = "other") -> Tensor:
    """`value` as a Tensor on `like`'s device. A Python number takes `like`'s dtype (as in
    PyTorch, `x * 2` keeps x's dtype), unless a float meets an integer tensor."""
    if isinstance(value, Tensor):
        return value
    xp = get_array_module(like._array)
    if isinstance(value, numbers.Number) and not isinstance(value, np.ndarray):
        if isinstance(value, bool) or not isinstance(value, float) or like.dtype.kind == "f":
            dtype = like.dtype
        else:
            dtype = dtypes.get_default_dtype()
        return Tensor._wrap(xp.asarray(value, dtype=dtype), False, None)
    if isinstance(value, (list, tuple)) or hasattr(value, "__array__"):
        return Tensor._wrap(_as_array(value, None, like.device), False, None)
    raise TypeError(
        f"{op}: argument '{name}' must be a Tensor or a number, got {type(value).__name__} "
        f"{value!r:.60}"
    )


def binary_operands(a, b, op: str = "op"):
    """Both operands as Tensors. One of them must be a Tensor, except that two plain numbers
    make 0-d tensors (as `torch.add(1, 2)`); lists need a Tensor beside them (as PyTorch)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._array.dtype is b._array.dtype:
        return a, b  # NOTE: the usual case, first: two tensors of one dtype need nothing here
    if isinstance(a, Tensor):
        b = as_tensor_like(b, a, op, "other")
    elif isinstance(b, Tensor):
        a = as_tensor_like(a, b, op, "input")
    elif isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        a = Tensor._wrap(_as_array(a, None, None), False, None)
        b = as_tensor_like(b, a, op, "other")
    else:
        raise TypeError(
            f"{op}: expected a Tensor argument, got {type(a).__name__} {a!r:.40} and "
            f"{type(b).__name__} {b!r:.40}"
        )
    if a._array.dtype != b._array.dtype:
        target = result_dtype(a, b)
        a = a if a.dtype == target else a.to(target)
        b = b if b.dtype == target else b.to(target)
    return a, b


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def result_dtype(a: Tensor, b: Tensor):
    """PyTorch's type promotion for two tensors.

    NOTE: the higher category (bool < integer < float) wins; within one category a tensor with
    dimensions outranks a 0-d one (`ones(2) * tensor(2., dtype=float64)` stays float32), and
    otherwise the wider dtype wins (NumPy alone would turn float32 + int64 into float64).
    """
    ca, cb = _CATEGORY[a.dtype.kind], _CATEGORY[b.dtype.kind]
    if ca != cb:
        return a.dtype if ca > cb else b.dtype
    if (a.ndim == 0) != (b.ndim == 0):
        return b.dtype if a.ndim == 0 else a.dtype
    return np.promote_types(a.dtype, b.dtype)


def floating(x: Tensor) -> Tensor:
    """x, or x in the default float dtype if it holds integers or bools (torch.exp(int) is
    float32, where NumPy would give float64)."""
    return x if x.dtype.kind == "f" else x.to(dtypes.get_default_dtype())


def normalize_dim(dim, ndim, op):
    """A dimension index in [0, ndim), from PyTorch-style possibly negative `dim`."""
    if dim.__class__ is not int:  # NOTE: a plain int skips the slower checks (a bool is no int)
        if not isinstance(dim, np.integer):
            raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__} {dim!r}")
        dim = int(dim)
    n = ndim if ndim > 0 else 1
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimensions")
    return dim % n


_ALL_AXES = tuple(tuple(range(n)) for n in range(65))  # NumPy 2 arrays have at most 64 dims


def normalize_dims(dim, ndim, op):
    """`dim` (None, int or a sequence) as a sorted tuple of distinct non-negative axes."""
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        # NOTE: PyTorch reads an empty dim list as "all dims" (x.sum(dim=()) is the full sum)
        return _ALL_AXES[ndim]  # tuple(range(ndim)), made once (a tenth of a small sum)
    if isinstance(dim, (list, tuple)):
        axes = [normalize_dim(d, ndim, op) for d in dim]
        if len(set(axes)) != len(axes):  # as PyTorch: sum(dim=(0, 0)) is an error, not a sum
            raise ValueError(f"{op}: dim {dim!r} names a dimension more than once")
        axes = tuple(sorted(axes))
    else:
        axes = (normalize_dim(dim, ndim, op),)
    return axes if ndim else ()  # a 0-d tensor accepts dim 0 or -1 (as PyTorch): nothing to reduce


def describe(tensors) -> str:
    """'shapes (3, 4) and (5,)' for error messages."""
    return " and ".join(str(tuple(t.shape)) for t in tensors)
