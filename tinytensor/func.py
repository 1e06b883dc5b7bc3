"""torch.func's transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap.

Each takes a function of Tensors and returns a function that computes a derivative, built on
the engine's reverse mode with create_graph (tinytensor/higher_order.py):

    grad(f)(x)          ∂f/∂x for a scalar f
    vjp(f, x)           (f(x), v ↦ vᵀ J)
    jvp(f, (x,), (u,))  (f(x), J u), by the double-vjp construction: g(w) = Jᵀw is linear in
                        w, so J u = ∂(g(w)·u)/∂w (two reverse passes; no forward mode)
    jacrev(f)(x)        J row by row (one vjp per output element)
    jacfwd(f)(x)        J column by column (one jvp per input element)
    hessian(f)(x)       jacrev of jacrev
    vmap(f)(xs)         f on each slice of xs along in_dims, stacked (a loop, not a batching
                        transform: the results are a batched function's, the speed a loop's)

Transforms nest (grad(grad(f)), jacrev(grad(f)), MAML's inner step inside an outer grad): an
input that an outer transform differentiates is entered through a recorded alias, and the inner
derivative is recorded (create_graph) so that the outer one can differentiate it.
"""

from __future__ import annotations

from .autograd import engine as autograd
from .creation import zeros_like
from .function import enable_grad, is_grad_enabled
from .higher_order import StandIn
from .ops import reshape, stack
from .tensor import Tensor


def _float_tensor(x) -> bool:
    return isinstance(x, Tensor) and x._array.dtype.kind in "fc"


def _track(x):
    """`x` as a tensor to differentiate with respect to: a fresh leaf, or, where x is itself
    being differentiated by an enclosing transform, a recorded alias of it."""
    if not _float_tensor(x):
        return x
    if x.requires_grad and is_grad_enabled():
        return StandIn.apply(x)
    return x.detach().requires_grad_(True)


def _leaves_of(tree):
    """The Tensors of a Tensor or a (nested) tuple/list/dict of them, in order."""
    if isinstance(tree, Tensor):
        return [tree]
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in _leaves_of(item)]
    if isinstance(tree, dict):
        return [leaf for key in tree for leaf in _leaves_of(tree[key])]
    return []


def _rebuild(tree, leaves):
    """`tree` with its Tensors replaced, in order, by those of the iterator `leaves`."""
    if isinstance(tree, Tensor):
        return next(leaves)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(item, leaves) for item in tree)
    if isinstance(tree, dict):
        return {key: _rebuild(value, leaves) for key, value in tree.items()}
    return tree


def _positions(argnums, n_args, fn):
    if isinstance(argnums, int):
        argnums = (argnums,)
    elif not (isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums)):
        raise TypeError(
            f"{fn}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}"
        )
    for a in argnums:
        if not -n_args <= a < n_args:
            raise ValueError(f"{fn}: argnums {a} is out of range for {n_args} positional arguments")
    return tuple(a % n_args for a in argnums)


class _Traced:
    """One call of a transformed function: its arguments with those at `argnums` tracked."""

    def __init__(self, args, argnums, fn):
        self.argnums = argnums
        positions = _positions(argnums, len(args), fn)
        self.args = list(args)
        self.nested = False  # an enclosing transform differentiates the result
        self.wrt = {}  # position -> its tracked tree
        for i in positions:
            originals = _leaves_of(args[i])
            self.nested = self.nested or any(t.requires_grad for t in originals if _float_tensor(t))
            tracked = _rebuild(args[i], iter([_track(t) for t in originals]))
            self.args[i] = self.wrt[i] = tracked
        self.nested = self.nested and is_grad_enabled()

    def leaves(self):
        return [t for tree in self.wrt.values() for t in _leaves_of(tree) if _float_tensor(t)]

    def shaped(self, grads):
        """Gradients (one per float leaf, in order) in the structure of `argnums`."""
        grads = iter(grads)
        per_arg = []
        for tree in self.wrt.values():
            leaves = [next(grads) if _float_tensor(t) else None for t in _leaves_of(tree)]
            per_arg.append(_rebuild(tree, iter(leaves)))
        return per_arg[0] if isinstance(self.argnums, int) else tuple(per_arg)

    def finish(self, value):
        """A result as the caller gets it: detached unless an outer transform needs its graph."""
        if self.nested:
            return value
        return _rebuild(value, iter([t.detach() for t in _leaves_of(value)]))


