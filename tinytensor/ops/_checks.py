"""Argument checks at the boundary of the public functions, with messages that name the function,
the argument and the value the user wrote: `zeros: size must be non-negative integers, got -1 in
(2, -1)`, never NumPy's `negative dimensions are not allowed`.

They run in the public functions only, never inside `Function.forward`/`backward`, and cost a few
isinstance checks on the common path (a Tensor, an int), so the per-op overhead stays small.
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np

from ..tensor import Tensor

_INT_TYPES = (int, np.integer)


def _show(value) -> str:
    """The value as the user wrote it, cut short (a huge list must not flood the message)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_int(value) -> bool:
    """A Python or NumPy integer; bool is not one here (as a size or dim it is a typo)."""
    return isinstance(value, _INT_TYPES) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    """A Python or NumPy real number, bool excluded."""
    if value.__class__ is float or value.__class__ is int:  # the common case, without the ABC
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_tensor(value, op: str, name: str = "input") -> Tensor:
    """`value` itself if it is a Tensor, else a TypeError naming the argument (as PyTorch:
    `torch.exp(2.0)` raises TypeError)."""
    if isinstance(value, Tensor):
        return value
    raise TypeError(
        f"{op}: argument '{name}' must be a Tensor, got {type(value).__name__} {_show(value)}"
    )


def check_int(value, op: str, name: str, minimum=None) -> int:
    """`value` as an int, checked to be an integer (not a bool or float) and >= minimum."""
    if value.__class__ is not int and not is_int(value):
        raise TypeError(f"{op}: {name} must be an int, got {type(value).__name__} {_show(value)}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value}")
    return int(value)


def _index_or_self(value):
    """A one-element integer Tensor (or any exact-integer object) as its int, as PyTorch takes
    `x.reshape(n, -1)` with a tensor n; anything else is returned for the checks to refuse."""
    if is_int(value) or isinstance(value, (bool, float, str)) or not hasattr(value, "__index__"):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


def sizes(size, op: str, allow_minus_one: bool = False) -> tuple:
    """`f(2, 3)` and `f((2, 3))` both as the shape (2, 3), of non-negative ints (or -1 for
    "infer" where `allow_minus_one`)."""
    if len(size) == 1 and size[0].__class__ is not int:
        if isinstance(size[0], (tuple, list)):
            size = size[0]
        elif hasattr(size[0], "__len__") and not isinstance(size[0], str):
            size = tuple(size[0])  # torch.Size-like objects, NumPy shapes
    lowest = -1 if allow_minus_one else 0
    for s in size:  # NOTE: the fast path (plain ints in range) is what reshape/zeros pay for
        if s.__class__ is not int or s < lowest:
            return _checked_sizes(size, op, lowest)
    return size if size.__class__ is tuple else tuple(size)


def _checked_sizes(size, op, lowest) -> tuple:
    """The slow path of `sizes`: NumPy ints and one-element tensors become ints, anything else
    is named in the error."""
    size = tuple(_index_or_self(s) for s in size)
    for s in size:
        if not is_int(s):
            raise TypeError(
                f"{op}: size must be integers, got {type(s).__name__} {_show(s)} in "
                f"{_show(tuple(size))}"
            )
        if s < lowest:
            kind = "non-negative integers (or -1)" if lowest < 0 else "non-negative integers"
            raise ValueError(f"{op}: size must be {kind}, got {s} in {_show(tuple(size))}")
    return tuple(int(s) for s in size)


def check_real(value, op: str, name: str) -> float:
    """A real number (not a bool, string or tensor), returned as it is."""
    if not is_real(value):
        raise TypeError(f"{op}: {name} must be a number, got {type(value).__name__} {_show(value)}")
    return value


def check_finite(value, op: str, name: str, *, low=None, high=None, low_open=False):
    """A finite real number in [low, high] (or (low, high] with `low_open`)."""
    check_real(value, op, name)
    if not math.isfinite(value):
        raise ValueError(f"{op}: {name} must be a finite number, got {value}")
    below = low is not None and (value <= low if low_open else value < low)
    if below or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        bounds = f"({lo}, {hi}]" if low_open else f"[{lo}, {hi}]"
        raise ValueError(f"{op}: {name} must be in {bounds}, got {value}")
    return value


def check_probability(p, op: str, name: str = "p"):
    """A probability in [0, 1]; NaN is refused (PyTorch's `p < 0 or p > 1` lets it through)."""
    return check_finite(p, op, name, low=0.0, high=1.0)


def check_distinct_dims(dims, axes, op: str, name: str = "dim") -> None:
    """Each dimension at most once: `sum(dim=(0, 0))` or `(1, -1)` on a 2-d tensor is refused."""
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: {name} {_show(dims)} names a dimension more than once")


def index_tensor(index, op: str, name: str = "index") -> Tensor:
    """An integer Tensor of indices, else a TypeError naming the argument."""
    if not isinstance(index, Tensor):
        raise TypeError(
            f"{op}: {name} must be an integer Tensor, got {type(index).__name__} {_show(index)}"
        )
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must be an integer Tensor, got dtype {index.dtype}")
    return index


def check_indices_in_range(indices, size: int, op: str, what: str, allow_negative=False) -> None:
    """Every entry of the index array in [0, size) (or [-size, size) where PyTorch wraps
    negatives for this op); names the first offender. One min/max pass over the indices."""
    if not indices.size:
        return
    low, high = int(indices.min()), int(indices.max())
    lowest = -size if allow_negative else 0
    if low < lowest or high >= size:
        bad = low if low < lowest else high
        allowed = f"[{lowest}, {size})"
        raise IndexError(f"{op}: index {bad} is out of range for {what} (allowed {allowed})")
