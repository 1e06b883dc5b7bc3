"""Embedding backward: dW[ids[k]] += g[k] for every token k, without races.

Threads split the embedding's columns, not the tokens: each thread adds every token's slice of
columns in token order, so repeated ids never collide and the sums are the same run to run.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .dispatch import pick, twin_jit

COLUMN_BLOCK = 16


@twin_jit
def _scatter_add_rows(ids, g, gw):
    tokens, dim = g.shape
    for blk in prange((dim + COLUMN_BLOCK - 1) // COLUMN_BLOCK):
        lo, hi = blk * COLUMN_BLOCK, min(dim, (blk + 1) * COLUMN_BLOCK)
        for k in range(tokens):
            row = ids[k]
            for j in range(lo, hi):
                gw[row, j] += g[k, j]


def embedding_backward(ids, g, num_embeddings):
    """dL/dW (num_embeddings, dim) from ids (any shape, int) and g (ids.shape + (dim,))."""
    dim = g.shape[-1]
    gw = np.zeros((num_embeddings, dim), g.dtype)
    flat_ids = np.ascontiguousarray(ids.reshape(-1), dtype=np.int64)
    pick(_scatter_add_rows, g.size)(flat_ids, g.reshape(-1, dim), gw)
    return gw