def _split_aux(out, has_aux, fn):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ValueError(f"{fn}: with has_aux=True the function must return (output, aux)")
    return out


def grad_and_value(func, argnums=0, has_aux=False):
    """`(∂func/∂args[argnums], func(*args))` for a func that returns a one-element Tensor."""

    def wrapper(*args, **kwargs):
        with enable_grad():
            call = _Traced(args, argnums, "grad")
            out, aux = _split_aux(func(*call.args, **kwargs), has_aux, "grad")
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise RuntimeError(
                    "grad: the function must return a one-element Tensor, got "
                    + (
                        f"shape {tuple(out.shape)}"
                        if isinstance(out, Tensor)
                        else type(out).__name__
                    )
                    + "; use vjp or jacrev for other outputs"
                )
            wrt = call.leaves()
            grads = (
                autograd.grad(
                    out, wrt, create_graph=call.nested, allow_unused=True, materialize_grads=True
                )
                if out.requires_grad
                else [zeros_like(t) for t in wrt]
            )
        result = call.finish(call.shaped(grads))
        value = call.finish(out)
        return (result, (value, call.finish(aux))) if has_aux else (result, value)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """∂func/∂args[argnums] for a func that returns a one-element Tensor (torch.func.grad)."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def vjp(func, *primals, has_aux=False):
    """`(func(*primals), vjp_fn)`, where vjp_fn(v) gives vᵀ ∂func/∂primal for each primal."""
    with enable_grad():
        call = _Traced(primals, tuple(range(len(primals))), "vjp")
        out, aux = _split_aux(func(*call.args), has_aux, "vjp")
    outs = _leaves_of(out)
    wrt = call.leaves()

    def vjp_fn(cotangents):
        vs = _leaves_of(cotangents)
        if len(vs) != len(outs):
            raise ValueError(f"vjp_fn: {len(outs)} outputs but {len(vs)} cotangents")
        pairs = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
        with enable_grad():
            grads = (
                autograd.grad(
                    [o for o, _ in pairs],
                    wrt,
                    [v for _, v in pairs],
                    retain_graph=True,
                    create_graph=call.nested,
                    allow_unused=True,
                    materialize_grads=True,
                )
                if pairs
                else [zeros_like(t) for t in wrt]
            )
        return call.finish(call.shaped(grads))

    value = call.finish(out)
    return (value, vjp_fn, call.finish(aux)) if has_aux else (value, vjp_fn)


def _jacobian_transposed(outs, wrt, nested):
    """(w, g): a cotangent leaf w per output and g = Jᵀw per input, recorded, so that
    ∂(g·u)/∂w = J u (the double-vjp construction of a forward-mode product)."""
    ws = [zeros_like(o).requires_grad_(True) for o in outs]
    pairs = [(o, w) for o, w in zip(outs, ws) if o.requires_grad]
    if not pairs:
        return ws, [None] * len(wrt)
    g = autograd.grad(
        [o for o, _ in pairs], wrt, [w for _, w in pairs], create_graph=True, allow_unused=True
    )
    return ws, list(g)


def _forward_product(ws, g, tangents, nested, retain=False):
    """J u for tangents u (one per input): ∂(Σ g·u)/∂w."""
    terms = [(gi * u).sum() for gi, u in zip(g, tangents) if gi is not None and gi.requires_grad]
    if not terms:
        return [zeros_like(w) for w in ws]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return list(
        autograd.grad(
            total,
            ws,
            retain_graph=retain or nested,
            create_graph=nested,
            allow_unused=True,
            materialize_grads=True,
        )
    )


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """`(func(*primals), J·tangents)` (torch.func.jvp), by the double-vjp construction."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise TypeError("jvp: primals and tangents must be tuples (of Tensors)")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    with enable_grad():
        call = _Traced(primals, tuple(range(len(primals))), "jvp")
        out, aux = _split_aux(func(*call.args), has_aux, "jvp")
        outs = _leaves_of(out)
        ws, g = _jacobian_transposed(outs, call.leaves(), call.nested)
        products = _forward_product(ws, g, _leaves_of(tangents), call.nested)
    result = call.finish(_rebuild(out, iter(products)))
    value = call.finish(out)
    return (value, result, call.finish(aux)) if has_aux else (value, result)


