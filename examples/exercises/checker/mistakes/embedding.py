"""Mistakes in the VJP of a gather: 7 embedding (a scatter-add)."""

from __future__ import annotations

import numpy as np

from .base import Mistake


def _scattered_rows(a, p, rows):
    gw = np.zeros_like(a["weight"])
    np.add.at(gw, p["ids"].reshape(-1), rows)
    return {"weight": gw}


def _written_once(a, p, g, right):
    gw = np.zeros_like(a["weight"])
    gw[p["ids"]] += g  # the trap itself: a repeated id is written once
    return {"weight": gw}


def _scattered_into(start):
    def grads(a, p, g, right):
        gw = start(a["weight"]).astype(g.dtype)
        np.add.at(gw, p["ids"].reshape(-1), g.reshape(-1, gw.shape[-1]))
        return {"weight": gw}

    return grads


EMBEDDING = (
    Mistake(
        "embedding-written-once",
        "`gw[ids] += g` (or `= g`) writes a repeated id once: every occurrence must add its "
        "gradient (step 2 and 'The NumPy trap' in 07_embedding.md; look up np.add.at)",
        _written_once,
    ),
    Mistake(
        "embedding-returned-g",
        "you returned g, the gradient of the looked-up rows; ∂L/∂W has the table's shape "
        "(V, D), with each row of g added into the row of W it came from (step 2 of "
        "07_embedding.md)",
        lambda a, p, g, right: {"weight": g},
    ),
    Mistake(
        "embedding-table-too-small",
        "your table has max(ids) + 1 rows; ∂L/∂W has all the V rows of W "
        "(self.weight_shape): rows never looked up stay 0 (step 2 of 07_embedding.md)",
        lambda a, p, g, right: _scattered_into(
            lambda w: np.zeros((int(p["ids"].max()) + 1, w.shape[1]))
        )(a, p, g, right),
    ),
    Mistake(
        "embedding-rows-scrambled",
        "g was reshaped into rows the wrong way: g.reshape(-1, D) keeps each position's D "
        "values together; reshape(D, -1) followed by a transpose mixes positions (step 2 and "
        "'The NumPy trap' of 07_embedding.md)",
        lambda a, p, g, right: _scattered_rows(a, p, g.reshape(a["weight"].shape[1], -1).T),
    ),
    Mistake(
        "embedding-started-from-weights",
        "your table of gradients starts from the weights W; it starts from zeros (a row never "
        "looked up gets 0, step 2 of 07_embedding.md)",
        _scattered_into(lambda w: w.copy()),
    ),
    Mistake(
        "embedding-started-from-ones",
        "your table of gradients starts from ones; it starts from zeros (a row never looked "
        "up gets 0, step 2 of 07_embedding.md)",
        _scattered_into(np.ones_like),
    ),
)
