"""Optimizers for data-parallel training: `ZeroRedundancyOptimizer` (sharded optimizer state)."""

from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
