"""PyTorch's Transformer family and MultiheadAttention, as PyTorch users meet them.

Small programs written the way PyTorch projects write them (an Annotated-Transformer-style
encoder-decoder around nn.Transformer, a word_language_model-style TransformerModel with
batch_first=False and a square subsequent mask) are defined once, as functions of the library
(`torch` or `tinytensor`), run on both with the same weights (PyTorch's state_dict loaded into
ours), and compared in float64: outputs, loss and every parameter's gradient, in eval mode and in
train mode with dropout=0.
"""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close


def load_torch_weights(ours, theirs):
    """Loads a torch module's state_dict into ours, as a user converting a checkpoint would."""
    result = ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []


def assert_grads_match(ours, theirs):
    theirs_params = dict(theirs.named_parameters())
    names = [name for name, _ in ours.named_parameters()]
    assert names == list(theirs_params)
    for name, p in ours.named_parameters():
        assert p.grad is not None, f"{name} got no gradient"
        assert_close(p.grad, theirs_params[name].grad, atol=1e-9, what=f"grad of {name}")


# ---- MultiheadAttention ----------------------------------------------------------------------

L, S, N, E, HEADS = 4, 5, 3, 8, 2
MHA_CONFIGS = [
    dict(),
    dict(batch_first=True),
    dict(kdim=6, vdim=5),
    dict(add_bias_kv=True, add_zero_attn=True),
    dict(bias=False),
]


def mha_inputs(lib, config, rng):
    kdim, vdim = config.get("kdim", E), config.get("vdim", E)
    shapes = [(L, N, E), (S, N, kdim), (S, N, vdim)]
    if config.get("batch_first"):
        shapes = [(n, t, e) for t, n, e in shapes]
    return [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]


def mha_masks(lib, kind):
    """(key_padding_mask, attn_mask) in PyTorch's convention (True = padding / not allowed)."""
    padding = np.zeros((N, S), bool)
    padding[0, -2:] = True
    blocked = np.triu(np.ones((L, S), bool), 2)
    if kind == "none":
        return None, None
    if kind == "bool":
        return lib.tensor(padding), lib.tensor(blocked)
    if kind == "float":
        return lib.tensor(np.where(padding, -np.inf, 0.0)), lib.tensor(np.where(blocked, -1e9, 0.3))
    if kind == "mixed":
        return lib.tensor(padding), lib.tensor(np.where(blocked, -np.inf, 0.0))
    per_head = np.random.default_rng(1).standard_normal((N * HEADS, L, S))  # "3d" float mask
    return None, lib.tensor(per_head)


