"""torch.backends.cuda's flags: `matmul.allow_tf32` and friends (TF32 is never used here)."""

from types import SimpleNamespace

matmul = SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True)


def is_built() -> bool:
    return False
