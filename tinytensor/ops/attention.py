"""Scaled dot-product attention as one fused op (the naive path: it materializes the scores).

For one (batch, head), with scale τ:
    S = τ·Q·Kᵀ + bias (+ -inf where masked),   P = softmax_rows(S),   O = P·V
    dV = Pᵀ·dO,  dP = dO·Vᵀ,  dS = P ∘ (dP - rowsum(dP ∘ P)),  dQ = τ·dS·K,  dK = τ·dSᵀ·Q,
    dBias = dS (the engine sums it over the dims the bias was broadcast on).
"""

from __future__ import annotations

import math

from ..backend import get_array_module
from ..function import Function
from ..kernels.cpu.dispatch import kernels_for, kernels_for_array
from ..tensor import Tensor, devices_mismatch_error
from ._checks import check_finite, check_probability
from .nn_ops import dropout_keep_mask


def _swap(a):
    return a.swapaxes(-1, -2)


def causal_mask(xp, n_queries, n_keys):
    """Boolean (Nq, Nk) mask of the keys each query may see.

    NOTE: aligned bottom-right: query i sees key j iff j ≤ i + Nk - Nq, so that the last query
    is the newest token and sees every key (what KV-cache decoding needs). For Nq = Nk this is
    the usual lower triangle; PyTorch aligns top-left when Nq ≠ Nk.
    """
    return xp.tri(n_queries, n_keys, n_keys - n_queries, dtype=bool)


def _repeat_heads(x, groups):
    """(..., Hkv, N, d) -> (..., Hkv·groups, N, d): each K/V head serves `groups` query heads."""
    if groups == 1:
        return x
    xp = get_array_module(x)
    shape = x.shape[:-3] + (x.shape[-3], groups) + x.shape[-2:]
    return xp.broadcast_to(x[..., None, :, :], shape).reshape(
        x.shape[:-3] + (x.shape[-3] * groups,) + x.shape[-2:]
    )


def _sum_groups(g, groups):
    """The VJP of `_repeat_heads`: adds the gradients of the query heads sharing a K/V head."""
    if groups == 1:
        return g
    return g.reshape(g.shape[:-3] + (g.shape[-3] // groups, groups) + g.shape[-2:]).sum(axis=-3)


def _probabilities(xp, s, scale, bias, allowed):
    """softmax(τ·s + bias, masked) over the keys, in place on the fresh scores s where it can:
    the NumPy reference of the fused kernel."""
    if s.dtype.kind != "f":  # integer inputs promote as NumPy would (in place cannot)
        s = s.astype(xp.result_type(s, 1.0))
    s *= scale
    if bias is not None:
        s = s + bias  # may broadcast s to a larger shape: not in place
    if allowed is not None:
        if xp.broadcast_shapes(allowed.shape, s.shape) == s.shape:
            xp.copyto(s, -xp.inf, where=~allowed)
        else:
            s = xp.where(allowed, s, -xp.inf)
    # NOTE: no keys at all (Nk = 0): the max has no identity, so the rows shift by 0.
    m = s.max(axis=-1, keepdims=True) if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), s.dtype)
    m = xp.where(xp.isfinite(m), m, 0)  # NOTE: fully masked row: exp(-inf - 0) = 0, no NaN
    s -= m
    e = xp.exp(s, out=s)
    total = e.sum(axis=-1, keepdims=True)
    e /= xp.where(total == 0, 1, total)
    return e


def attention_composite(q, k, v, bias, allowed, scale, groups, keep):
    """softmax(τ·q·kᵀ + bias, masked)·v in differentiable ops, the value create_graph
    differentiates (the fused kernels are first order). A row with no visible key gives 0."""
    if groups > 1:
        k, v = k.repeat_interleave(groups, -3), v.repeat_interleave(groups, -3)
    s = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        s = s + bias
    if allowed is not None:
        s = s.masked_fill(Tensor._wrap(~allowed, False, None), -math.inf)
    xp = get_array_module(s._array)
    empty = ~xp.isfinite(s._array).any(axis=-1, keepdims=True)  # rows that see no key
    if empty.any():
        s = s.masked_fill(Tensor._wrap(empty, False, None), 0.0)
    p = s.softmax(-1)
    if empty.any():
        p = p * Tensor._wrap(~empty, False, None)
    if keep is not None:
        p = p * Tensor._wrap(keep, False, None)
    return p @ v


