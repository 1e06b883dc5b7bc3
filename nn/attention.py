"""`Attention`: the one attention module of every model here (GPT, BERT, T5, BART).

It is tinytensor's own layer (batch first, bool masks with True = may attend, GQA/MQA, RoPE, a KV
cache, separate q/k/v projections). PyTorch's `nn.MultiheadAttention`, with its signature and
packed `in_proj_weight`, is `multihead_attention.py`.

    q = x·Wq, k = c·Wk, v = c·Wv      (c = x for self-attention, the encoder output for cross)
    heads: q (B, H, Tq, d), k, v (B, H_kv, Tk, d)        (optionally RoPE on q and k)
    o_h = softmax(scale·q_h·k_hᵀ + bias, masked)·v_h     (F.scaled_dot_product_attention)
    y = concat(o_1..o_H)·Wo

Masks follow one convention everywhere: bool, True = may attend. A float `attn_bias` (T5's
position bias, ALiBi) is added to the scores and receives a gradient.
"""

from __future__ import annotations

from tinytensor.ops import merge_heads, scaled_dot_product_attention, split_heads
from tinytensor.tensor import Tensor

from .kv_cache import KVCache
from .linear import Linear
from .module import Module
from .rotary import RotaryEmbedding


class Attention(Module):
    """Multi-head self- or cross-attention with GQA/MQA, RoPE, masks, bias and a KV cache.

    Args:
        d_model: size of the input x and of the output.
        n_heads: query heads H.
        n_kv_heads: key/value heads (default H). H_kv < H is grouped-query attention (H_kv = 1:
            multi-query); H must be a multiple of H_kv. Each K/V head serves H/H_kv query heads.
        d_head: size of each head (default d_model // n_heads; T5 sets it apart as d_kv).
        bias: biases on the four projections (GPT-2, BERT, BART: True; T5, Llama: False).
        dropout: dropout on the attention probabilities, in training only.
        scale: factor on q·kᵀ; None means 1/√d_head (T5 uses 1.0: its init absorbs it).
        rotary: a `RotaryEmbedding` applied to q and k of self-attention (may be shared by all
            layers), or None.
        d_context: size of the cross-attention context (default d_model).

    Parameters (for mapping checkpoints):
        q_proj (H·d_head, d_model), k_proj and v_proj (H_kv·d_head, d_context),
        out_proj (d_model, H·d_head); each with a bias when `bias`.

    forward(x, context=None, *, attn_mask=None, key_mask=None, attn_bias=None,
            is_causal=False, cache=None) -> (B, Tq, d_model)

        x: (B, Tq, d_model), the queries (and keys/values when `context` is None).
        context: (B, Tk, d_context) for cross-attention (the encoder output).
        attn_mask: bool, True = may attend, broadcastable to (B, H, Tq, Tk); a float mask is
            added to the scores (as PyTorch).
        key_mask: (B, Tk) bool, True = a real key, False = padding (HF's attention_mask
            convention; NOTE: the opposite of PyTorch's key_padding_mask). With a cache it
            covers all keys, cached and new.
        attn_bias: float, broadcastable to (B, H, Tq, Tk), added to the scores; differentiable.
        is_causal: query i may not see later keys. With Tq < Tk (a KV cache) the mask is
            aligned bottom-right: the last query sees every key.
        cache: a `KVCache`. Self-attention appends this call's K/V and attends to all cached
            steps (RoPE then starts at the cached length); cross-attention projects `context`
            on the first call and reuses those K/V afterwards (later calls may then pass
            context=None). The result equals running the whole sequence at once.

    Example:
        >>> attn = nn.Attention(d_model=32, n_heads=4, n_kv_heads=2)
        >>> attn(tt.randn(2, 5, 32), is_causal=True).shape
        (2, 5, 32)
    """

    def __init__(
        self,
        d_model,
        n_heads,
        n_kv_heads=None,
        d_head=None,
        bias=True,
        dropout=0.0,
        scale=None,
        rotary: RotaryEmbedding | None = None,
        d_context=None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(
                    f"Attention: d_model={d_model} is not divisible by n_heads="
                    f"{n_heads}; pass d_head explicitly"
                )
            d_head = d_model // n_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(
                f"Attention: n_heads={n_heads} must be a multiple of n_kv_heads={n_kv_heads}"
            )
        if rotary is not None and not isinstance(rotary, RotaryEmbedding):
            raise TypeError("Attention: rotary must be a RotaryEmbedding or None")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_head = (
            d_model,
            n_heads,
            n_kv_heads,
            d_head,
        )
        self.dropout, self.scale = float(dropout), scale
        d_context = d_model if d_context is None else d_context
        factory = dict(device=device, dtype=dtype)
        self.q_proj = Linear(d_model, n_heads * d_head, bias=bias, **factory)
        self.k_proj = Linear(d_context, n_kv_heads * d_head, bias=bias, **factory)
        self.v_proj = Linear(d_context, n_kv_heads * d_head, bias=bias, **factory)
        self.out_proj = Linear(n_heads * d_head, d_model, bias=bias, **factory)
        self.rotary = rotary

    def _heads(self, x, n_heads):
        return split_heads(x, n_heads)  # (B, T, nh·hs) -> (B, nh, T, hs)

    def forward(
        self,
        x,
        context=None,
        *,
        attn_mask=None,
        key_mask=None,
        attn_bias=None,
        is_causal=False,
        cache: KVCache | None = None,
    ):
        if not isinstance(x, Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"Attention: x must be (B, T, {self.d_model}), got {got}")
        b = x.shape[0]
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, Tq, hs)
        cached_cross = cache.cross(self) if cache is not None else None
        if context is None and cached_cross is None:  # self-attention
            k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, H_kv, Tq, hs)
            v = split_heads(self.v_proj(x), self.n_kv_heads)
            if self.rotary is not None:
                offset = cache.length(self) if cache is not None else 0
                q, k = self.rotary(q, k, offset)
            if cache is not None:
                k, v = cache.append(self, k, v)  # (B, H_kv, Tcached + Tq, hs)
        else:  # cross-attention: keys and values from the context
            if cached_cross is not None:
                k, v = cached_cross
            else:
                if context.ndim != 3 or context.shape[0] != b:
                    raise ValueError(
                        f"Attention: context must be (B={b}, Tk, d_context), got "
                        f"{tuple(context.shape)}"
                    )
                k = split_heads(self.k_proj(context), self.n_kv_heads)  # (B, H_kv, Tk, hs)
                v = split_heads(self.v_proj(context), self.n_kv_heads)
                if cache is not None:
                    cache.set_cross(self, k, v)
        mask = self._combine_masks(attn_mask, key_mask, attn_bias, b, k.shape[-2])
        out = scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            scale=self.scale,
            enable_gqa=self.n_kv_heads != self.n_heads,
        )  # (B, H, Tq, hs)
        return self.out_proj(merge_heads(out))  # (B, Tq, H·hs)

    @staticmethod
    def _combine_masks(attn_mask, key_mask, attn_bias, batch, t_k):
        """One mask for scaled_dot_product_attention: bool (True = attend) when there is no
        float part, else a float bias with -inf where a bool part forbids."""
        allowed, bias = None, attn_bias
        if attn_mask is not None:
            if attn_mask.dtype.kind == "f":
                bias = attn_mask if bias is None else bias + attn_mask
            elif attn_mask.dtype.kind == "b":
                allowed = attn_mask
            else:
                raise TypeError(
                    f"Attention: attn_mask must be bool (True = attend) or float, got "
                    f"{attn_mask.dtype}"
                )
        if key_mask is not None:
            if key_mask.dtype.kind != "b" or tuple(key_mask.shape) != (batch, t_k):
                raise ValueError(
                    f"Attention: key_mask must be bool of shape (B, Tk) = "
                    f"({batch}, {t_k}), got {key_mask.dtype} {tuple(key_mask.shape)}"
                )
            keys = key_mask.reshape(batch, 1, 1, t_k)  # broadcast over heads and queries
            allowed = keys if allowed is None else allowed & keys
        if bias is None:
            return allowed
        if allowed is None:
            return bias
        # NOTE: -inf, not a large negative number: a fully masked row then gives zeros (the
        # op's rule), and masked positions get exactly zero probability and gradient.
        return bias.masked_fill(~allowed, float("-inf"))

    def extra_repr(self):
        parts = [f"d_model={self.d_model}", f"n_heads={self.n_heads}"]
        if self.n_kv_heads != self.n_heads:
            parts.append(f"n_kv_heads={self.n_kv_heads}")
        parts.append(f"d_head={self.d_head}")
        if self.scale is not None:
            parts.append(f"scale={self.scale}")
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        return ", ".join(parts)