@pytest.mark.parametrize("config", MHA_CONFIGS, ids=lambda c: ",".join(c) or "default")
@pytest.mark.parametrize("masks", ["none", "bool", "float", "mixed", "3d"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_matches_torch(torch, float64, config, masks, need_weights):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(E, HEADS, **config)
    ours = nn.MultiheadAttention(E, HEADS, **config)
    load_torch_weights(ours, theirs)
    rng = np.random.default_rng(0)
    q, k, v = mha_inputs(tt, config, rng)
    qt, kt, vt = mha_inputs(torch, config, np.random.default_rng(0))
    padding, blocked = mha_masks(tt, masks)
    padding_t, blocked_t = mha_masks(torch, masks)
    out, weights = ours(q, k, v, padding, need_weights, blocked)
    out_t, weights_t = theirs(qt, kt, vt, padding_t, need_weights, blocked_t)
    assert_close(out, out_t, what="attn_output")
    if need_weights:
        assert_close(weights, weights_t, what="attn_weights")
    else:
        assert weights is None and weights_t is None
    r = rng.standard_normal(out.shape)
    (out * tt.tensor(r)).sum().backward()
    (out_t * torch.tensor(r)).sum().backward()
    for ours_x, theirs_x, name in ((q, qt, "query"), (k, kt, "key"), (v, vt, "value")):
        assert_close(ours_x.grad, theirs_x.grad, what=f"grad of {name}")
    assert_grads_match(ours, theirs)


def test_multihead_attention_self_attention_per_head_weights_and_unbatched(torch, float64):
    torch.manual_seed(1)
    theirs = torch.nn.MultiheadAttention(E, HEADS, batch_first=True)
    ours = nn.MultiheadAttention(E, HEADS, batch_first=True)
    load_torch_weights(ours, theirs)
    x = np.random.default_rng(2).standard_normal((N, L, E))
    xo, xt = tt.tensor(x), torch.tensor(x)
    out, w = ours(xo, xo, xo, average_attn_weights=False)  # query is key is value: packed path
    out_t, w_t = theirs(xt, xt, xt, average_attn_weights=False)
    assert tuple(w.shape) == (N, HEADS, L, L)
    assert_close(out, out_t)
    assert_close(w, w_t)
    out1, w1 = ours(xo[0], xo[0], xo[0])  # unbatched (L, E)
    out1_t, w1_t = theirs(xt[0], xt[0], xt[0])
    assert tuple(out1.shape) == (L, E)
    assert_close(out1, out1_t)
    assert_close(w1, w1_t)


def test_multihead_attention_is_causal_hint_with_its_mask(torch, float64):
    torch.manual_seed(2)
    theirs = torch.nn.MultiheadAttention(E, HEADS)
    ours = nn.MultiheadAttention(E, HEADS)
    load_torch_weights(ours, theirs)
    x = np.random.default_rng(3).standard_normal((L, N, E))
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    mask_t = torch.nn.Transformer.generate_square_subsequent_mask(L)
    for need_weights in (False, True):
        out, _ = ours(
            *[tt.tensor(x)] * 3, attn_mask=mask, is_causal=True, need_weights=need_weights
        )
        out_t, _ = theirs(
            *[torch.tensor(x)] * 3, attn_mask=mask_t, is_causal=True, need_weights=need_weights
        )
        assert_close(out, out_t, what=f"need_weights={need_weights}")


def test_multihead_attention_parameters_and_state_dict_layout(torch):
    for config in MHA_CONFIGS:
        ours, theirs = (
            nn.MultiheadAttention(E, HEADS, **config),
            torch.nn.MultiheadAttention(E, HEADS, **config),
        )
        assert list(ours.state_dict()) == list(theirs.state_dict()), config
        for (name, p), (name_t, p_t) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert name == name_t and tuple(p.shape) == tuple(p_t.shape)
    separate = nn.MultiheadAttention(E, HEADS, kdim=6)
    assert separate.in_proj_weight is None and tuple(separate.k_proj_weight.shape) == (E, 6)


def test_multihead_attention_initialization_as_torch():
    mha = nn.MultiheadAttention(64, 4)
    bound = math.sqrt(6 / (64 + 3 * 64))  # xavier_uniform on the packed (3E, E) weight
    w = mha.in_proj_weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()


def test_multihead_attention_errors_name_the_argument():
    mha = nn.MultiheadAttention(E, HEADS)
    x = tt.randn(L, N, E)
    with pytest.raises(ValueError, match="embed_dim=10 must be a positive multiple of num_heads=3"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(RuntimeError, match="is_causal=True needs attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match=r"attn_mask must be \(L, S\) = \(4, 4\)"):
        mha(x, x, x, attn_mask=tt.zeros(3, 4))
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(N, S\) = \(3, 4\)"):
        mha(x, x, x, key_padding_mask=tt.zeros(N, 5, dtype=tt.bool))
    with pytest.raises(TypeError, match="attn_mask must be bool .* got int64"):
        mha(x, x, x, attn_mask=tt.zeros(L, L, dtype=tt.int64))
    with pytest.raises(
        ValueError, match=r"query must be \(T, N, E\) .* E = 8, got shape \(4, 3, 7\)"
    ):
        mha(tt.randn(L, N, 7), x, x)
    with pytest.raises(ValueError, match="all be batched"):
        mha(x, x[0], x[0])


# ---- Transformer layers --------------------------------------------------------------------

D, NHEAD, FF = 8, 2, 16
LAYER_OPTIONS = [
    dict(),
    dict(norm_first=True, activation="gelu"),
    dict(batch_first=True, bias=False),
    dict(layer_norm_eps=1e-3, activation="callable"),
]


def layer_options(lib, options):
    options = dict(options)
    if options.get("activation") == "callable":  # a Module, as users pass nn.GELU()
        options["activation"] = lib.nn.GELU(approximate="tanh")
    return options


@pytest.mark.parametrize("options", LAYER_OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_encoder_and_decoder_layers_match_torch(torch, float64, options):
    torch.manual_seed(3)
    theirs_enc = torch.nn.TransformerEncoderLayer(
        D, NHEAD, FF, 0.0, **layer_options(torch, options)
    )
    theirs_dec = torch.nn.TransformerDecoderLayer(
        D, NHEAD, FF, 0.0, **layer_options(torch, options)
    )
    ours_enc = nn.TransformerEncoderLayer(D, NHEAD, FF, 0.0, **layer_options(tt, options))
    ours_dec = nn.TransformerDecoderLayer(D, NHEAD, FF, 0.0, **layer_options(tt, options))
    with torch.no_grad():  # norms away from ones and zeros, so a swapped norm would show
        for p in [*theirs_enc.parameters(), *theirs_dec.parameters()]:
            p.add_(torch.randn(p.shape) * 0.1)
    load_torch_weights(ours_enc, theirs_enc)
    load_torch_weights(ours_dec, theirs_dec)
    batch_first = options.get("batch_first", False)
    rng = np.random.default_rng(4)
    src = rng.standard_normal((N, S, D) if batch_first else (S, N, D))
    tgt = rng.standard_normal((N, L, D) if batch_first else (L, N, D))
    src_padding = np.zeros((N, S), bool)
    src_padding[1, -1] = True

    def run(lib, enc, dec):
        memory = enc(lib.tensor(src), src_key_padding_mask=lib.tensor(src_padding))
        causal = lib.nn.Transformer.generate_square_subsequent_mask(L)
        out = dec(
            lib.tensor(tgt),
            memory,
            tgt_mask=causal,
            memory_mask=lib.tensor(np.triu(np.ones((L, S), bool), 3)),  # True = may not attend
            memory_key_padding_mask=lib.tensor(src_padding),
            tgt_is_causal=True,
        )
        (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(out.shape))).sum().backward()
        return out

    assert_close(run(tt, ours_enc, ours_dec), run(torch, theirs_enc, theirs_dec))
    assert_grads_match(ours_enc, theirs_enc)
    assert_grads_match(ours_dec, theirs_dec)


def test_layer_state_dict_keys_are_torchs(torch):
    for options in LAYER_OPTIONS:
        for name in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
            ours = getattr(nn, name)(D, NHEAD, FF, **layer_options(tt, options))
            theirs = getattr(torch.nn, name)(D, NHEAD, FF, **layer_options(torch, options))
            assert list(ours.state_dict()) == list(theirs.state_dict()), (name, options)
            assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]


def test_layer_defaults_are_torchs():
    layer = nn.TransformerEncoderLayer(D, NHEAD)
    assert tuple(layer.linear1.weight.shape) == (2048, D)  # dim_feedforward=2048
    assert layer.dropout.p == 0.1 and layer.self_attn.dropout == 0.1
    assert layer.self_attn.batch_first is False and layer.norm_first is False
    assert layer.norm1.eps == 1e-5
    x = tt.randn(5, 2, D)  # (T, N, E): batch_first=False
    assert tuple(layer.eval()(x).shape) == (5, 2, D)


def test_transformer_errors():
    with pytest.raises(ValueError, match="activation should be relu/gelu, not 'tanh'"):
        nn.TransformerEncoderLayer(D, NHEAD, activation="tanh")
    with pytest.raises(TypeError, match="encoder_layer must be a Module"):
        nn.TransformerEncoder("layer", 2)
    model = nn.Transformer(D, NHEAD, 1, 1, FF)
    with pytest.raises(ValueError, match=r"batch size of src \(2\) and tgt \(3\)"):
        model(tt.randn(5, 2, D), tt.randn(4, 3, D))
    with pytest.raises(ValueError, match="must equal d_model=8"):
        model(tt.randn(5, 2, D), tt.randn(4, 2, 6))


def test_generate_square_subsequent_mask_is_torchs(torch):
    ours = nn.Transformer.generate_square_subsequent_mask(5)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float32)
    assert ours.dtype == tt.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_custom_encoder_and_decoder_are_used(torch):
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, NHEAD, FF), 3)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, NHEAD, FF), 1)
    model = nn.Transformer(D, NHEAD, custom_encoder=encoder, custom_decoder=decoder)
    theirs = torch.nn.Transformer(
        D,
        NHEAD,
        custom_encoder=torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(D, NHEAD, FF), 3
        ),
        custom_decoder=torch.nn.TransformerDecoder(
            torch.nn.TransformerDecoderLayer(D, NHEAD, FF), 1
        ),
    )
    assert model.encoder is encoder and len(model.encoder.layers) == 3
    assert list(model.state_dict()) == list(theirs.state_dict())


