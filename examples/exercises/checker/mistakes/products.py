"""Mistakes in the VJPs of matrix products: 5 matmul, batched and not."""

from __future__ import annotations

import numpy as np

from .base import Mistake, _broadcast_dims, _some, _t, _try


def _batch_reduced(full, shape, how):
    """`full` (the broadcast batch shape) brought back to `shape` with how = np.sum/np.mean."""
    added, stretched = _broadcast_dims(shape, full.shape)
    return how(full, axis=added + stretched, keepdims=True).reshape(shape)


MATMUL = (
    Mistake(
        "matmul-gx-missing-transpose",
        "∂L/∂x uses y without its transpose: in step 1 of 05_matmul.md x_ip meets y_pj, so "
        "the sum runs over j, the second index of y. The shapes of step 4 decide",
        lambda a, p, g, right: _some(x=_try(lambda: g @ a["y"])),
    ),
    Mistake(
        "matmul-gy-missing-transpose",
        "∂L/∂y uses x without its transpose: y_pj meets x_ip, so the sum runs over i, the "
        "first index of x (step 3 of 05_matmul.md). The shapes of step 4 decide",
        lambda a, p, g, right: _some(y=_try(lambda: a["x"] @ g)),
    ),
    Mistake(
        "matmul-factors-swapped",
        "the right factors in the wrong order: a matrix product does not commute. Write the "
        "shape of each factor under it (step 4 of 05_matmul.md)",
        lambda a, p, g, right: _some(
            x=_try(lambda: _t(a["y"]) @ g) if a["y"].shape[-1] != 1 else None,
            y=_try(lambda: g @ _t(a["x"])),
        ),
    ),
    Mistake(
        "matmul-g-transposed",
        "g enters transposed: ∂L/∂x must have x's shape (m, k), and g (m, n) already has m "
        "in front; only y needs a transpose (step 4 of 05_matmul.md)",
        lambda a, p, g, right: _some(x=_try(lambda: _t(g) @ a["y"])),
    ),
    Mistake(
        "matmul-elementwise",
        "you multiplied elementwise (*); the gradient of a matrix product is itself a matrix "
        "product (step 2 of 05_matmul.md)",
        lambda a, p, g, right: _some(x=_try(lambda: g * a["y"]), y=_try(lambda: g * a["x"])),
    ),
)

BATCHED_MATMUL = (
    Mistake(
        "bmm-batch-not-reduced",
        "this input was broadcast over batch dims (like y in exercise 3): each batch's "
        "product is right, but the batches that used the same matrix must be summed back to "
        "its shape (the batched-matmul section of 05_matmul.md)",
        lambda a, p, g, right: {"x": g @ _t(a["y"]), "y": _t(a["x"]) @ g},
    ),
    Mistake(
        "bmm-batch-averaged",
        "the batches that used the same matrix each add their gradient: sum them, do not "
        "average (the batched-matmul section of 05_matmul.md)",
        lambda a, p, g, right: {
            "x": _batch_reduced(g @ _t(a["y"]), a["x"].shape, np.mean),
            "y": _batch_reduced(_t(a["x"]) @ g, a["y"].shape, np.mean),
        },
    ),
    *MATMUL,
)
