"""Exercise 7: the VJP of an embedding lookup.  Read 07_embedding.md first.

Write `Embedding.backward` below, then check it:
    python examples/exercises/check.py embedding
"""

import numpy as np  # noqa: F401 - you will need it

import tinytensor as tt


class Embedding(tt.Function):
    """z = W[ids]: row ids[...] of the table W (V, D), for integer ids of any shape.

    Called as Embedding.apply(weight, ids=ids): the ids are an option, not an input, because
    integers have no gradient.
    """

    def forward(self, weight, ids=None):
        self.ids, self.weight_shape = ids, weight.shape  # kept for backward
        return weight[ids]

    def backward(self, g):
        """g = dL/dz, shape ids.shape + (D,). Return dL/dW, shape (V, D), with g's dtype."""
        raise NotImplementedError(
            "Embedding.backward is yours to write: see 07_embedding.md, then replace this "
            "`raise` with your code"
        )
