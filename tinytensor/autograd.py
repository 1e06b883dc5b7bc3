"""Reverse-mode differentiation: walk the graph backwards, one vector-Jacobian product per node.

backward(root): order the nodes that lead to `root` topologically (iteratively: a chain of
100,000 ops must not hit Python's recursion limit), seed dL/droot, then visit them in reverse
order, handing each node the gradient of its output and adding what it returns into the
gradients of its inputs. Leaves accumulate into `.grad`; nodes are freed as they are passed
unless `retain_graph=True`.
"""

from __future__ import annotations

from .backend import get_array_module
from .inplace import check_saved_versions
from .kernels.cpu.dispatch import PARALLEL_MIN_ELEMENTS, pooled_add
from .tensor import Tensor


def sum_to(grad, shape):
    """Sums `grad` over the dimensions that broadcasting added or stretched, giving `shape`.

    The one place in the engine where broadcasting is undone.
    """
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and grad.shape[i + lead] != 1
    )
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def _topological_order(root):
    """The nodes `root` depends on, inputs before outputs; built without recursion.

    Also counts, for each leaf with hooks, how many edges reach it: its hooks run once, on the
    sum, after the last of them was walked (PyTorch's leaf hooks and post-accumulate hooks).

    Edges are `node.parents` (each input's producing node *when the node was recorded*), so an
    in-place op that later gave a tensor a new node does not reroute earlier consumers.
    Also returns the tensors that want their gradient seen (retain_grad or hooks) by node.
    """
    order, seen, watched, hooked_leaves = [], set(), {}, {}
    top = root._ctx
    if root._retains_grad or root._hooks:
        watched[id(top)] = root
    stack = [(top, False)]
    pop, push, visit = stack.pop, stack.append, seen.add
    while stack:
        node, expanded = pop()
        if expanded:
            order.append(node)
            continue
        key = id(node)
        if key in seen:
            continue
        visit(key)
        inputs = node.inputs
        if inputs is None:
            raise RuntimeError(
                f"backward: the graph through {node.name} was already freed by an earlier "
                "backward; pass retain_graph=True to the first backward to go through it twice"
            )
        push((node, True))
        for x, parent in zip(inputs, node.parents):
            if parent is not None:
                if (x._retains_grad or x._hooks) and x._ctx is parent:
                    watched[id(parent)] = x
                if id(parent) not in seen:
                    push((parent, False))
            elif x._hooks and x.requires_grad:  # count the edges a hooked leaf hears from
                entry = hooked_leaves.setdefault(id(x), [x, 0, None])
                entry[1] += 1
    return order, watched, hooked_leaves


def _seed(root, gradient):
    data = root._array
    xp = get_array_module(data)
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(
                f"backward: a gradient can be implied only for a single-element output, this "
                f"one has shape {root.shape}; pass backward(gradient=...) of that shape"
            )
        # NOTE: array(1).reshape is ~3x cheaper than ones_like, and this runs every step
        return xp.array(1, dtype=data.dtype).reshape(data.shape)
    g = gradient._array if isinstance(gradient, Tensor) else xp.asarray(gradient)
    if g.shape != data.shape:
        raise ValueError(
            f"backward: gradient has shape {g.shape} but the output has shape {root.shape}"
        )
    return g.astype(data.dtype, copy=False)


def _run_grad_hooks(t, g):
    """PyTorch's Tensor.register_hook: each hook may return a replacement gradient."""
    for hook in t._hooks["grad"]:
        new = hook(_wrap(g, False, None))
        if new is not None:
            g = new._array if isinstance(new, Tensor) else new
    return g


def _add_to_grad(t, g):
    grad = t._grad
    if grad is None:
        # A copy: the same array may be handed to several leaves (x + y gives both g), and a
        # later in-place update of one .grad must not change another.
        t._grad = _wrap(g.copy(), False, None)
    else:
        grad._array = grad._array + g


def _deliver(hooked, x, gx):
    """One edge into a hooked leaf was walked: sum its gradient; after the last, accumulate."""
    entry = hooked[id(x)]
    if gx is not None:
        entry[2] = gx if entry[2] is None else entry[2] + gx
    entry[1] -= 1
    if entry[1] == 0 and entry[2] is not None:
        _accumulate_leaf(x, entry[2])


def _accumulate_leaf(t, g):
    if t._hooks:
        g = _run_grad_hooks(t, g)
    _add_to_grad(t, g)
    if t._hooks:
        for hook in t._hooks["post_accumulate"]:
            hook(t)


_wrap = Tensor._wrap
_trace = None  # the list of a running backward_trace(), else None


class BackwardStep:
    """One node's vector-Jacobian product as it ran: what arrived, and what it sent on."""

    __slots__ = ("node", "grad_output", "input_grads")

    def __init__(self, node, grad_output, input_grads):
        self.node, self.grad_output, self.input_grads = node, grad_output, input_grads


