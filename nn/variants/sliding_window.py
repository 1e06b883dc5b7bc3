"""Sliding-window attention (Longformer's local attention; Mistral 7B's SWA).

Each query attends to the last w keys, itself included:

    allowed(i, j) = (j ≤ i) and (i - j < w)

so one layer's receptive field is w tokens (a stack of L layers reaches L·(w-1)). At decode time
nothing older than w-1 steps is ever read again, so the KV cache is a ring buffer of exactly w
slots: position p lives in slot p mod w, overwriting position p - w. Memory per layer is
2·B·H_kv·w·d_h whatever the length of the sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinytensor.backend import get_array_module
from tinytensor.ops import cat, scaled_dot_product_attention
from tinytensor.tensor import Tensor

from ..attention import Attention
from ..linear import Linear
from ..module import Module
from ..rotary import RotaryEmbedding
from .state import set_variant_state, variant_state, variant_tokens


def sliding_window_mask(query_positions, key_positions, window):
    """Bool (Nq, Nk): key position j is visible from query position i iff 0 ≤ i - j < window.
    Negative key positions mark empty slots and are never visible."""
    distance = np.asarray(query_positions)[:, None] - np.asarray(key_positions)[None, :]
    valid = np.asarray(key_positions)[None, :] >= 0
    return valid & (distance >= 0) & (distance < window)


@dataclass
class RingKVCache:
    """A ring buffer of `window` slots per layer: keys and values after RoPE (detached arrays),
    the absolute position held by each slot (-1 = empty) and, per batch row, whether that key
    was a real token (not padding)."""

    k: object  # (B, H_kv, w, d_h) array
    v: object  # (B, H_kv, w, d_h) array
    positions: np.ndarray  # (w,) ints, -1 where empty
    valid: object  # (B, w) bool array

    def arrays(self):
        return (self.k, self.v)

    @property
    def window(self) -> int:
        return self.positions.shape[0]

    def write(self, k, v, positions, valid):
        """Stores the new steps (B, H_kv, T, d) at slots positions mod w (only the last w of
        them survive; NOTE: later writes overwrite earlier ones, as the ring must)."""
        keep = slice(max(0, len(positions) - self.window), None)
        slots = np.asarray(positions[keep]) % self.window
        self.k[:, :, slots] = k[:, :, keep]
        self.v[:, :, slots] = v[:, :, keep]
        self.positions[slots] = positions[keep]
        self.valid[:, slots] = valid[:, keep]


class SlidingWindowAttention(Module):
    """Causal self-attention restricted to the last `window` positions, with a ring-buffer cache.

    Args:
        d_model, n_heads, n_kv_heads, d_head, bias, dropout, rotary: as `Attention`
            (the same parameter names: q_proj, k_proj, v_proj, out_proj).
        window: w ≥ 1, the keys each query sees (itself and the w - 1 before it).

    forward(x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=True, cache=None)
        as `Attention.forward`; attention is always causal. With a cache, key_mask
        (B, T_total) covers every token so far (only its last T columns are read), and
        attn_bias / a float attn_mask are refused: their columns would not match the ring.

    Example:
        >>> swa = SlidingWindowAttention(32, n_heads=4, window=3)
        >>> swa(tt.randn(2, 7, 32)).shape
        (2, 7, 32)
    """

    def __init__(
        self,
        d_model,
        n_heads,
        window,
        n_kv_heads=None,
        d_head=None,
        bias=True,
        dropout=0.0,
        rotary: RotaryEmbedding | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if int(window) < 1:
            raise ValueError(f"SlidingWindowAttention: window must be ≥ 1, got {window}")
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        d_head = d_model // n_heads if d_head is None else d_head
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(
                f"SlidingWindowAttention: n_heads={n_heads} must be a multiple of n_kv_heads="
                f"{n_kv_heads}"
            )
        self.d_model, self.n_heads, self.n_kv_heads, self.d_head = (
            d_model,
            n_heads,
            n_kv_heads,
            d_head,
        )
        self.window, self.dropout, self.rotary = int(window), float(dropout), rotary
        f = dict(device=device, dtype=dtype)
        self.q_proj = Linear(d_model, n_heads * d_head, bias=bias, **f)
        self.k_proj = Linear(d_model, n_kv_heads * d_head, bias=bias, **f)
        self.v_proj = Linear(d_model, n_kv_heads * d_head, bias=bias, **f)
        self.out_proj = Linear(n_heads * d_head, d_model, bias=bias, **f)

    def _heads(self, x, n):
        b, t, _ = x.shape
        return x.reshape(b, t, n, self.d_head).transpose(1, 2)  # (B, n, T, hs)

    def forward(
        self, x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=True, cache=None
    ):
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"SlidingWindowAttention: x must be (B, T, {self.d_model}), got {got}")
        b, t, _ = x.shape
        offset = variant_tokens(cache, self) if cache is not None else 0
        q = self._heads(self.q_proj(x), self.n_heads)  # (B, H, T, hs)
        k = self._heads(self.k_proj(x), self.n_kv_heads)  # (B, H_kv, T, hs)
        v = self._heads(self.v_proj(x), self.n_kv_heads)
        if self.rotary is not None:
            q, k = self.rotary(q, k, offset)
        q_pos = np.arange(offset, offset + t)
        if cache is None:
            window = Tensor(sliding_window_mask(q_pos, q_pos, self.window), device=x.device)
            if attn_mask is not None and attn_mask.dtype.kind == "b":
                window = window & attn_mask
            elif attn_mask is not None:
                attn_bias = attn_mask if attn_bias is None else attn_bias + attn_mask
            mask = Attention._combine_masks(window, key_mask, attn_bias, b, t)
            out = self._attend(q, k, v, mask)
        else:
            out = self._attend_cached(q, k, v, q_pos, attn_mask, key_mask, attn_bias, cache)
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head)  # (B, T, H·hs)
        return self.out_proj(out)

    def _attend(self, q, k, v, mask):
        return scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            enable_gqa=self.n_kv_heads != self.n_heads,
        )

    def _attend_cached(self, q, k, v, q_pos, attn_mask, key_mask, attn_bias, cache):
        """Attends to [ring slots ; new steps], then writes the new steps into the ring."""
        if attn_bias is not None or (attn_mask is not None and attn_mask.dtype.kind != "b"):
            raise ValueError(
                "SlidingWindowAttention: a float attn_bias/attn_mask cannot be used with a cache "
                "(its key columns do not follow the ring buffer's slots)"
            )
        b, t = q.shape[0], q.shape[2]
        xp = get_array_module(k._array)
        ring = variant_state(cache, self)
        if ring is None:
            shape = (b, self.n_kv_heads, self.window, self.d_head)
            ring = RingKVCache(
                xp.zeros(shape, k.dtype),
                xp.zeros(shape, k.dtype),
                np.full(self.window, -1),
                xp.zeros((b, self.window), bool),
            )
        new_valid = xp.ones((b, t), bool)
        if key_mask is not None:
            if key_mask.ndim != 2 or key_mask.shape[0] != b or key_mask.shape[1] < t:
                raise ValueError(
                    f"SlidingWindowAttention: key_mask must be (B={b}, T_total ≥ {t}), got "
                    f"{tuple(key_mask.shape)}"
                )
            new_valid = key_mask._array[:, -t:].astype(bool)
        keys = cat([Tensor(ring.k), k], dim=2)  # (B, H_kv, w + T, hs)
        values = cat([Tensor(ring.v), v], dim=2)
        k_pos = np.concatenate([ring.positions, q_pos])
        allowed = xp.asarray(sliding_window_mask(q_pos, k_pos, self.window))  # (T, w + T)
        key_ok = xp.concatenate([ring.valid, new_valid], axis=1)[:, None, None, :]
        mask = Tensor(allowed[None, None] & key_ok)  # (B, 1, T, w + T)
        if attn_mask is not None:
            if tuple(attn_mask.shape[-2:]) != (t, t):
                raise ValueError(
                    "SlidingWindowAttention: with a cache, a bool attn_mask must cover only the "
                    f"new steps, (..., {t}, {t}); got {tuple(attn_mask.shape)}"
                )
            old = Tensor(xp.ones(attn_mask.shape[:-1] + (self.window,), bool))
            mask = mask & cat([old, attn_mask], dim=-1)
        out = self._attend(q, keys, values, mask)
        ring.write(k._array, v._array, q_pos, new_valid)
        set_variant_state(cache, self, ring, t)
        return out

    @staticmethod
    def cache_numbers_per_layer(batch, n_kv_heads, d_head, window) -> int:
        """2·B·H_kv·w·d_h numbers: the ring, whatever the sequence length."""
        return 2 * batch * n_kv_heads * window * d_head

    def extra_repr(self):
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, "
            f"d_head={self.d_head}, window={self.window}"
        )
