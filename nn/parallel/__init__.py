"""Data parallelism: `DistributedDataParallel`, one model replica per process."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
