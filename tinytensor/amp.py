"""Mixed precision: `autocast` and `GradScaler`, with PyTorch's names (`tt.amp`, `tt.autocast`,
`tt.cuda.amp`).

autocast: inside `with tt.autocast("cuda"):` matrix products (matmul, linear) run in float16
on CuPy arrays, as PyTorch's autocast does for its float16 op list; their inputs are cast by
recorded Cast ops, so gradients flow back to the float32 weights. On the CPU it is an error,
not a silent no-op: NumPy has no fast float16/bfloat16 matrix product, so tinytensor computes in
float32 there (pass `enabled=False`, or leave autocast out on the CPU, as nanoGPT does).

GradScaler (works on every device): multiplies the loss by a scale S before backward so small
float16 gradients do not flush to zero; `unscale_` divides the gradients by S and notes any
inf/NaN; `step` skips the optimizer step when one was found; `update` halves S after a skipped
step and doubles it after `growth_interval` clean ones.
"""

from __future__ import annotations

import math
import warnings

from . import dtypes
from .backend import get_array_module

_autocast_dtype = None  # the float dtype of matrix products inside an enabled CUDA autocast


class autocast:
    """`with tt.autocast(device_type, dtype=None, enabled=True):` (also a decorator)."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        device_type = str(device_type).split(":")[0]
        if device_type not in ("cuda", "cpu"):
            raise ValueError(f"autocast: device_type must be 'cuda' or 'cpu', got {device_type!r}")
        self.device_type, self.enabled = device_type, bool(enabled)
        self.dtype = dtypes.to_dtype(dtype) if dtype is not None else dtypes.float16
        if not self.enabled:
            return
        if device_type == "cpu":
            raise RuntimeError(
                "autocast: mixed precision on the CPU is not supported: NumPy has no fast "
                "float16/bfloat16 matrix product, so tinytensor computes in float32 there; pass "
                "enabled=False, or use autocast only when device_type is 'cuda'"
            )
        from . import cuda

        if not cuda.is_available():
            raise RuntimeError("autocast: device_type 'cuda' but no CUDA GPU is available here")
        if self.dtype != dtypes.float16:
            raise TypeError(f"autocast: only float16 is supported on CUDA, got {self.dtype}")

    def __enter__(self):
        global _autocast_dtype
        self._previous = _autocast_dtype
        if self.enabled:
            _autocast_dtype = self.dtype
        return self

    def __exit__(self, *exc):
        global _autocast_dtype
        _autocast_dtype = self._previous

    def __call__(self, fn):
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def cast_for_matmul(*tensors):
    """Inside an enabled autocast, float32 CuPy operands become float16 (recorded casts)."""
    dtype = _autocast_dtype
    if dtype is None:
        return tensors
    return tuple(
        t.to(dtype) if t is not None and t.dtype == dtypes.float32 and t.is_cuda else t
        for t in tensors
    )


def _cuda_available() -> bool:
    from . import cuda  # late: tt.cuda reaches back here for its amp aliases

    return cuda.is_available()


class GradScaler:
    """PyTorch's dynamic loss scaling (see the module docstring)."""

    def __init__(
        self,
        device="cuda",
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        for name, value in (("init_scale", init_scale), ("growth_factor", growth_factor)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"GradScaler: {name} must be a positive number, got {value}")
        if not 0 < backoff_factor < 1:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise ValueError(
                f"GradScaler: growth_interval must be a positive int, got {growth_interval}"
            )
        self.enabled = bool(enabled)
        if self.enabled and str(device).startswith("cuda") and not _cuda_available():
            # as torch: the default device is "cuda", and CPU-only runs of scripts that pass
            # enabled=True (nanoGPT's float16 default) train unscaled rather than fail
            warnings.warn("GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)  # fmt: skip
            self.enabled = False
        self._scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"unscaled": bool, "found_inf": bool}

    def is_enabled(self) -> bool:
        return self.enabled

    def get_scale(self) -> float:
        return self._scale if self.enabled else 1.0

    def scale(self, outputs):
        """loss * S (a tensor, or a list/tuple of them)."""
        if not self.enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(
            id(optimizer), {"unscaled": False, "found_inf": False}
        )

    def unscale_(self, optimizer) -> None:
        """Divides the optimizer's gradients by S in place and notes any inf/NaN among them."""
        if not self.enabled:
            return
        state = self._state(optimizer)
        if state["unscaled"]:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()"
            )
        inverse = 1.0 / self._scale
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad._array
                g *= inverse
                found = found or not bool(get_array_module(g).isfinite(g).all())
        state.update(unscaled=True, found_inf=found)

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless the (unscaled) gradients held an inf or NaN."""
        if not self.enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if not state["unscaled"]:
            self.unscale_(optimizer)
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        """Backs the scale off after a skipped step, grows it after growth_interval good ones."""
        if not self.enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            found_inf = any(s["found_inf"] for s in self._per_optimizer.values())
            if found_inf:
                self._scale *= self.backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self.growth_interval:
                    self._scale *= self.growth_factor
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self) -> dict:
        return {
            "scale": self._scale,
            "growth_factor": self.growth_factor,
            "backoff_factor": self.backoff_factor,
            "growth_interval": self.growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state: dict) -> None:
        self._scale = float(state["scale"])
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])
