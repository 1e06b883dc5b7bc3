"""Attention variants: cached decode == full forward, what each cache holds (shapes and bytes vs
the formulas), sliding-window masks vs a direct loop, linear attention parallel == recurrent ==
a NumPy recurrence, GQA with H_kv = H equals MHA, and GPT training with each variant."""

import math

import numpy as np
import pytest
from tinytensor.models.gpt import GPT, GPTConfig
from tinytensor.nn import variants as V

import tinytensor as tt
from tinytensor import nn

D_MODEL, H, D_HEAD = 16, 4, 4


def _module(kind, **kw):
    tt.manual_seed(0)
    n_kv = {"mha": None, "gqa": 2, "mqa": None, "sliding": 2}.get(kind)
    m = V.make_attention(
        kind, D_MODEL, H, n_kv_heads=n_kv, window=3, kv_latent_dim=6, rope_dim=2, **kw
    )
    return m.eval()


def _decode_incrementally(m, x, prefill):
    cache = nn.KVCache()
    outs = [m(x[:, :prefill], is_causal=True, cache=cache).numpy()]
    for i in range(prefill, x.shape[1]):
        outs.append(m(x[:, i : i + 1], is_causal=True, cache=cache).numpy())
    return np.concatenate(outs, axis=1), cache


# MLA brings its own decoupled RoPE and linear attention refuses RoPE: no shared-rotary case
DECODE_CASES = [(k, False) for k in V.ATTENTION_KINDS] + [
    (k, True) for k in ("mha", "gqa", "mqa", "sliding")
]


@pytest.mark.parametrize(("kind", "rope"), DECODE_CASES)
def test_cached_decode_equals_full_forward(kind, rope):
    m = _module(kind, rotary=nn.RotaryEmbedding(D_HEAD)) if rope else _module(kind)
    x = tt.randn(2, 8, D_MODEL)
    full = m(x, is_causal=True).numpy()
    incremental, cache = _decode_incrementally(m, x, prefill=3)
    np.testing.assert_allclose(incremental, full, atol=1e-10)
    assert V.tokens_seen(cache) == 8


def test_mla_absorbed_equals_explicit_and_cache_holds_only_latent_and_rope_key():
    x = tt.randn(2, 7, D_MODEL)
    explicit = V.MultiHeadLatentAttention(D_MODEL, H, kv_latent_dim=6, rope_dim=2).eval()
    absorbed = V.MultiHeadLatentAttention(D_MODEL, H, kv_latent_dim=6, rope_dim=2, absorb=True)
    absorbed.load_state_dict(explicit.state_dict())
    full = explicit(x).numpy()
    np.testing.assert_allclose(absorbed(x).numpy(), full, atol=1e-12)
    incremental, cache = _decode_incrementally(absorbed.eval(), x, prefill=2)
    np.testing.assert_allclose(incremental, full, atol=1e-12)
    entry = V.variant_state(cache, absorbed)
    assert tuple(entry.latent.shape) == (2, 7, 6)  # (B, T, d_c)
    assert tuple(entry.k_rope.shape) == (2, 1, 7, 2)  # (B, 1, T, d_R): one shared head
    assert V.cache_nbytes(cache) == 2 * 7 * (6 + 2) * 8  # B·T·(d_c + d_R) float64
    assert len(cache._self_attn) == 0  # no per-head K/V anywhere


def test_mla_decoupled_rope_makes_scores_relative():
    """The decoupled RoPE part's scores q_R·k_R depend only on relative positions: shifting
    queries and keys by the same offset leaves them unchanged."""
    m = V.MultiHeadLatentAttention(D_MODEL, H, kv_latent_dim=6, rope_dim=4).eval()
    q = tt.randn(1, 1, 3, 4)
    k = tt.randn(1, 1, 3, 4)
    s0 = (m.rotary.rotate(q, 0) @ m.rotary.rotate(k, 0).transpose(-1, -2)).numpy()
    s7 = (m.rotary.rotate(q, 7) @ m.rotary.rotate(k, 7).transpose(-1, -2)).numpy()
    np.testing.assert_allclose(s0, s7, atol=1e-12)


def test_sliding_window_matches_a_direct_loop_and_ring_never_exceeds_window(torch):
    w = 3
    m = _module("sliding")
    x = tt.randn(2, 9, D_MODEL)
    out = m(x).numpy()
    # reference: for each query, torch attention over exactly the keys t-w+1..t
    q = m._heads(m.q_proj(x), H).numpy()
    k = np.repeat(m._heads(m.k_proj(x), 2).numpy(), 2, axis=1)
    v = np.repeat(m._heads(m.v_proj(x), 2).numpy(), 2, axis=1)
    rows = []
    for t in range(9):
        lo = max(0, t - w + 1)
        rows.append(
            torch.nn.functional.scaled_dot_product_attention(
                torch.tensor(q[:, :, t : t + 1]),
                torch.tensor(k[:, :, lo : t + 1]),
                torch.tensor(v[:, :, lo : t + 1]),
            ).numpy()
        )
    o = np.concatenate(rows, axis=2).transpose(0, 2, 1, 3).reshape(2, 9, H * D_HEAD)
    ref = o @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)
    cache = nn.KVCache()
    for i in range(9):
        m(x[:, i : i + 1], cache=cache)
        ring = V.variant_state(cache, m)
        assert ring.k.shape[2] == w and (ring.positions >= 0).sum() == min(i + 1, w)
        assert V.cache_nbytes(cache) == 2 * 2 * 2 * w * D_HEAD * 8  # 2·B·H_kv·w·d_h


