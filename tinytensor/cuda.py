"""`tt.cuda`: is a GPU usable here? (PyTorch's `torch.cuda.is_available()` and friends.)"""

from __future__ import annotations

from .backend import _import_cupy

_available = None  # cached answer: probing the driver is slow


def is_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    global _available
    if _available is None:
        cp = _import_cupy()
        try:
            _available = cp is not None and cp.cuda.runtime.getDeviceCount() > 0
        except Exception:  # noqa: BLE001 - no driver, no device: all mean "not available"
            _available = False
    return _available


def device_count() -> int:
    return 1 if is_available() else 0


def synchronize() -> None:
    """Waits for queued GPU work (CuPy launches are asynchronous); a no-op without a GPU."""
    if is_available():
        _import_cupy().cuda.Device().synchronize()
