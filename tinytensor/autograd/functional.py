"""torch.autograd.functional: jacobian, hessian, vjp, jvp, hvp, vhp of a function of Tensors.

The same products as tinytensor.func, in torch.autograd.functional's calling convention:
`inputs` is a Tensor or a tuple of Tensors, results come back in that structure, and
`create_graph=True` keeps them differentiable. jvp and hvp use the double-vjp construction
(two reverse passes: Jᵀw is linear in w, so J·u = ∂(Jᵀw·u)/∂w).

    vjp(f, x, v)    (f(x), vᵀ·J)           jvp(f, x, u)    (f(x), J·u)
    vhp(f, x, v)    (f(x), vᵀ·H)           hvp(f, x, u)    (f(x), H·u)
    jacobian(f, x)  J[i][j] = ∂f_i/∂x_j    hessian(f, x)   H[i][j] = ∂²f/∂x_i∂x_j
"""

from __future__ import annotations

from .. import func as _func
from ..creation import zeros_like
from ..function import enable_grad
from ..ops import reshape, stack
from ..tensor import Tensor
from . import engine


def _as_tuple(x, fn, arg):
    """(tuple of Tensors, whether x was a tuple)."""
    if isinstance(x, Tensor):
        return (x,), False
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), True
    raise TypeError(f"{fn}: {arg} must be a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _prepare(inputs, create_graph):
    """Leaves to differentiate at: aliases of the inputs that keep their graph with
    create_graph (so the results are differentiable in the caller's inputs too)."""
    return tuple(
        _func._track(x) if create_graph else x.detach().requires_grad_(True) for x in inputs
    )


def _check_strict(grads, strict, fn, what):
    if strict:
        for i, g in enumerate(grads):
            if g is None:
                raise RuntimeError(
                    f"{fn}: the output of the function does not depend on input {i}; "
                    f"strict=True does not allow that ({what})"
                )


def _gradients(outs, wrt, vs, create_graph, retain=True):
    pairs = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
    if not pairs:
        return [None] * len(wrt)
    return list(
        engine.grad(
            [o for o, _ in pairs],
            list(wrt),
            [v for _, v in pairs],
            retain_graph=retain,
            create_graph=create_graph,
            allow_unused=True,
        )
    )


def _fill(grads, like):
    return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, like))


def _finish(values, create_graph):
    return tuple(v if create_graph else v.detach() for v in values)


def _seed(v, outs, fn):
    if v is None:
        for o in outs:
            if o.numel() != 1:
                raise RuntimeError(
                    f"{fn}: v can be left out only for a one-element output, this one has "
                    f"shape {tuple(o.shape)}"
                )
        return [None] * len(outs)
    vs, _ = _as_tuple(v, fn, "v")
    if len(vs) != len(outs):
        raise ValueError(f"{fn}: {len(outs)} outputs but {len(vs)} tensors in v")
    for o, w in zip(outs, vs):
        if tuple(o.shape) != tuple(w.shape):
            raise ValueError(
                f"{fn}: v has shape {tuple(w.shape)} for an output of shape {tuple(o.shape)}"
            )
    return list(vs)


def _call(func, xs, fn):
    out = func(*xs)
    outs, is_tuple = _as_tuple(out, fn, "the function's output")
    return outs, is_tuple


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·J): the vector-Jacobian product at `inputs`."""
    inputs, in_tuple = _as_tuple(inputs, "vjp", "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        outs, out_tuple = _call(func, xs, "vjp")
        grads = _gradients(outs, xs, _seed(v, outs, "vjp"), create_graph)
    _check_strict(grads, strict, "vjp", "its vjp would be zero")
    result = _finish(_fill(grads, xs), create_graph)
    outs = _finish(outs, create_graph)
    return (outs if out_tuple else outs[0]), (result if in_tuple else result[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J·v): the Jacobian-vector product (double-vjp construction)."""
    inputs, in_tuple = _as_tuple(inputs, "jvp", "inputs")
    if v is None:
        if any(x.numel() != 1 for x in inputs):
            raise RuntimeError("jvp: v can be left out only for one-element inputs")
        v = tuple(x.new_ones(x.shape) if hasattr(x, "new_ones") else x * 0 + 1 for x in inputs)
    vs, _ = _as_tuple(v, "jvp", "v")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        outs, out_tuple = _call(func, xs, "jvp")
        ws, g = _func._jacobian_transposed(list(outs), list(xs), create_graph)
        _check_strict(g, strict, "jvp", "its jvp would be zero")
        products = _func._forward_product(ws, g, list(vs), create_graph)
    result = _finish(products, create_graph)
    outs = _finish(outs, create_graph)
    return (outs if out_tuple else outs[0]), (result if out_tuple else result[0])


