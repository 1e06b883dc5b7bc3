"""Absolute position encodings: learned (`LearnedPositionalEmbedding`) and fixed sinusoidal.

Both are called with a sequence length and an `offset` (the position of the first token: the
number of tokens already in a KV cache) and return one vector per position, (seq_len, d_model),
to be added to the token embeddings. The relative schemes live in rotary.py (RoPE), alibi.py and
relative_position.py (T5).
"""

from __future__ import annotations

import math

import numpy as np

from tinytensor import dtypes
from tinytensor.tensor import Tensor

from .embedding import Embedding
from .module import Module


def _check_range(name, seq_len, offset, max_positions):
    if offset < 0 or seq_len < 0 or offset + seq_len > max_positions:
        raise IndexError(
            f"{name}: positions {offset}..{offset + seq_len - 1} are out of range for "
            f"max_positions={max_positions}"
        )


class LearnedPositionalEmbedding(Embedding):
    """A learned vector per position (GPT-2's wpe, BERT's position_embeddings): an `Embedding`
    of (max_positions, d_model) called with a length instead of ids.

    forward(seq_len, offset=0) -> (seq_len, d_model), the rows offset .. offset+seq_len-1.
    Its state_dict key is `weight`, as an Embedding's.
    """

    def __init__(self, max_positions, d_model, device=None, dtype=None):
        super().__init__(max_positions, d_model, device=device, dtype=dtype)

    def forward(self, seq_len: int, offset: int = 0):
        _check_range("LearnedPositionalEmbedding", seq_len, offset, self.num_embeddings)
        # NOTE: consecutive rows are a slice, the same values and gradient as embedding ids
        # offset..offset+seq_len-1, without making the ids and checking them every call, and
        # its backward writes the rows instead of np.add.at's scatter
        return self.weight[offset : offset + seq_len]


def sinusoidal_table(max_positions: int, d_model: int) -> np.ndarray:
    """pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(p / 10000^(2i/d)) (Vaswani et al.
    2017, interleaved), in float64."""
    position = np.arange(max_positions, dtype=np.float64)[:, None]
    inv_freq = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((max_positions, d_model))
    table[:, 0::2] = np.sin(position * inv_freq)
    table[:, 1::2] = np.cos(position * inv_freq)[:, : d_model // 2]
    return table


class SinusoidalPositionalEncoding(Module):
    """The fixed sine/cosine encoding of "Attention Is All You Need" (no parameters).

    The table is a non-persistent buffer `pe` (max_positions, d_model): moved by `.to()`, not
    saved, since it is recomputed at construction.

    forward(seq_len, offset=0) -> (seq_len, d_model).
    """

    def __init__(self, max_positions, d_model, device=None, dtype=None):
        super().__init__()
        self.max_positions, self.d_model = int(max_positions), int(d_model)
        table = sinusoidal_table(max_positions, d_model)
        dtype = dtypes.to_dtype(dtype) or dtypes.get_default_dtype()
        self.register_buffer(
            "pe", Tensor(table, dtype=dtype, device=device or "cpu"), persistent=False
        )

    def forward(self, seq_len: int, offset: int = 0):
        _check_range("SinusoidalPositionalEncoding", seq_len, offset, self.max_positions)
        return self.pe[offset : offset + seq_len]

    def extra_repr(self):
        return f"{self.max_positions}, {self.d_model}"
