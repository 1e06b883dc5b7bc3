"""Multi-head latent attention (MLA; DeepSeek-AI 2024, "DeepSeek-V2", section 2.1).

Keys and values come from one low-rank latent per token, and only that latent is cached:

    c_t      = RMSNorm(W_DKV·x_t)                       (d_c)       the cached latent
    k_t^R    = RoPE(W_KR·x_t)                           (d_R)       cached, shared by all heads
    k_{t,h}  = [W_UK,h·c_t ; k_t^R],   v_{t,h} = W_UV,h·c_t          rebuilt from the cache
    q_{t,h}  = [q^C_{t,h} ; RoPE(q^R_{t,h})],   [q^C ; q^R] = W_Q·x_t
    o_{t,h}  = softmax(q_{t,h}·K_hᵀ / √(d_h + d_R))·V_h,   y_t = W_O·[o_{t,1} .. o_{t,H}]

RoPE is "decoupled": it acts on a separate d_R-dim part, because a rotation between W_UK and the
query would stop W_UK from being absorbed into W_Q. The cache per token and layer is
d_c + d_R numbers, against 2·H·d_h for MHA.

Absorption (`absorb=True`): q^C_h·(W_UK,h·c) = (W_UK,hᵀ·q^C_h)·c, and the values' up-projection
commutes with the softmax average, so attention runs directly on the latents, as multi-query
attention with one shared "head" [c ; k^R] of size d_c + d_R (values c), followed by W_UV,h per
head. Same numbers, no per-head K/V ever materialized: the decoding path of the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinytensor.ops import cat, scaled_dot_product_attention
from tinytensor.tensor import Tensor

from ..attention import Attention
from ..linear import Linear
from ..module import Module
from ..normalization import RMSNorm
from ..rotary import RotaryEmbedding
from .state import set_variant_state, variant_state, variant_tokens


@dataclass
class MLACacheEntry:
    """What MLA caches per layer: the latents and the RoPE key part, nothing per head."""

    latent: Tensor  # (B, T, d_c)
    k_rope: Tensor  # (B, 1, T, d_R): one head, shared by all query heads

    def arrays(self):
        return (self.latent, self.k_rope)


class MultiHeadLatentAttention(Module):
    """Causal self-attention with a low-rank latent KV cache and decoupled RoPE.

    Args:
        d_model: input/output width.
        n_heads: H.
        kv_latent_dim: d_c, the cached latent per token (DeepSeek-V2: 512 for d_model 5120).
        rope_dim: d_R, the RoPE part of queries and keys (even; DeepSeek-V2: 64).
        d_head: d_h of the non-RoPE part (default d_model // n_heads).
        bias: biases on W_Q, W_DKV, W_KR and W_O (never on W_UK, W_UV: absorption needs them
            linear).
        dropout: on the attention probabilities (non-absorbed path, training only).
        absorb: compute attention on the latents (see the module docstring).
        max_positions, rope_base: of the RoPE tables.

    Parameters: q_proj (H·(d_h+d_R), d_model), kv_down = W_DKV (d_c, d_model), kv_norm,
    k_up = W_UK (H·d_h, d_c), v_up = W_UV (H·d_h, d_c), k_rope_proj = W_KR (d_R, d_model),
    out_proj (d_model, H·d_h).

    forward(x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=True, cache=None)
        as `Attention.forward` (self-attention only). With a cache the new latents
        and RoPE keys are appended and positions continue at the cached length.

    Example:
        >>> mla = MultiHeadLatentAttention(32, n_heads=4, kv_latent_dim=8, rope_dim=4)
        >>> mla(tt.randn(2, 5, 32)).shape
        (2, 5, 32)
    """

    def __init__(
        self,
        d_model,
        n_heads,
        kv_latent_dim,
        rope_dim=8,
        d_head=None,
        bias=True,
        dropout=0.0,
        absorb=False,
        max_positions=2048,
        rope_base=10000.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        d_head = d_model // n_heads if d_head is None else d_head
        if d_head < 1 or kv_latent_dim < 1:
            raise ValueError(
                f"MultiHeadLatentAttention: d_head={d_head} and kv_latent_dim={kv_latent_dim} "
                "must be positive"
            )
        if rope_dim < 2 or rope_dim % 2:
            raise ValueError(f"MultiHeadLatentAttention: rope_dim must be even, got {rope_dim}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_head
        self.kv_latent_dim, self.rope_dim = kv_latent_dim, rope_dim
        self.dropout, self.absorb = float(dropout), bool(absorb)
        f = dict(device=device, dtype=dtype)
        self.q_proj = Linear(d_model, n_heads * (d_head + rope_dim), bias=bias, **f)
        self.kv_down = Linear(d_model, kv_latent_dim, bias=bias, **f)
        self.kv_norm = RMSNorm(kv_latent_dim, eps=1e-6, **f)  # DeepSeek-V2's eps
        self.k_up = Linear(kv_latent_dim, n_heads * d_head, bias=False, **f)
        self.v_up = Linear(kv_latent_dim, n_heads * d_head, bias=False, **f)
        self.k_rope_proj = Linear(d_model, rope_dim, bias=bias, **f)
        self.out_proj = Linear(n_heads * d_head, d_model, bias=bias, **f)
        self.rotary = RotaryEmbedding(rope_dim, max_positions, rope_base, device=device)

    def forward(
        self, x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=True, cache=None
    ):
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(
                f"MultiHeadLatentAttention: x must be (B, T, {self.d_model}), got {got}"
            )
        b, t, _ = x.shape
        h, dh, dr = self.n_heads, self.d_head, self.rope_dim
        offset = variant_tokens(cache, self) if cache is not None else 0
        q = self.q_proj(x).reshape(b, t, h, dh + dr).transpose(1, 2)  # (B, H, T, dh+dR)
        q_nope, q_rope = q[..., :dh], self.rotary.rotate(q[..., dh:], offset)
        latent = self.kv_norm(self.kv_down(x))  # (B, T, d_c)
        k_rope = self.k_rope_proj(x).reshape(b, 1, t, dr)  # (B, 1, T, dR): one shared head
        k_rope = self.rotary.rotate(k_rope, offset)
        if cache is not None:
            entry = variant_state(cache, self)
            if entry is not None:
                latent = cat([entry.latent, latent], dim=1)  # (B, Tk, d_c)
                k_rope = cat([entry.k_rope, k_rope], dim=2)  # (B, 1, Tk, dR)
            set_variant_state(cache, self, MLACacheEntry(latent, k_rope), t)
        t_k = latent.shape[1]
        mask = Attention._combine_masks(attn_mask, key_mask, attn_bias, b, t_k)
        scale = 1.0 / math.sqrt(dh + dr)
        if self.absorb:
            out = self._attend_absorbed(q_nope, q_rope, latent, k_rope, mask, is_causal, scale)
        else:
            k_nope = self.k_up(latent).reshape(b, t_k, h, dh).transpose(1, 2)  # (B, H, Tk, dh)
            v = self.v_up(latent).reshape(b, t_k, h, dh).transpose(1, 2)  # (B, H, Tk, dh)
            k = cat([k_nope, k_rope.expand(b, h, t_k, dr)], dim=-1)  # (B, H, Tk, dh+dR)
            out = scaled_dot_product_attention(
                cat([q_nope, q_rope], dim=-1),
                k,
                v,
                attn_mask=mask,
                dropout_p=self.dropout if self.training else 0.0,
                is_causal=is_causal,
                scale=scale,
            )  # (B, H, T, dh)
        out = out.transpose(1, 2).reshape(b, t, h * dh)  # (B, T, H·dh)
        return self.out_proj(out)

    def _attend_absorbed(self, q_nope, q_rope, latent, k_rope, mask, is_causal, scale):
        """Attention on the latents: W_UK folded into the queries, W_UV applied after."""
        b, t_k = latent.shape[0], latent.shape[1]
        h, dh, dc = self.n_heads, self.d_head, self.kv_latent_dim
        w_uk = self.k_up.weight.reshape(h, dh, dc)  # k_nope_h = W_UK,h · c
        w_uv = self.v_up.weight.reshape(h, dh, dc)  # v_h = W_UV,h · c
        q_latent = q_nope @ w_uk  # (B, H, T, d_c): W_UK,hᵀ q_h
        keys = cat([latent.reshape(b, 1, t_k, dc), k_rope], dim=-1)  # (B, 1, Tk, d_c+dR)
        values = latent.reshape(b, 1, t_k, dc)  # (B, 1, Tk, d_c)
        out_latent = scaled_dot_product_attention(
            cat([q_latent, q_rope], dim=-1),
            keys,
            values,
            attn_mask=mask,
            is_causal=is_causal,
            scale=scale,
            enable_gqa=True,
        )  # (B, H, T, d_c)
        return out_latent @ w_uv.transpose(1, 2)  # (B, H, T, dh)

    @staticmethod
    def cache_numbers_per_token(kv_latent_dim, rope_dim) -> int:
        """Numbers cached per token and layer: d_c + d_R."""
        return kv_latent_dim + rope_dim

    def extra_repr(self):
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"kv_latent_dim={self.kv_latent_dim}, rope_dim={self.rope_dim}, absorb={self.absorb}"
        )
