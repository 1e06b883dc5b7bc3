"""Mistakes in undoing a broadcast and in spreading a reduction back: 3 broadcasting add,
4 sum and mean."""

from __future__ import annotations

import numpy as np

from .base import Mistake, _broadcast_dims


def _reduce_with(how):
    """A wrong reduction of g to each input's shape: how(g, shape, added, stretched)."""

    def grads(a, p, g, right):
        out = {}
        for name, x in a.items():
            added, stretched = _broadcast_dims(x.shape, g.shape)
            out[name] = how(g, x.shape, added, stretched)
        return out

    return grads


BROADCAST_ADD = (
    Mistake(
        "add-mean-not-sum",
        "you averaged over the broadcast dims; a value used n times collects the *sum* of its "
        "n gradients (step 2 of 03_broadcast_add.md)",
        _reduce_with(
            lambda g, s, added, stretched: g.mean(axis=added).mean(
                axis=tuple(i - len(added) for i in stretched), keepdims=True
            )
        ),
    ),
    Mistake(
        "add-no-keepdims",
        "right values, but the dims broadcasting stretched from size 1 were summed away: "
        "case (b) of step 3 in 03_broadcast_add.md keeps them as size 1 (keepdims=True)",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=added + stretched)),
    ),
    Mistake(
        "add-only-leading",
        "you summed the dims broadcasting added in front (case (a) of step 3 in "
        "03_broadcast_add.md) but not the ones it stretched from size 1 (case (b))",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=added)),
    ),
    Mistake(
        "add-only-stretched",
        "you summed the dims broadcasting stretched from size 1 (case (b) of step 3 in "
        "03_broadcast_add.md) but not the ones it added in front (case (a))",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=stretched, keepdims=True)),
    ),
    Mistake(
        "add-leading-kept",
        "the dims broadcasting added in front must be summed *away* (case (a) of step 3 in "
        "03_broadcast_add.md); you kept them as size 1",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=added + stretched, keepdims=True)),
    ),
    Mistake(
        "add-sum-everything",
        "you summed g over every dim, also those where the input has elements of its own; "
        "only the dims broadcasting added or stretched are summed (step 3 of "
        "03_broadcast_add.md)",
        lambda a, p, g, right: {n: np.full(x.shape, g.sum()) for n, x in a.items()},
    ),
)


def _expand_at(g, axis, keepdim, shape):
    """g put back at `axis` (when the dim was removed) and broadcast to `shape`; None if it
    does not broadcast (that mistake then raises in the learner's code, no fingerprint)."""
    try:
        return np.broadcast_to(g if keepdim else np.expand_dims(g, axis), shape)
    except ValueError:
        return None


def _expanded_elsewhere(x, p, g, scale):
    """g put back at dim 0 or -1 where forward reduced another dim (the first that fits)."""
    if p["keepdim"]:
        return {}
    for axis in (0, -1):
        if axis % x.ndim != p["dim"] % x.ndim:
            spread = _expand_at(g, axis, False, x.shape)
            if spread is not None:
                return {"x": spread * scale}
    return {}


def _reduce_grads(scale, axis=None):
    """The gradient of a sum over p["dim"] times scale(x, dim, g), g put back at `axis`."""

    def grads(a, p, g, right):
        x, dim = a["x"], p["dim"]
        spread = _expand_at(g, dim if axis is None else axis, p["keepdim"], x.shape)
        return {} if spread is None else {"x": spread * scale(x, dim, g)}

    return grads


SUM = (
    Mistake(
        "sum-expanded-at-wrong-dim",
        "g was put back at the wrong dim: np.expand_dims(g, dim) must put the size-1 dim "
        "where forward removed it (step 3 of 04_sum_mean.md)",
        lambda a, p, g, right: _expanded_elsewhere(a["x"], p, g, 1.0),
    ),
)

MEAN = (
    Mistake(
        "mean-missing-1/N",
        "this is the gradient of the *sum*: the mean's constant 1/N is missing (step 4 of "
        "04_sum_mean.md)",
        _reduce_grads(lambda x, dim, g: 1.0),
    ),
    Mistake(
        "mean-times-N",
        "you multiplied by N where the mean divides by it (step 4 of 04_sum_mean.md)",
        _reduce_grads(lambda x, dim, g: x.shape[dim]),
    ),
    Mistake(
        "mean-divides-by-size",
        "you divided by x.size, every element of x; the mean averages only the N = "
        "x.shape[dim] elements of one slice (step 4 of 04_sum_mean.md)",
        _reduce_grads(lambda x, dim, g: 1 / x.size),
    ),
    Mistake(
        "mean-N-from-last-dim",
        "N is x.shape[dim], the size of the averaged dim; you divided by x.shape[-1]",
        _reduce_grads(lambda x, dim, g: 1 / x.shape[-1]),
    ),
    Mistake(
        "mean-N-from-first-dim",
        "N is x.shape[dim], the size of the averaged dim; you divided by x.shape[0]",
        _reduce_grads(lambda x, dim, g: 1 / x.shape[0]),
    ),
    Mistake(
        "mean-N-from-g",
        "you divided by the size of g (the output); N is x.shape[dim], the number of elements "
        "each mean averages",
        _reduce_grads(lambda x, dim, g: 1 / max(len(g) if g.ndim else 1, 1)),
    ),
    Mistake(
        "mean-expanded-at-wrong-dim",
        "g was put back at the wrong dim: np.expand_dims(g, dim) must put the size-1 dim "
        "where forward removed it (step 3 of 04_sum_mean.md)",
        lambda a, p, g, right: _expanded_elsewhere(a["x"], p, g, 1 / a["x"].shape[p["dim"]]),
    ),
)
