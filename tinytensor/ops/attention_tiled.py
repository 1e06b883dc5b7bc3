"""Tiled attention (FlashAttention-2): the same op as the naive path, never holding the T×T scores.

For one (batch, head), with scale τ, queries in tiles of `block_q` rows and keys in tiles of
`block_k` columns:

    forward   per query tile, stream key tiles: S = τ·Qᵢ·Kⱼᵀ + bias (−inf where masked),
              m' = max(m, rowmax S),  P = exp(S − m'),  α = exp(m − m'),
              l = α·l + rowsum P,  acc = α·acc + P·Vⱼ;   O = acc / l,  L = m + log l
    backward  D = rowsum(dO ∘ O); per key tile, stream query tiles: P = exp(S − L),
              dVⱼ += Pᵀ·dOᵢ,  dP = dOᵢ·Vⱼᵀ,  dS = P ∘ (dP − D),
              dKⱼ += τ·dSᵀ·Qᵢ,  dQᵢ += τ·dS·Kⱼ,  dBias += dS (summed over its broadcast dims)

A row that may attend to nothing has l = 0: O = 0 and L = +inf, so backward's P = exp(S − ∞) = 0.
This is the executable specification of the CUDA kernels in tinytensor/kernels/flash_attention.cu
(which split the backward in a dK/dV pass and a dQ pass so that no two programs write one
element; here one pass does both, since NumPy has no such race).

Layout inside: Q as (B, Hkv, G, Nq, d) and K, V as (B, Hkv, 1, Nk, d), so a tile's matmuls
broadcast each K/V head over its G query heads (GQA) without copying K or V.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backend import get_array_module
from ..function import Function

DEFAULT_BLOCK_Q = 128
DEFAULT_BLOCK_K = 512


@dataclass
class AttentionSpec:
    """Everything but the tensors: how scores are scaled and which (query, key) pairs count.

    Attributes:
        scale: τ.
        groups: G = Hq / Hkv (1 without GQA).
        causal: query i sees key j iff j ≤ i + Nk − Nq (bottom-right alignment).
        key_lengths: (B,) ints or None: key j of batch b is padding iff j ≥ key_lengths[b].
        mask: bool (True = attend) of 4 dims broadcastable to (B, Hq, Nq, Nk), or None.
    """

    scale: float
    groups: int = 1
    causal: bool = False
    key_lengths: object = None
    mask: object = None


def as_4d(x):
    """(…, N, X) with 2 to 4 dims -> (B, H, N, X), adding leading axes of size 1 (a view)."""
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


def _split_heads(a4, kv_heads, groups):
    """(B, H, N, X) with H ∈ {1, Hkv·G} -> (B, Hkv, G, N, X) or (B, 1, 1, N, X) (a view)."""
    if a4.shape[1] == 1:
        return a4[:, :, None]
    return a4.reshape(a4.shape[0], kv_heads, groups, *a4.shape[2:])


def _merge_groups(x):
    """(B, Hkv, G, n, X) -> (B, Hkv, G·n, X): one matmul then also sums over the G heads."""
    if x.shape[2] == 1:
        return x[:, :, 0]
    return x.reshape(x.shape[0], x.shape[1], x.shape[2] * x.shape[3], x.shape[4])


def _tile(a, i0, i1, j0, j1):
    """The [i0:i1, j0:j1] tile of the last two axes; an axis of size 1 is broadcast, not cut."""
    rows = slice(i0, i1) if a.shape[-2] > 1 else slice(None)
    cols = slice(j0, j1) if a.shape[-1] > 1 else slice(None)
    return a[..., rows, cols]


class _Tiling:
    """The masks and loop bounds of one call, shared by forward and backward."""

    def __init__(self, xp, spec, n_q, n_k, kv_heads):
        self.xp, self.spec, self.n_q, self.n_k = xp, spec, n_q, n_k
        self.diagonal = n_k - n_q  # query i sees key j iff j ≤ i + diagonal (when causal)
        self.mask = None if spec.mask is None else _split_heads(spec.mask, kv_heads, spec.groups)
        self.lengths = self.min_length = None
        self.key_stop = n_k  # no key at or after this position is visible to anyone
        if spec.key_lengths is not None:
            lengths = xp.asarray(spec.key_lengths).astype(xp.int64)
            self.lengths = lengths.reshape(-1, 1, 1, 1, 1)
            self.min_length = int(lengths.min())
            self.key_stop = max(0, min(n_k, int(lengths.max())))

    def key_end(self, i1):
        """The end of the keys that queries before i1 may see."""
        if self.spec.causal:
            return max(0, min(self.key_stop, i1 + self.diagonal))
        return self.key_stop

    def query_start(self, j0):
        """The first query that may see key j0."""
        return max(0, j0 - self.diagonal) if self.spec.causal else 0

    def allowed(self, i0, i1, j0, j1):
        """Bool tile broadcastable to (B, Hkv, G, i1−i0, j1−j0), or None if all pairs count."""
        xp, allowed = self.xp, None
        if self.mask is not None:
            allowed = _tile(self.mask, i0, i1, j0, j1)
        # NOTE: causal and padding masks are built only on tiles that cross them.
        if self.spec.causal and j1 - 1 > i0 + self.diagonal:
            keys, queries = xp.arange(j0, j1), xp.arange(i0, i1)
            causal = keys[None, :] <= queries[:, None] + self.diagonal
            allowed = causal if allowed is None else allowed & causal
        if self.lengths is not None and j1 > self.min_length:
            padding = xp.arange(j0, j1) < self.lengths
            allowed = padding if allowed is None else allowed & padding
        return allowed


def _scores(t, qi, kj, bias5, scale, i0, i1, j0, j1):
    """S = τ·Qᵢ·Kⱼᵀ + bias, −inf where masked: one (B, Hkv, G, bq, bk) tile."""
    xp = t.xp
    s = qi @ kj.swapaxes(-1, -2)
    s *= scale
    if bias5 is not None:
        s = s + _tile(bias5, i0, i1, j0, j1)
    allowed = t.allowed(i0, i1, j0, j1)
    if allowed is not None:
        s = xp.where(allowed, s, -xp.inf)
    return s


def flash_attention_forward(q, k, v, bias, spec, block_q=DEFAULT_BLOCK_Q, block_k=DEFAULT_BLOCK_K):
    """O and L = logsumexp_rows(S) for (B, Hq, Nq, d) q and (B, Hkv, Nk, d) k, v.

    `bias` is None or 4-D, broadcastable to (B, Hq, Nq, Nk). Returns (O (B, Hq, Nq, dv),
    L (B, Hq, Nq)), with L = +inf on rows that may attend to nothing.
    """
    xp = get_array_module(q)
    batch, heads_q, n_q, _ = q.shape
    kv_heads, n_k, dv = k.shape[1], k.shape[2], v.shape[-1]
    groups = spec.groups
    t = _Tiling(xp, spec, n_q, n_k, kv_heads)
    q5, k5, v5 = _split_heads(q, kv_heads, groups), k[:, :, None], v[:, :, None]
    bias5 = None if bias is None else _split_heads(bias, kv_heads, groups)
    dtype = xp.result_type(q, k, v, *(() if bias is None else (bias,)))
    out = xp.empty((batch, kv_heads, groups, n_q, dv), dtype)
    lse = xp.empty((batch, kv_heads, groups, n_q), dtype)
    for i0 in range(0, n_q, block_q):
        i1 = min(i0 + block_q, n_q)
        qi = q5[..., i0:i1, :]
        m = xp.full(qi.shape[:-1], -xp.inf, dtype)
        m_safe = xp.zeros_like(m)
        row_sum = xp.zeros_like(m)
        acc = xp.zeros(qi.shape[:-1] + (dv,), dtype)
        for j0 in range(0, t.key_end(i1), block_k):
            j1 = min(j0 + block_k, n_k)
            s = _scores(t, qi, k5[..., j0:j1, :], bias5, spec.scale, i0, i1, j0, j1)
            m_new = xp.maximum(m, s.max(axis=-1))
            # NOTE: while a row has seen only masked keys its max is −inf; shifting by 0 then
            # gives exp(−inf) = 0 instead of exp(−inf + inf) = NaN.
            m_safe = xp.where(m_new == -xp.inf, 0, m_new)
            s -= m_safe[..., None]
            p = xp.exp(s, out=s)
            alpha = xp.exp(m - m_safe)  # rescales what was summed under the old max
            row_sum = alpha * row_sum + p.sum(axis=-1)
            acc *= alpha[..., None]
            acc += p @ v5[..., j0:j1, :]
            m = m_new
        empty = row_sum == 0
        l_safe = xp.where(empty, 1, row_sum)
        out[..., i0:i1, :] = acc / l_safe[..., None]
        lse[..., i0:i1] = xp.where(empty, xp.inf, m_safe + xp.log(l_safe))
    return out.reshape(batch, heads_q, n_q, dv), lse.reshape(batch, heads_q, n_q)


def flash_attention_backward(
    q,
    k,
    v,
    bias,
    out,
    lse,
    grad_out,
    spec,
    need_bias_grad=False,
    block_q=DEFAULT_BLOCK_Q,
    block_k=DEFAULT_BLOCK_K,
):
    """(dQ, dK, dV, dBias) from the saved O and L, recomputing P tile by tile.

    dBias (None unless `need_bias_grad`) has the bias's own 4-D shape: each tile's dS is summed
    over the axes the bias was broadcast on as it is made, so no (B, Hq, Nq, Nk) array exists.
    """
    xp = get_array_module(q)
    batch, heads_q, n_q, d = q.shape
    kv_heads, n_k, dv = k.shape[1], k.shape[2], v.shape[-1]
    groups = spec.groups
    t = _Tiling(xp, spec, n_q, n_k, kv_heads)
    split = lambda a: _split_heads(a, kv_heads, groups)  # noqa: E731
    q5, k5, v5, o5, do5 = split(q), k[:, :, None], v[:, :, None], split(out), split(grad_out)
    lse5 = lse.reshape(batch, kv_heads, groups, n_q)
    bias5 = None if bias is None else split(bias)
    dtype = xp.result_type(q, k, v, *(() if bias is None else (bias,)))
    delta = (do5 * o5).sum(axis=-1)  # D = rowsum(dO ∘ O), (B, Hkv, G, Nq)
    dq5 = xp.zeros((batch, kv_heads, groups, n_q, d), dtype)
    dk = xp.zeros((batch, kv_heads, n_k, d), dtype)
    dv_ = xp.zeros((batch, kv_heads, n_k, dv), dtype)
    dbias5 = xp.zeros(bias5.shape, dtype) if need_bias_grad else None
    sum_axes = ()
    if need_bias_grad:
        full = (batch, kv_heads, groups)
        sum_axes = tuple(a for a in range(3) if bias5.shape[a] == 1 and full[a] > 1)
    for j0 in range(0, t.key_stop, block_k):
        j1 = min(j0 + block_k, n_k)
        kj, vj = k5[..., j0:j1, :], v5[..., j0:j1, :]
        dk_acc = xp.zeros((batch, kv_heads, j1 - j0, d), dtype)
        dv_acc = xp.zeros((batch, kv_heads, j1 - j0, dv), dtype)
        for i0 in range(t.query_start(j0), n_q, block_q):
            i1 = min(i0 + block_q, n_q)
            qi, doi = q5[..., i0:i1, :], do5[..., i0:i1, :]
            s = _scores(t, qi, kj, bias5, spec.scale, i0, i1, j0, j1)
            # NOTE: masked S = −inf and empty rows' L = +inf both give P = 0, never NaN.
            s -= lse5[..., i0:i1, None]
            p = xp.exp(s, out=s)
            dv_acc += _merge_groups(p).swapaxes(-1, -2) @ _merge_groups(doi)
            dp = doi @ vj.swapaxes(-1, -2)
            dp -= delta[..., i0:i1, None]
            ds = p * dp
            dk_acc += _merge_groups(ds).swapaxes(-1, -2) @ _merge_groups(qi)
            dq5[..., i0:i1, :] += ds @ kj
            if dbias5 is not None:
                dbias_tile = ds.sum(axis=sum_axes, keepdims=True) if sum_axes else ds
                rows = slice(i0, i1) if bias5.shape[-2] > 1 else slice(None)
                cols = slice(j0, j1) if bias5.shape[-1] > 1 else slice(None)
                keep = tuple(a for a in (-2, -1) if bias5.shape[a] == 1)
                if keep:
                    dbias_tile = dbias_tile.sum(axis=keep, keepdims=True)
                dbias5[..., rows, cols] += dbias_tile
        dk_acc *= spec.scale
        dk[:, :, j0:j1] = dk_acc
        dv_[:, :, j0:j1] = dv_acc
    dq5 *= spec.scale
    dbias = None if dbias5 is None else dbias5.reshape(bias.shape)
    return dq5.reshape(batch, heads_q, n_q, d), dk, dv_, dbias


class NumpyTiles:
    """The tiled implementation on NumPy (or CuPy) arrays, with its tile sizes."""

    name = "tiled"

    def __init__(self, block_q=None, block_k=None):
        # NOTE: the defaults are read per call, so tests can shrink the module's tile sizes.
        self.block_q = block_q or DEFAULT_BLOCK_Q
        self.block_k = block_k or DEFAULT_BLOCK_K

    def forward(self, q, k, v, bias, spec):
        return flash_attention_forward(q, k, v, bias, spec, self.block_q, self.block_k)

    def backward(self, q, k, v, bias, out, lse, grad_out, spec, need_bias_grad):
        return flash_attention_backward(
            q, k, v, bias, out, lse, grad_out, spec, need_bias_grad, self.block_q, self.block_k
        )


class FlashAttention(Function):
    """O = softmax(τ·Q·Kᵀ + bias, masked)·V computed tile by tile; VJP from the saved L.

    `runner` is the implementation (`NumpyTiles` or the CUDA kernels' launcher); inputs keep
    their 2-4-D shapes outside and are seen as (B, H, N, d) inside.
    """

    broadcasts = True  # only the bias is broadcast; its gradient comes back in its own shape

    def forward(self, q, k, v, bias=None, spec=None, runner=None):
        q4, k4, v4 = as_4d(q), as_4d(k), as_4d(v)
        bias4 = None if bias is None else as_4d(bias)
        out, lse = runner.forward(q4, k4, v4, bias4, spec)
        self.saved = (q4, k4, v4, bias4, out, lse)
        self.shapes = (q.shape, k.shape, v.shape, None if bias is None else bias.shape)
        self.spec, self.runner = spec, runner
        return out.reshape(q.shape[:-1] + (v.shape[-1],))

    def composite(self, q, k, v, bias=None):
        from .attention import attention_composite

        spec, xp = self.spec, get_array_module(q._array)
        four = [t.reshape((1,) * (4 - t.ndim) + tuple(t.shape)) for t in (q, k, v)]
        n_q, n_k = q.shape[-2], k.shape[-2]
        allowed = spec.mask
        if spec.causal:
            causal = xp.arange(n_k)[None, :] <= xp.arange(n_q)[:, None] + (n_k - n_q)
            allowed = causal if allowed is None else allowed & causal
        if spec.key_lengths is not None:
            lengths = xp.asarray(spec.key_lengths).astype(xp.int64).reshape(-1, 1, 1, 1)
            padding = xp.arange(n_k) < lengths
            allowed = padding if allowed is None else allowed & padding
        if bias is not None:
            bias = bias.reshape((1,) * (4 - bias.ndim) + tuple(bias.shape))
        out = attention_composite(*four, bias, allowed, spec.scale, spec.groups, None)
        return out.reshape(tuple(q.shape[:-1]) + (v.shape[-1],))

    def backward(self, g):
        q4, k4, v4, bias4, out, lse = self.saved
        needs = self.needs_input_grad
        need_bias_grad = len(needs) > 3 and needs[3]
        g4 = as_4d(g)
        if not g4.flags.c_contiguous:
            g4 = get_array_module(g4).ascontiguousarray(g4)
        dq, dk, dv, dbias = self.runner.backward(
            q4, k4, v4, bias4, out, lse, g4, self.spec, need_bias_grad
        )
        q_shape, k_shape, v_shape, bias_shape = self.shapes
        return (
            dq.reshape(q_shape) if needs[0] else None,
            dk.reshape(k_shape) if needs[1] else None,
            dv.reshape(v_shape) if needs[2] else None,
            dbias.reshape(bias_shape) if need_bias_grad else None,
        )
