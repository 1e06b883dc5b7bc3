"""Reverse-mode differentiation: walk the graph backwards, one vector-Jacobian product per node.

backward(root): order the nodes that lead to `root` topologically (iteratively: a chain of
100,000 ops must not hit Python's recursion limit), seed dL/droot, then visit them in reverse
order, handing each node the gradient of its output and adding what it returns into the
gradients of its inputs. Leaves accumulate into `.grad`; nodes are freed as they are passed
unless `retain_graph=True`.

`create_graph=True` runs the same walk on Tensors instead of arrays: each node's VJP is computed
by recorded ops (`higher_order.vjp`), so the gradients are on a graph of their own and can be
differentiated again, to any order. `grad(outputs, inputs)` runs the walk for the given inputs
only (nodes that lead to none of them are skipped) and returns their gradients, touching no
`.grad`.
"""

from __future__ import annotations

from .. import function, higher_order
from ..backend import get_array_module
from ..inplace import check_saved_versions
from ..kernels.cpu.dispatch import PARALLEL_MIN_ELEMENTS, pooled_add
from ..tensor import Tensor

_wrap = Tensor._wrap
_trace = None  # the list of a running backward_trace(), else None
_anomaly = {"enabled": False, "check_nan": False}  # set by anomaly_mode (detect_anomaly)


def sum_to(grad, shape):
    """Sums `grad` over the dimensions that broadcasting added or stretched, giving `shape`.

    The one place in the engine where broadcasting is undone (arrays, or Tensors under
    create_graph).
    """
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and grad.shape[i + lead] != 1
    )
    if axes:
        if grad.__class__ is Tensor:
            grad = grad.sum(dim=axes, keepdim=True)
        else:
            grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def _topological_order(roots, stop=()):
    """The nodes the tensors `roots` depend on, inputs before outputs; built without recursion.
    Nodes in `stop` (ids) are ordered but not walked behind (a composite's stand-ins).

    Also counts, for each leaf with hooks, how many edges reach it: its hooks run once, on the
    sum, after the last of them was walked (PyTorch's leaf hooks and post-accumulate hooks).

    Edges are `node.parents` (each input's producing node *when the node was recorded*), so an
    in-place op that later gave a tensor a new node does not reroute earlier consumers.
    Also returns the tensors that want their gradient seen (retain_grad or hooks) by node.
    """
    order, seen, watched, hooked_leaves = [], set(), {}, {}
    stack = []
    for root in roots:
        if root._ctx is not None:
            if root._retains_grad or root._hooks:
                watched[id(root._ctx)] = root
            stack.append((root._ctx, False))
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
        push((node, True))
        if stop and key in stop:
            continue
        inputs = node.inputs
        if inputs is None:
            raise RuntimeError(
                f"backward: the graph through {node.name} was already freed by an earlier "
                "backward; pass retain_graph=True to the first backward to go through it twice"
            )
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


def _edges_to_targets(order, target_leaves, target_nodes, stop):
    """{id(node): needs} for the nodes whose backward leads to a target, `needs` saying which of
    the node's inputs to compute a gradient for; nodes not in it are skipped (PyTorch prunes
    the same way: grad(loss, x) computes no weight gradients)."""
    masks = {}
    for node in order:  # inputs before outputs: a parent's entry is known when it is needed
        key = id(node)
        if key in stop:
            continue
        mask, useful = [], False
        for x, parent, need in zip(node.inputs, node.parents, node.needs_input_grad):
            if need:
                if parent is None:
                    need = id(x) in target_leaves
                else:
                    pkey = id(parent)
                    need = pkey in target_nodes or pkey in masks
            mask.append(need)
            useful = useful or need
        if useful:
            masks[key] = tuple(mask)
    return masks


def _seed(root, gradient, create_graph, where="backward", argument="backward(gradient=...)"):
    """dL/droot: an array, or under create_graph a Tensor (which may itself require grad)."""
    data = root._array
    if gradient is None:
        if data.size != 1:
            raise RuntimeError(
                f"{where}: a gradient can be implied only for a single-element output, this "
                f"one has shape {root.shape}; pass {argument} of that shape"
            )
        # NOTE: array(1).reshape is ~3x cheaper than ones_like, and this runs every step
        g = get_array_module(data).array(1, dtype=data.dtype).reshape(data.shape)
        return _wrap(g, False, None) if create_graph else g
    if gradient.__class__ is Tensor:
        g = gradient._array
    elif isinstance(gradient, Tensor):
        g = gradient._array
    else:
        g = get_array_module(data).asarray(gradient)
    if g.shape != data.shape:
        raise ValueError(
            f"{where}: the gradient has shape {tuple(g.shape)} but the output has shape "
            f"{root.shape}"
        )
    if not create_graph:
        return g.astype(data.dtype, copy=False)
    seed = gradient if isinstance(gradient, Tensor) else _wrap(g, False, None)
    return seed if g.dtype == data.dtype else seed.to(root.dtype)


