"""An encoder-decoder built by hand from primitives, the way the Annotated Transformer builds one
(deep-copied clones in ModuleLists, a LayerNorm of raw Parameters, sublayer connections, attention
written out with masked_fill, Sequential embeddings, a registered positional table, Xavier init
of every matrix), written once as a function of the library and run on torch and on tinytensor
with the same weights: state_dict keys, log-probs, loss and every gradient in float64."""

import copy
import math

import numpy as np
import pytest

import tinytensor as tt

from .conftest import assert_close


def build(lib, vocab=11, n_layers=2, d_model=16, d_ff=32, heads=4, dropout=0.0):
    nn_, F = lib.nn, lib.nn.functional

    def clones(module, n):
        return nn_.ModuleList([copy.deepcopy(module) for _ in range(n)])

    class LayerNorm(nn_.Module):
        def __init__(self, features, eps=1e-6):
            super().__init__()
            self.a_2 = nn_.Parameter(lib.ones(features))
            self.b_2 = nn_.Parameter(lib.zeros(features))
            self.eps = eps

        def forward(self, x):
            mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
            return self.a_2 * (x - mean) / (std + self.eps) + self.b_2

    class Residual(nn_.Module):
        def __init__(self, size, dropout):
            super().__init__()
            self.norm = LayerNorm(size)
            self.dropout = nn_.Dropout(dropout)

        def forward(self, x, sublayer):
            return x + self.dropout(sublayer(self.norm(x)))

    def attention(query, key, value, mask, dropout):
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
        scores = scores.masked_fill(mask == 0, -1e9)
        return dropout(scores.softmax(dim=-1)) @ value

    class HeadsAttention(nn_.Module):
        def __init__(self, h, d_model, dropout):
            super().__init__()
            self.d_k, self.h = d_model // h, h
            self.linears = clones(nn_.Linear(d_model, d_model), 4)
            self.dropout = nn_.Dropout(p=dropout)

        def forward(self, query, key, value, mask):
            mask = mask.unsqueeze(1)  # the same mask for every head
            n = query.size(0)
            query, key, value = [
                lin(x).view(n, -1, self.h, self.d_k).transpose(1, 2)
                for lin, x in zip(self.linears, (query, key, value))
            ]
            x = attention(query, key, value, mask, self.dropout)
            x = x.transpose(1, 2).contiguous().view(n, -1, self.h * self.d_k)
            return self.linears[-1](x)

    class FeedForward(nn_.Module):
        def __init__(self, d_model, d_ff, dropout):
            super().__init__()
            self.w_1, self.w_2 = nn_.Linear(d_model, d_ff), nn_.Linear(d_ff, d_model)
            self.dropout = nn_.Dropout(dropout)

        def forward(self, x):
            return self.w_2(self.dropout(self.w_1(x).relu()))

    class EncoderLayer(nn_.Module):
        def __init__(self, size, self_attn, feed_forward, dropout):
            super().__init__()
            self.self_attn, self.feed_forward = self_attn, feed_forward
            self.sublayer = clones(Residual(size, dropout), 2)

        def forward(self, x, mask):
            x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
            return self.sublayer[1](x, self.feed_forward)

    class DecoderLayer(nn_.Module):
        def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
            super().__init__()
            self.self_attn, self.src_attn, self.feed_forward = self_attn, src_attn, feed_forward
            self.sublayer = clones(Residual(size, dropout), 3)

        def forward(self, x, memory, src_mask, tgt_mask):
            x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
            x = self.sublayer[1](x, lambda x: self.src_attn(x, memory, memory, src_mask))
            return self.sublayer[2](x, self.feed_forward)

    class Stack(nn_.Module):
        def __init__(self, layer, n):
            super().__init__()
            self.layers = clones(layer, n)
            self.norm = LayerNorm(layer.self_attn.linears[0].in_features)

        def forward(self, x, *args):
            for layer in self.layers:
                x = layer(x, *args)
            return self.norm(x)

    class Embeddings(nn_.Module):
        def __init__(self, d_model, vocab):
            super().__init__()
            self.lut, self.d_model = nn_.Embedding(vocab, d_model), d_model

        def forward(self, x):
            return self.lut(x) * math.sqrt(self.d_model)

    class PositionalEncoding(nn_.Module):
        def __init__(self, d_model, dropout, max_len=32):
            super().__init__()
            self.dropout = nn_.Dropout(p=dropout)
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x):
            return self.dropout(x + self.pe[:, : x.size(1)].requires_grad_(False))

    class EncoderDecoder(nn_.Module):
        def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder
            self.src_embed, self.tgt_embed, self.generator = src_embed, tgt_embed, generator

        def forward(self, src, tgt, src_mask, tgt_mask):
            memory = self.encoder(self.src_embed(src), src_mask)
            out = self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)
            return F.log_softmax(self.generator(out), dim=-1)

    c = copy.deepcopy
    attn, ff = HeadsAttention(heads, d_model, dropout), FeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Stack(EncoderLayer(d_model, c(attn), c(ff), dropout), n_layers),
        Stack(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), n_layers),
        nn_.Sequential(Embeddings(d_model, vocab), c(position)),
        nn_.Sequential(Embeddings(d_model, vocab), c(position)),
        nn_.Linear(d_model, vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn_.init.xavier_uniform_(p)
    return model


def masks(lib, src, tgt, pad=0):
    src_mask = (src != pad).unsqueeze(-2)  # (N, 1, S)
    size = tgt.size(-1)
    future = lib.triu(lib.ones((1, size, size)), diagonal=1).type(lib.uint8)
    tgt_mask = (tgt != pad).unsqueeze(-2) & (future == 0)  # (N, T, T)
    return src_mask, tgt_mask


def test_state_dict_keys_are_torchs(torch):
    assert list(build(tt).state_dict()) == list(build(torch).state_dict())


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_hand_built_encoder_decoder_matches_torch(torch, float64, mode):
    torch.manual_seed(0)
    theirs, ours = build(torch), build(tt)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 11, (2, 7)), rng.integers(1, 11, (2, 6))
    src[1, -2:], tgt[1, -1:] = 0, 0
    results = []
    for lib, model in ((tt, ours), (torch, theirs)):
        model.train(mode == "train")
        s, t_in, t_out = lib.tensor(src), lib.tensor(tgt[:, :-1]), lib.tensor(tgt[:, 1:])
        log_probs = model(s, t_in, *masks(lib, s, t_in))
        loss = lib.nn.functional.nll_loss(
            log_probs.reshape(-1, 11), t_out.reshape(-1), ignore_index=0, reduction="sum"
        )
        loss.backward()
        results.append((log_probs, loss))
    assert_close(results[0][0], results[1][0], what="log-probs")
    assert_close(results[0][1], results[1][1], what="loss")
    theirs_params = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(theirs_params)
    for name, p in ours.named_parameters():
        assert_close(p.grad, theirs_params[name].grad, atol=1e-9, what=name)
