"""`MultiheadAttention`: PyTorch's `torch.nn.MultiheadAttention`, same signature and parameters.

    q = query·W_qᵀ + b_q,  k = key·W_kᵀ + b_k,  v = value·W_vᵀ + b_v
    head h: o_h = softmax(q_h·k_hᵀ/√d_head + mask)·v_h
    out = concat(o_1..o_H)·W_oᵀ + b_o                    (out_proj)

W_q, W_k, W_v are the three row blocks of one packed `in_proj_weight` (3E, E) when key and value
have the query's size, and separate `q_proj_weight`, `k_proj_weight` (E, kdim), `v_proj_weight`
(E, vdim) when they do not, so a PyTorch state_dict loads as it is. Masks follow PyTorch's
convention, the opposite of tinytensor's own `nn.Attention`: in a bool mask True means "may NOT
attend" (and, in key_padding_mask, "is padding"); a float mask is added to the scores.
"""

from __future__ import annotations

import math

from tinytensor.creation import empty, zeros
from tinytensor.ops import cat, dropout, linear, scaled_dot_product_attention, softmax
from tinytensor.ops._checks import check_int
from tinytensor.tensor import Tensor

from . import init
from .linear import Linear
from .module import Module
from .parameter import Parameter


def _check_mask_dtype(mask, name):
    if mask is not None and mask.dtype.kind not in "bf":
        raise TypeError(
            f"MultiheadAttention.forward: {name} must be bool (True = not allowed) or float "
            f"(added to the scores), got {mask.dtype}"
        )


def _pad_last(mask, value):
    """`mask` with one more column at the end (for the key added by add_bias_kv/add_zero_attn):
    False for a bool mask, `value` (0) for a float one."""
    column = zeros(*mask.shape[:-1], 1, dtype=mask.dtype, device=mask.device)
    return cat([mask, column + value if mask.dtype.kind == "f" else column], dim=-1)


def _merge_masks(attn_mask, key_padding_mask, dtype):
    """One mask in scaled_dot_product_attention's convention: bool (True = may attend) when
    both parts are bool, else a float mask added to the scores (-inf where a bool part
    forbids), as PyTorch merges them."""
    if key_padding_mask is not None:
        n, s = key_padding_mask.shape
        key_padding_mask = key_padding_mask.reshape(n, 1, 1, s)  # over heads and queries
    parts = [m for m in (attn_mask, key_padding_mask) if m is not None]
    if not parts:
        return None
    if all(m.dtype.kind == "b" for m in parts):
        blocked = parts[0] if len(parts) == 1 else parts[0] | parts[1]
        return ~blocked
    total = None
    for m in parts:
        if m.dtype.kind == "b":  # NOTE: -inf, as PyTorch: masked keys get exactly zero
            m = zeros(*m.shape, dtype=dtype, device=m.device).masked_fill(m, float("-inf"))
        total = m if total is None else total + m
    return total


