"""`tt.backends`: the switches PyTorch programs set at start-up (`allow_tf32`, ...).

They are real flags that can be read and set; TF32 is an NVIDIA tensor-core format that our
float32 kernels never use, so they change no numbers here (as on a CPU in PyTorch).
"""

from __future__ import annotations

from types import SimpleNamespace

cuda = SimpleNamespace(
    matmul=SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True),
    is_built=lambda: False,
)
cudnn = SimpleNamespace(allow_tf32=True, benchmark=False, deterministic=False, enabled=True)
cudnn.is_available = lambda: False
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
