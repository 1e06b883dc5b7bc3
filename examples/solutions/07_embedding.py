"""Solution to exercise 7: the VJP of an embedding lookup."""

import numpy as np

import tinytensor as tt


class Embedding(tt.Function):
    """z = W[ids]: row ids[...] of the table W (V, D), for integer ids of any shape."""

    def forward(self, weight, ids=None):
        self.ids, self.weight_shape = ids, weight.shape  # kept for backward
        return weight[ids]

    def backward(self, g):
        """dL/dW[v] = Σ over the positions p with ids[p] = v of g[p] (repeated ids add up)."""
        gw = np.zeros(self.weight_shape, dtype=g.dtype)
        # NOTE: `gw[ids] += g` would write a repeated id once; np.add.at adds every occurrence.
        np.add.at(gw, self.ids.reshape(-1), g.reshape(-1, self.weight_shape[1]))
        return gw
