"""Exercise 3: the VJP of a broadcasting add, where you undo the broadcasting yourself.
Read 03_broadcast_add.md first.

Write `reduce_to_shape` and `BroadcastAdd.backward` below, then check them:
    python examples/exercises/check.py broadcast_add
"""

import tinytensor as tt


def reduce_to_shape(g, shape):
    """Sums g (the broadcast shape) down to `shape`, the shape an input had before broadcasting.

    Example: g of shape (2, 3, 4) and shape (3, 1) -> sum over dim 0 (added) and dim 2
    (stretched from 1 to 4, so kept as size 1) -> (3, 1).
    """
    raise NotImplementedError(
        "reduce_to_shape is yours to write: see 03_broadcast_add.md, then replace this `raise`"
    )


class BroadcastAdd(tt.Function):
    """z = x + y, where x and y broadcast against each other like NumPy arrays."""

    # The engine's own Add sets `broadcasts = True` and the engine reduces the gradients for it.
    # Here that reduction is the exercise: leave this Function without that line.

    def forward(self, x, y):
        self.x_shape, self.y_shape = x.shape, y.shape  # kept for backward
        return x + y

    def backward(self, g):
        """g = dL/dz, of the broadcast shape. Return (dL/dx, dL/dy), shaped like x and y."""
        raise NotImplementedError(
            "BroadcastAdd.backward is yours to write: see 03_broadcast_add.md, then replace "
            "this `raise` with your code"
        )
