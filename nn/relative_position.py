"""T5's bucketed relative position bias (Raffel et al. 2020).

Each head learns one scalar per bucket of relative distance (key position - query position):
distances below max_exact = num_buckets/2 get a bucket each, larger ones share logarithmically
sized buckets up to `max_distance`. Bidirectional attention (the encoder) spends half the buckets
on each direction; causal attention (the decoder) only looks back.
"""

from __future__ import annotations

import math

import numpy as np

from tinytensor.creation import tensor
from tinytensor.dtypes import int64

from .embedding import Embedding
from .module import Module


def relative_position_bucket(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    """The bucket of each relative position (int array in, int64 array out), exactly as HF's
    `T5Attention._relative_position_bucket`.

    NOTE: the logarithm is taken in float32, as HF does, so that distances on a bucket boundary
    round the same way.
    """
    relative_position = np.asarray(relative_position, dtype=np.int64)
    buckets = np.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).astype(np.int64) * num_buckets
        distance = np.abs(relative_position)
    else:
        distance = -np.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # np.maximum(..., 1) only avoids log(0) warnings: those entries take the `is_small` branch
    scaled = np.maximum(distance, 1).astype(np.float32) / max_exact
    with np.errstate(divide="ignore", invalid="ignore"):  # max_distance = max_exact: as HF
        log_ratio = np.log(scaled) / math.log(max_distance / max_exact)
        if_large = max_exact + (log_ratio * (num_buckets - max_exact)).astype(np.int64)
    if_large = np.minimum(if_large, num_buckets - 1)
    return buckets + np.where(is_small, distance, if_large)


class T5RelativePositionBias(Module):
    """The learned bucketed relative position bias of T5, added to the attention scores.

    Args:
        n_heads: heads of the attention it feeds.
        num_buckets, max_distance: T5's relative_attention_num_buckets (32) and
            relative_attention_max_distance (128).
        bidirectional: True for the encoder, False for the decoder's self-attention.

    Parameters: `relative_attention_bias`, an Embedding (num_buckets, n_heads) (HF's name).

    forward(q_len, k_len, offset=0) -> (1, H, q_len, k_len) float bias with gradient, for queries
    at positions offset .. offset+q_len-1 (offset = number of cached keys when decoding) and keys
    at 0 .. k_len-1. T5 computes it in the first layer and shares it with all layers; pass it to
    attention as `attn_bias` (with scale=1.0).
    """

    def __init__(
        self, n_heads, num_buckets=32, max_distance=128, bidirectional=True, device=None, dtype=None
    ):
        super().__init__()
        self.n_heads, self.num_buckets, self.max_distance = n_heads, num_buckets, max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = Embedding(num_buckets, n_heads, device=device, dtype=dtype)

    def forward(self, q_len: int, k_len: int, offset: int = 0):
        context = np.arange(offset, offset + q_len)[:, None]
        memory = np.arange(k_len)[None, :]
        buckets = relative_position_bucket(
            memory - context, self.bidirectional, self.num_buckets, self.max_distance
        )
        ids = tensor(buckets, dtype=int64, device=self.relative_attention_bias.weight.device)
        values = self.relative_attention_bias(ids)  # (q_len, k_len, H)
        return values.permute(2, 0, 1).unsqueeze(0)  # (1, H, q_len, k_len)

    def extra_repr(self):
        return (
            f"n_heads={self.n_heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )
