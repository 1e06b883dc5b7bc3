"""`tt.cuda`: is a GPU usable here? (PyTorch's `torch.cuda.is_available()` and friends.)"""

from __future__ import annotations

from ..backend import _import_cupy

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


def current_device() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Seeds the generator that GPU tensors draw from: tinytensor draws every random number on
    the host from one generator (same numbers on CPU and GPU), so this is `tt.manual_seed`."""
    from ..random import manual_seed as seed_all

    seed_all(seed)


manual_seed_all = manual_seed


def empty_cache() -> None:
    """Returns CuPy's cached, unused GPU blocks to the driver; a no-op without a GPU."""
    if is_available():
        _import_cupy().get_default_memory_pool().free_all_blocks()


def is_bf16_supported() -> bool:
    """False: tinytensor computes in float16/32/64 only (see tt.bfloat16)."""
    return False


def get_device_name(device=None) -> str:
    if not is_available():
        raise RuntimeError("cuda.get_device_name: no CUDA GPU is available here")
    cp = _import_cupy()
    return cp.cuda.runtime.getDeviceProperties(0)["name"].decode()


from . import amp  # noqa: E402,F401 - tt.cuda.amp.autocast / GradScaler: PyTorch's older spelling