def _run_grad_hooks(t, g):
    """PyTorch's Tensor.register_hook: each hook may return a replacement gradient."""
    graph = g.__class__ is Tensor
    for hook in t._hooks["grad"]:
        new = hook(g if graph else _wrap(g, False, None))
        if new is not None:
            g = new if graph or not isinstance(new, Tensor) else new._array
    return g


def _add_to_grad(t, g):
    grad = t._grad
    if g.__class__ is Tensor:  # create_graph: .grad is on the graph, and is replaced, not updated
        # (a clone: the same gradient may reach several tensors, and one .grad must not alias
        # another)
        t._grad = g.clone() if grad is None else grad + g
        return
    if grad is None:
        # A copy: the same array may be handed to several leaves (x + y gives both g), and a
        # later in-place update of one .grad must not change another.
        t._grad = _wrap(g.copy(), False, None)
    else:
        grad._array = grad._array + g


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


def _accumulate_leaf(t, g):
    """g into the leaf's .grad: its hooks first, then the post-accumulate hooks."""
    if t._hooks:
        g = _run_grad_hooks(t, g)
    _add_to_grad(t, g)
    if t._hooks:
        for hook in t._hooks["post_accumulate"]:
            hook(t)


def _as_array(g):
    return g._array if g.__class__ is Tensor else g


class _Walk:
    """Where the gradients of one walk go.

    targets None: every leaf that requires grad (and every retain_grad tensor) accumulates into
    `.grad` (backward). Otherwise only the target tensors receive a gradient: into `.grad`
    (backward(inputs=...)), or, with `capture`, into `self.captured` and no `.grad` changes
    (autograd.grad).
    """

    __slots__ = ("targets", "capture", "captured", "target_nodes")

    def __init__(self, targets=None, capture=False):
        self.targets = None if targets is None else {id(t): t for t in targets}
        self.capture = capture
        self.captured = {}
        # non-leaf targets by their producing node: their gradient is the one that node receives
        self.target_nodes = {}
        if targets is not None:
            for t in targets:
                if t._ctx is not None:
                    self.target_nodes[id(t._ctx)] = t

    def leaf(self, t, g):
        """A leaf's total gradient `g` (hooked leaves: after the last edge into it)."""
        if not self.capture:
            _accumulate_leaf(t, g)
            return
        if t._hooks:
            g = _run_grad_hooks(t, g)
        self.keep(t, g)

    def keep(self, t, g):
        key = id(t)
        earlier = self.captured.get(key)
        self.captured[key] = g if earlier is None else earlier + g

    def deliver(self, hooked, x, gx):
        """One edge into a hooked leaf was walked: sum its gradient; after the last, pass it on."""
        entry = hooked[id(x)]
        if gx is not None:
            entry[2] = gx if entry[2] is None else entry[2] + gx
        entry[1] -= 1
        if entry[1] == 0 and entry[2] is not None:
            self.leaf(x, entry[2])


_deliver_to_leaves = _Walk().deliver  # backward()'s: a hooked leaf's sum into its .grad


def walk(roots, seeds, retain_graph=False, create_graph=False, into=None, stop=()):
    """The backward walk from `roots` with dL/droot = `seeds` (see the module docstring).

    into: a `_Walk` saying where gradients go (None: every leaf's `.grad`). stop: ids of nodes
    not to walk behind.
    """
    order, watched, hooked = _topological_order(roots, stop)
    targets = masks = None
    if into is not None and into.targets is not None:
        targets = into.targets
        masks = _edges_to_targets(order, targets, into.target_nodes, stop)
    grads = {}
    for root, g in zip(roots, seeds):
        if root._ctx is None:
            if targets is None:
                _accumulate_leaf(root, g)
            elif id(root) in targets:
                into.leaf(root, g)
            continue
        key = id(root._ctx)
        grads[key] = g if key not in grads else grads[key] + g
    if create_graph:
        with function.enable_grad():
            _walk_nodes(order, grads, watched, hooked, masks, into, retain_graph, True)
    else:
        _walk_nodes(order, grads, watched, hooked, masks, into, retain_graph, False)


