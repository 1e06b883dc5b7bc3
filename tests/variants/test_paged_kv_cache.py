"""Paged KV cache: paged == contiguous attention, refcounted prefix sharing, copy-on-write,
freeing, a batch of different lengths, memory accounting, pool exhaustion."""

import numpy as np
import pytest
from tinytensor.nn.paged_kv_cache import (
    PagedKVCache,
    PoolExhaustedError,
    paged_attention,
    paged_self_attention,
)

import tinytensor as tt
from tinytensor import nn

H_KV, D = 2, 4


def _kv(rng, t):
    return rng.standard_normal((H_KV, t, D)), rng.standard_normal((H_KV, t, D))


def test_gather_returns_what_was_appended_across_blocks():
    rng = np.random.default_rng(0)
    cache = PagedKVCache(8, block_size=3, n_kv_heads=H_KV, d_head=D, dtype=np.float64)
    cache.add_sequence("a")
    k1, v1 = _kv(rng, 4)
    k2, v2 = _kv(rng, 5)
    cache.append("a", k1, v1)
    cache.append("a", k2, v2)
    k, v = cache.gather("a")
    np.testing.assert_array_equal(k, np.concatenate([k1, k2], 1))
    np.testing.assert_array_equal(v, np.concatenate([v1, v2], 1))
    assert len(cache.block_tables["a"]) == 3  # ceil(9 / 3)


def test_paged_attention_equals_contiguous_for_different_lengths(torch):
    rng = np.random.default_rng(1)
    cache = PagedKVCache(16, block_size=4, n_kv_heads=H_KV, d_head=D, dtype=np.float64)
    lengths = {"a": 3, "b": 9, "c": 6}
    stored = {}
    for s, n in lengths.items():
        cache.add_sequence(s)
        stored[s] = _kv(rng, n)
        cache.append(s, *stored[s])
    q = rng.standard_normal((3, 4, 2, D))  # 4 query heads (GQA over 2), the last 2 tokens
    out = paged_attention(tt.tensor(q), cache, list(lengths)).numpy()
    for i, s in enumerate(lengths):
        k, v = (torch.tensor(a).repeat_interleave(2, dim=0) for a in stored[s])
        n = lengths[s]
        mask = torch.arange(n)[None, :] <= torch.arange(n - 2, n)[:, None]
        ref = torch.nn.functional.scaled_dot_product_attention(
            torch.tensor(q[i]), k, v, attn_mask=mask
        )
        np.testing.assert_allclose(out[i], ref.numpy(), atol=1e-12)


def test_fork_shares_prefix_blocks_and_frees_them_by_refcount():
    rng = np.random.default_rng(2)
    cache = PagedKVCache(10, block_size=4, n_kv_heads=H_KV, d_head=D, dtype=np.float64)
    cache.add_sequence("p")
    prompt = _kv(rng, 6)  # one full block + a half-filled one
    cache.append("p", *prompt)
    cache.fork("p", "c1")
    cache.fork("p", "c2")
    assert cache.blocks_in_use() == 2  # shared, not copied
    full, partial = cache.block_tables["p"]
    assert cache.allocator.refcount[full] == 3 and cache.allocator.refcount[partial] == 3
    tail = _kv(rng, 1)
    cache.append("c1", *tail)  # writes into the shared partial block: copy-on-write
    assert cache.block_tables["c1"][0] == full
    assert cache.block_tables["c1"][1] != partial
    assert cache.allocator.refcount[partial] == 2
    k_parent, _ = cache.gather("p")
    k_child, _ = cache.gather("c1")
    np.testing.assert_array_equal(k_parent, prompt[0])  # the parent is untouched
    np.testing.assert_array_equal(k_child, np.concatenate([prompt[0], tail[0]], 1))
    free_before = cache.allocator.num_free
    cache.free("p")
    assert cache.allocator.num_free == free_before  # c2 still holds both blocks
    cache.free("c2")
    assert cache.allocator.num_free == free_before + 1  # `partial` is released
    cache.free("c1")
    assert cache.allocator.num_free == 10 and cache.blocks_in_use() == 0


def test_pool_exhaustion_is_a_clear_error_and_leaves_the_cache_intact():
    rng = np.random.default_rng(3)
    cache = PagedKVCache(2, block_size=2, n_kv_heads=H_KV, d_head=D, dtype=np.float64)
    cache.add_sequence("a")
    cache.append("a", *_kv(rng, 3))
    with pytest.raises(PoolExhaustedError, match="exhausted|free"):
        cache.append("a", *_kv(rng, 2))
    assert cache.lengths["a"] == 3
    cache.free("a")
    cache.add_sequence("b")
    cache.append("b", *_kv(rng, 4))  # the freed blocks are reused
    with pytest.raises(ValueError, match="H_kv"):
        cache.append("b", np.zeros((3, 1, D)), np.zeros((3, 1, D)))


def test_memory_used_is_blocks_not_max_length():
    cache = PagedKVCache(32, block_size=4, n_kv_heads=H_KV, d_head=D, dtype=np.float32)
    for s, n in (("a", 5), ("b", 1), ("c", 12)):
        cache.add_sequence(s)
        cache.append(s, np.zeros((H_KV, n, D)), np.zeros((H_KV, n, D)))
    blocks = 2 + 1 + 3
    per_position = 2 * H_KV * D * 4
    assert cache.nbytes_used() == blocks * 4 * per_position
    assert cache.contiguous_nbytes(3, max_len=64) == 3 * 64 * per_position


def test_batch_of_different_lengths_decodes_like_full_forward():
    tt.manual_seed(0)
    attn = nn.Attention(16, n_heads=4, n_kv_heads=2, rotary=nn.RotaryEmbedding(4))
    attn.to(tt.float64)
    lengths = [3, 7, 5]
    seqs = [tt.randn(1, n + 2, 16, dtype=tt.float64) for n in lengths]
    cache = PagedKVCache(32, block_size=2, n_kv_heads=2, d_head=4, dtype=np.float64)
    for i, (x, n) in enumerate(zip(seqs, lengths)):
        cache.add_sequence(i)
        paged_self_attention(attn, x[:, :n], cache, [i])  # prefill, one sequence at a time
    outs = []
    for step in range(2):  # then decode the three together
        x = tt.cat([x[:, n + step : n + step + 1] for x, n in zip(seqs, lengths)], dim=0)
        outs.append(paged_self_attention(attn, x, cache, [0, 1, 2]).numpy())
    for i, (x, n) in enumerate(zip(seqs, lengths)):
        full = attn(x, is_causal=True).numpy()[0]
        np.testing.assert_allclose(outs[0][i, 0], full[n], atol=1e-12)
        np.testing.assert_allclose(outs[1][i, 0], full[n + 1], atol=1e-12)