def _stack_rows(rows, out_shape, in_shape):
    return reshape(stack(rows), tuple(out_shape) + tuple(in_shape))


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian ∂func/∂args[argnums] of shape out.shape + arg.shape, one vjp per output
    element (torch.func.jacrev)."""

    def wrapper(*args, **kwargs):
        with enable_grad():
            call = _Traced(args, argnums, "jacrev")
            out, aux = _split_aux(func(*call.args, **kwargs), has_aux, "jacrev")
            if not isinstance(out, Tensor):
                raise TypeError("jacrev: the function must return a Tensor")
            wrt = call.leaves()
            flat = reshape(out, (-1,))
            rows = [[] for _ in wrt]
            for i in range(flat.shape[0]):
                if not out.requires_grad:
                    grads = [zeros_like(t) for t in wrt]
                else:
                    grads = autograd.grad(
                        flat[i],
                        wrt,
                        retain_graph=True,
                        create_graph=call.nested,
                        allow_unused=True,
                        materialize_grads=True,
                    )
                for r, gi in zip(rows, grads):
                    r.append(gi)
            jac = [
                _stack_rows(r, out.shape, t.shape)
                if r
                else zeros_like(t).reshape(tuple(out.shape) + tuple(t.shape))
                for r, t in zip(rows, wrt)
            ]
        result = call.finish(call.shaped(jac))
        return (result, call.finish(aux)) if has_aux else result

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian, column by column: one Jacobian-vector product per input element
    (torch.func.jacfwd; the products by the double-vjp construction, see jvp)."""

    def wrapper(*args, **kwargs):
        with enable_grad():
            call = _Traced(args, argnums, "jacfwd")
            out, aux = _split_aux(func(*call.args, **kwargs), has_aux, "jacfwd")
            if not isinstance(out, Tensor):
                raise TypeError("jacfwd: the function must return a Tensor")
            wrt = call.leaves()
            ws, g = _jacobian_transposed([out], wrt, call.nested)
            jac = []
            for k, t in enumerate(wrt):
                columns = []
                for j in range(t.numel()):
                    basis = [zeros_like(s) for s in wrt]
                    basis[k] = zeros_like(t).reshape(-1)
                    basis[k]._array[j] = 1
                    basis[k] = basis[k].reshape(t.shape)
                    (column,) = _forward_product(ws, g, basis, call.nested, retain=True)
                    columns.append(reshape(column, (-1,)))
                shape = tuple(out.shape) + tuple(t.shape)
                jac.append(reshape(stack(columns, 1), shape) if columns else zeros_like(t))
        result = call.finish(call.shaped(jac))
        return (result, call.finish(aux)) if has_aux else result

    return wrapper


def hessian(func, argnums=0):
    """∂²func/∂x² for a scalar func: the Jacobian of the gradient (torch.func.hessian)."""
    return jacrev(jacrev(func, argnums), argnums)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func over a batch: called on each slice of the inputs along `in_dims` (None: not
    batched), the outputs stacked along `out_dims` (see the module docstring: a loop)."""

    def wrapper(*args):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap: in_dims has {len(dims)} entries for {len(args)} arguments")
        sizes = {a.shape[d] for a, d in zip(args, dims) if d is not None}
        if len(sizes) != 1:
            raise ValueError(
                "vmap: the batched arguments must have one batch size along in_dims, got "
                f"{sorted(sizes) or 'no batched argument'}"
            )
        (n,) = sizes
        results = []
        for i in range(n):
            sliced = [a if d is None else a.select(d, i) for a, d in zip(args, dims)]
            results.append(func(*sliced))
        first = results[0]
        if isinstance(first, tuple):
            outs = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(first)
            return tuple(stack([r[k] for r in results], d) for k, d in enumerate(outs))
        return stack(results, out_dims)

    return wrapper
