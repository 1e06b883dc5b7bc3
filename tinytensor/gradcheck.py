"""Numerical gradient checking: compare backward's gradients with central differences.

For a function f of inputs x₁..xₙ, a fixed random vector r turns any output into the scalar
L = Σ f(x)·r. Backward gives ∂L/∂xᵢ; central differences give, for each element j,
    (L(x + ε·eⱼ) - L(x - ε·eⱼ)) / 2ε,
accurate to O(ε²). In float64 with ε = 1e-6 the two agree to ~1e-8 for a correct VJP.
For large inputs the directional mode checks ∂L/∂x · u against (L(x + εu) - L(x - εu)) / 2ε
for a few random directions u instead of every element.
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .backend import get_array_module
from .function import no_grad
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """A gradient disagreed with its numerical estimate; the message says where and by how much."""


def _outputs(result):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    return [o for o in outs if isinstance(o, Tensor) and o.dtype.kind == "f"]


def _projections(fn, inputs, seed):
    """Random output weights r (fixed per check) so that L = Σ f(x)·r is a scalar."""
    with no_grad():
        outs = _outputs(fn(*inputs))
    rng = np.random.default_rng(seed)
    return [get_array_module(o._array).asarray(rng.standard_normal(o.shape)) for o in outs]


def _scalar_loss(fn, inputs, projections):
    outs = _outputs(fn(*inputs))
    total = None
    for o, r in zip(outs, projections):
        term = (o * Tensor._wrap(r.astype(o.dtype), False, None)).sum()
        total = term if total is None else total + term
    return total


def prepare_inputs(inputs):
    """Float64 leaf copies of the inputs (integer inputs, such as ids, are left as they are)."""
    prepared = []
    for x in inputs:
        if isinstance(x, Tensor) and x.dtype.kind == "f":
            y = Tensor._wrap(x._array.astype(dtypes.float64), False, None)
            prepared.append(y.requires_grad_(x.requires_grad))
        else:
            prepared.append(x)
    return prepared


def analytic_gradients(fn, inputs, projections):
    """∂L/∂x for every input that requires grad (None for the others), through backward."""
    for x in inputs:
        if isinstance(x, Tensor):
            x.grad = None
    loss = _scalar_loss(fn, inputs, projections)
    if loss is not None and loss.requires_grad:
        loss.backward()
    return [
        (x.grad._array if x.grad is not None else get_array_module(x._array).zeros_like(x._array))
        if isinstance(x, Tensor) and x.requires_grad
        else None
        for x in inputs
    ]


def numerical_gradient(fn, inputs, index, projections, eps=1e-6):
    """Central-difference ∂L/∂x for input `index`, one element at a time."""
    x = inputs[index]
    flat = x._array.reshape(-1)  # a view: writes perturb x in place
    grad = np.zeros(flat.shape, dtype=np.float64)
    with no_grad():
        for j in range(flat.size):
            original = flat[j].item()
            flat[j] = original + eps
            plus = _scalar_loss(fn, inputs, projections).item()
            flat[j] = original - eps
            minus = _scalar_loss(fn, inputs, projections).item()
            flat[j] = original
            grad[j] = (plus - minus) / (2 * eps)
    return grad.reshape(x.shape)


def _directional(fn, inputs, index, projections, analytic, eps, n_directions, rng):
    """Pairs of (analytic, numerical) directional derivatives along random directions."""
    x = inputs[index]
    original = x._array.copy()
    xp = get_array_module(original)
    pairs = []
    with no_grad():
        for _ in range(n_directions):
            u = xp.asarray(rng.standard_normal(x.shape))
            x._array[...] = original + eps * u
            plus = _scalar_loss(fn, inputs, projections).item()
            x._array[...] = original - eps * u
            minus = _scalar_loss(fn, inputs, projections).item()
            x._array[...] = original
            pairs.append((float((analytic * u).sum()), (plus - minus) / (2 * eps)))
    return pairs


def _name(names, i):
    return f"input {i}" + (f" ({names[i]})" if names and i < len(names) else "")


def gradcheck(
    fn,
    inputs,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    directional=False,
    n_directions=3,
    seed=0,
    names=None,
    raise_exception=True,
) -> bool:
    """Checks the gradients of `fn` at `inputs` against central differences, in float64.

    Args:
        fn: takes the inputs (Tensors, plus any non-tensor arguments) and returns a Tensor or a
            tuple of Tensors.
        inputs: the arguments; float Tensors with requires_grad=True are checked. They are
            copied to float64 first.
        eps, atol, rtol: step and tolerances; an element fails if
            |analytic - numerical| > atol + rtol·|numerical|.
        directional: check a few random directional derivatives instead of every element
            (for large inputs).
        names: optional names of the inputs, for the error message.
    Returns:
        True when every gradient agrees.
    Raises:
        GradcheckError naming the input, the worst element (index) and both values.

    Example:
        >>> x = tt.randn(3, 4, dtype=tt.float64, requires_grad=True)
        >>> tt.gradcheck(lambda x: x.tanh().sum(), (x,))
        True
    """
    inputs = prepare_inputs(inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True, so there is nothing to check")
    projections = _projections(fn, inputs, seed)
    analytic = analytic_gradients(fn, inputs, projections)
    rng = np.random.default_rng(seed + 1)
    for i in checked:
        a = np.asarray(analytic[i].get() if hasattr(analytic[i], "get") else analytic[i])
        if directional:
            for a_dir, n_dir in _directional(
                fn, inputs, i, projections, analytic[i], eps, n_directions, rng
            ):
                if not abs(a_dir - n_dir) <= atol + rtol * abs(n_dir):
                    if not raise_exception:
                        return False
                    raise GradcheckError(
                        f"gradcheck: {_name(names, i)} of shape {tuple(inputs[i].shape)}: "
                        f"directional derivative along a random direction is {a_dir:.8g} "
                        f"from backward but {n_dir:.8g} numerically"
                    )
            continue
        n = numerical_gradient(fn, inputs, i, projections, eps)
        error = np.abs(a - n) - (atol + rtol * np.abs(n))
        bad = ~(error <= 0)  # NaN counts as failing
        if bad.any():
            if not raise_exception:
                return False
            worst = np.unravel_index(np.argmax(np.where(np.isnan(error), np.inf, error)), a.shape)
            raise GradcheckError(
                f"gradcheck: {_name(names, i)} of shape {tuple(inputs[i].shape)}: "
                f"{int(bad.sum())} of {a.size} gradient elements disagree; worst at index "
                f"{tuple(int(k) for k in worst)}: backward gives {a[worst]:.8g}, central "
                f"differences give {n[worst]:.8g} (atol={atol}, rtol={rtol})"
            )
    return True


def gradgradcheck(
    fn,
    inputs,
    grad_outputs=None,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    seed=0,
    raise_exception=True,
    **options,
) -> bool:
    """Checks second derivatives: gradcheck of the map (x, v) ↦ ∂(Σ fn(x)·v)/∂x, whose
    gradients backward computes with create_graph=True, against central differences.

    Args:
        fn, inputs, eps, atol, rtol, seed, raise_exception: as `gradcheck`.
        grad_outputs: the vectors v, one per float output; random (and checked too, since the
            first derivative is linear in them) when None.
        options: passed to `gradcheck` (directional, names).
    Raises:
        GradcheckError naming the first derivative's input (an x or a v) that disagrees.

    Example:
        >>> x = tt.randn(3, dtype=tt.float64, requires_grad=True)
        >>> tt.autograd.gradgradcheck(lambda x: (x ** 3).sum(), (x,))
        True
    """
    from . import autograd
    from .function import enable_grad

    inputs = prepare_inputs(inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    n = len(inputs)
    if grad_outputs is None:
        with no_grad():
            outs = _outputs(fn(*inputs))
        rng = np.random.default_rng(seed + 2)
        grad_outputs = [
            Tensor._wrap(
                get_array_module(o._array).asarray(rng.standard_normal(o.shape)), True, None
            )
            for o in outs
        ]
    else:
        grad_outputs = prepare_inputs(grad_outputs)

    def first_derivative(*args):
        xs, vs = args[:n], args[n:]
        with enable_grad():  # gradcheck evaluates under no_grad: the inner backward must record
            outs = _outputs(fn(*xs))
            wrt = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
            return autograd.grad(
                outs, wrt, list(vs), create_graph=True, allow_unused=True, materialize_grads=True
            )

    return gradcheck(
        first_derivative,
        (*inputs, *grad_outputs),
        eps=eps,
        atol=atol,
        rtol=rtol,
        seed=seed,
        raise_exception=raise_exception,
        **options,
    )
