"""Creating tensors: from data, filled with constants, ranges, random numbers, and *_like."""

from __future__ import annotations

import builtins
import math

from . import dtypes
from . import random as _random
from .backend import array_module_for
from .ops._checks import check_int, check_tensor, is_real, sizes
from .tensor import Tensor, _as_array

_size = sizes  # `zeros(2, 3)` and `zeros((2, 3))` both mean shape (2, 3); checked, named by op


def _finish(array, requires_grad):
    t = Tensor._wrap(array, False, None)
    return t.requires_grad_(True) if requires_grad else t


def _float_dtype(dtype):
    return dtypes.to_dtype(dtype) or dtypes.get_default_dtype()


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new tensor holding a copy of `data` (lists, scalars, arrays).

    Example:
        >>> tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True).shape
        (2, 2)
    """
    if isinstance(data, (str, bytes)):
        raise TypeError(f"tensor: data must be numbers, nested lists or an array, got {data!r}")
    t = Tensor._wrap(_as_array(data, dtype, device), False, None)
    if isinstance(data, Tensor) or hasattr(data, "__array__"):
        t._array = t._array.copy()
    return t.requires_grad_(True) if requires_grad else t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like `tensor`, but shares memory with a NumPy array of the right dtype."""
    return (
        data
        if isinstance(data, Tensor) and dtype is None
        else Tensor._wrap(_as_array(data, dtype, device), False, None)
    )


def from_numpy(array) -> Tensor:
    return Tensor(array)


def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    xp = array_module_for(device or "cpu")
    return _finish(xp.zeros(_size(size, "zeros"), dtype=_float_dtype(dtype)), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    xp = array_module_for(device or "cpu")
    return _finish(xp.ones(_size(size, "ones"), dtype=_float_dtype(dtype)), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    _size(size, "empty")
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape = _size((size,), "full")
    if not isinstance(fill_value, (builtins.bool, builtins.int, builtins.float, complex)):
        if isinstance(fill_value, Tensor) and fill_value.numel() == 1:
            fill_value = fill_value.item()
        elif not is_real(fill_value):
            raise TypeError(
                f"full: fill_value must be a number, got {type(fill_value).__name__} "
                f"{fill_value!r:.40}"
            )
    xp = array_module_for(device or "cpu")
    if dtype is None:
        dtype = (
            dtypes.bool
            if isinstance(fill_value, builtins.bool)
            else dtypes.int64
            if isinstance(fill_value, builtins.int)
            else dtypes.get_default_dtype()
        )
    return _finish(xp.full(shape, fill_value, dtype=dtypes.to_dtype(dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Values from start (default 0) up to, not including, end; integers unless a float is given."""
    if end is None:
        start, end = 0, start
    if builtins.any(isinstance(v, Tensor) for v in (start, end, step)):  # 0-d tensors as bounds
        start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    for name, value in (("start", start), ("end", end), ("step", step)):
        if not is_real(value):
            raise TypeError(
                f"arange: {name} must be a number, got {type(value).__name__} {value!r}"
            )
        if not math.isfinite(value):
            raise ValueError(f"arange: {name} must be finite, got {value}")
    if step == 0:
        raise ValueError("arange: step must be nonzero, got 0")
    if (end - start) * step < 0:  # NumPy would return an empty range; PyTorch raises
        raise ValueError(
            f"arange: step {step} goes away from end {end} (start {start}): the range is empty"
        )
    xp = array_module_for(device or "cpu")
    if dtype is None:
        is_int = builtins.all(isinstance(v, builtins.int) for v in (start, end, step))
        dtype = dtypes.int64 if is_int else dtypes.get_default_dtype()
    return _finish(xp.arange(start, end, step).astype(dtypes.to_dtype(dtype)), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    check_int(steps, "linspace", "steps", minimum=0)
    xp = array_module_for(device or "cpu")
    return _finish(xp.linspace(start, end, steps).astype(_float_dtype(dtype)), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    check_int(n, "eye", "n", minimum=0)
    if m is not None:
        check_int(m, "eye", "m", minimum=0)
    xp = array_module_for(device or "cpu")
    return _finish(xp.eye(n, m, dtype=_float_dtype(dtype)), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    """Standard normal samples from the seeded global generator (see `tt.manual_seed`)."""
    arr = _random.normal_array(
        _size(size, "randn"), _float_dtype(dtype), device, 0.0, 1.0, generator
    )
    return _finish(arr, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    """Uniform samples in [0, 1)."""
    arr = _random.uniform_array(
        _size(size, "rand"), _float_dtype(dtype), device, 0.0, 1.0, generator
    )
    return _finish(arr, requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None, generator=None) -> Tensor:
    """Integers in [low, high) (int64); `randint(high, size)` starts at 0."""
    if isinstance(high, (tuple, list)):  # randint(high, size), as torch.randint(5, (3,))
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    low = check_int(low, "randint", "low")
    high = check_int(high, "randint", "high")
    if low >= high:
        raise ValueError(f"randint: low must be < high, got low={low}, high={high}")
    shape = _size((size,), "randint")
    dtype = dtypes.to_dtype(dtype) or dtypes.int64
    return _finish(_random.integers_array(shape, low, high, dtype, device, generator), False)


def randperm(n, dtype=None, device=None, generator=None) -> Tensor:
    check_int(n, "randperm", "n", minimum=0)
    arr = _random.permutation(n, generator).astype(dtypes.to_dtype(dtype) or dtypes.int64)
    return Tensor(arr, device=device)


def _like(fn, x, dtype, device, **kwargs):
    check_tensor(x, f"{fn.__name__}_like")
    return fn(x.shape, dtype=dtype or x.dtype, device=device or x.device, **kwargs)


def zeros_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(zeros, x, dtype, device, requires_grad=requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(ones, x, dtype, device, requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    check_tensor(x, "full_like")
    return full(
        x.shape,
        fill_value,
        dtype=dtype or x.dtype,
        device=device or x.device,
        requires_grad=requires_grad,
    )


def randn_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(randn, x, dtype, device, requires_grad=requires_grad)


def rand_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(rand, x, dtype, device, requires_grad=requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    return zeros_like(x, dtype, device, requires_grad)
