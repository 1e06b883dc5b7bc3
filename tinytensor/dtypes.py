"""Data types: PyTorch's names for NumPy dtypes, and the default float type (float32)."""

from __future__ import annotations

import builtins

import numpy as np

float16 = half = np.dtype("float16")
float32 = float = np.dtype("float32")
float64 = double = np.dtype("float64")
uint8 = np.dtype("uint8")
int8 = np.dtype("int8")
int16 = short = np.dtype("int16")
int32 = int = np.dtype("int32")
int64 = long = np.dtype("int64")
bool = np.dtype("bool")  # noqa: A001 - PyTorch's name, only inside this module


class _Unsupported:
    """A PyTorch dtype name the NumPy backend cannot compute in: using it is a clear error."""

    def __init__(self, name, why):
        self.name, self.why = name, why

    def __repr__(self):
        return f"tinytensor.{self.name}"


# NOTE: NumPy has no bfloat16 arithmetic (ml_dtypes stores it, but as a non-float 'V' kind that
# every op would need special-casing for); HF checkpoints stored in bfloat16 are read as float32.
bfloat16 = _Unsupported(
    "bfloat16",
    "NumPy has no bfloat16 arithmetic; use float32 (bfloat16 checkpoints load as float32)",
)

_SUPPORTED = {float16, float32, float64, uint8, int8, int16, int32, int64, bool}
_default_dtype = float32


def get_default_dtype():
    return _default_dtype


def set_default_dtype(dtype) -> None:
    """Sets the dtype of new float tensors (float32 unless changed; float64 for gradchecks)."""
    global _default_dtype
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {dtype}")
    _default_dtype = dtype


def to_dtype(dtype):
    """Normalizes a dtype given as tt.float32, np.float32, 'float32' or Python's float/int/bool."""
    if dtype is None:
        return None
    if dtype is builtins.float:
        return _default_dtype
    if dtype is builtins.int:
        return int64
    if dtype is builtins.bool:
        return bool
    if isinstance(dtype, _Unsupported):
        raise TypeError(f"dtype {dtype.name} is not supported by tinytensor: {dtype.why}")
    try:
        dtype = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"unknown dtype {dtype!r}") from e
    if dtype not in _SUPPORTED:
        raise TypeError(f"dtype {dtype} is not supported by tinytensor")
    return dtype


def is_floating(dtype) -> builtins.bool:
    return dtype.kind == "f"