def _walk_nodes(order, grads, watched, hooked, masks, into, retain_graph, create_graph):
    """Visits `order` backwards (see walk); into None: every leaf accumulates (backward)."""
    # NOTE: the hot path of every training step: locals over attribute lookups throughout,
    # and the pruning and capture of autograd.grad only where there are targets (masks)
    pop_grad = grads.pop
    trace = _trace
    check_nan = _anomaly["check_nan"]
    plain = masks is None and not create_graph  # first order, every edge: backward()
    if into is None:
        targets = None
        leaf, deliver = _accumulate_leaf, _deliver_to_leaves
    else:
        targets, target_nodes, capture = into.targets, into.target_nodes, into.capture
        leaf, deliver = into.leaf, into.deliver
    for ctx in reversed(order):
        key = id(ctx)
        g = pop_grad(key, None)
        needs = ctx.needs_input_grad
        if masks is not None and g is not None:
            needs = masks.get(key)
            if key in target_nodes:
                t = target_nodes[key]
                if key in watched and watched[key]._hooks:  # the target's hooks, then keep
                    g = _run_grad_hooks(t, g)
                if capture:
                    into.keep(t, g)
                else:
                    _add_to_grad(t, g)
                if needs is None:  # a target whose own inputs lead to no other target
                    g = None
            elif needs is None:
                g = None  # leads to no target
        if g is None:  # no path from root carries a gradient through this node
            if hooked:
                for x, parent in zip(ctx.inputs, ctx.parents):
                    if parent is None and id(x) in hooked:
                        deliver(hooked, x, None)
            # (a node that autograd.grad did not need to run is left as it was, as torch
            # does: the graph behind a non-leaf input stays usable)
            if not retain_graph and masks is None:
                ctx.release()
            continue
        if key in watched and (masks is None or key not in target_nodes):
            t = watched[key]
            if t._hooks:
                g = _run_grad_hooks(t, g)
            if t._retains_grad and targets is None:
                _add_to_grad(t, g)
        if ctx.saved_at is not None or ctx.saved_versions:
            check_saved_versions(ctx)
        if plain:
            input_grads = ctx.backward(g)
        elif create_graph:
            input_grads = higher_order.vjp(ctx, g, needs)
        else:  # pruned to the edges that lead to a target
            full, ctx.needs_input_grad = ctx.needs_input_grad, needs
            try:
                input_grads = ctx.backward(g)
            finally:
                ctx.needs_input_grad = full
        if input_grads.__class__ is not tuple:
            input_grads = (input_grads,)
        if check_nan:
            _check_nan(ctx, input_grads)
        sent = [None] * len(needs) if trace is not None else None
        for i, (x, parent, gx) in enumerate(zip(ctx.inputs, ctx.parents, input_grads)):
            if gx is None or not needs[i]:
                if hooked and parent is None and id(x) in hooked:
                    deliver(hooked, x, None)
                continue
            data = x._array
            if gx.shape != data.shape or gx.dtype != data.dtype or create_graph:
                gx = _fit(gx, x, ctx, i, create_graph)
            if sent is not None:
                sent[i] = _as_array(gx)
            if parent is None:
                if hooked and id(x) in hooked:
                    deliver(hooked, x, gx)
                elif targets is None or id(x) in targets:
                    leaf(x, gx)
            else:
                pkey = id(parent)
                if pkey in grads:  # a second path to the same tensor: the gradients add up
                    earlier = grads[pkey]
                    total = None
                    if not create_graph and gx.size >= PARALLEL_MIN_ELEMENTS:
                        total = pooled_add(earlier, gx)
                    gx = earlier + gx if total is None else total
                grads[pkey] = gx
        if sent is not None:
            trace.append(BackwardStep(ctx, _as_array(g), tuple(sent)))
        if not retain_graph:
            ctx.release()


def _check_nan(ctx, input_grads):
    """detect_anomaly: a NaN among a node's gradients is an error naming it and its forward."""
    for i, gx in enumerate(input_grads):
        array = gx._array if gx.__class__ is Tensor else gx
        if not hasattr(array, "__array_namespace__"):  # None, or a Function's by-output sums
            continue
        if array.dtype.kind in "fc" and bool(get_array_module(array).isnan(array).any()):
            from .anomaly_mode import nan_error

            raise nan_error(ctx, i)


def _fit(gx, x, ctx, i, create_graph):
    """Input i's gradient `gx` in x's shape (broadcasting undone) and dtype."""
    if create_graph and gx.__class__ is not Tensor and hasattr(gx, "__array_namespace__"):
        gx = _wrap(gx, False, None)  # a constant (zeros) from a VJP
    data = x._array
    if gx.shape != data.shape:
        if ctx.broadcasts:
            gx = sum_to(gx, data.shape)
        if gx.shape != data.shape:
            raise RuntimeError(
                f"{ctx.name}.backward returned a gradient of shape {tuple(gx.shape)} for input "
                f"{i}, whose shape is {data.shape}"
            )
    if gx.__class__ is Tensor:
        return gx if gx._array.dtype == data.dtype else gx.to(x.dtype)
    # (an array, or a custom Function's gradients by output on their way to it: autograd/function)
    return gx if gx.dtype == data.dtype else gx.astype(data.dtype)