def _as_score_bias(mask, dtype):
    """A `_merge_masks` result as a term added to the scores (0 where there is no mask)."""
    if mask is None:
        return 0.0
    if mask.dtype.kind == "f":
        return mask
    return zeros(*mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


class MultiheadAttention(Module):
    """Multi-head attention exactly as `torch.nn.MultiheadAttention` (Vaswani et al. 2017).

    Args:
        embed_dim: E, the size of query and of the output.
        num_heads: H; E must be a multiple of H (each head has E // H features).
        dropout: dropout on the attention probabilities (training only).
        bias: biases on the input projections (`in_proj_bias`, 3E) and on `out_proj`.
        add_bias_kv: learn `bias_k`, `bias_v` (1, 1, E): one extra key and value appended to
            every sequence.
        add_zero_attn: append one all-zero key and value per head (after the projections).
        kdim, vdim: sizes of key and value (default E); when either differs from E the
            projections are separate Parameters `q_proj_weight`, `k_proj_weight`,
            `v_proj_weight` instead of one `in_proj_weight`.
        batch_first: inputs and output are (N, L, E) instead of PyTorch's default (L, N, E).

    Parameters: in_proj_weight (3E, E) or q/k/v_proj_weight; in_proj_bias (3E,); out_proj
    (a Linear E -> E); bias_k, bias_v. Initialized as PyTorch: Xavier-uniform projections, zero
    biases.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
            average_attn_weights=True, is_causal=False) -> (attn_output, attn_weights)

        query (L, N, E), key (S, N, kdim), value (S, N, vdim); (N, L, E)... with batch_first;
            unbatched (L, E), (S, kdim), (S, vdim) also work.
        key_padding_mask: (N, S), bool (True = padding, ignored) or float (added).
        attn_mask: (L, S) or (N·H, L, S), bool (True = not allowed) or float (added).
        need_weights: also return the attention probabilities (then computed explicitly;
            without them the fused `scaled_dot_product_attention` runs).
        average_attn_weights: return the weights averaged over heads (N, L, S) instead of
            per head (N, H, L, S).
        is_causal: a hint that attn_mask is the causal mask (which must still be given, as
            in PyTorch); the fused path then applies the causal rule itself.

    Returns (attn_output, attn_weights): attn_output shaped as query; attn_weights None
    unless need_weights. NOTE: where a query may attend to no key at all, need_weights=False
    gives zeros before out_proj (the fused op's rule) and need_weights=True gives NaN (a softmax
    over nothing), both as PyTorch 2.13.

    Example:
        >>> mha = nn.MultiheadAttention(16, 4)
        >>> x = tt.randn(5, 2, 16)                     # (L, N, E)
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        ((5, 2, 16), (2, 5, 5))
    """

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_int(embed_dim, "MultiheadAttention", "embed_dim")
        check_int(num_heads, "MultiheadAttention", "num_heads")
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(
                f"MultiheadAttention: embed_dim={embed_dim} must be a positive multiple of "
                f"num_heads={num_heads}"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        factory = dict(device=device, dtype=dtype)
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = float(dropout)
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        # Attribute order is PyTorch's parameter registration order, hence its state_dict order.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **factory))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **factory))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **factory))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **factory))
            self.in_proj_weight = None
        self.in_proj_bias = Parameter(empty(3 * embed_dim, **factory)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.bias_k = self.bias_v = None
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, embed_dim, **factory))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **factory))
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    # ---- forward --------------------------------------------------------------------------

    def _project(self, query, key, value):
        """q, k, v (N, T, E) from the batch-first inputs."""
        e = self.embed_dim
        b = self.in_proj_bias
        b_q, b_k, b_v = (None,) * 3 if b is None else (b[:e], b[e : 2 * e], b[2 * e :])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one matmul for all three
                q, k, v = linear(query, w, b).chunk(3, dim=-1)
                return q, k, v
            w_q, w_k, w_v = w[:e], w[e : 2 * e], w[2 * e :]
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)

    def _check_inputs(self, query, key, value):
        for name, t, size in (
            ("query", query, self.embed_dim),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"MultiheadAttention.forward: {name} must be a Tensor, got {type(t).__name__}"
                )
            if t.ndim not in (2, 3) or t.shape[-1] != size:
                layout = "(N, T, E)" if self.batch_first else "(T, N, E)"
                raise ValueError(
                    f"MultiheadAttention.forward: {name} must be {layout} or unbatched (T, E) "
                    f"with E = {size}, got shape {tuple(t.shape)}"
                )
        if not query.ndim == key.ndim == value.ndim:
            raise ValueError(
                "MultiheadAttention.forward: query, key and value must all be batched (3-D) or "
                f"all unbatched (2-D), got {query.ndim}-D, {key.ndim}-D, {value.ndim}-D"
            )
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(
                f"MultiheadAttention.forward: key {tuple(key.shape)} and value "
                f"{tuple(value.shape)} must have the same sequence and batch sizes"
            )

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        self._check_inputs(query, key, value)
        _check_mask_dtype(key_padding_mask, "key_padding_mask")
        _check_mask_dtype(attn_mask, "attn_mask")
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "MultiheadAttention.forward: is_causal=True needs attn_mask as well (it is only "
                "a hint, as in PyTorch); use nn.Transformer.generate_square_subsequent_mask(L)"
            )
        batched = query.ndim == 3
        if not batched:  # unbatched: a batch of one
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:  # (T, N, E) -> (N, T, E), keeping q is k is v visible
            same_qk, same_kv = query is key, key is value
            query = query.transpose(0, 1)
            key = query if same_qk else key.transpose(0, 1)
            value = key if same_kv else value.transpose(0, 1)
        n, t_q, _ = query.shape
        t_k = key.shape[1]
        h, d = self.num_heads, self.head_dim

        q, k, v = self._project(query, key, value)  # (N, T, E)
        attn_mask = self._check_attn_mask(attn_mask, n, t_q, t_k)
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (n, t_k):
            raise ValueError(
                f"MultiheadAttention.forward: key_padding_mask must be (N, S) = ({n}, {t_k}), "
                f"got {tuple(key_padding_mask.shape)}"
            )
        if self.bias_k is not None:  # one learned key/value more at the end of every sequence
            k = cat([k, self.bias_k.expand(n, 1, self.embed_dim)], dim=1)
            v = cat([v, self.bias_v.expand(n, 1, self.embed_dim)], dim=1)
            attn_mask, key_padding_mask = self._pad_masks(attn_mask, key_padding_mask)
        q = q.reshape(n, t_q, h, d).transpose(1, 2)  # (N, H, L, hd)
        k = k.reshape(n, k.shape[1], h, d).transpose(1, 2)  # (N, H, S, hd)
        v = v.reshape(n, v.shape[1], h, d).transpose(1, 2)
        if self.add_zero_attn:  # one all-zero key/value more per head
            zero = zeros(n, h, 1, d, dtype=k.dtype, device=k.device)
            k, v = cat([k, zero], dim=2), cat([v, zero], dim=2)
            attn_mask, key_padding_mask = self._pad_masks(attn_mask, key_padding_mask)

        use_causal_rule = is_causal and key_padding_mask is None and not need_weights
        # PyTorch's rule: the hint replaces the mask only on the fused path. Ours aligns a
        # non-square causal mask bottom-right (KV caches), PyTorch top-left: keep the mask then.
        use_causal_rule = use_causal_rule and t_q == k.shape[2]
        mask = None if use_causal_rule else _merge_masks(attn_mask, key_padding_mask, q.dtype)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * (1.0 / math.sqrt(d))) @ k.transpose(-2, -1)  # (N, H, L, S)
            weights = softmax(scores + _as_score_bias(mask, q.dtype), dim=-1)
            weights = dropout(weights, p) if p > 0 else weights  # (N, H, L, S)
            out = weights @ v
        else:
            out = scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=use_causal_rule
            )
            weights = None
        out = out.transpose(1, 2).reshape(n, t_q, self.embed_dim)  # (N, L, E)
        out = self.out_proj(out)
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (N, L, S)
        if not batched:
            return out.squeeze(0), None if weights is None else weights.squeeze(0)
        if not self.batch_first:
            out = out.transpose(0, 1)  # (L, N, E)
        return out, weights

    def _check_attn_mask(self, attn_mask, n, t_q, t_k):
        """attn_mask as (1, 1, L, S) or (N, H, L, S), after checking PyTorch's two shapes."""
        if attn_mask is None:
            return None
        if attn_mask.ndim == 2 and tuple(attn_mask.shape) == (t_q, t_k):
            return attn_mask.reshape(1, 1, t_q, t_k)
        if attn_mask.ndim == 3 and tuple(attn_mask.shape) == (n * self.num_heads, t_q, t_k):
            return attn_mask.reshape(n, self.num_heads, t_q, t_k)
        raise ValueError(
            f"MultiheadAttention.forward: attn_mask must be (L, S) = ({t_q}, {t_k}) or "
            f"(N·num_heads, L, S) = ({n * self.num_heads}, {t_q}, {t_k}), got "
            f"{tuple(attn_mask.shape)}"
        )

    @staticmethod
    def _pad_masks(attn_mask, key_padding_mask):
        attn_mask = None if attn_mask is None else _pad_last(attn_mask, 0.0)
        key_padding_mask = None if key_padding_mask is None else _pad_last(key_padding_mask, 0.0)
        return attn_mask, key_padding_mask

    def extra_repr(self):
        parts = [f"embed_dim={self.embed_dim}", f"num_heads={self.num_heads}"]
        if self.dropout:
            parts.append(f"dropout={self.dropout}")
        if not self._qkv_same_embed_dim:
            parts.append(f"kdim={self.kdim}, vdim={self.vdim}")
        parts.append(f"batch_first={self.batch_first}")
        return ", ".join(parts)
