"""PyTorch's legacy tensor types: `tt.FloatTensor([1, 2])`, `tt.LongTensor(3)`, and
`isinstance(x, tt.FloatTensor)`, which checks the dtype (as PyTorch does, CPU tensors only)."""

from __future__ import annotations

from . import dtypes
from .tensor import Tensor

_NAMES = {
    "FloatTensor": dtypes.float32,
    "DoubleTensor": dtypes.float64,
    "HalfTensor": dtypes.float16,
    "ByteTensor": dtypes.uint8,
    "CharTensor": dtypes.int8,
    "ShortTensor": dtypes.int16,
    "IntTensor": dtypes.int32,
    "LongTensor": dtypes.int64,
    "BoolTensor": dtypes.bool,
}


class _LegacyTypeMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"


def _make(name, dtype):
    def __new__(cls, *data, device=None):
        return Tensor(*data, dtype=dtype, device=device)

    return _LegacyTypeMeta(
        name,
        (),
        {
            "dtype": dtype,
            "__new__": __new__,
            "__doc__": (f"tt.{name}(*sizes) or tt.{name}(data): a CPU tensor of dtype {dtype}."),
        },
    )


LEGACY_TYPES = {name: _make(name, dtype) for name, dtype in _NAMES.items()}


def legacy_type_name(t) -> str:
    for name, dtype in _NAMES.items():
        if t.dtype == dtype:
            prefix = "torch.cuda." if t.device.type == "cuda" else "torch."
            return prefix + name
    return f"torch.{t.dtype}"


def parse_legacy_type(name: str):
    """'torch.DoubleTensor' (or 'DoubleTensor') -> float64."""
    short = name.rsplit(".", 1)[-1]
    if short not in _NAMES:
        raise TypeError(f"type: unknown tensor type {name!r}; expected e.g. 'torch.FloatTensor'")
    return _NAMES[short]
