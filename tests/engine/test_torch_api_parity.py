"""Torch-API parity: the same call, written with PyTorch's names and keywords, on both libraries.

Each case is `fn(lib, F, *inputs)`, run once with `lib = torch` (and `torch.nn.functional`) and
once with `lib = tinytensor` (and `tinytensor.nn.functional`) on the same float64 inputs; the
values must match, and so must the gradients of a weighted sum of the output (weights vary per
element, so a gradient routed to the wrong element shows). This is what a ported script writes:
`x.sum(dim=())`, `tt.max(x, y)`, `x.add(y, alpha=2)`, `F.pad(x, (1, 2))`, ...
"""

from __future__ import annotations

import numpy as np
import pytest
import tinytensor.nn.functional as tF

import tinytensor as tt

RNG = np.random.default_rng(0)
POS = RNG.uniform(0.5, 2.0, (3, 4))  # positive: log, sqrt, prod stay smooth
SIGNED = RNG.uniform(-2.0, 2.0, (3, 4))
CUBE = RNG.uniform(-2.0, 2.0, (2, 3, 4))
CLASS_WEIGHT = [0.5, 1.0, 2.0, 0.25]


CASES = {
    # elementwise, with PyTorch's extra arguments
    "log1p": (lambda L, F, x: L.log1p(x - 0.4), [POS]),
    "expm1": (lambda L, F, x: x.expm1(), [SIGNED]),
    "erf": (lambda L, F, x: L.erf(x), [SIGNED]),
    "square-reciprocal": (lambda L, F, x: x.square() + L.reciprocal(x), [POS]),
    "clip-min-only": (lambda L, F, x: L.clip(x, min=0.0), [SIGNED]),
    "clamp_min-max": (lambda L, F, x: x.clamp_min(-0.5).clamp_max(1.0), [SIGNED]),
    "add-alpha": (lambda L, F, x, y: L.add(x, y, alpha=2) + x.sub(y, alpha=0.5), [POS, SIGNED]),
    "max-binary": (lambda L, F, x, y: L.max(x, y) - L.min(x, y), [POS, SIGNED]),
    "x.max-binary": (lambda L, F, x, y: x.max(y), [POS, SIGNED]),
    "where-scalar-branch": (lambda L, F, x: L.where(x > 0, x, 0.0), [SIGNED]),
    "x.where": (lambda L, F, x, y: x.where(x > 0, y), [SIGNED, POS]),
    "masked_fill-bool-list": (
        lambda L, F, x: x.masked_fill(L.tensor([True, False, True, False]), -1.0),
        [SIGNED],
    ),
    "floor-ceil-round-trunc-sign": (
        lambda L, F, x: L.stack(
            [L.floor(x * 3), x.ceil(), L.round(x * 3), x.trunc(), L.sign(x), x.round(decimals=1)]
        ).detach(),
        [SIGNED],
    ),
    "comparisons": (
        lambda L, F, x, y: L.stack([x.gt(y), x.ge(0.5), L.lt(x, y), x.le(y), x.ne(y), x.eq(x)]),
        [SIGNED, POS],
    ),
    # reductions
    "sum-dim-empty-tuple": (lambda L, F, x: x.sum(dim=()), [POS]),
    "mean-dim-empty-list": (lambda L, F, x: L.mean(x, dim=[]), [POS]),
    "sum-dtype": (lambda L, F, x: (x > 1).sum(dim=1, dtype=L.float64), [POS]),
    "prod": (lambda L, F, x: x.prod(dim=1) + L.prod(x).reshape(1), [SIGNED]),
    "prod-keepdim": (lambda L, F, x: x.prod(0, keepdim=True), [POS]),
    "cumsum": (lambda L, F, x: L.cumsum(x, dim=1) + x.cumsum(0), [SIGNED]),
    "norm-default": (lambda L, F, x: x.norm(), [SIGNED]),
    "norm-p1-dim": (lambda L, F, x: x.norm(p=1, dim=1, keepdim=True), [SIGNED]),
    "linalg.vector_norm": (lambda L, F, x: L.linalg.vector_norm(x, dim=-1), [SIGNED]),
    "linalg.norm-vector": (lambda L, F, x: L.linalg.norm(x, dim=0), [SIGNED]),
    "var_mean": (lambda L, F, x: L.stack(L.var_mean(x, dim=1, correction=0)), [SIGNED]),
    # movement
    "t-swapaxes": (lambda L, F, x: x.t() + x.swapaxes(0, 1) + L.t(x), [SIGNED]),
    "movedim": (lambda L, F, x: L.movedim(x, 0, -1), [CUBE]),
    "unflatten": (lambda L, F, x: x.unflatten(1, (2, -1)), [SIGNED]),
    "unbind": (lambda L, F, x: L.unbind(x, dim=1)[2] * 2 + x.unbind()[0][:3], [SIGNED]),
    "narrow": (lambda L, F, x: x.narrow(1, 1, 2), [SIGNED]),
    "index_select": (lambda L, F, x: x.index_select(1, L.tensor([0, 3, 3])), [SIGNED]),
    "flip": (lambda L, F, x: x.flip(0) + L.flip(x, dims=(0, 1)), [SIGNED]),
    "roll": (lambda L, F, x: L.roll(x, 1, dims=1) + x.roll((1, -2), (0, 1)), [SIGNED]),
    "roll-flat": (lambda L, F, x: x.roll(5), [SIGNED]),
    "repeat": (lambda L, F, x: x.repeat(2, 1, 3), [SIGNED]),
    "tile": (lambda L, F, x: L.tile(x, (2,)), [SIGNED]),
    "reshape_as": (lambda L, F, x: x.reshape_as(x.T), [SIGNED]),
    "hstack-vstack": (
        lambda L, F, x, y: L.hstack([x, y]).sum(0) + L.vstack([x, y]).sum(1).sum(),
        [SIGNED, POS],
    ),
    # linear algebra
    "mm-bmm": (lambda L, F, x, y: L.mm(x, y.T) + x.mm(y.T), [SIGNED, POS]),
    "bmm": (lambda L, F, x: L.bmm(x, x.transpose(1, 2)), [CUBE]),
    "dot-outer-mv": (
        lambda L, F, x, y: L.outer(x[0], y[1]).sum(0) + L.dot(x[0], y[0]) + L.mv(x, y[0]).sum(),
        [SIGNED, POS],
    ),
    "einsum-two-operand": (lambda L, F, x, y: L.einsum("ij,kj->ik", x, y), [SIGNED, POS]),
    "einsum-batched-list": (
        lambda L, F, x: L.einsum("bij,bkj->bik", [x, x * 2]),
        [CUBE],
    ),
    "einsum-ellipsis-implicit": (lambda L, F, x, y: L.einsum("...j,kj", x, y), [CUBE, POS]),
    # nn.functional
    "F.pad": (lambda L, F, x: F.pad(x, (1, 2)), [SIGNED]),
    "F.pad-2d-value-crop": (lambda L, F, x: F.pad(x, (-1, 0, 0, 2), value=-1.0), [SIGNED]),
    "F.softplus": (
        lambda L, F, x: F.softplus(x * 8) + F.softplus(x, beta=2.0, threshold=1.0),
        [SIGNED],
    ),
    "F.logsigmoid": (lambda L, F, x: F.logsigmoid(x * 20), [SIGNED]),
    "F.leaky_relu": (lambda L, F, x: F.leaky_relu(x, 0.1), [SIGNED]),
    # class weights (torch's third argument) with the other keywords
    "F.cross_entropy-weight": (
        lambda L, F, x: F.cross_entropy(x, L.tensor([0, 3, 1]), L.tensor(CLASS_WEIGHT)),
        [SIGNED],
    ),
    "F.cross_entropy-weight-ignore-smoothing": (
        lambda L, F, x: F.cross_entropy(
            x,
            L.tensor([0, -1, 3]),
            weight=L.tensor(CLASS_WEIGHT),
            ignore_index=-1,
            label_smoothing=0.2,
        ),
        [SIGNED],
    ),
    "F.cross_entropy-weight-sum-none": (
        lambda L, F, x: L.stack(
            [
                F.cross_entropy(x, L.tensor([2, 0, 3]), L.tensor(CLASS_WEIGHT), reduction="sum"),
                F.cross_entropy(
                    x, L.tensor([2, 0, 3]), L.tensor(CLASS_WEIGHT), reduction="none"
                ).sum(),
            ]
        ),
        [SIGNED],
    ),
    "F.cross_entropy-weight-spatial": (
        lambda L, F, x: F.cross_entropy(
            x,
            L.tensor([[0, 1, 2, 1], [2, 2, 0, 1]]),
            weight=L.tensor(CLASS_WEIGHT[:3]),
            label_smoothing=0.1,
        ),
        [CUBE],
    ),
    "F.cross_entropy-weight-probabilities": (
        lambda L, F, x, y: F.cross_entropy(
            x, y.softmax(-1), weight=L.tensor(CLASS_WEIGHT), label_smoothing=0.1
        ),
        [SIGNED, POS],
    ),
    "F.nll_loss-weight": (
        lambda L, F, x: F.nll_loss(
            x.log_softmax(-1), L.tensor([1, 3, -100]), weight=L.tensor(CLASS_WEIGHT)
        ),
        [SIGNED],
    ),
    "nn.CrossEntropyLoss-weight": (
        lambda L, F, x: L.nn.CrossEntropyLoss(weight=L.tensor(CLASS_WEIGHT), label_smoothing=0.1)(
            x, L.tensor([3, 0, 2])
        ),
        [SIGNED],
    ),
    "F.softmax-dtype": (lambda L, F, x: F.softmax(x.float(), dim=-1, dtype=L.float64), [SIGNED]),
    "log_softmax-dtype": (lambda L, F, x: x.log_softmax(-1, dtype=L.float64), [SIGNED]),
}


