"""Our EncoderBlock / DecoderBlock against torch.nn.TransformerEncoderLayer / DecoderLayer
(same weights, Post-LN and Pre-LN), KV-cached decoding through a decoder layer, RMSNorm layers."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close, copy_linear, to_torch

B, T, S, D, H, FF = 2, 4, 3, 8, 2, 12


def copy_attention(torch, ours, theirs):
    """Our q/k/v/out projections into a torch.nn.MultiheadAttention (packed in_proj)."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(
            torch.cat(
                [to_torch(torch, getattr(ours, n).weight) for n in ("q_proj", "k_proj", "v_proj")]
            )
        )
        theirs.in_proj_bias.copy_(
            torch.cat(
                [to_torch(torch, getattr(ours, n).bias) for n in ("q_proj", "k_proj", "v_proj")]
            )
        )
    copy_linear(torch, ours.out_proj, theirs.out_proj)


def copy_norm(torch, ours, theirs):
    with torch.no_grad():
        theirs.weight.copy_(to_torch(torch, ours.weight))
        theirs.bias.copy_(to_torch(torch, ours.bias))


def randomize(layer):
    with tt.no_grad():  # norms away from ones/zeros, so that a swapped norm would show
        for p in layer.parameters():
            p.add_(tt.randn(*p.shape) * 0.2)


def grads_match(torch, ours, theirs, pairs):
    for our_name, their_name in pairs:
        ours_p = dict(ours.named_parameters())[our_name]
        theirs_p = dict(theirs.named_parameters())[their_name]
        assert_close(ours_p.grad, theirs_p.grad, what=our_name)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(torch, float64, norm_first):
    ours = nn.EncoderBlock(D, H, FF, dropout=0.0, activation="gelu", norm_first=norm_first)
    randomize(ours)
    theirs = torch.nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
    )
    copy_attention(torch, ours.self_attn, theirs.self_attn)
    copy_linear(torch, ours.ffn.fc_in, theirs.linear1)
    copy_linear(torch, ours.ffn.fc_out, theirs.linear2)
    copy_norm(torch, ours.norm1, theirs.norm1)
    copy_norm(torch, ours.norm2, theirs.norm2)
    x = tt.randn(B, T, D, requires_grad=True)
    key_mask = tt.tensor([[True] * T, [True, True, True, False]])
    xt = to_torch(torch, x, requires_grad=True)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = may NOT attend
    y = ours(x, key_mask=key_mask, is_causal=True)
    yt = theirs(xt, src_mask=causal, src_key_padding_mask=~to_torch(torch, key_mask))
    assert_close(y, yt)
    r = np.random.default_rng(0).standard_normal(y.shape)
    (y * tt.tensor(r)).sum().backward()
    (yt * torch.tensor(r)).sum().backward()
    assert_close(x.grad, xt.grad, what="dx")
    grads_match(
        torch,
        ours,
        theirs,
        [("ffn.fc_in.weight", "linear1.weight"), ("norm1.weight", "norm1.weight"),
         ("norm2.bias", "norm2.bias"), ("self_attn.out_proj.weight", "self_attn.out_proj.weight")],
    )  # fmt: skip


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(torch, float64, norm_first):
    ours = nn.DecoderBlock(D, H, FF, dropout=0.0, norm_first=norm_first)
    randomize(ours)
    theirs = torch.nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    copy_attention(torch, ours.self_attn, theirs.self_attn)
    copy_attention(torch, ours.cross_attn, theirs.multihead_attn)
    copy_linear(torch, ours.ffn.fc_in, theirs.linear1)
    copy_linear(torch, ours.ffn.fc_out, theirs.linear2)
    for i in (1, 2, 3):
        copy_norm(torch, getattr(ours, f"norm{i}"), getattr(theirs, f"norm{i}"))
    x = tt.randn(B, T, D, requires_grad=True)
    memory = tt.randn(B, S, D, requires_grad=True)
    memory_mask = tt.tensor([[True] * S, [True, True, False]])
    xt, mt = to_torch(torch, x, True), to_torch(torch, memory, True)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = may NOT attend
    y = ours(x, memory, memory_key_mask=memory_mask)
    yt = theirs(xt, mt, tgt_mask=causal, memory_key_padding_mask=~to_torch(torch, memory_mask))
    assert_close(y, yt)
    r = np.random.default_rng(0).standard_normal(y.shape)
    (y * tt.tensor(r)).sum().backward()
    (yt * torch.tensor(r)).sum().backward()
    assert_close(x.grad, xt.grad, what="dx")
    assert_close(memory.grad, mt.grad, what="dmemory")
    grads_match(
        torch,
        ours,
        theirs,
        [("cross_attn.out_proj.weight", "multihead_attn.out_proj.weight"),
         ("norm3.weight", "norm3.weight"), ("ffn.fc_out.bias", "linear2.bias")],
    )  # fmt: skip


def test_decoder_layer_kv_cached_decoding_equals_full(float64):
    rope = nn.RotaryEmbedding(4)
    layer = nn.DecoderBlock(
        D, H, FF, dropout=0.0, norm_first=True, norm="rmsnorm", bias=False, n_kv_heads=1,
        rotary=rope, activation="geglu",
    )  # fmt: skip
    x, memory = tt.randn(B, T, D), tt.randn(B, S, D)
    full = layer(x, memory)
    cache = nn.KVCache()
    with tt.no_grad():
        steps = [layer(x[:, :2], memory, cache=cache)]
        steps += [layer(x[:, t : t + 1], memory, cache=cache) for t in range(2, T)]
    np.testing.assert_allclose(tt.cat(steps, dim=1).numpy(), full.numpy(), atol=1e-12)
    assert cache.seq_len == T and len(cache) == 2


def test_rmsnorm_layer_has_no_norm_bias_and_gradchecks(float64):
    layer = nn.EncoderBlock(4, 2, 6, dropout=0.0, norm="rmsnorm", norm_first=True)
    assert "norm1.bias" not in dict(layer.named_parameters())
    x = tt.randn(1, 3, 4, requires_grad=True)
    assert tt.gradcheck(lambda x: layer(x, is_causal=True), [x])


def test_unknown_norm_is_refused():
    with pytest.raises(ValueError, match="unknown norm 'batchnorm'"):
        nn.EncoderBlock(D, H, norm="batchnorm")


def test_decoder_layer_gradcheck(float64):
    layer = nn.DecoderBlock(4, 2, 6, dropout=0.0, activation="gelu")
    x, memory = tt.randn(1, 3, 4, requires_grad=True), tt.randn(1, 2, 4, requires_grad=True)
    mask = tt.tensor([[True, False]])
    assert tt.gradcheck(lambda x, m: layer(x, m, memory_key_mask=mask), [x, memory])
