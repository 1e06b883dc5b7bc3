"""`tt.utils`: helpers outside the engine proper, as `torch.utils` (`tt.utils.data` for now)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