def _numpy(t):
    return np.asarray(t.detach().numpy())


def _run(lib, functional, fn, arrays):
    inputs = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays]
    out = fn(lib, functional, *inputs)
    out_values = _numpy(out)
    grads = []
    if out.requires_grad:
        weights = lib.tensor(np.linspace(0.5, 2.0, out_values.size).reshape(out_values.shape))
        (out.to(lib.float64) * weights).sum().backward()
        grads = [None if t.grad is None else _numpy(t.grad) for t in inputs]
    return out_values, str(out.dtype).split(".")[-1], grads


@pytest.mark.parametrize("name", list(CASES))
def test_same_values_and_gradients_as_torch(torch, name):
    fn, arrays = CASES[name]
    expected, expected_dtype, expected_grads = _run(torch, torch.nn.functional, fn, arrays)
    got, got_dtype, got_grads = _run(tt, tF, fn, arrays)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert got_dtype == expected_dtype
    assert len(got_grads) == len(expected_grads)
    for g, e in zip(got_grads, expected_grads, strict=True):
        e = np.zeros_like(got) if e is None else e  # an input that does not reach the output
        g = np.zeros_like(e) if g is None else g
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)


def test_plain_python_answers_match_torch(torch):
    x, y = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0 + 1e-9])
    for lib in (torch, tt):
        a, b = lib.tensor(x), lib.tensor(y)
        assert lib.allclose(a, b) is True and lib.equal(a, a) is True and lib.equal(a, b) is False
        assert lib.isclose(a, b).tolist() == [True, True, True]
        assert lib.is_tensor(a) and lib.numel(a.reshape(1, 3)) == 3
        assert a.is_floating_point() and not a.long().is_floating_point()
        assert a.type(lib.int64).dtype == lib.int64 and a.nelement() == 3
        assert a.element_size() == 8 and a.is_cuda is False