# ---- Programs ---------------------------------------------------------------------------------


def annotated_transformer_style(lib, d_model=16, vocab=11, dropout=0.0):
    """An encoder-decoder for a copy task in the Annotated Transformer's style, around
    nn.Transformer: scaled embeddings, sinusoidal positions, a generator with log_softmax."""
    nn_, F = lib.nn, lib.nn.functional

    class PositionalEncoding(nn_.Module):
        def __init__(self, d_model, dropout, max_len=64):
            super().__init__()
            self.dropout = nn_.Dropout(p=dropout)
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0), persistent=False)

        def forward(self, x):
            return self.dropout(x + self.pe[:, : x.size(1)])

    class Seq2Seq(nn_.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = nn_.Embedding(vocab, d_model)
            self.tgt_embed = nn_.Embedding(vocab, d_model)
            self.pos = PositionalEncoding(d_model, dropout)
            self.transformer = nn_.Transformer(
                d_model, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                dim_feedforward=32, dropout=dropout, batch_first=True,
            )  # fmt: skip
            self.generator = nn_.Linear(d_model, vocab)

        def forward(self, src, tgt, src_pad, tgt_pad):
            tgt_mask = nn_.Transformer.generate_square_subsequent_mask(tgt.size(1))
            out = self.transformer(
                self.pos(self.src_embed(src) * math.sqrt(d_model)),
                self.pos(self.tgt_embed(tgt) * math.sqrt(d_model)),
                tgt_mask=tgt_mask,
                src_key_padding_mask=src_pad,
                tgt_key_padding_mask=tgt_pad,
                memory_key_padding_mask=src_pad,
            )
            return F.log_softmax(self.generator(out), dim=-1)

    return Seq2Seq()


def word_language_model_style(lib, ntoken=13, ninp=16, dropout=0.0):
    """A language model in the style of pytorch/examples' word_language_model: it subclasses
    nn.Transformer, keeps only its encoder (replacing `decoder` by the output Linear), takes (T, N)
    batches (batch_first=False) and masks with log(tril(ones)), a square subsequent mask."""
    nn_, F = lib.nn, lib.nn.functional

    class PositionalEncoding(nn_.Module):
        def __init__(self, d_model, dropout, max_len=64):
            super().__init__()
            self.dropout = nn_.Dropout(p=dropout)
            position = lib.arange(0, max_len, dtype=lib.float).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe = lib.zeros(max_len, d_model)
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))  # (max_len, 1, d)

        def forward(self, x):
            return self.dropout(x + self.pe[: x.size(0), :])

    class TransformerModel(nn_.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout):
            super().__init__(
                d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                num_decoder_layers=1, dropout=dropout,
            )  # fmt: skip
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn_.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn_.Linear(ninp, ntoken)  # replaces the TransformerDecoder
            nn_.init.uniform_(self.input_emb.weight, -0.1, 0.1)
            nn_.init.zeros_(self.decoder.bias)
            nn_.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, src):
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = lib.log(lib.tril(lib.ones(len(src), len(src))))
            x = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
            x = self.encoder(x, mask=self.src_mask)
            return F.log_softmax(self.decoder(x), dim=-1)

    return TransformerModel(ntoken, ninp, 2, 32, 2, dropout)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_annotated_transformer_style_program_matches_torch(torch, float64, mode):
    torch.manual_seed(5)
    theirs = annotated_transformer_style(torch)
    ours = annotated_transformer_style(tt)
    load_torch_weights(ours, theirs)
    assert "pos.pe" not in ours.state_dict()  # a non-persistent buffer, as in torch
    rng = np.random.default_rng(6)
    src, tgt = rng.integers(1, 11, (2, 7)), rng.integers(1, 11, (2, 6))
    src[1, -2:], tgt[1, -1:] = 0, 0  # padding id 0
    losses = []
    for lib, model in ((tt, ours), (torch, theirs)):
        model.train(mode == "train")
        log_probs = model(
            lib.tensor(src),
            lib.tensor(tgt[:, :-1]),
            lib.tensor(src == 0),
            lib.tensor(tgt[:, :-1] == 0),
        )
        loss = lib.nn.functional.nll_loss(
            log_probs.reshape(-1, log_probs.size(-1)), lib.tensor(tgt[:, 1:]).reshape(-1),
            ignore_index=0,
        )  # fmt: skip
        loss.backward()
        losses.append((log_probs, loss))
    assert_close(losses[0][0], losses[1][0], what="log-probs")
    assert_close(losses[0][1], losses[1][1], what="loss")
    assert_grads_match(ours, theirs)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_word_language_model_style_program_matches_torch(torch, float64, mode):
    torch.manual_seed(7)
    theirs = word_language_model_style(torch)
    ours = word_language_model_style(tt)
    load_torch_weights(ours, theirs)
    data = np.random.default_rng(8).integers(0, 13, (9, 3))  # (T + 1, N)
    results = []
    for lib, model in ((tt, ours), (torch, theirs)):
        model.train(mode == "train")
        output = model(lib.tensor(data[:-1]))
        loss = lib.nn.functional.nll_loss(output.view(-1, 13), lib.tensor(data[1:]).view(-1))
        loss.backward()
        results.append((output, loss))
    assert_close(results[0][0], results[1][0], what="log-probs")
    assert_close(results[0][1], results[1][1], what="loss")
    assert_grads_match(ours, theirs)


