"""tt.autograd.Function in torch's form, against torch.autograd.Function: the same user
functions (written once, for both libraries) compared in float64, and the errors torch gives."""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt

X = np.array([0.5, -1.2, 2.0, 0.3])


def functions(lib):
    """User Functions as PyTorch's tutorial and courses write them, for library `lib`."""

    class LegendrePolynomial3(lib.autograd.Function):
        """P3(x) = ½(5x³ - 3x), PyTorch's "Defining new autograd functions" example."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 0.5 * (5 * x**3 - 3 * x)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * x**2 - 1)

    class MyReLU(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            grad = grad_output.clone()
            grad[x < 0] = 0
            return grad

    class ScaleAndSquare(lib.autograd.Function):
        """Two outputs, a non-tensor argument, torch 2's setup_context form."""

        @staticmethod
        def forward(x, k):
            return x * k, x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.save_for_backward(x)
            ctx.k = k

        @staticmethod
        def backward(ctx, g_scaled, g_square):
            (x,) = ctx.saved_tensors
            return g_scaled * ctx.k + g_square * 2 * x, None

    class MulAdd(lib.autograd.Function):
        """needs_input_grad: only the gradients asked for are computed."""

        @staticmethod
        def forward(ctx, x, y, z):
            ctx.save_for_backward(x, y)
            return x * y + z

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * y if ctx.needs_input_grad[0] else None
            gy = g * x if ctx.needs_input_grad[1] else None
            gz = g if ctx.needs_input_grad[2] else None
            return gx, gy, gz

    class SortValues(lib.autograd.Function):
        """mark_non_differentiable: the indices get no gradient."""

        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort()
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, g_values, g_indices):
            (indices,) = ctx.saved_tensors
            grad = lib.zeros_like(g_values)
            grad[indices] = g_values
            return grad

    class AddOneInPlace(lib.autograd.Function):
        """mark_dirty: forward modifies its input and returns it."""

        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    return locals()


def _pair(run):
    import torch

    results = []
    for lib in (tt, torch):
        fns = functions(lib)
        x = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        results.append([np.asarray(r.detach().numpy() if hasattr(r, "detach") else r)
                        for r in run(lib, fns, x)])  # fmt: skip
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


CASES = {
    "legendre": lambda lib, f, x: [
        f["LegendrePolynomial3"].apply(x),
        *lib.autograd.grad(f["LegendrePolynomial3"].apply(x).sum(), x),
    ],
    "relu": lambda lib, f, x: [*lib.autograd.grad((f["MyReLU"].apply(x) ** 2).sum(), x)],
    "two-outputs-setup-context": lambda lib, f, x: [
        *lib.autograd.grad(
            (lambda a, b: (a * b).sum() + a.sum())(*f["ScaleAndSquare"].apply(x, 3.0)), x
        )
    ],
    "one-of-two-outputs-used": lambda lib, f, x: [
        *lib.autograd.grad(f["ScaleAndSquare"].apply(x, 2.0)[1].sum(), x)
    ],
    "needs-input-grad": lambda lib, f, x: [
        *lib.autograd.grad(f["MulAdd"].apply(x, x * 2, lib.ones(4, dtype=lib.float64)).sum(), x)
    ],
    "non-differentiable-output": lambda lib, f, x: [
        *lib.autograd.grad((f["SortValues"].apply(x)[0] * lib.arange(4.0)).sum(), x)
    ],
    "mark-dirty": lambda lib, f, x: [
        *lib.autograd.grad((f["AddOneInPlace"].apply(x * 1) ** 2).sum(), x)
    ],
    "second-derivative": lambda lib, f, x: [
        *lib.autograd.grad(
            lib.autograd.grad(f["LegendrePolynomial3"].apply(x).sum(), x, create_graph=True)[
                0
            ].sum(),
            x,
        )
    ],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_custom_functions_match_torch(torch, name):
    _pair(CASES[name])


def test_gradcheck_and_gradgradcheck_on_a_custom_function():
    fns = functions(tt)
    x = tt.tensor(X, dtype=tt.float64, requires_grad=True)
    assert tt.autograd.gradcheck(fns["LegendrePolynomial3"].apply, (x,))
    assert tt.autograd.gradgradcheck(fns["LegendrePolynomial3"].apply, (x,))
    assert tt.autograd.gradcheck(lambda v: fns["ScaleAndSquare"].apply(v, 1.5), (x,))


def test_the_graph_names_the_function():
    fns = functions(tt)
    x = tt.tensor(X, requires_grad=True)
    assert "LegendrePolynomial3" in tt.draw_graph(fns["LegendrePolynomial3"].apply(x).sum()).source


def test_materialize_grads_off_gives_none():
    seen = []

    class Two(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append(gb)
            return ga * 2

    x = tt.ones(3, requires_grad=True)
    Two.apply(x)[0].sum().backward()
    assert seen == [None] and x.grad.tolist() == [2.0, 2.0, 2.0]


def test_once_differentiable_refuses_a_second_derivative():
    class Cube(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        @tt.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x**2

    x = tt.tensor([1.0, 2.0], requires_grad=True)
    (g,) = tt.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [3.0, 12.0]
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_errors_name_the_function():
    class Wrong(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x)
            return x * y

        @staticmethod
        def backward(ctx, g):
            return (g,)  # one gradient for two arguments

    class BadShape(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum()

    x = tt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Wrong.backward returned 1 gradients.*2 arguments"):
        Wrong.apply(x, x).sum().backward()
    with pytest.raises(RuntimeError, match=r"BadShape.backward returned a gradient of shape \(\)"):
        BadShape.apply(x).sum().backward()


def test_saved_tensors_modified_in_place_or_freed():
    fns = functions(tt)
    x = tt.tensor(X, requires_grad=True)
    h = x * 1.0
    y = fns["LegendrePolynomial3"].apply(h)
    with tt.no_grad():
        h.add_(1)
    with pytest.raises(
        RuntimeError, match="LegendrePolynomial3: saved tensor 0.*modified in place"
    ):
        y.sum().backward()
    y = fns["LegendrePolynomial3"].apply(x)
    loss = y.sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="already freed|freed after backward"):
        loss.backward()