def test_new_tensor_factories_keep_dtype_and_device(torch):
    for lib in (torch, tt):
        x = lib.zeros(2, dtype=lib.float64)
        assert x.new_zeros(3).dtype == lib.float64 and tuple(x.new_ones((2, 3)).shape) == (2, 3)
        assert x.new_full((2,), 7.0).tolist() == [7.0, 7.0]
        assert x.new_tensor([1, 2]).dtype == lib.float64
        assert x.new_zeros(2, dtype=lib.int64).dtype == lib.int64


def test_masked_fill_in_place(torch):
    for lib in (torch, tt):
        x = lib.zeros(3)
        x.masked_fill_(lib.tensor([True, False, True]), 2.0)
        assert x.tolist() == [2.0, 0.0, 2.0]


def test_max_min_with_dim_still_return_values_and_indices(torch):
    values = [[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]]
    for lib in (torch, tt):
        r = lib.max(lib.tensor(values), dim=1)
        assert r.values.tolist() == [5.0, 7.0] and r.indices.tolist() == [1, 0]
        assert lib.tensor(values).min(0).indices.tolist() == [0, 1, 0]


def test_autograd_grad_matches_torch_and_leaves_grad_alone(torch):
    results = []
    for lib in (torch, tt):
        x = lib.tensor(SIGNED, requires_grad=True)
        w = lib.tensor(POS, requires_grad=True)
        w.grad = lib.ones(3, 4, dtype=w.dtype)
        hidden = x * w
        y = (hidden * hidden).sum()
        gx, gh = lib.autograd.grad(y, [x, hidden], retain_graph=True)
        assert x.grad is None and w.grad.tolist() == [[1.0] * 4] * 3
        (gw,) = lib.autograd.grad([y], w, grad_outputs=[lib.tensor(2.0)])
        results.append([gx.numpy(), gh.detach().numpy(), gw.numpy()])
    for got, expected in zip(results[1], results[0], strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_autograd_grad_unused_input(torch):
    for lib in (torch, tt):
        x, z = lib.ones(2, requires_grad=True), lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError):
            lib.autograd.grad((x * 2).sum(), [x, z], retain_graph=True)
        assert lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)[1] is None


def test_tensor_from_a_list_of_one_element_tensors(torch):
    for lib in (torch, tt):
        losses = [lib.tensor(1.5), lib.tensor([2.5]), 3.0]
        assert lib.tensor(losses).tolist() == [1.5, 2.5, 3.0]


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.Sequential(nn.Flatten(), nn.LeakyReLU(0.2), nn.Softmax(dim=-1)),
        lambda nn: nn.Sequential(nn.ReLU(inplace=False), nn.Flatten(0, 1), nn.LogSoftmax(dim=0)),
        lambda nn: nn.Sequential(nn.Unflatten(2, (2, 2)), nn.Flatten(start_dim=2)),
    ],
)
def test_shape_and_activation_layers_match_torch(torch, make):
    outputs = []
    for lib in (torch, tt):
        x = lib.tensor(CUBE, requires_grad=True)
        y = make(lib.nn)(x)
        (y * lib.tensor(np.linspace(1, 2, y.numel()).reshape(tuple(y.shape)))).sum().backward()
        outputs.append((y.detach().numpy(), x.grad.numpy()))
    for got, expected in zip(outputs[1], outputs[0], strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