class ScaledDotProductAttention(Function):
    """O = softmax(τ·Q·Kᵀ + bias, masked)·V; see the module docstring for the VJP.

    A row whose keys are all masked gives O = 0 (not NaN) and no gradient.
    """

    broadcasts = True  # only the bias may be broadcast; it is summed back by the engine

    def forward(
        self, q, k, v, bias=None, allowed=None, scale=1.0, groups=1, keep=None, causal=False
    ):
        xp = get_array_module(q)
        self.causal = causal  # only for reading: `allowed` already holds the causal mask
        k, v = _repeat_heads(k, groups), _repeat_heads(v, groups)
        self.scale, self.groups, self.keep, self.allowed = scale, groups, keep, allowed
        self.heads = None
        fused = None
        if bias is None and keep is None:
            fused = kernels_for("attention", q, k, v, any_layout=True)
        if fused and fused.head_by_head(q, k, v, allowed):
            # one pool task per head: both products and the softmax (kernels/cpu/attention.py)
            out, self.p, self.heads = fused.heads_forward(q, k, v, scale, allowed)
            self.fused = fused
            return out
        # NOTE: the scores are one fresh array, updated in place from here on (the same
        # operations as out-of-place, so the same rounding, without a temporary per step).
        s = q @ _swap(k)
        fused = kernels_for_array("attention", s) if bias is None else None
        self.fused = fused if fused and fused.mask_fits(s, allowed) else None
        if self.fused:  # scale, mask and softmax in one pass (kernels/cpu/attention.py)
            p = self.fused.masked_softmax_(s, scale, allowed)
        else:
            p = _probabilities(xp, s, scale, bias, allowed)
        self.q, self.k, self.v, self.p = q, k, v, p
        return (p * keep if keep is not None else p) @ v

    def composite(self, q, k, v, bias=None):
        return attention_composite(q, k, v, bias, self.allowed, self.scale, self.groups, self.keep)

    def backward(self, g):
        if self.heads is not None:
            dq, dk, dv = self.fused.heads_backward(self.heads, self.p, g, self.scale)
            return dq, _sum_groups(dk, self.groups), _sum_groups(dv, self.groups), None
        p, keep = self.p, self.keep
        p_used = p * keep if keep is not None else p
        dv = _sum_groups(_swap(p_used) @ g, self.groups)
        dp = g @ _swap(self.v)
        if keep is not None:
            dp = dp * keep
        # ds = p·(dp - rowsum(dp·p)), in place on the fresh dp (same operations, same rounding)
        if self.fused and kernels_for("attention", p, dp):
            ds = self.fused.softmax_vjp_(p, dp)
        elif dp.shape == p.shape and dp.dtype == p.dtype:
            dp -= (dp * p).sum(axis=-1, keepdims=True)
            dp *= p
            ds = dp
        else:
            ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
        needs = self.needs_input_grad
        dq = dk = None
        if needs[0]:
            dq = ds @ self.k
            dq *= self.scale
        if needs[1]:
            dk = _swap(ds) @ self.q
            dk *= self.scale
            dk = _sum_groups(dk, self.groups)
        dbias = ds if len(needs) > 3 and needs[3] else None
        return dq, dk, dv, dbias


def _check_inputs(q, k, v, enable_gqa):
    # NOTE: reads the arrays' shapes once (Tensor properties cost ~0.1 µs a read, and a
    # generation step runs this once per layer)
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"scaled_dot_product_attention: {name} must be a Tensor, got "
                f"{type(t).__name__} {t!r:.40}"
            )
        if t._array.ndim < 2:
            raise ValueError(
                f"scaled_dot_product_attention: {name} needs (..., N, d), got {t.shape}"
            )
    kind = q._array.__class__
    if k._array.__class__ is not kind or v._array.__class__ is not kind:
        raise devices_mismatch_error("scaled_dot_product_attention", (q, k, v))
    qs, ks, vs = q._array.shape, k._array.shape, v._array.shape
    if qs[-1] != ks[-1] or ks[-2] != vs[-2] or ks[:-1] != vs[:-1]:
        raise ValueError(
            "scaled_dot_product_attention: shapes do not fit: query (..., Nq, d), key (..., Nk, "
            f"d), value (..., Nk, dv) expected; got {tuple(qs)}, {tuple(ks)}, {tuple(vs)}"
        )
    hq = qs[-3] if len(qs) >= 3 else 1
    hk = ks[-3] if len(ks) >= 3 else 1
    if hq != hk and not (enable_gqa and hk and hq % hk == 0):
        raise ValueError(
            f"scaled_dot_product_attention: query has {hq} heads and key/value {hk}; "
            "with enable_gqa=True the query heads must be a multiple of the key/value heads"
        )
    if qs[:-3] != ks[:-3]:
        raise ValueError(
            f"scaled_dot_product_attention: batch dims differ: {tuple(qs)} vs {tuple(ks)}"
        )
    return hq // hk