def backward(root, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Tensor.backward: the gradient of `root` with respect to every leaf that requires grad,
    accumulated into their `.grad`.

    Args:
        gradient: dL/droot; may be omitted only for a single-element tensor (then 1).
        retain_graph: keep the graph so backward can run through it again; by default the
            graph is freed as it is walked, so that intermediate arrays are released (kept by
            default with create_graph).
        create_graph: record the backward itself, so that each `.grad` is a Tensor on a graph
            and can be differentiated again (double backward).
        inputs: accumulate into the `.grad` of these tensors only.
    """
    if not root.requires_grad:
        raise RuntimeError(
            "backward: this tensor does not require grad and has no graph; did you forget "
            "requires_grad=True on the inputs, or compute it under no_grad()?"
        )
    if retain_graph is None:
        retain_graph = create_graph
    g = _seed(root, gradient, create_graph)
    if inputs is None and not create_graph:  # every training step: the walk without its options
        if root._ctx is None:
            _accumulate_leaf(root, g)
            return
        order, watched, hooked = _topological_order((root,))
        _walk_nodes(order, {id(root._ctx): g}, watched, hooked, None, None, retain_graph, False)
        return
    into = None
    if inputs is not None:
        inputs = _tensor_list(inputs, "backward", "inputs")
        if not inputs:
            raise RuntimeError("backward: inputs= was given but is empty")
        into = _Walk(inputs)
    walk([root], [g], retain_graph, create_graph, into)


def _tensor_list(values, fn, argument):
    values = [values] if isinstance(values, Tensor) else list(values)
    for i, v in enumerate(values):
        if not isinstance(v, Tensor):
            raise TypeError(f"{fn}: {argument}[{i}] must be a Tensor, got {type(v).__name__}")
    return values


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    allow_unused=None,
    materialize_grads=False,
):
    """d(Σ outputs·grad_outputs)/d(inputs) as a tuple, as `torch.autograd.grad`.

    No `.grad` changes. With `create_graph=True` the gradients are Tensors on a graph of their
    own, differentiable again (a gradient penalty, a Hessian-vector product). Nodes that lead to
    none of `inputs` are skipped.

    Args:
        outputs: a Tensor or a sequence of Tensors to differentiate.
        inputs: the Tensors (leaves or not) to differentiate with respect to.
        grad_outputs: dL/d(each output); None for a single-element output means 1.
        retain_graph: keep the graph for another backward (default: create_graph).
        create_graph: record the backward, so that the gradients can be differentiated.
        allow_unused: give None (or zeros, with materialize_grads) for an input the outputs do
            not depend on, instead of raising.
        materialize_grads: zeros instead of None for unused inputs (implies allow_unused).
    """
    outputs = _tensor_list(outputs, "autograd.grad", "outputs")
    inputs = _tensor_list(inputs, "autograd.grad", "inputs")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError(
            "autograd.grad: materialize_grads=True needs allow_unused (True or left out)"
        )
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    else:
        grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(
            f"autograd.grad: {len(outputs)} outputs but {len(grad_outputs)} grad_outputs"
        )
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise RuntimeError(
                f"autograd.grad: output {i} does not require grad and has no graph; did you "
                "forget requires_grad=True on the inputs, or compute it under no_grad()?"
            )
    for i, x in enumerate(inputs):
        if not x.requires_grad:
            raise RuntimeError(f"autograd.grad: input {i} does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    seeds = [
        _seed(out, g, create_graph, f"autograd.grad (output {i})", f"grad_outputs[{i}]")
        for i, (out, g) in enumerate(zip(outputs, grad_outputs))
    ]
    into = _Walk(inputs, capture=True)
    walk(outputs, seeds, retain_graph, create_graph, into)
    result = []
    for i, x in enumerate(inputs):
        g = into.captured.get(id(x))
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"autograd.grad: input {i} was not used to compute the outputs; "
                    "pass allow_unused=True to get None for it"
                )
            if materialize_grads:
                g = get_array_module(x._array).zeros_like(x._array)
        if g is not None and g.__class__ is not Tensor:
            g = _wrap(g, False, None)
        result.append(g)
    return tuple(result)


# NOTE: Tensor.backward is this function itself (tensor.py cannot import the engine, which
# imports it): a method that called on into it cost a call, ~0.1 µs of every small backward
Tensor.backward = backward