def _hessian_product(func, inputs, v, create_graph, strict, fn, times):
    """(func(inputs), times(first, xs, vs)): the shared part of vhp and hvp, where `first` is
    the gradient of the scalar func, recorded."""
    inputs, in_tuple = _as_tuple(inputs, fn, "inputs")
    vs = list(_as_tuple(v, fn, "v")[0]) if v is not None else [None] * len(inputs)
    with enable_grad():
        xs = _prepare(inputs, True)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(f"{fn}: the function must return a one-element Tensor")
        first = _gradients([out], xs, [None], create_graph=True)
        _check_strict(first, strict, fn, "its gradient would be zero")
        result = _finish(times(first, xs, vs), create_graph)
    return _finish((out,), create_graph)[0], (result if in_tuple else result[0])


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·H) for a scalar func: the gradient's vjp."""

    def times(first, xs, vs):
        pairs = [(g, w) for g, w in zip(first, vs) if g is not None]
        return _fill(_gradients([g for g, _ in pairs], xs, [w for _, w in pairs], create_graph), xs)

    return _hessian_product(func, inputs, v, create_graph, strict, "vhp", times)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H·v) for a scalar func: the gradient's jvp (double-vjp construction)."""

    def times(first, xs, vs):
        kept = [g if g is not None else zeros_like(x) for g, x in zip(first, xs)]
        ws, g = _func._jacobian_transposed(kept, list(xs), create_graph)
        return _func._forward_product(ws, g, vs, create_graph)

    return _hessian_product(func, inputs, v, create_graph, strict, "hvp", times)


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """J[i][j] = ∂ output_i / ∂ input_j, each of shape output_i.shape + input_j.shape; a Tensor
    for one output and one input (torch's structure). strategy "forward-mode" builds it column
    by column from Jacobian-vector products instead of row by row from vjps."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(
            f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}"
        )
    inputs, in_tuple = _as_tuple(inputs, "jacobian", "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        outs, out_tuple = _call(func, xs, "jacobian")
        if strategy == "forward-mode":
            blocks = _columns(outs, xs, create_graph)
        else:
            blocks = _rows(outs, xs, create_graph, strict)
    blocks = [_finish(row, create_graph) for row in blocks]
    blocks = [row if in_tuple else row[0] for row in blocks]
    return tuple(blocks) if out_tuple else blocks[0]


def _rows(outs, xs, create_graph, strict):
    blocks = []
    for o in outs:
        flat = reshape(o, (-1,))
        rows = [[] for _ in xs]
        for i in range(flat.shape[0]):
            grads = (
                _gradients([flat[i]], xs, [None], create_graph)
                if o.requires_grad
                else [None] * len(xs)
            )
            _check_strict(grads, strict, "jacobian", "a row of its Jacobian would be zero")
            for r, g, x in zip(rows, grads, xs):
                r.append(zeros_like(x) if g is None else g)
        blocks.append(
            tuple(
                reshape(stack(r), tuple(o.shape) + tuple(x.shape))
                if r
                else zeros_like(x).reshape(tuple(o.shape) + tuple(x.shape))
                for r, x in zip(rows, xs)
            )
        )
    return blocks


def _columns(outs, xs, create_graph):
    ws, g = _func._jacobian_transposed(list(outs), list(xs), True)
    columns = [[[] for _ in xs] for _ in outs]
    for k, x in enumerate(xs):
        for j in range(x.numel()):
            basis = [zeros_like(s) for s in xs]
            flat = zeros_like(x).reshape(-1)
            flat._array[j] = 1
            basis[k] = flat.reshape(x.shape)
            products = _func._forward_product(ws, g, basis, create_graph, retain=True)
            for i, p in enumerate(products):
                columns[i][k].append(reshape(p, (-1,)))
    return [
        tuple(
            reshape(stack(columns[i][k], 1), tuple(o.shape) + tuple(x.shape))
            for k, x in enumerate(xs)
        )
        for i, o in enumerate(outs)
    ]


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """H[i][j] = ∂²func/∂input_i∂input_j for a scalar func (the Jacobian of its gradient)."""
    inputs, in_tuple = _as_tuple(inputs, "hessian", "inputs")

    def gradient(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("hessian: the function must return a one-element Tensor")
        grads = _gradients([out], xs, [None], create_graph=True)
        _check_strict(grads, strict, "hessian", "its gradient would be zero")
        return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, xs))

    result = jacobian(gradient, inputs, create_graph, strict, vectorize, outer_jacobian_strategy)
    if in_tuple:
        return result
    return result[0][0] if isinstance(result[0], tuple) else result[0]