def attention_mask_parts(q, k, attn_mask, is_causal, key_lengths=None):
    """Splits the mask arguments into (bias Tensor or None, allowed bool array or None)."""
    xp = get_array_module(q._array)
    nq, nk = q.shape[-2], k.shape[-2]
    bias = allowed = None
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise TypeError("scaled_dot_product_attention: attn_mask must be a Tensor")
        if attn_mask.device != q.device:
            raise devices_mismatch_error("scaled_dot_product_attention", (q, attn_mask))
        scores_shape = q.shape[:-1] + (nk,)
        try:
            # NOTE: a mask with more dims than the scores would silently grow the output.
            fits = xp.broadcast_shapes(attn_mask.shape, scores_shape) == scores_shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"scaled_dot_product_attention: attn_mask of shape {tuple(attn_mask.shape)} does "
                f"not broadcast to the scores' shape {scores_shape}"
            )
        if attn_mask.dtype == bool:
            allowed = attn_mask._array
        elif attn_mask.dtype.kind == "f":
            bias = attn_mask
        else:
            raise TypeError(
                f"scaled_dot_product_attention: attn_mask must be bool (True = attend) or float "
                f"(added to the scores), got {attn_mask.dtype}"
            )
    if is_causal and nq > 1:  # one query (a KV-cache decoding step) is the newest: sees all
        c = causal_mask(xp, nq, nk)
        allowed = c if allowed is None else allowed & c
    if key_lengths is not None:
        lengths = key_lengths_array(q, key_lengths)
        batch = q.shape[0]
        pad = (xp.arange(nk) < lengths[:, None]).reshape((batch,) + (1,) * (q.ndim - 2) + (nk,))
        allowed = pad if allowed is None else allowed & pad
    return bias, allowed


def key_lengths_array(q, key_lengths):
    """`key_lengths` as a (B,) integer array on q's device (B = q.shape[0]), checked."""
    xp = get_array_module(q._array)
    lengths = key_lengths._array if isinstance(key_lengths, Tensor) else xp.asarray(key_lengths)
    batch = q.shape[0]
    if lengths.shape != (batch,) or lengths.dtype.kind not in "iu":
        raise ValueError(
            f"scaled_dot_product_attention: key_lengths must be ({batch},) integers, got "
            f"shape {tuple(lengths.shape)} of {lengths.dtype}"
        )
    return lengths


# Which implementation computes attention: see `attention_backend`.
IMPLS = ("auto", "naive", "tiled", "cuda")
TILED_MIN_SCORES = 1 << 23  # auto: the tiled path on the CPU from B·H·Nq·Nk ≥ 8M scores (32 MB)
_backend = ["auto"]


class attention_backend:
    """Picks the attention implementation inside `with tt.attention_backend("tiled"):`.

    Args:
        impl: "auto" (default): the fused kernels on CUDA (float32, head dims ≤ 128, dv = d),
            on the CPU the naive path while B·H·Nq·Nk < `TILED_MIN_SCORES` and the tiled NumPy
            path above; "naive": materialize the scores (the reference); "tiled": the NumPy
            FlashAttention-2 path (on CuPy arrays too); "cuda": the CUDA kernels (CuPy tensors
            only: a CPU tensor raises RuntimeError).
    NOTE: dropout (dropout_p > 0) and inputs of more than 4 dims always take the naive path, and
    "cuda" takes it too for what the kernels do not cover (see above): the tiled paths never
    materialize a dropout mask, so they decline instead.
    """

    def __init__(self, impl):
        if impl not in IMPLS:
            raise ValueError(f"attention_backend: impl must be one of {IMPLS}, got {impl!r}")
        self.impl = impl

    def __enter__(self):
        _backend.append(self.impl)
        return self

    def __exit__(self, *exc):
        _backend.pop()