class backward_trace:
    """`with tt.autograd.backward_trace() as trace: loss.backward()` records, in the order
    backward ran them, one `BackwardStep` per node (`trace.steps`): for teaching and the
    graph explorer. Costs nothing when not used."""

    def __init__(self):
        self.steps = []

    def __enter__(self):
        global _trace
        self._previous, _trace = _trace, self.steps
        return self

    def __exit__(self, *exc):
        global _trace
        _trace = self._previous


def backward(root, gradient=None, retain_graph=False):
    if not root.requires_grad:
        raise RuntimeError(
            "backward: this tensor does not require grad and has no graph; did you forget "
            "requires_grad=True on the inputs, or compute it under no_grad()?"
        )
    g = _seed(root, gradient)
    if root._ctx is None:
        _accumulate_leaf(root, g)
        return
    # NOTE: the hot path of every training step: locals over attribute lookups throughout.
    order, watched, hooked = _topological_order(root)
    grads = {id(root._ctx): g}
    pop_grad = grads.pop
    trace = _trace
    for ctx in reversed(order):
        key = id(ctx)
        g = pop_grad(key, None)
        if g is None:  # no path from root carries a gradient through this node
            if hooked:
                for x, parent in zip(ctx.inputs, ctx.parents):
                    if parent is None and id(x) in hooked:
                        _deliver(hooked, x, None)
            if not retain_graph:
                ctx.release()
            continue
        if key in watched:
            t = watched[key]
            if t._hooks:
                g = _run_grad_hooks(t, g)
            if t._retains_grad:
                _add_to_grad(t, g)
        if ctx.saved_at is not None or ctx.saved_versions:
            check_saved_versions(ctx)
        input_grads = ctx.backward(g)
        if input_grads.__class__ is not tuple:
            input_grads = (input_grads,)
        needs = ctx.needs_input_grad
        sent = [None] * len(needs) if trace is not None else None
        for i, (x, parent, gx) in enumerate(zip(ctx.inputs, ctx.parents, input_grads)):
            if gx is None or not needs[i]:
                if hooked and parent is None and id(x) in hooked:
                    _deliver(hooked, x, None)
                continue
            data = x._array
            if gx.shape != data.shape:
                if ctx.broadcasts:
                    gx = sum_to(gx, data.shape)
                if gx.shape != data.shape:
                    raise RuntimeError(
                        f"{ctx.name}.backward returned a gradient of shape {gx.shape} for input "
                        f"{i}, whose shape is {data.shape}"
                    )
            if gx.dtype != data.dtype:
                gx = gx.astype(data.dtype)
            if sent is not None:
                sent[i] = gx
            if parent is None:
                if hooked and id(x) in hooked:
                    _deliver(hooked, x, gx)
                else:
                    _accumulate_leaf(x, gx)
            else:
                pkey = id(parent)
                if pkey in grads:  # a second path to the same tensor: the gradients add up
                    earlier = grads[pkey]
                    total = pooled_add(earlier, gx) if gx.size >= PARALLEL_MIN_ELEMENTS else None
                    gx = earlier + gx if total is None else total
                grads[pkey] = gx
        if sent is not None:
            trace.append(BackwardStep(ctx, g, tuple(sent)))
        if not retain_graph:
            ctx.release()


def _leaves(root):
    """The leaf tensors that require grad and that `root` depends on."""
    if root._ctx is None:
        return [root] if root.requires_grad else []
    found = {}
    for node in _topological_order(root)[0]:
        for x, parent in zip(node.inputs, node.parents):
            if parent is None and x.requires_grad:
                found[id(x)] = x
    return list(found.values())


def grad(
    outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False
):
    """d(Σ outputs·grad_outputs)/d(inputs) as a tuple, as `torch.autograd.grad`.

    Runs `backward` and reads the inputs' `.grad`, then puts back every `.grad` it touched, so
    (as in PyTorch) no leaf's `.grad` changes. `create_graph` (double backward) is not supported.
    """
    if create_graph:
        raise NotImplementedError(
            "autograd.grad: create_graph=True (double backward) is not supported"
        )
    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise ValueError(
            f"autograd.grad: {len(outputs)} outputs but {len(grad_outputs)} grad_outputs"
        )
    for i, x in enumerate(inputs):
        if not x.requires_grad:
            raise RuntimeError(f"autograd.grad: input {i} does not require grad")
    touched = {id(t): t for out in outputs for t in _leaves(out)}
    touched.update({id(x): x for x in inputs})
    saved = {key: (t.grad, t._retains_grad) for key, t in touched.items()}
    try:
        for t in touched.values():
            t.grad = None
        for x in inputs:
            if x._ctx is not None:
                x._retains_grad = True
        for k, (out, g) in enumerate(zip(outputs, grad_outputs)):
            last = k == len(outputs) - 1
            backward(out, g, retain_graph=bool(retain_graph) or not last)
        result = tuple(x.grad for x in inputs)
    finally:
        for key, t in touched.items():
            t.grad, t._retains_grad = saved[key]
    for i, g in enumerate(result):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"autograd.grad: input {i} was not used to compute the outputs; "
                "pass allow_unused=True to get None for it"
            )
    return result
