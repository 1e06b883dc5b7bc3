"""Builds the self-attention module of a decoder block from a variant name.

    attention   module                         KV cache per token and layer (numbers)
    "mha"       Attention             2·H·d_h
    "gqa"       Attention(H_kv)       2·H_kv·d_h
    "mqa"       Attention(H_kv = 1)   2·d_h
    "mla"       MultiHeadLatentAttention       d_c + d_R
    "sliding"   SlidingWindowAttention         2·H_kv·d_h, for the last w tokens only
    "linear"    LinearAttention                none: a state of H·(d_h² + d_h) per sequence

Position options: "learned" (absolute embeddings, added by the model), "rope" (RotaryEmbedding
on q and k; MLA always has its own decoupled RoPE) and "alibi" (a score bias, passed by the model;
not for sliding-window or linear attention, whose caches have no full score matrix).
"""

from __future__ import annotations

from ..attention import Attention
from .linear_attention import LinearAttention
from .mla import MultiHeadLatentAttention
from .sliding_window import SlidingWindowAttention

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla", "sliding", "linear")
POSITION_KINDS = ("learned", "rope", "alibi")


def resolve_kv_heads(kind, n_heads, n_kv_heads):
    """H_kv for mha (H), gqa (given, dividing H), mqa (1), sliding (given or H)."""
    if kind == "mha":
        if n_kv_heads not in (None, n_heads):
            raise ValueError(
                f"attention='mha' has n_kv_heads = n_heads = {n_heads}, got n_kv_heads="
                f"{n_kv_heads}; use attention='gqa'"
            )
        return n_heads
    if kind == "mqa":
        return 1
    if kind == "gqa" and n_kv_heads is None:
        raise ValueError("attention='gqa' needs n_kv_heads (a divisor of n_heads)")
    return n_heads if n_kv_heads is None else n_kv_heads


def check_attention_options(kind, position):
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention {kind!r}: expected one of {ATTENTION_KINDS}")
    if position not in POSITION_KINDS:
        raise ValueError(f"unknown position {position!r}: expected one of {POSITION_KINDS}")
    if position == "alibi" and kind in ("sliding", "linear"):
        raise ValueError(f"position='alibi' is not supported with attention={kind!r}")
    if position == "rope" and kind == "linear":
        raise ValueError(
            "position='rope' is not supported with attention='linear' (the rotation would "
            "break the positivity of φ(q)·φ(k)); use 'learned'"
        )


def make_attention(
    kind,
    d_model,
    n_heads,
    *,
    n_kv_heads=None,
    kv_latent_dim=None,
    rope_dim=None,
    window=None,
    rotary=None,
    dropout=0.0,
    bias=True,
    max_positions=2048,
):
    """The self-attention module for `kind` (see the module docstring).

    Args:
        kind: one of ATTENTION_KINDS.
        n_kv_heads: for gqa (required) and sliding (default n_heads).
        kv_latent_dim, rope_dim: MLA's d_c (default d_model // 4) and d_R (default
            d_head // 2, rounded to even).
        window: for sliding (required).
        rotary: a shared `RotaryEmbedding` for mha/gqa/mqa/sliding, or None.
    """
    check_attention_options(kind, "learned")
    if kind in ("mha", "gqa", "mqa"):
        h_kv = resolve_kv_heads(kind, n_heads, n_kv_heads)
        return Attention(
            d_model, n_heads, n_kv_heads=h_kv, bias=bias, dropout=dropout, rotary=rotary
        )
    if kind == "sliding":
        if window is None:
            raise ValueError("attention='sliding' needs window (≥ 1)")
        return SlidingWindowAttention(
            d_model,
            n_heads,
            window,
            n_kv_heads=resolve_kv_heads(kind, n_heads, n_kv_heads),
            bias=bias,
            dropout=dropout,
            rotary=rotary,
        )
    if kind == "mla":
        d_head = d_model // n_heads
        rope_dim = rope_dim if rope_dim is not None else max(2, (d_head // 2) // 2 * 2)
        return MultiHeadLatentAttention(
            d_model,
            n_heads,
            kv_latent_dim or max(1, d_model // 4),
            rope_dim=rope_dim,
            bias=bias,
            dropout=dropout,
            max_positions=max_positions,
        )
    return LinearAttention(d_model, n_heads, bias=bias)
