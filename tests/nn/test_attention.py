"""Attention against PyTorch's scaled_dot_product_attention built by hand from the same
projections; KV-cache decoding against the full recomputation; GQA semantics; gradchecks."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close, to_torch

B, T, S, D = 2, 5, 4, 16


def torch_weights(torch, attn):
    """Leaf torch copies of the four projections (weight, bias or None)."""
    out = {}
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        lin = getattr(attn, name)
        w = to_torch(torch, lin.weight, requires_grad=True)
        b = to_torch(torch, lin.bias, requires_grad=True) if lin.bias is not None else None
        out[name] = (w, b)
    return out


def torch_rope(torch, x, offset, dim, base=10000.0):
    """RoPE by HF Llama's apply_rotary_pos_emb, with cos/sin built here."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    pos = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    emb = torch.cat([torch.outer(pos, inv_freq)] * 2, dim=-1)
    rotated, _ = apply_rotary_pos_emb(x, x, emb.cos(), emb.sin(), unsqueeze_dim=0)
    return rotated


def torch_attention(torch, attn, w, x, context=None, mask=None, bias=None, rope=False):
    """Reference: projections with torch, then torch's sdpa (bool mask True = attend)."""
    F = torch.nn.functional
    b, t, _ = x.shape
    src = x if context is None else context
    h, hkv, d = attn.n_heads, attn.n_kv_heads, attn.d_head
    q = F.linear(x, *w["q_proj"]).view(b, t, h, d).transpose(1, 2)
    k = F.linear(src, *w["k_proj"]).view(b, src.shape[1], hkv, d).transpose(1, 2)
    v = F.linear(src, *w["v_proj"]).view(b, src.shape[1], hkv, d).transpose(1, 2)
    if rope:
        q, k = torch_rope(torch, q, 0, d), torch_rope(torch, k, 0, d)
    if bias is not None:
        float_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        mask = float_mask
    o = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=attn.scale, enable_gqa=hkv != h
    )
    return F.linear(o.transpose(1, 2).reshape(b, t, h * d), *w["out_proj"])


def compare_with_torch(torch, attn, x, context=None, mask=None, bias=None, rope=False, **kw):
    w = torch_weights(torch, attn)
    xt = to_torch(torch, x, requires_grad=True)
    ct = to_torch(torch, context, requires_grad=True) if context is not None else None
    bt = to_torch(torch, bias, requires_grad=True) if bias is not None else None
    ours = attn(x, context, attn_bias=bias, **kw)
    theirs = torch_attention(torch, attn, w, xt, ct, mask, bt, rope)
    assert_close(ours, theirs, what="output")
    r = np.random.default_rng(1).standard_normal(ours.shape)
    (ours * tt.tensor(r)).sum().backward()
    (theirs * torch.tensor(r)).sum().backward()
    assert_close(x.grad, xt.grad, what="dx")
    if context is not None:
        assert_close(context.grad, ct.grad, what="dcontext")
    if bias is not None:
        assert_close(bias.grad, bt.grad, what="dbias")
    for name, (wt, bt_) in w.items():
        assert_close(getattr(attn, name).weight.grad, wt.grad, what=f"{name}.weight grad")
        if bt_ is not None:
            assert_close(getattr(attn, name).bias.grad, bt_.grad, what=f"{name}.bias grad")


def causal(torch, tq, tk):
    return torch.ones(tq, tk, dtype=torch.bool).tril()


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_causal_self_attention_matches_torch(torch, float64, n_kv_heads):
    attn = nn.Attention(D, 4, n_kv_heads=n_kv_heads)
    x = tt.randn(B, T, D, requires_grad=True)
    compare_with_torch(torch, attn, x, mask=causal(torch, T, T), is_causal=True)


def test_key_mask_bias_and_custom_head_size_match_torch(torch, float64):
    # T5-like: no biases, d_head != d_model / n_heads, scale 1, an additive bias with gradient
    attn = nn.Attention(D, 2, d_head=6, bias=False, scale=1.0)
    x = tt.randn(B, T, D, requires_grad=True)
    key_mask = tt.tensor([[True] * T, [True] * 3 + [False] * (T - 3)])
    bias = tt.randn(1, 2, T, T, requires_grad=True)
    mask = to_torch(torch, key_mask).reshape(B, 1, 1, T).expand(B, 2, T, T)
    compare_with_torch(torch, attn, x, mask=mask, bias=bias, key_mask=key_mask)


