"""Position encodings: T5 bucketing and bias vs HF, ALiBi slopes vs the paper, sinusoidal vs the
formula, learned positions, RoPE's relative property."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close, to_torch


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20), (32, 16)])
def test_t5_bucketing_equals_hf(transformers, torch, bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = np.arange(-400, 401)[None, :] + np.arange(0, 3)[:, None]
    theirs = T5Attention._relative_position_bucket(
        torch.tensor(relative), bidirectional, num_buckets, max_distance
    )
    ours = nn.relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(ours, theirs.numpy())


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_relative_position_bias_equals_hf_compute_bias(
    transformers, torch, float64, bidirectional
):
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention

    config = T5Config(
        d_model=8, d_kv=4, num_heads=2, relative_attention_num_buckets=8,
        relative_attention_max_distance=20, is_decoder=not bidirectional,
    )  # fmt: skip
    hf = T5Attention(config, has_relative_attention_bias=True).double()
    ours = nn.T5RelativePositionBias(2, num_buckets=8, max_distance=20, bidirectional=bidirectional)
    with torch.no_grad():
        hf.relative_attention_bias.weight.copy_(
            to_torch(torch, ours.relative_attention_bias.weight)
        )
    assert_close(ours(7, 7), hf.compute_bias(7, 7))
    # decoding: one query at position 6 against 7 keys is the last row of the full bias
    assert_close(ours(1, 7, offset=6), hf.compute_bias(7, 7)[:, :, 6:7])
    assert_close(ours(1, 7, offset=6), hf.compute_bias(1, 7, past_seen_tokens=6))


def test_t5_relative_position_bias_gradcheck(float64):
    bias = nn.T5RelativePositionBias(2, num_buckets=6, max_distance=10)
    assert [n for n, _ in bias.named_parameters()] == ["relative_attention_bias.weight"]

    w = bias.relative_attention_bias.weight.detach().requires_grad_(True)
    del bias.relative_attention_bias.weight  # as torch: a plain tensor can't replace a Parameter

    def f(w):
        bias.relative_attention_bias.weight = w
        return bias(4, 5, offset=1)

    assert tt.gradcheck(f, [w])


def test_alibi_slopes_follow_the_paper():
    # 8 heads: the geometric sequence 1/2^1 .. 1/2^8 (Press et al. 2022, section 3)
    np.testing.assert_allclose(nn.alibi_slopes(8), [2.0**-k for k in range(1, 9)])
    # 12 heads: the 8-head slopes, then every other slope of 16 heads (2^-0.5, 2^-1.5, ...)
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    np.testing.assert_allclose(nn.alibi_slopes(12), expected)
    np.testing.assert_allclose(nn.alibi_slopes(4), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])


def test_alibi_bias_and_decoding_offset(float64):
    alibi = nn.ALiBi(4)
    bias = alibi(5, 5).numpy()
    assert bias.shape == (1, 4, 5, 5)
    slopes = nn.alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(i + 1):
                assert math.isclose(bias[0, h, i, j], slopes[h] * (j - i), abs_tol=1e-15)
    np.testing.assert_array_equal(alibi(1, 5, offset=4).numpy(), bias[:, :, 4:5])
    assert alibi.state_dict() == {}  # slopes are fixed: not saved


def test_sinusoidal_encoding_follows_the_formula(float64):
    pe = nn.SinusoidalPositionalEncoding(50, 6)
    table = pe(50).numpy()
    for pos in (0, 1, 7, 49):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert math.isclose(table[pos, 2 * i], math.sin(angle), abs_tol=1e-12)
            assert math.isclose(table[pos, 2 * i + 1], math.cos(angle), abs_tol=1e-12)
    np.testing.assert_array_equal(pe(3, offset=5).numpy(), table[5:8])
    assert list(pe.parameters()) == [] and pe.state_dict() == {}
    with pytest.raises(IndexError, match="out of range"):
        pe(10, offset=45)


def test_learned_positions_are_embedding_rows_with_gradient(float64):
    wpe = nn.LearnedPositionalEmbedding(8, 4)
    out = wpe(3, offset=2)
    np.testing.assert_array_equal(out.numpy(), wpe.weight.numpy()[2:5])
    out.sum().backward()
    expected = np.zeros((8, 4))
    expected[2:5] = 1
    np.testing.assert_array_equal(wpe.weight.grad.numpy(), expected)
    assert list(wpe.state_dict()) == ["weight"]
    with pytest.raises(IndexError, match="max_positions=8"):
        wpe(5, offset=4)


def test_rope_scores_depend_only_on_relative_position(float64):
    rope = nn.RotaryEmbedding(8)
    q, k = tt.randn(1, 1, 1, 8), tt.randn(1, 1, 1, 8)

    def score(m, n):
        return (rope.rotate(q, m) * rope.rotate(k, n)).sum().item()

    assert math.isclose(score(3, 1), score(10, 8), rel_tol=1e-10)
    assert math.isclose(score(0, 0), (q * k).sum().item(), rel_tol=1e-10)
    assert not math.isclose(score(3, 1), score(3, 2), rel_tol=1e-6)


def test_partial_rope_leaves_the_other_features(float64):
    rope = nn.RotaryEmbedding(4)
    x = tt.randn(1, 2, 3, 6)
    out = rope.rotate(x, offset=1)
    np.testing.assert_array_equal(out.numpy()[..., 4:], x.numpy()[..., 4:])
    np.testing.assert_allclose(out.numpy()[..., :4], rope.rotate(x[..., :4], 1).numpy())


def test_rope_gradcheck(float64):
    rope = nn.RotaryEmbedding(4)
    x = tt.randn(1, 2, 3, 4, requires_grad=True)
    assert tt.gradcheck(lambda x: rope.rotate(x, offset=2), [x])
