"""nn.KVCache growth (amortized O(1) appends) and beam-style reordering, variants included."""

import math

import numpy as np
import pytest
from tinytensor.nn import variants as V

import tinytensor as tt
from tinytensor import nn

D, H = 8, 2


def test_appending_one_token_at_a_time_reallocates_logarithmically_often():
    cache = nn.KVCache()
    layer = object()  # any hashable key stands for a module
    rng = np.random.default_rng(0)
    b, t_total = 2, 1000
    ks = rng.standard_normal((b, H, t_total, 4))
    vs = rng.standard_normal((b, H, t_total, 4))
    with tt.no_grad():
        for i in range(t_total):
            k, v = cache.append(
                layer, tt.tensor(ks[:, :, i : i + 1]), tt.tensor(vs[:, :, i : i + 1])
            )
    # doubling from MIN_CAPACITY: 16, 32, ..., 1024 -> 7 allocations; concatenation would be 1000
    assert cache.reallocations(layer) <= math.ceil(math.log2(t_total)) + 1
    assert cache.seq_len == t_total and k.shape == (b, H, t_total, 4)
    np.testing.assert_array_equal(k.numpy(), ks)
    np.testing.assert_array_equal(v.numpy(), vs)


def test_views_returned_earlier_are_not_overwritten_by_later_appends():
    cache, layer = nn.KVCache(), object()
    with tt.no_grad():
        k1, _ = cache.append(layer, tt.ones(1, 1, 3, 2), tt.ones(1, 1, 3, 2))
        cache.append(layer, tt.zeros(1, 1, 40, 2), tt.zeros(1, 1, 40, 2))  # grows
    assert k1.shape == (1, 1, 3, 2) and np.all(k1.numpy() == 1)


def test_mismatched_append_is_refused():
    cache, layer = nn.KVCache(), object()
    cache.append(layer, tt.zeros(2, 1, 3, 4), tt.zeros(2, 1, 3, 4))
    with pytest.raises(ValueError, match="do not continue the cached"):
        cache.append(layer, tt.zeros(3, 1, 1, 4), tt.zeros(3, 1, 1, 4))


def test_decoding_with_grad_still_backpropagates_into_earlier_steps(float64):
    """With a recorded graph the cache concatenates Tensors; the gradient of the last step's
    output reaches the prompt's input, as torch's through a plain concatenation."""
    attn = nn.Attention(D, H)
    x = tt.randn(1, 4, D, requires_grad=True)
    cache = nn.KVCache()
    attn(x[:, :3], cache=cache, is_causal=True)
    last = attn(x[:, 3:4], cache=cache, is_causal=True)
    last.sum().backward()
    x_full = tt.tensor(x.numpy(), requires_grad=True)
    attn(x_full, is_causal=True)[:, 3:4].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x_full.grad.numpy(), atol=1e-12)
    assert np.abs(x.grad.numpy()[:, :3]).sum() > 0


def test_reorder_keeps_filled_rows_and_capacity():
    cache, layer = nn.KVCache(), object()
    rows = tt.tensor(np.arange(3 * 5, dtype=np.float64).reshape(3, 1, 5, 1))
    with tt.no_grad():
        cache.append(layer, rows, rows)
        cache.reorder(np.array([2, 0, 0, 1]))
        k, _ = cache.append(layer, tt.zeros(4, 1, 1, 1), tt.zeros(4, 1, 1, 1))
    expected = np.concatenate([rows.numpy()[[2, 0, 0, 1]], np.zeros((4, 1, 1, 1))], axis=2)
    np.testing.assert_array_equal(k.numpy(), expected)
    assert cache.reallocations(layer) == 1  # the reorder reused the capacity, no growth


def _decode(m, x, cache, start, stop):
    return [m(x[:, i : i + 1], is_causal=True, cache=cache).numpy() for i in range(start, stop)]


@pytest.mark.parametrize("kind", ["sliding", "mla", "linear"])
def test_beam_style_reorder_covers_variant_states(float64, kind):
    """Reordering the cache mid-decode (as beam search does) equals decoding the reordered
    sequences from scratch: the variants' side tables follow the rows."""
    tt.manual_seed(0)
    m = V.make_attention(kind, D, H, window=3, kv_latent_dim=4, rope_dim=2).eval()
    x = tt.randn(3, 7, D)
    index = np.array([2, 2, 0, 1])  # beams: duplicate one row, drop none, permute
    cache = nn.KVCache()
    with tt.no_grad():
        m(x[:, :2], is_causal=True, cache=cache)
        _decode(m, x, cache, 2, 4)
        cache.reorder(tt.tensor(index))
        after = np.concatenate(_decode(m, x[index], cache, 4, 7), axis=1)
        full = m(x[index], is_causal=True).numpy()[:, 4:7]
    np.testing.assert_allclose(after, full, atol=1e-10)
    assert V.tokens_seen(cache) == 7


def test_rope_per_row_position_ids_equal_per_row_offsets(float64, torch):
    """position_ids (B, T) rotate each row as `offset` would that row alone, and match HF's
    rotate-half formula computed in torch from the same positions."""
    rope = nn.RotaryEmbedding(4, max_positions=8)  # positions up to 11: the tables grow
    x = tt.randn(2, 3, 4, 6)  # (B, H, T, d): partial rotary, 2 features pass through
    offsets = [7, 2]
    pos = np.array([[o + i for i in range(4)] for o in offsets])
    out = rope.rotate(x, position_ids=tt.tensor(pos)).numpy()
    for b, o in enumerate(offsets):
        np.testing.assert_allclose(out[b : b + 1], rope.rotate(x[b : b + 1], o).numpy())
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 4, 2, dtype=torch.float64) / 4)
    angles = torch.tensor(pos, dtype=torch.float64)[..., None] * inv_freq  # (B, T, 2)
    emb = torch.cat([angles, angles], -1)[:, None]  # (B, 1, T, 4)
    xt = torch.tensor(x.numpy())
    rot = xt[..., :4]
    half = torch.cat([-rot[..., 2:], rot[..., :2]], -1)
    expected = torch.cat([rot * emb.cos() + half * emb.sin(), xt[..., 4:]], -1)
    np.testing.assert_allclose(out, expected.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="position_ids must be"):
        rope.rotate(x, position_ids=tt.tensor(pos[:, :2]))
