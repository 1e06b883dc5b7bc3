"""Layers against PyTorch (float64, same weights, forward and gradients), plus gradchecks."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close, copy_linear, to_torch


def check_against_torch(torch, ours, theirs, x, pairs, xt=None):
    """Runs both layers on x, compares outputs and the gradients of x and of each
    (our parameter, their parameter) pair under a random output projection."""
    xt = to_torch(torch, x, requires_grad=x.dtype.kind == "f") if xt is None else xt
    y, yt = ours(x), theirs(xt)
    assert_close(y, yt, what="output")
    r = np.random.default_rng(0).standard_normal(y.shape)
    (y * tt.tensor(r)).sum().backward()
    (yt * torch.tensor(r)).sum().backward()
    if x.requires_grad:
        assert_close(x.grad, xt.grad, what="input grad")
    for name, (p, pt) in pairs.items():
        assert_close(p.grad, pt.grad, what=f"{name} grad")


def test_linear_matches_torch(torch, float64):
    ours, theirs = nn.Linear(5, 3), torch.nn.Linear(5, 3)
    copy_linear(torch, ours, theirs)
    x = tt.randn(2, 4, 5, requires_grad=True)
    pairs = {"weight": (ours.weight, theirs.weight), "bias": (ours.bias, theirs.bias)}
    check_against_torch(torch, ours, theirs, x, pairs)
    assert nn.Linear(5, 3, bias=False).bias is None


def test_embedding_matches_torch_and_padding_row(torch, float64):
    ours = nn.Embedding(6, 4, padding_idx=1)
    assert np.all(ours.weight.numpy()[1] == 0)  # initialized to zero, as PyTorch
    theirs = torch.nn.Embedding(6, 4, padding_idx=1)
    with torch.no_grad():
        theirs.weight.copy_(to_torch(torch, ours.weight))
    ids = tt.tensor([[0, 1, 2], [1, 5, 5]])
    check_against_torch(
        torch, ours, theirs, ids, {"weight": (ours.weight, theirs.weight)}, to_torch(torch, ids)
    )
    assert np.all(ours.weight.grad.numpy()[1] == 0)  # the padding row gets no gradient


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_layer_norm_matches_torch(torch, float64, affine, bias):
    ours = nn.LayerNorm(6, eps=1e-4, elementwise_affine=affine, bias=bias)
    theirs = torch.nn.LayerNorm(6, eps=1e-4, elementwise_affine=affine, bias=bias)
    pairs = {}
    if affine:
        with tt.no_grad():
            ours.weight.copy_(tt.randn(6))
        with torch.no_grad():
            theirs.weight.copy_(to_torch(torch, ours.weight))
        pairs["weight"] = (ours.weight, theirs.weight)
        if bias:
            with tt.no_grad():
                ours.bias.copy_(tt.randn(6))
            with torch.no_grad():
                theirs.bias.copy_(to_torch(torch, ours.bias))
            pairs["bias"] = (ours.bias, theirs.bias)
    check_against_torch(torch, ours, theirs, tt.randn(3, 2, 6, requires_grad=True), pairs)


def test_rms_norm_matches_torch_and_t5(torch, transformers, float64):
    ours = nn.RMSNorm(6, eps=1e-6)
    with tt.no_grad():
        ours.weight.copy_(tt.randn(6))
    theirs = torch.nn.RMSNorm(6, eps=1e-6)
    with torch.no_grad():
        theirs.weight.copy_(to_torch(torch, ours.weight))
    x = tt.randn(3, 6, requires_grad=True)
    check_against_torch(torch, ours, theirs, x, {"weight": (ours.weight, theirs.weight)})
    from transformers.models.t5.modeling_t5 import T5LayerNorm

    t5 = T5LayerNorm(6, eps=1e-6)
    with torch.no_grad():
        t5.weight.copy_(to_torch(torch, ours.weight))
    assert_close(ours(x), t5(to_torch(torch, x)), what="T5LayerNorm")
    assert not any(name.endswith("bias") for name, _ in ours.named_parameters())


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5)])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_running_statistics_and_eval_match_torch(torch, float64, shape, momentum):
    ours = nn.BatchNorm1d(3, momentum=momentum)
    theirs = torch.nn.BatchNorm1d(3, momentum=momentum)
    with tt.no_grad():
        ours.weight.copy_(tt.randn(3))
        ours.bias.copy_(tt.randn(3))
    with torch.no_grad():
        theirs.weight.copy_(to_torch(torch, ours.weight))
        theirs.bias.copy_(to_torch(torch, ours.bias))
    for step in range(4):
        x = tt.randn(*shape) * (step + 1) + step
        x.requires_grad_(True)
        pairs = {"weight": (ours.weight, theirs.weight), "bias": (ours.bias, theirs.bias)}
        ours.zero_grad()
        theirs.zero_grad()
        check_against_torch(torch, ours, theirs, x, pairs)
        assert_close(ours.running_mean, theirs.running_mean, what="running_mean")
        assert_close(ours.running_var, theirs.running_var, what="running_var")
        assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == step + 1
    ours.eval()
    theirs.eval()
    x = tt.randn(*shape, requires_grad=True)
    check_against_torch(torch, ours, theirs, x, {"weight": (ours.weight, theirs.weight)})
    assert set(ours.state_dict()) == set(theirs.state_dict())


def test_batch_norm_rejects_wrong_input():
    with pytest.raises(ValueError, match=r"expected input \(N, 3\)"):
        nn.BatchNorm1d(3)(tt.randn(2, 4))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(tt.randn(1, 3))


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (lambda: nn.ReLU(), "ReLU()"),
        (lambda: nn.GELU(), "GELU()"),
        (lambda: nn.GELU(approximate="tanh"), "GELU(approximate='tanh')"),
        (lambda: nn.SiLU(), "SiLU()"),
        (lambda: nn.Tanh(), "Tanh()"),
        (lambda: nn.Sigmoid(), "Sigmoid()"),
    ],
    ids=["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"],
)
def test_activations_match_torch(torch, float64, ours, theirs):
    x = tt.randn(4, 5, requires_grad=True)
    check_against_torch(torch, ours(), eval(f"torch.nn.{theirs}"), x, {})


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "geglu", "swiglu"])
def test_feed_forward_matches_torch(torch, float64, activation):
    ours = nn.FeedForward(6, 10, activation=activation, bias=activation != "swiglu")
    F = torch.nn.functional
    acts = {
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "geglu": F.gelu,
        "swiglu": F.silu,
    }
    names = ["fc_in", "fc_out"] + (["fc_gate"] if ours.gated else [])
    layers = {}
    for name in names:
        lin = getattr(ours, name)
        layers[name] = torch.nn.Linear(lin.in_features, lin.out_features, bias=lin.bias is not None)
        copy_linear(torch, lin, layers[name])

    def theirs(x):
        h = acts[activation](layers["fc_in"](x))
        if ours.gated:  # the activated branch is fc_gate (T5 wi_0, Llama gate_proj)
            h = acts[activation](layers["fc_gate"](x)) * layers["fc_in"](x)
        return layers["fc_out"](h)

    pairs = {n: (getattr(ours, n).weight, layers[n].weight) for n in names}
    check_against_torch(torch, ours, theirs, tt.randn(2, 3, 6, requires_grad=True), pairs)


def test_dropout_module_follows_training_flag():
    drop = nn.Dropout(0.5)
    x = tt.ones(1000)
    y = drop(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    drop.eval()
    assert drop(x) is x


def test_layer_gradchecks(float64):
    """Central differences for each layer's input and parameters (small shapes)."""
    cases = [
        (nn.Linear(3, 2), tt.randn(2, 3)),
        (nn.LayerNorm(4), tt.randn(2, 4)),
        (nn.RMSNorm(4), tt.randn(2, 4)),
        (nn.BatchNorm1d(3), tt.randn(4, 3, 2)),
        (nn.FeedForward(4, 6, activation="swiglu"), tt.randn(2, 4)),
        (nn.FeedForward(4, 6, activation="gelu"), tt.randn(2, 4)),
    ]
    for layer, x in cases:
        with tt.no_grad():  # non-trivial affine parameters
            for p in layer.parameters():
                p.add_(tt.randn(*p.shape) * 0.3)
        names = [n for n, _ in layer.named_parameters()]
        x.requires_grad_(True)

        def f(x, *params, layer=layer, names=names):
            for name, p in zip(names, params):
                module_path, _, attr = name.rpartition(".")
                owner = dict(layer.named_modules())[module_path]
                if attr in owner._parameters:  # as torch: a plain tensor can't replace a Parameter
                    delattr(owner, attr)
                setattr(owner, attr, p)
            return layer(x)

        params = [p.detach().requires_grad_(True) for p in layer.parameters()]
        assert tt.gradcheck(f, [x, *params], names=["x", *names])


def test_embedding_gradcheck(float64):
    # (no padding_idx here: its row deliberately gets no gradient, tested against torch above)
    emb = nn.Embedding(5, 3)
    ids = tt.tensor([[0, 2, 2], [4, 1, 0]])  # repeated ids: their gradients add up

    w = emb.weight.detach().requires_grad_(True)
    del emb.weight  # as torch: a plain tensor can't replace a registered Parameter

    def f(w):
        emb.weight = w
        return emb(ids)

    assert tt.gradcheck(f, [w])