def test_dropout_acts_in_train_mode_only():
    model = word_language_model_style(tt, dropout=0.5)
    data = tt.tensor(np.random.default_rng(9).integers(0, 13, (6, 2)))
    model.eval()
    with tt.no_grad():
        first, second = model(data), model(data)
        np.testing.assert_array_equal(first.numpy(), second.numpy())
        model.train()
        assert not np.allclose(model(data).numpy(), first.numpy())


def test_attention_dropout_acts_on_the_returned_weights_as_torch(float64):
    """PyTorch returns the weights after dropout: each is 0 or its eval value / (1 - p)."""
    mha = nn.MultiheadAttention(E, HEADS, dropout=0.5)
    x = tt.randn(16, 4, E)
    with tt.no_grad():
        _, eval_weights = mha.eval()(x, x, x, average_attn_weights=False)
        _, train_weights = mha.train()(x, x, x, average_attn_weights=False)
    dropped = train_weights.numpy() == 0
    assert 0.4 < dropped.mean() < 0.6
    np.testing.assert_allclose(train_weights.numpy()[~dropped], 2 * eval_weights.numpy()[~dropped])


def test_transformer_initializes_every_matrix_xavier_uniform():
    model = nn.Transformer(D, NHEAD, 1, 1, FF)
    for name, p in model.named_parameters():
        if p.ndim > 1:
            fan_out, fan_in = p.shape
            bound = math.sqrt(6 / (fan_in + fan_out))
            assert 0.7 * bound < np.abs(p.numpy()).max() <= bound, name
    assert (model.encoder.norm.weight.numpy() == 1).all()  # vectors keep their own init