def test_linear_attention_parallel_equals_recurrent_and_a_numpy_loop():
    rng = np.random.default_rng(0)
    q, k, v = (tt.tensor(rng.standard_normal((2, 3, 6, 4))) for _ in range(3))
    fq, fk = V.elu_feature_map(q), V.elu_feature_map(k)
    parallel, (s_p, z_p) = V.causal_linear_attention(fq, fk, v)
    recurrent, (s_r, z_r) = V.recurrent_linear_attention(fq, fk, v)
    np.testing.assert_allclose(parallel.numpy(), recurrent.numpy(), atol=1e-12)
    # an independent recurrence on plain arrays, with elu+1 written out
    phi = lambda a: np.where(a > 0, a + 1, np.exp(a))  # noqa: E731
    qa, ka, va = phi(q.numpy()), phi(k.numpy()), v.numpy()
    s, z = np.zeros((2, 3, 4, 4)), np.zeros((2, 3, 4))
    expected = np.zeros_like(va)
    for t in range(6):
        s += ka[:, :, t, :, None] * va[:, :, t, None, :]
        z += ka[:, :, t]
        num = np.einsum("bhd,bhde->bhe", qa[:, :, t], s)
        expected[:, :, t] = num / np.einsum("bhd,bhd->bh", qa[:, :, t], z)[..., None]
    np.testing.assert_allclose(parallel.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(s_p.numpy(), s, atol=1e-12)
    np.testing.assert_allclose(z_p.numpy(), z, atol=1e-12)


def test_linear_attention_state_size_is_constant_in_t():
    m = _module("linear")
    x = tt.randn(1, 20, D_MODEL)
    cache = nn.KVCache()
    sizes = []
    for i in range(20):
        m(x[:, i : i + 1], cache=cache)
        sizes.append(V.cache_nbytes(cache))
    assert len(set(sizes)) == 1
    assert sizes[0] == 1 * H * (D_HEAD * D_HEAD + D_HEAD) * 8 == m.state_numbers(1) * 8


def test_linear_attention_gradient_matches_finite_differences():
    m = _module("linear")
    x = tt.randn(1, 4, D_MODEL, requires_grad=True)
    assert tt.gradcheck(lambda a: m(a), (x,))


def test_gqa_with_n_kv_heads_equal_n_heads_is_mha():
    tt.manual_seed(1)
    mha = nn.Attention(D_MODEL, H)
    gqa = V.make_attention("gqa", D_MODEL, H, n_kv_heads=H)
    gqa.load_state_dict(mha.state_dict())
    x = tt.randn(2, 5, D_MODEL)
    np.testing.assert_allclose(gqa(x, is_causal=True).numpy(), mha(x, is_causal=True).numpy())


@pytest.mark.parametrize(("kind", "n_kv"), [("mha", H), ("gqa", 2), ("mqa", 1)])
def test_kv_cache_bytes_match_formula(kind, n_kv):
    m = _module(kind)
    b, t = 3, 7
    _, cache = _decode_incrementally(m, tt.randn(b, t, D_MODEL), prefill=4)
    k, v = cache._self_attn[m]
    assert tuple(k.shape) == (b, n_kv, t, D_HEAD)
    assert (
        V.cache_nbytes(cache) == k._array.nbytes + v._array.nbytes == 2 * b * t * n_kv * D_HEAD * 8
    )
    mha_bytes = 2 * b * t * H * D_HEAD * 8
    assert math.isclose(V.cache_nbytes(cache) / mha_bytes, n_kv / H)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="attention"):
        GPT(GPTConfig(vocab_size=5, n_layer=1, n_head=2, n_embd=8, attention="nope"))
    with pytest.raises(ValueError, match="alibi"):
        GPT(
            GPTConfig(
                vocab_size=5, n_layer=1, n_head=2, n_embd=8, attention="linear", position="alibi"
            )
        )
    with pytest.raises(ValueError, match="n_kv_heads"):
        V.make_attention("gqa", 8, 2)
    with pytest.raises(ValueError, match="window"):
        V.make_attention("sliding", 8, 2)
    with pytest.raises(ValueError, match="attn_mask"):
        V.LinearAttention(8, 2)(tt.randn(1, 2, 8), attn_mask=tt.ones(2, 2).bool())


CONFIGS = [
    ("mha", "learned"),
    ("gqa", "rope"),
    ("mqa", "alibi"),
    ("mla", "rope"),
    ("sliding", "rope"),
    ("linear", "learned"),
]


@pytest.mark.parametrize(("attention", "position"), CONFIGS)
def test_gpt_variant_trains_and_decodes_with_cache(attention, position):
    tt.manual_seed(0)
    config = GPTConfig(
        vocab_size=11,
        block_size=16,
        n_layer=2,
        n_head=H,
        n_embd=D_MODEL,
        dropout=0.0,
        attention=attention,
        position=position,
        n_kv_heads=2 if attention == "gqa" else None,
        window=3,
    )
    model = GPT(config)
    data = tt.randint(0, 11, (4, 10))
    model.eval()
    full = model(data).logits.numpy()
    cache = nn.KVCache()
    steps = [model(data[:, :4], cache=cache).logits.numpy()]
    steps += [model(data[:, i : i + 1], cache=cache).logits.numpy() for i in range(4, 10)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-10)
    model.train()
    opt = tt.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = model(data[:, :-1], targets=data[:, 1:]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3, losses
