"""Rotary position embedding (RoPE, Su et al. 2021), rotate-half convention of HF Llama/GPT-NeoX.

For position p and frequency θ_i = base^(-2i/d), the pair of features (x_i, x_{i+d/2}) is rotated
by the angle p·θ_i:
    rope(x) = x·cos(pθ) + rotate_half(x)·sin(pθ),   rotate_half([x₁, x₂]) = [-x₂, x₁]
with cos/sin laid out as [cos(pθ_0..pθ_{d/2-1}), cos(pθ_0..pθ_{d/2-1})]. Applied to queries and
keys, the score q·k then depends only on the distance between the two positions.
"""

from __future__ import annotations

import numpy as np

from tinytensor.ops import cat
from tinytensor.tensor import Tensor

from .module import Module


def rotate_half(x):
    """[x₁, x₂] -> [-x₂, x₁] on the last dim."""
    half = x.shape[-1] // 2
    return cat([-x[..., half:], x[..., :half]], dim=-1)


def rope_tables(positions: np.ndarray, dim: int, base: float):
    """cos and sin tables (len(positions), dim) in float64, HF's layout (frequencies repeated)."""
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    angles = np.outer(positions.astype(np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


class RotaryEmbedding(Module):
    """Rotates queries and keys by their positions (no parameters).

    Args:
        dim: features rotated per head: d_head, or fewer for partial rotary (GPT-NeoX's
            rotary_pct); the remaining features pass through unchanged. Must be even.
        max_positions: size of the precomputed cos/sin tables (non-persistent buffers
            `cos_cached`, `sin_cached`); longer sequences extend them on demand.
        base: the frequency base (10000 in the paper and Llama).

    forward(q, k, offset=0, position_ids=None) -> (q, k) rotated, for q (B, Hq, T, d) and
    k (B, Hkv, T, d) whose first token sits at position `offset` (the number of tokens already
    in the KV cache), or whose token (b, t) sits at position_ids[b, t] ((B, T) integers).
    """

    def __init__(self, dim, max_positions=2048, base=10000.0, device=None):
        super().__init__()
        if dim % 2:
            raise ValueError(f"RotaryEmbedding: dim must be even, got {dim}")
        self.dim, self.base = int(dim), float(base)
        self._build(max_positions, device or "cpu")

    def _build(self, n, device):
        cos, sin = rope_tables(np.arange(n), self.dim, self.base)
        self.max_positions = n
        self.register_buffer("cos_cached", Tensor(cos, device=device), persistent=False)
        self.register_buffer("sin_cached", Tensor(sin, device=device), persistent=False)

    def _tables(self, seq_len, offset, dtype):
        if offset + seq_len > self.max_positions:
            self._build(max(2 * self.max_positions, offset + seq_len), self.cos_cached.device)
        cos = self.cos_cached[offset : offset + seq_len]
        sin = self.sin_cached[offset : offset + seq_len]
        return cos.to(dtype), sin.to(dtype)  # (T, dim): broadcast over batch and heads

    def rotate(self, x, offset: int = 0, position_ids=None):
        """RoPE on one tensor x (..., T, d) whose first row is at position `offset`, or, with
        `position_ids` (B, T) integers, whose token (b, t) is at position_ids[b, t] (left-padded
        batches: each row its own positions); x is then (B, ..., T, d)."""
        if x.shape[-1] < self.dim:
            raise ValueError(
                f"RotaryEmbedding: input has {x.shape[-1]} features per head, fewer than "
                f"dim={self.dim}"
            )
        if position_ids is None:
            cos, sin = self._tables(x.shape[-2], offset, x.dtype)
        else:
            cos, sin = self._row_tables(position_ids, x)
        if x.shape[-1] == self.dim:
            return x * cos + rotate_half(x) * sin
        x_rot, x_pass = x[..., : self.dim], x[..., self.dim :]
        return cat([x_rot * cos + rotate_half(x_rot) * sin, x_pass], dim=-1)

    def _row_tables(self, position_ids, x):
        """cos, sin (B, 1.., T, dim) gathered per token, broadcasting over x's middle dims."""
        ids = position_ids._array if isinstance(position_ids, Tensor) else position_ids
        ids = np.asarray(ids.get() if hasattr(ids, "get") else ids)
        b, t = x.shape[0], x.shape[-2]
        if x.ndim < 3 or ids.shape != (b, t) or ids.dtype.kind not in "iu":
            raise ValueError(
                f"RotaryEmbedding: position_ids must be (B, T) = ({b}, {t}) integers for x "
                f"{tuple(x.shape)}, got {ids.shape} {ids.dtype}"
            )
        if ids.size and ids.min() < 0:
            raise ValueError(f"RotaryEmbedding: position_ids must be ≥ 0, got {ids.min()}")
        if ids.size and ids.max() >= self.max_positions:
            self._build(max(2 * self.max_positions, int(ids.max()) + 1), self.cos_cached.device)
        shape = (b,) + (1,) * (x.ndim - 3) + (t, self.dim)
        index = Tensor(ids.reshape(-1), device=self.cos_cached.device)
        cos = self.cos_cached[index].reshape(shape)  # (B·T, dim) rows -> (B, 1.., T, dim)
        sin = self.sin_cached[index].reshape(shape)
        return cos.to(x.dtype), sin.to(x.dtype)

    def forward(self, q, k, offset: int = 0, position_ids=None):
        return self.rotate(q, offset, position_ids), self.rotate(k, offset, position_ids)

    def extra_repr(self):
        return f"dim={self.dim}, base={self.base}"