def test_fully_masked_query_gives_what_torch_gives(torch, float64):
    """A sequence that is all padding: zeros on the fused path, NaN with need_weights (torch's
    softmax over nothing), in both libraries."""
    torch.manual_seed(4)
    theirs, ours = torch.nn.MultiheadAttention(E, HEADS), nn.MultiheadAttention(E, HEADS)
    load_torch_weights(ours, theirs)
    x = np.random.default_rng(5).standard_normal((L, N, E))
    padding = np.zeros((N, L), bool)
    padding[1] = True
    for need_weights in (False, True):
        out, _ = ours(*[tt.tensor(x)] * 3, tt.tensor(padding), need_weights)
        out_t, _ = theirs(*[torch.tensor(x)] * 3, torch.tensor(padding), need_weights)
        np.testing.assert_array_equal(np.isnan(out.numpy()), np.isnan(out_t.detach().numpy()))
        assert np.isnan(out.numpy()[:, 1]).all() == need_weights
        assert_close(out[:, 0], out_t[:, 0])


@pytest.mark.parametrize("grad", [False, True])
def test_encoder_inference_zeros_padded_positions_as_torch(torch, float64, grad):
    """torch's nested-tensor path (eval, no gradient, batch_first, a padding mask) returns zeros
    at padded positions, then the final norm; with gradients it computes every position."""
    torch.manual_seed(6)

    def build(lib):
        layer = lib.nn.TransformerEncoderLayer(D, NHEAD, FF, batch_first=True)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(D)).eval()

    theirs, ours = build(torch), build(tt)
    with torch.no_grad():
        theirs.norm.bias.add_(0.5)  # padded rows then show the norm's bias, not zeros
    load_torch_weights(ours, theirs)
    x = np.random.default_rng(7).standard_normal((N, S, D))
    padding = np.zeros((N, S), bool)
    padding[1, -2:] = True
    with tt.set_grad_enabled(grad), torch.set_grad_enabled(grad):
        out = ours(tt.tensor(x, requires_grad=grad), src_key_padding_mask=tt.tensor(padding))
        out_t = theirs(
            torch.tensor(x, requires_grad=grad), src_key_padding_mask=torch.tensor(padding)
        )
    assert_close(out, out_t)
    padded_rows_are_bias = np.allclose(out.numpy()[1, -2:], 0.5)
    assert padded_rows_are_bias != grad


def test_unbatched_inputs_as_torch(torch, float64):
    torch.manual_seed(8)
    theirs = torch.nn.Transformer(D, NHEAD, 1, 1, FF, dropout=0.0)
    ours = nn.Transformer(D, NHEAD, 1, 1, FF, dropout=0.0)
    load_torch_weights(ours, theirs)
    rng = np.random.default_rng(9)
    src, tgt = rng.standard_normal((S, D)), rng.standard_normal((L, D))  # no batch dim
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    mask_t = torch.nn.Transformer.generate_square_subsequent_mask(L)
    out = ours(tt.tensor(src), tt.tensor(tgt), tgt_mask=mask)
    out_t = theirs(torch.tensor(src), torch.tensor(tgt), tgt_mask=mask_t)
    assert tuple(out.shape) == (L, D)
    assert_close(out, out_t)