def test_bool_attn_mask_matches_torch(torch, float64):
    attn = nn.Attention(D, 4)
    x = tt.randn(B, T, D, requires_grad=True)
    mask = tt.rand(B, 1, T, T) > 0.3
    mask = mask | tt.tensor(np.eye(T, dtype=bool))  # every query may attend somewhere
    compare_with_torch(torch, attn, x, mask=to_torch(torch, mask), attn_mask=mask)


def test_cross_attention_matches_torch(torch, float64):
    attn = nn.Attention(D, 4, n_kv_heads=2, d_context=12)
    x = tt.randn(B, T, D, requires_grad=True)
    context = tt.randn(B, S, 12, requires_grad=True)
    key_mask = tt.tensor([[True] * S, [True, True, False, False]])
    mask = to_torch(torch, key_mask).reshape(B, 1, 1, S)
    compare_with_torch(torch, attn, x, context, mask=mask, key_mask=key_mask)


def test_rope_attention_matches_hf_rotary(torch, transformers, float64):
    attn = nn.Attention(D, 4, n_kv_heads=2, rotary=nn.RotaryEmbedding(D // 4))
    x = tt.randn(B, T, D, requires_grad=True)
    compare_with_torch(torch, attn, x, mask=causal(torch, T, T), rope=True, is_causal=True)


def test_rotary_offset_matches_hf(torch, transformers, float64):
    rope = nn.RotaryEmbedding(8, max_positions=4)  # the tables grow past max_positions on demand
    q = tt.randn(2, 3, 5, 8)
    ours, _ = rope(q, q, offset=7)
    assert_close(ours, torch_rope(torch, to_torch(torch, q), 7, 8))


def test_gqa_equals_mha_with_repeated_kv_weights(float64):
    """A GQA layer equals an MHA layer whose K/V heads are the GQA heads repeated per group:
    query head h reads K/V head h // (n_heads / n_kv_heads)."""
    gqa = nn.Attention(D, 4, n_kv_heads=2)
    mha = nn.Attention(D, 4)
    d = gqa.d_head
    with tt.no_grad():
        mha.q_proj.weight.copy_(gqa.q_proj.weight)
        mha.q_proj.bias.copy_(gqa.q_proj.bias)
        mha.out_proj.weight.copy_(gqa.out_proj.weight)
        mha.out_proj.bias.copy_(gqa.out_proj.bias)
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.numpy().reshape(2, d, D)
            b = getattr(gqa, name).bias.numpy().reshape(2, d)
            getattr(mha, name).weight.copy_(np.repeat(w, 2, axis=0).reshape(4 * d, D))
            getattr(mha, name).bias.copy_(np.repeat(b, 2, axis=0).reshape(4 * d))
    x = tt.randn(B, T, D)
    np.testing.assert_allclose(
        gqa(x, is_causal=True).numpy(), mha(x, is_causal=True).numpy(), atol=1e-12
    )


def test_gqa_with_as_many_kv_heads_as_heads_is_plain_mha(float64):
    tt.manual_seed(3)
    a = nn.Attention(D, 4, n_kv_heads=4)
    tt.manual_seed(3)
    b = nn.Attention(D, 4)
    x = tt.randn(B, T, D)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def decode_step_by_step(attn, x, context=None, prefix=2, **kw):
    """Runs a prompt of `prefix` tokens, then one token at a time, through one KV cache."""
    cache = nn.KVCache()
    outs = [attn(x[:, :prefix], context, cache=cache, **kw)]
    for t in range(prefix, x.shape[1]):
        outs.append(attn(x[:, t : t + 1], context, cache=cache, **kw))
    return tt.cat(outs, dim=1), cache


@pytest.mark.parametrize(
    "options",
    [dict(), dict(n_kv_heads=2), dict(n_kv_heads=1, rotary=nn.RotaryEmbedding(4))],
    ids=["mha", "gqa", "mqa+rope"],
)
def test_kv_cached_causal_decoding_equals_full_forward(float64, options):
    attn = nn.Attention(D, 4, **options)
    x = tt.randn(B, T, D)
    full = attn(x, is_causal=True)
    with tt.no_grad():
        stepped, cache = decode_step_by_step(attn, x, is_causal=True)
    np.testing.assert_allclose(stepped.numpy(), full.numpy(), atol=1e-12)
    assert cache.seq_len == T and cache.length(attn) == T


def test_kv_cached_cross_attention_equals_full_forward(float64):
    attn = nn.Attention(D, 4, n_kv_heads=2)
    x, memory = tt.randn(B, T, D), tt.randn(B, S, D)
    key_mask = tt.tensor([[True] * S, [True, True, True, False]])
    full = attn(x, memory, key_mask=key_mask)
    with tt.no_grad():
        stepped, cache = decode_step_by_step(attn, x, memory, key_mask=key_mask)
    np.testing.assert_allclose(stepped.numpy(), full.numpy(), atol=1e-12)
    # the encoder K/V were projected once and reused: a different context is now ignored
    k_cached = cache.cross(attn)[0]
    with tt.no_grad():
        attn(x[:, :1], tt.zeros(B, S, D), cache=cache)
    assert cache.cross(attn)[0] is k_cached
    # once cached, the context may be omitted: still cross-attention, not self-attention
    with tt.no_grad():
        again = attn(x[:, 2:3], None, cache=cache, key_mask=key_mask)
    np.testing.assert_allclose(again.numpy(), full[:, 2:3].numpy(), atol=1e-12)


def test_kv_cache_reorder_selects_batch_rows(float64):
    attn = nn.Attention(D, 4)
    x = tt.randn(B, T, D)
    cache = nn.KVCache()
    with tt.no_grad():
        attn(x[:, :3], cache=cache, is_causal=True)
        cache.reorder(tt.tensor([1, 1]))
        step = attn(x[[1, 1], 3:4], cache=cache, is_causal=True)
    full = attn(x[[1, 1], :4], is_causal=True)
    np.testing.assert_allclose(step.numpy(), full[:, 3:4].numpy(), atol=1e-12)


def test_fully_masked_query_gives_zeros_not_nan(float64):
    attn = nn.Attention(D, 2, bias=False)
    x = tt.randn(1, 3, D)
    out = attn(x, key_mask=tt.tensor([[False, False, False]]), attn_bias=tt.zeros(1, 2, 3, 3))
    assert np.all(np.isfinite(out.numpy())) and np.allclose(out.numpy(), 0)


def test_attention_gradcheck(float64):
    attn = nn.Attention(8, 2, n_kv_heads=1, rotary=nn.RotaryEmbedding(4))
    x = tt.randn(1, 3, 8, requires_grad=True)
    bias = tt.randn(1, 2, 3, 3, requires_grad=True)
    params = [attn.q_proj.weight, attn.k_proj.bias]
    del attn.q_proj.weight, attn.k_proj.bias  # as torch: a plain tensor can't replace a Parameter

    def f(x, bias, wq, bk):
        attn.q_proj.weight, attn.k_proj.bias = wq, bk
        return attn(x, attn_bias=bias, is_causal=True)

    assert tt.gradcheck(f, [x, bias, *params])


def test_attention_dropout_only_in_training(float64):
    attn = nn.Attention(D, 4, dropout=0.5)
    x = tt.randn(B, T, D)
    attn.eval()
    np.testing.assert_array_equal(attn(x).numpy(), attn(x).numpy())
    attn.train()
    assert not np.allclose(attn(x).numpy(), attn.eval()(x).numpy())


def test_attention_errors_name_the_problem():
    attn = nn.Attention(D, 4)
    with pytest.raises(ValueError, match=r"x must be \(B, T, 16\)"):
        attn(tt.randn(T, D))
    with pytest.raises(ValueError, match="key_mask must be bool of shape"):
        attn(tt.randn(B, T, D), key_mask=tt.ones(B, T))
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        nn.Attention(D, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="not divisible"):
        nn.Attention(D, 3)