def _kernels_cover(query, key, value, attn_mask=None):
    import numpy as np

    # NOTE: the kernels compute in float32 only; any float64 operand (a bias included) takes the
    # naive path, so that no output or gradient is silently downcast.
    operands = (query, key, value) + ((attn_mask,) if attn_mask is not None else ())
    floats32 = all(t.dtype == np.float32 for t in operands if t.dtype != bool)
    d = query.shape[-1]
    return floats32 and d <= 128 and value.shape[-1] == d


def choose_attention_impl(query, key, value, attn_mask=None, dropout_p=0.0, key_lengths=None):
    """The implementation ("naive", "tiled" or "cuda") a call with these arguments gets."""
    wanted = _backend[-1]
    on_cuda = query.device == "cuda"
    if wanted == "cuda" and not on_cuda:
        raise RuntimeError(
            "scaled_dot_product_attention: attention_backend('cuda') needs CUDA tensors, got "
            f"query on {query.device}"
        )
    bias_dims = attn_mask.ndim if attn_mask is not None else 0
    if (
        wanted == "naive"
        or dropout_p > 0.0
        or query.ndim > 4
        or bias_dims > query.ndim
        or (key_lengths is not None and query.ndim != 4)
    ):
        return "naive"
    if wanted == "auto":
        if on_cuda:
            wanted = "cuda"
        else:
            batch_heads = math.prod(query.shape[:-2])
            big = batch_heads * query.shape[-2] * key.shape[-2] >= TILED_MIN_SCORES
            return "tiled" if big else "naive"
    if wanted == "cuda" and not _kernels_cover(query, key, value, attn_mask):
        return "naive"
    return wanted


def _runner(impl):
    if impl == "tiled":
        from .attention_tiled import NumpyTiles

        return NumpyTiles()
    from ..kernels.flash_attention import cupy_kernels

    return cupy_kernels()


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    key_lengths=None,
):
    """Attention with PyTorch's arguments: softmax(Q·Kᵀ·scale + mask)·V.

    Args:
        query: (..., Hq, Nq, d); key: (..., Hkv, Nk, d); value: (..., Hkv, Nk, dv).
        attn_mask: bool (True = may attend) or float (added to the scores, and differentiable),
            broadcastable to (..., Hq, Nq, Nk).
        dropout_p: dropout on the attention probabilities (training only: pass 0 in eval).
        is_causal: mask future keys. NOTE: for Nq ≠ Nk the mask is aligned bottom-right
            (query i sees key j iff j ≤ i + Nk - Nq), as KV-cache decoding needs; PyTorch
            aligns it top-left.
        scale: τ; defaults to 1/√d (T5 uses 1.0).
        enable_gqa: allow Hkv < Hq (grouped-query attention; Hq must be a multiple of Hkv).
        key_lengths: optional (B,) ints: keys at positions ≥ length are padding (tinytensor's
            addition; cheaper than building a mask).
    Returns:
        (..., Hq, Nq, dv). Query rows that may attend to nothing give zeros.

    Three implementations compute this, chosen per call (see `attention_backend`): "naive"
    (materializes the scores), "tiled" (FlashAttention-2 in NumPy) and "cuda" (fused kernels).
    """
    check_probability(dropout_p, "scaled_dot_product_attention", "dropout_p")
    if scale is not None:
        check_finite(scale, "scaled_dot_product_attention", "scale")
    groups = _check_inputs(query, key, value, enable_gqa)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    impl = choose_attention_impl(query, key, value, attn_mask, dropout_p, key_lengths)
    if impl != "naive":
        from .attention_tiled import AttentionSpec, FlashAttention

        bias, mask = attention_mask_parts(query, key, attn_mask, False)
        lengths = None if key_lengths is None else key_lengths_array(query, key_lengths)
        spec = AttentionSpec(scale, groups, bool(is_causal), lengths, mask)
        if mask is not None:
            spec.mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        inputs = (query, key, value) if bias is None else (query, key, value, bias)
        return FlashAttention.apply(*inputs, spec=spec, runner=_runner(impl))
    bias, allowed = attention_mask_parts(query, key, attn_mask, is_causal, key_lengths)
    keep = None
    if dropout_p > 0.0:
        scores_shape = query.shape[:-1] + (key.shape[-2],)
        keep = dropout_keep_mask(scores_shape, dropout_p, query.dtype, query.device)
    inputs = (query, key, value) if bias is None else (query, key, value, bias)
    return ScaledDotProductAttention.apply(
        *inputs, allowed=allowed, scale=scale, groups=groups, keep=keep, causal=bool(is_causal)
    )
