"""Exercise 4: the VJPs of a sum and of a mean over one dimension.  Read 04_sum_mean.md first.

Write `SumDim.backward` and `MeanDim.backward` below, then check them:
    python examples/exercises/check.py sum_mean
"""

import numpy as np  # noqa: F401 - you will want np.expand_dims and np.broadcast_to

import tinytensor as tt


class SumDim(tt.Function):
    """z = Σ_dim x: sums over dimension `dim` (removed unless keepdim)."""

    def forward(self, x, dim=0, keepdim=False):
        self.shape, self.dim, self.keepdim = x.shape, dim, keepdim  # kept for backward
        return x.sum(axis=dim, keepdims=keepdim)

    def backward(self, g):
        """g = dL/dz, shaped like z (dim removed unless keepdim). Return dL/dx, shaped like x."""
        raise NotImplementedError(
            "SumDim.backward is yours to write: see 04_sum_mean.md, then replace this `raise`"
        )


class MeanDim(tt.Function):
    """z = (1/N) Σ_dim x with N = x.shape[dim]."""

    def forward(self, x, dim=0, keepdim=False):
        self.shape, self.dim, self.keepdim = x.shape, dim, keepdim  # kept for backward
        return x.mean(axis=dim, keepdims=keepdim)

    def backward(self, g):
        """g = dL/dz, shaped like z. Return dL/dx, shaped like x."""
        raise NotImplementedError(
            "MeanDim.backward is yours to write: see 04_sum_mean.md, then replace this `raise`"
        )
