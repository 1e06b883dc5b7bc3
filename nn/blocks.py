"""Transformer blocks (Vaswani et al. 2017), Post-LN or Pre-LN: the layers our models stack.

`EncoderBlock` and `DecoderBlock` are tinytensor's own (batch first, bool masks with True = may
attend, RMSNorm, gated FFNs, RoPE, a KV cache). PyTorch's `nn.TransformerEncoderLayer` and
`nn.TransformerDecoderLayer`, with their signatures and parameter names, are in `transformer.py`.

    Post-LN (norm_first=False, BERT, BART, the original):
        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(ffn(x)))
    Pre-LN (norm_first=True, GPT-2, T5):
        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(ffn(norm2(x)))

The decoder layer adds cross-attention to the encoder output (`memory`) between the two, with
norm2 and dropout2, and its FFN uses norm3 and dropout3, as `torch.nn.TransformerDecoderLayer`.
A Pre-LN stack needs a final norm after its last layer; that belongs to the model.
"""

from __future__ import annotations

from .attention import Attention
from .dropout import Dropout
from .feedforward import FeedForward
from .module import Module
from .normalization import LayerNorm, RMSNorm


def make_norm(kind: str, d_model: int, eps: float, bias: bool = True, device=None, dtype=None):
    """LayerNorm ("layernorm", with or without bias) or RMSNorm ("rmsnorm")."""
    if kind == "layernorm":
        return LayerNorm(d_model, eps=eps, bias=bias, device=device, dtype=dtype)
    if kind == "rmsnorm":
        return RMSNorm(d_model, eps=eps, device=device, dtype=dtype)
    raise ValueError(f"unknown norm {kind!r}: expected 'layernorm' or 'rmsnorm'")


def _residual(x, sublayer, norm, dropout, norm_first: bool):
    """One residual sub-layer: Pre-LN x + dropout(sublayer(norm(x))), or Post-LN
    norm(x + dropout(sublayer(x)))."""
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


class EncoderBlock(Module):
    """Self-attention and a feed-forward block, each with a residual connection and a norm.

    With `is_causal=True` (and a `cache`) it is also the block of a decoder-only model (GPT).

    Args:
        d_model, n_heads: model width and attention heads.
        d_ff: FFN hidden size (default 4·d_model).
        dropout: on the attention probabilities, inside the FFN and on both residual branches
            (as PyTorch's single `dropout` argument).
        activation: FeedForward activation: relu, gelu, gelu_tanh, silu, geglu, swiglu, ...
        norm_first: Pre-LN (True) or Post-LN (False, PyTorch's default).
        norm: "layernorm" or "rmsnorm"; eps: its epsilon.
        bias: biases in the attention and FFN projections and in LayerNorm.
        n_kv_heads, d_head, scale, rotary: passed to `Attention`.

    Submodules: self_attn (Attention), norm1, ffn (FeedForward), norm2, dropout1,
    dropout2.

    forward(x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=False, cache=None)
        -> (B, T, d_model); the arguments are those of `Attention.forward`.
    """

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff=None,
        dropout=0.1,
        activation="relu",
        norm_first=False,
        norm="layernorm",
        eps=1e-5,
        bias=True,
        n_kv_heads=None,
        d_head=None,
        scale=None,
        rotary=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        factory = dict(device=device, dtype=dtype)
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.norm_first = norm_first
        attention = dict(
            n_kv_heads=n_kv_heads, d_head=d_head, bias=bias, dropout=dropout, scale=scale, **factory
        )
        self.self_attn = Attention(d_model, n_heads, rotary=rotary, **attention)
        self.norm1 = make_norm(norm, d_model, eps, bias, **factory)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout, **factory)
        self.norm2 = make_norm(norm, d_model, eps, bias, **factory)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(
        self, x, *, attn_mask=None, key_mask=None, attn_bias=None, is_causal=False, cache=None
    ):
        def attend(h):
            return self.self_attn(
                h,
                attn_mask=attn_mask,
                key_mask=key_mask,
                attn_bias=attn_bias,
                is_causal=is_causal,
                cache=cache,
            )

        x = _residual(x, attend, self.norm1, self.dropout1, self.norm_first)
        return _residual(x, self.ffn, self.norm2, self.dropout2, self.norm_first)

    def extra_repr(self):
        return f"norm_first={self.norm_first}"


class DecoderBlock(Module):
    """Causal self-attention, cross-attention to the encoder output, and a feed-forward block.

    Args: as `EncoderBlock`; `rotary` applies to the self-attention only, and
    `d_context` is the encoder output's size (default d_model).

    Submodules: self_attn, norm1, cross_attn, norm2, ffn, norm3, dropout1..3.

    forward(x, memory, *, self_attn_mask=None, self_key_mask=None, self_attn_bias=None,
            memory_key_mask=None, memory_attn_bias=None, is_causal=True, cache=None)
        x: (B, T, d_model) decoder states; memory: (B, S, d_context) encoder output.
        self_*: masks and bias of the self-attention (see `Attention.forward`).
        memory_key_mask: (B, S) bool, True = real encoder token.
        is_causal: causal self-attention (default True: a decoder).
        cache: a `KVCache` for both attentions (the encoder K/V are computed once).
        -> (B, T, d_model)
    """

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff=None,
        dropout=0.1,
        activation="relu",
        norm_first=False,
        norm="layernorm",
        eps=1e-5,
        bias=True,
        n_kv_heads=None,
        d_head=None,
        scale=None,
        rotary=None,
        d_context=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        factory = dict(device=device, dtype=dtype)
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.norm_first = norm_first
        attention = dict(
            n_kv_heads=n_kv_heads, d_head=d_head, bias=bias, dropout=dropout, scale=scale, **factory
        )
        self.self_attn = Attention(d_model, n_heads, rotary=rotary, **attention)
        self.norm1 = make_norm(norm, d_model, eps, bias, **factory)
        self.cross_attn = Attention(d_model, n_heads, d_context=d_context, **attention)
        self.norm2 = make_norm(norm, d_model, eps, bias, **factory)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout, **factory)
        self.norm3 = make_norm(norm, d_model, eps, bias, **factory)
        self.dropout1, self.dropout2, self.dropout3 = (
            Dropout(dropout),
            Dropout(dropout),
            Dropout(dropout),
        )

    def forward(
        self,
        x,
        memory,
        *,
        self_attn_mask=None,
        self_key_mask=None,
        self_attn_bias=None,
        memory_key_mask=None,
        memory_attn_bias=None,
        is_causal=True,
        cache=None,
    ):
        def self_attend(h):
            return self.self_attn(
                h,
                attn_mask=self_attn_mask,
                key_mask=self_key_mask,
                attn_bias=self_attn_bias,
                is_causal=is_causal,
                cache=cache,
            )

        def cross_attend(h):
            return self.cross_attn(
                h, memory, key_mask=memory_key_mask, attn_bias=memory_attn_bias, cache=cache
            )

        x = _residual(x, self_attend, self.norm1, self.dropout1, self.norm_first)
        x = _residual(x, cross_attend, self.norm2, self.dropout2, self.norm_first)
        return _residual(x, self.ffn, self.norm3, self.dropout3, self.norm_first)

    def extra_repr(self):
        return f"norm_first={self.norm_first}"
