"""The one place that knows about array libraries: NumPy on the CPU, CuPy on a GPU.

Op code asks `get_array_module(array)` for its `xp` and never names numpy or cupy itself, so every
op is written once. CuPy is imported lazily, only when a GPU is actually asked for: importing
tinytensor never needs it.
"""

from __future__ import annotations

import numpy as np

_cupy = None  # the cupy module once imported; False if the import failed
_cupy_error = None  # why cupy could not be imported, for error messages


def _import_cupy():
    """Returns the cupy module, or None if it is not installed or does not load."""
    global _cupy, _cupy_error
    if _cupy is None:
        try:
            import cupy

            _cupy = cupy
        except Exception as e:  # noqa: BLE001 - any import failure means "no cupy"
            _cupy, _cupy_error = False, e
    return _cupy or None


def cupy_module():
    """Returns cupy, or raises a RuntimeError that says why it cannot be used."""
    cp = _import_cupy()
    if cp is None:
        raise RuntimeError(
            "CUDA device requested but CuPy is not available "
            f"({_cupy_error}); install it with `pip install tinytensor[cuda]`"
        )
    return cp


def is_cupy_array(a) -> bool:
    """True for a cupy.ndarray, without importing cupy when it was never imported."""
    return bool(_cupy) and isinstance(a, _cupy.ndarray)


# (Tensor, tinytensor.tensor_xp), bound by tensor_xp when it loads: an op's backward under
# create_graph=True is handed Tensors, and its `xp` is then tensor_xp (see there)
_tensor_class = _tensor_xp = None


def bind_tensor_namespace(tensor_class, namespace) -> None:
    global _tensor_class, _tensor_xp
    _tensor_class, _tensor_xp = tensor_class, namespace


def get_array_module(*arrays):
    """The array module (numpy or cupy) of the given arrays: the `xp` that op code uses; for
    Tensors (a backward under create_graph), `tinytensor.tensor_xp`, NumPy's names on Tensors."""
    if arrays[0].__class__ is _tensor_class:
        return _tensor_xp
    if _cupy:  # NOTE: CPU-only programs (cupy never imported) pay one test: most ops call this
        for a in arrays:
            if isinstance(a, _cupy.ndarray):
                return _cupy
    return np


class Device:
    """Where a tensor lives: `Device("cpu")` or `Device("cuda")` (one GPU, index 0).

    Compares equal to its string form, so `x.device == "cpu"` works as in PyTorch.
    """

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu"):
        if isinstance(spec, Device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string like 'cpu' or 'cuda', got {spec!r}")
        kind, _, index = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {spec!r}: expected 'cpu' or 'cuda'")
        self.type = kind
        self.index = int(index) if index else (0 if kind == "cuda" else None)
        if kind == "cuda" and self.index != 0:
            raise ValueError(f"device {spec!r}: tinytensor uses a single GPU, 'cuda:0'")

    def __eq__(self, other):
        if other.__class__ is Device:  # NOTE: the usual case (x.device == y.device), no parsing
            return self.type == other.type
        if other.__class__ is str and (other == "cpu" or other == "cuda"):  # no parsing either
            return self.type == other
        try:
            other = Device(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self.type == other.type

    def __hash__(self):
        return hash(self.type)

    def __str__(self):
        return "cpu" if self.type == "cpu" else "cuda:0"

    def __repr__(self):
        return f"device(type='{self.type}')"


CPU = Device("cpu")
CUDA = Device("cuda")


def device_of(array) -> Device:
    return CUDA if is_cupy_array(array) else CPU


def array_module_for(device) -> object:
    """numpy for 'cpu', cupy for 'cuda' (with a clear error if cupy is unusable)."""
    if Device(device).type != "cuda":
        return np
    from . import cuda

    if not cuda.is_available():  # else CuPy fails later with a bare driver error
        cupy_module()  # says why, if CuPy itself is missing
        raise RuntimeError("cannot create a tensor on 'cuda': no CUDA GPU is available")
    return cupy_module()


def move_array(array, device):
    """Copies `array` to `device` (a no-op if it is there already)."""
    target = Device(device)
    if target == device_of(array):
        return array
    if target.type == "cuda":
        from . import cuda

        if not cuda.is_available():
            raise RuntimeError("cannot move a tensor to 'cuda': no CUDA GPU is available")
        return cupy_module().asarray(array)
    return array.get()
