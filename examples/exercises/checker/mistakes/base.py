"""What every part of the catalogue shares: the `Mistake` record and small array helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..diagnosis import ATOL, RTOL

Grads = dict[str, np.ndarray]


@dataclass(frozen=True)
class Mistake:
    """One wrong derivation: `grads(arrays, params, g, right)` gives the gradient it produces
    for the inputs it gets wrong ({input name: array}); `says` is the hint."""

    key: str  # a short name, for tests and autograders: "softmax-diagonal-only"
    says: str
    grads: Callable[[Grads, dict, np.ndarray, Grads], Grads]


def _t(a):
    return a.swapaxes(-1, -2)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _rows(a):
    """Every dim but the last: the dims a per-feature weight is broadcast over."""
    return tuple(range(a.ndim - 1))


def _try(fn):
    """fn() or None when its shapes do not fit (the learner's code would raise there)."""
    try:
        return fn()
    except (ValueError, IndexError):
        return None


def _some(**grads):
    return {k: v for k, v in grads.items() if v is not None}


def _broadcast_dims(shape, gshape):
    """(dims broadcasting added in front, dims it stretched from size 1), as axes of g."""
    lead = len(gshape) - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1)
    return tuple(range(lead)), stretched


def _softmax_ds(p, dp):
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def _close(a, b) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL))
