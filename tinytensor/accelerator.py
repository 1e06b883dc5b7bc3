"""`tt.accelerator`: PyTorch's device-agnostic view of the current accelerator (CUDA or none)."""

from __future__ import annotations

from . import cuda
from .backend import Device


def is_available() -> bool:
    return cuda.is_available()


def current_accelerator():
    """Device('cuda') where CuPy sees a GPU, else None (as PyTorch on a CPU-only machine)."""
    return Device("cuda") if cuda.is_available() else None


def device_count() -> int:
    return cuda.device_count()


def synchronize(device=None) -> None:
    cuda.synchronize()
