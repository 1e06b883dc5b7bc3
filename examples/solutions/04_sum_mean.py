"""Solution to exercise 4: the VJPs of a sum and of a mean over one dimension."""

import numpy as np

import tinytensor as tt


def _expand_back(g, dim, keepdim, shape):
    """g with the reduced dim put back (size 1), then broadcast to the input's shape."""
    if not keepdim:
        g = np.expand_dims(g, dim)
    return np.broadcast_to(g, shape)


class SumDim(tt.Function):
    """z = Σ_dim x: sums over dimension `dim` (removed unless keepdim)."""

    def forward(self, x, dim=0, keepdim=False):
        self.shape, self.dim, self.keepdim = x.shape, dim, keepdim  # kept for backward
        return x.sum(axis=dim, keepdims=keepdim)

    def backward(self, g):
        """dL/dx = g copied along `dim`: every element of the slice adds into the sum once."""
        return _expand_back(g, self.dim, self.keepdim, self.shape)


class MeanDim(tt.Function):
    """z = (1/N) Σ_dim x with N = x.shape[dim]."""

    def forward(self, x, dim=0, keepdim=False):
        self.shape, self.dim, self.keepdim = x.shape, dim, keepdim  # kept for backward
        return x.mean(axis=dim, keepdims=keepdim)

    def backward(self, g):
        """dL/dx = g/N copied along `dim`."""
        return _expand_back(g / self.shape[self.dim], self.dim, self.keepdim, self.shape)
