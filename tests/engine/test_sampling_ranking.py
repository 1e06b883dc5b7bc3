"""sort, argsort, topk, nonzero, scatter(_add), index_add/fill, diagonal, trace and multinomial
against PyTorch: values, indices and every gradient in float64; errors; sampling statistics."""

import numpy as np
import pytest

import tinytensor as tt

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6))
X[1, 2] = X[1, 4]  # a tie: stable order must agree with torch's stable sort
SRC = rng.standard_normal((4, 6))


def run(lib, program):
    x = lib.tensor(X, requires_grad=True)
    src = lib.tensor(SRC, requires_grad=True)
    outs = program(lib, x, src)
    outs = outs if isinstance(outs, tuple) else (outs,)
    floats = [o for o in outs if str(o.dtype).replace("torch.", "").startswith("float")]
    loss = sum((o * (i + 2.0)).sum() for i, o in enumerate(floats) if o.requires_grad)
    if not isinstance(loss, int):
        loss.backward()
    grads = [g.grad.numpy() if g.grad is not None else None for g in (x, src)]
    return [o.detach().numpy() for o in outs], grads


PROGRAMS = {
    "sort": lambda lib, x, s: tuple(x.sort(dim=1, stable=True)),
    "sort-descending": lambda lib, x, s: tuple(lib.sort(x, dim=0, descending=True, stable=True)),
    "argsort": lambda lib, x, s: x.argsort(dim=-1, stable=True),
    "topk": lambda lib, x, s: tuple(x.topk(3, dim=1)),
    "topk-smallest": lambda lib, x, s: tuple(lib.topk(x, 2, dim=0, largest=False)),
    "nonzero": lambda lib, x, s: lib.nonzero(x > 0.5),
    "nonzero-tuple": lambda lib, x, s: lib.nonzero(x > 0.5, as_tuple=True),
    "scatter": lambda lib, x, s: x.scatter(1, lib.tensor([[5], [1], [2], [4]]), s[:, :1]),
    "scatter-value": lambda lib, x, s: x.scatter(0, lib.tensor([[3, 1, 0]]), 7.0),
    "scatter_add": lambda lib, x, s: x.scatter_add(
        1, lib.tensor([[0, 0, 5], [1, 1, 1]] * 2), s[:, :3]
    ),
    "scatter_add-fn": lambda lib, x, s: lib.scatter_add(
        x, 0, lib.tensor([[3, 0], [3, 0]]), s[:2, :2]
    ),
    "index_add": lambda lib, x, s: x.index_add(0, lib.tensor([2, 0, 2, 1]), s, alpha=0.5),
    "index_fill": lambda lib, x, s: x.index_fill(1, lib.tensor([0, 5]), -2.0),
    "diagonal": lambda lib, x, s: x.diagonal(),
    "diagonal-offset": lambda lib, x, s: x.diagonal(2)[:3] * s.diagonal(-1),
    "trace": lambda lib, x, s: x.trace(),
    "scatter_-inplace": lambda lib, x, s: (x * 1).scatter_(
        1, lib.tensor([[1], [2], [3], [0]]), s[:, :1]
    ),
    "index_add_-inplace": lambda lib, x, s: (x * 1).index_add_(1, lib.tensor([5, 5]), s[:, :2]),
    "index_fill_-inplace": lambda lib, x, s: (x * 2).index_fill_(0, lib.tensor([3]), 1.5),
    "diagonal-write": lambda lib, x, s: _write_diagonal(lib, x),
}


def _write_diagonal(lib, x):
    y = x.detach().clone()
    y.diagonal().fill_(0.0)
    return y


@pytest.mark.parametrize("name", PROGRAMS)
def test_matches_torch(torch, name):
    expected = run(torch, PROGRAMS[name])
    got = run(tt, PROGRAMS[name])
    for g, e in zip(got[0], expected[0], strict=True):
        assert g.shape == e.shape, name
        np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=name)
    for g, e in zip(got[1], expected[1], strict=True):
        assert (g is None) == (e is None), name
        if g is not None:
            np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: tt.ones(3).topk(4), r"topk: k must be an int in \[0, 3\].*got 4"),
        (lambda: tt.ones(2, 3).scatter(1, tt.tensor([[3]]), 1.0), "index 3 is out of range"),
        (lambda: tt.ones(2, 3).scatter(1, tt.tensor([[-1]]), 1.0), "index -1 is out of range"),
        (lambda: tt.ones(2, 3).scatter(1, tt.tensor([0]), 1.0), "index has 1 dims"),
        (lambda: tt.ones(2, 3).index_add(0, tt.tensor([0]), tt.ones(2, 3)), "source has shape"),
        (lambda: tt.ones(2, 3).index_fill(0, tt.tensor([0.5]), 1.0), "index must be an integer"),
        (lambda: tt.ones(3).diagonal(), "diagonal: needs at least 2 dims"),
        (lambda: tt.ones(2, 2).diagonal(dim1=1, dim2=-1), "dim1 and dim2 are the same"),
        (lambda: tt.ones(2, 2, 2).trace(), "trace: expected a 2-D tensor"),
        (lambda: tt.tensor([True]).sort(), "bool tensors cannot be ordered"),
        (lambda: tt.multinomial(tt.tensor([0.5, -0.1]), 1), "non-negative"),
        (lambda: tt.multinomial(tt.tensor([0.5, 0.0]), 2), "cannot draw 2 samples"),
        (lambda: tt.multinomial(tt.tensor([0.0, 0.0]), 1, True), "positive sum"),
        (lambda: tt.multinomial(tt.tensor([1, 2]), 1), "must be a floating tensor"),
        (lambda: tt.multinomial(tt.ones(3), 0), "num_samples must be a positive int, got 0"),
    ],
)
def test_bad_arguments_name_the_function_and_value(call, match):
    with pytest.raises((ValueError, TypeError, IndexError, RuntimeError), match=match):
        call()


def test_multinomial_frequencies_and_reproducibility():
    p = tt.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    draws = tt.multinomial(p, 20000, replacement=True, generator=tt.Generator(1)).numpy()
    for row, probs in zip(draws, p.numpy(), strict=True):
        freq = np.bincount(row, minlength=4) / row.size
        np.testing.assert_allclose(freq, probs, atol=0.015)
    without = tt.multinomial(p, 3, generator=tt.Generator(2)).numpy()
    assert all(len(set(row)) == 3 for row in without) and 1 not in without[0]
    tt.manual_seed(9)
    a = tt.multinomial(p[1], 2)
    tt.manual_seed(9)
    assert a.tolist() == tt.multinomial(p[1], 2).tolist()
    # without replacement, the first draw follows the weights (Gumbel-top-k is exact)
    firsts = [tt.multinomial(p[0], 2, generator=tt.Generator(s))[0].item() for s in range(3000)]
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 3000, p.numpy()[0], atol=0.03)
