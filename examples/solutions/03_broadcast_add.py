"""Solution to exercise 3: the VJP of a broadcasting add, reducing by hand."""

import tinytensor as tt


def reduce_to_shape(g, shape):
    """Sums g over the dims that broadcasting added (leading) or stretched (size 1 → n)."""
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead)))  # dims that `shape` does not have at all
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=stretched, keepdims=True)  # dims that were size 1 in the input


class BroadcastAdd(tt.Function):
    """z = x + y, where x and y broadcast against each other like NumPy arrays."""

    # `broadcasts = True` would make the engine do the reduction; here that is the exercise.

    def forward(self, x, y):
        self.x_shape, self.y_shape = x.shape, y.shape  # kept for backward
        return x + y

    def backward(self, g):
        """dL/dx = g summed down to x's shape; the same for y."""
        return reduce_to_shape(g, self.x_shape), reduce_to_shape(g, self.y_shape)
