"""torch.cuda.amp: the older spelling of torch.amp's autocast and GradScaler for CUDA."""

from __future__ import annotations

from .. import amp as _amp
from .. import dtypes


class autocast(_amp.autocast):
    """`torch.cuda.amp.autocast(enabled=True, dtype=torch.float16)`: autocast on 'cuda'."""

    def __init__(self, enabled=True, dtype=dtypes.float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """`torch.cuda.amp.GradScaler(...)`: the loss scaler for 'cuda'."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):  # fmt: skip
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)  # fmt: skip
