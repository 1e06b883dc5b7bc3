"""tt.func and tt.autograd.functional against torch.func and torch.autograd.functional: the same
small functions, written once, run through both libraries' transforms (float64)."""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt

X = np.array([0.3, -1.2, 0.8])
Y = np.array([[0.5, 1.5], [-0.7, 0.2], [1.1, -0.4]])
U = np.array([1.0, -0.5, 2.0])


def scalar_f(lib, x):
    return (x.sin() * x * x).sum() + (x.exp() * x[0]).sum()


def vector_f(lib, x):
    return lib.tanh(x) * x.sum() + x**3


def two_args(lib, x, y):
    return ((x[:, None] * y).tanh() ** 2).sum()


def mlp_loss(lib, w, x):
    return ((x @ w).tanh() ** 2).mean()


def _both(run):
    """run(lib, tensor) for tinytensor and torch; returns both results as nested numpy."""
    import torch

    torch.set_default_dtype(torch.float64)

    def to_np(r):
        if isinstance(r, (tuple, list)):
            return [to_np(v) for v in r]
        return r.detach().numpy() if hasattr(r, "detach") else np.asarray(r)

    results = []
    for lib in (tt, torch):

        def tensor(a, lib=lib):
            return lib.tensor(np.asarray(a), dtype=lib.float64)

        results.append(to_np(run(lib, tensor)))
    return results


def assert_same(pair):
    ours, theirs = pair

    def walk(a, b):
        if isinstance(b, list):
            assert isinstance(a, list) and len(a) == len(b)
            for p, q in zip(a, b):
                walk(p, q)
        else:
            assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

    walk(ours, theirs)


FUNC_CASES = {
    "grad": lambda lib, t: lib.func.grad(lambda x: scalar_f(lib, x))(t(X)),
    "grad-argnums-tuple": lambda lib, t: lib.func.grad(
        lambda x, y: two_args(lib, x, y), argnums=(0, 1)
    )(t(X), t(Y)),
    "grad-argnums-1": lambda lib, t: lib.func.grad(lambda x, y: two_args(lib, x, y), argnums=1)(
        t(X), t(Y)
    ),
    "grad-has-aux": lambda lib, t: lib.func.grad(
        lambda x: (scalar_f(lib, x), x.sum()), has_aux=True
    )(t(X)),
    "grad-and-value": lambda lib, t: lib.func.grad_and_value(lambda x: scalar_f(lib, x))(t(X)),
    "grad-of-grad": lambda lib, t: lib.func.grad(
        lambda x: lib.func.grad(lambda y: scalar_f(lib, y))(x).sum()
    )(t(X)),
    "vjp": lambda lib, t: lib.func.vjp(lambda x: vector_f(lib, x), t(X))[1](t(U)),
    "jvp": lambda lib, t: lib.func.jvp(lambda x: vector_f(lib, x), (t(X),), (t(U),)),
    "jacrev": lambda lib, t: lib.func.jacrev(lambda x: vector_f(lib, x))(t(X)),
    "jacrev-2d": lambda lib, t: lib.func.jacrev(lambda y: (y * y).tanh())(t(Y)),
    "jacfwd": lambda lib, t: lib.func.jacfwd(lambda x: vector_f(lib, x))(t(X)),
    "hessian": lambda lib, t: lib.func.hessian(lambda x: scalar_f(lib, x))(t(X)),
    "hessian-mlp-weights": lambda lib, t: lib.func.hessian(lambda w: mlp_loss(lib, w, t(Y.T)))(
        t(Y)
    ),
    "jacrev-of-grad": lambda lib, t: lib.func.jacrev(lib.func.grad(lambda x: scalar_f(lib, x)))(
        t(X)
    ),
    "vmap": lambda lib, t: lib.func.vmap(lambda row: (row * row).sum())(t(Y)),
    "vmap-in-dims": lambda lib, t: lib.func.vmap(lambda a, b: a * b, in_dims=(1, None))(t(Y), t(X)),
    "vmap-of-grad": lambda lib, t: lib.func.vmap(lib.func.grad(lambda x: scalar_f(lib, x)))(t(Y.T)),
}


@pytest.mark.parametrize("name", sorted(FUNC_CASES))
def test_func_transforms_match_torch_func(torch, name):
    assert_same(_both(FUNC_CASES[name]))


def _functional(lib):
    return lib.autograd.functional


FUNCTIONAL_CASES = {
    "jacobian": lambda lib, t: _functional(lib).jacobian(lambda x: vector_f(lib, x), t(X)),
    "jacobian-tuples": lambda lib, t: _functional(lib).jacobian(
        lambda x, y: (x * y[:, 0], (y * y).sum(1) + x), (t(X), t(Y))
    ),
    "jacobian-forward-mode": lambda lib, t: _functional(lib).jacobian(
        lambda x: vector_f(lib, x), t(X), strategy="forward-mode", vectorize=lib is not tt
    ),
    "hessian": lambda lib, t: _functional(lib).hessian(lambda x: scalar_f(lib, x), t(X)),
    "hessian-tuple": lambda lib, t: _functional(lib).hessian(
        lambda x, y: two_args(lib, x, y), (t(X), t(Y))
    ),
    "vjp": lambda lib, t: _functional(lib).vjp(lambda x: vector_f(lib, x), t(X), t(U)),
    "jvp": lambda lib, t: _functional(lib).jvp(lambda x: vector_f(lib, x), t(X), t(U)),
    "hvp": lambda lib, t: _functional(lib).hvp(lambda x: scalar_f(lib, x), t(X), t(U)),
    "vhp": lambda lib, t: _functional(lib).vhp(lambda x: scalar_f(lib, x), t(X), t(U)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL_CASES))
def test_autograd_functional_matches_torch(torch, name):
    assert_same(_both(FUNCTIONAL_CASES[name]))


def test_functional_create_graph_is_differentiable(torch):
    """hvp(create_graph=True) gives a product that depends on x: its gradient is a third
    derivative."""

    def run(lib, t):
        x = t(X).requires_grad_(True)
        _, hv = lib.autograd.functional.hvp(lambda z: scalar_f(lib, z), x, t(U), create_graph=True)
        return lib.autograd.grad(hv.sum(), x)

    assert_same(_both(run))


def test_grad_needs_a_scalar_and_says_so():
    with pytest.raises(RuntimeError, match="grad: the function must return a one-element"):
        tt.func.grad(lambda x: x * 2)(tt.ones(3))
    with pytest.raises(RuntimeError, match="strict=True"):
        tt.autograd.functional.jacobian(lambda x, y: x * 2, (tt.ones(2), tt.ones(2)), strict=True)


def test_forward_ad_dual_numbers_match_torch(torch):
    def run(lib, t):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(t(X), t(U))
            w = t(Y)
            y = vector_f(lib, x) + (x[:, None] * w).sum(1)
            out = fw.unpack_dual(y)
            same = fw.unpack_dual(x)
        return [out.primal, out.tangent, same.tangent]

    assert_same(_both(run))


def test_forward_ad_needs_a_level_and_matching_shapes():
    fw = tt.autograd.forward_ad
    with pytest.raises(RuntimeError, match="dual_level"):
        fw.make_dual(tt.ones(2), tt.ones(2))
    with fw.dual_level(), pytest.raises(ValueError, match="shape"):
        fw.make_dual(tt.ones(2), tt.ones(3))
