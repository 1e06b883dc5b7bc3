"""ALiBi: attention with linear biases (Press et al. 2022, "Train Short, Test Long").

No position embeddings; instead each head h adds -m_h·(i - j) to the score of query i and key j.
The slopes m_h form a geometric sequence starting at 2^(-8/n) with that ratio (n a power of 2);
for other n, the n' = 2^⌊log2 n⌋ slopes are followed by every other slope of 2n' heads.
"""

from __future__ import annotations

import math

import numpy as np

from tinytensor import dtypes
from tinytensor.tensor import Tensor

from .module import Module


def alibi_slopes(n_heads: int) -> list[float]:
    """The per-head slopes m_h of the paper (its reference code), e.g. 1/2, 1/4, ..., 1/256 for 8
    heads."""

    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if n_heads < 1:
        raise ValueError(f"alibi_slopes: n_heads must be positive, got {n_heads}")
    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n_heads - closest]


class ALiBi(Module):
    """The ALiBi score bias (no parameters; the slopes are a non-persistent buffer `slopes`).

    forward(q_len, k_len, offset=0) -> (1, H, q_len, k_len) float bias, without gradient:
        bias[h, i, j] = -m_h·|offset + i - j|
    where `offset` is the position of the first query (the number of cached keys when decoding
    with a KV cache: q_len=1, k_len=offset+1). For causal attention (j ≤ i) this is the paper's
    m_h·(j - i); for bidirectional attention it is symmetric in distance. Pass it to attention as
    `attn_bias`.
    """

    def __init__(self, n_heads, device=None, dtype=None):
        super().__init__()
        self.n_heads = int(n_heads)
        dtype = dtypes.to_dtype(dtype) or dtypes.get_default_dtype()
        slopes = Tensor(np.asarray(alibi_slopes(n_heads)), dtype=dtype, device=device or "cpu")
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(self, q_len: int, k_len: int, offset: int = 0):
        distance = np.abs(np.arange(offset, offset + q_len)[:, None] - np.arange(k_len)[None, :])
        distance = Tensor(distance, dtype=self.slopes.dtype, device=self.slopes.device)
        bias = -(self.slopes.reshape(-1, 1, 1) * distance)  # (H, q_len, k_len)
        return bias.reshape(1, self.n_heads, q_len, k_len)  # (1, H, q_len, k_len)

    def extra_repr(self):
        return f"n_heads={self.n_heads}"
