"""The computation graph as plain data for the explorer page.

`extract(outputs, params)` walks the graph that produced `outputs` (the same nodes and module
names as `draw_graph`), runs the real backward under `autograd.backward_trace()` and returns one
JSON-ready dict:

    nodes    tensors and ops; a tensor has a role, shape, dtype, a summary of its value and of
             its gradient, and flags (nan, inf, exploding, vanishing); an op has its name, the
             VJP math from its docstring, its scalar arguments, its input and output tensors
    edges    [source id, destination id]: input tensor -> op -> output tensor
    modules  the nn.Module tree (dotted name, class, parent) with repeated blocks recognised
    steps    the backward pass in the order the engine ran it: the op, the gradient arriving at
             its output, and what it sent to each input (k-th of n contributions when an input
             is used n times and its gradient accumulates)
"""

from __future__ import annotations

import inspect
import numbers
import time
from collections import Counter, defaultdict, deque

import numpy as np

from ..tensor import Tensor
from .summary import brief, rounded, summarize, to_numpy

# A gradient is marked exploding when its largest entry exceeds this, vanishing when every entry
# is below the other (and the tensor has any entries): scale-free tests would miss a plain 1e6.
EXPLODING_GRAD = 1e3
VANISHING_GRAD = 1e-8

_OP_FIELDS_SKIPPED = {
    "inputs",
    "parents",
    "needs_input_grad",
    "module",
    "saved_versions",
    "saved_at",
}


def extract(outputs, params=None, backward=True, name="explore") -> dict:
    """The graph behind `outputs` as a dict (see the module docstring).

    `backward=True` runs `loss.backward()` once, recording the engine's order, where the loss is
    the first single-element output that requires grad; the graph must not be freed yet.
    """
    started = time.perf_counter()
    outputs = _as_output_list(outputs, name)
    tensor_names, module_names = _names(params, name)
    walked, walked_edges = _walk(outputs)
    # Ids in computing order (inputs first) read naturally in the page and in the JSON.
    walked.reverse()
    ids = {key: i for i, (key, _) in enumerate(walked)}
    _check_not_freed(walked, name)

    output_ids = {id(t) for t in outputs}
    param_ids = {id(p) for p in _parameter_list(params)}
    modules = _ModuleTree(module_names)
    nodes = []
    for key, obj in walked:
        if key[0] == "op":
            nodes.append(_op_node(ids[key], obj, modules))
        else:
            role = _role(obj, output_ids, param_ids)
            nodes.append(_tensor_node(ids[key], obj, role, tensor_names, outputs, modules))
    for src, dst in walked_edges:
        if src[0] == "t":
            nodes[ids[dst]]["inputs"].append(ids[src])
        else:
            nodes[ids[src]]["output"] = ids[dst]
            nodes[ids[dst]]["producer"] = ids[src]
    for node in nodes:
        if node["kind"] == "op":
            for i in node["inputs"]:
                nodes[i]["used_by"].append(node["id"])

    tensors = {id(obj): ids[key] for key, obj in walked if key[0] == "t"}
    ops = {id(obj): ids[key] for key, obj in walked if key[0] == "op"}
    op_inputs = {id(obj): obj.inputs for key, obj in walked if key[0] == "op"}
    steps, note = [], "backward was not run (backward=False)"
    if backward:
        steps, grads, note = _run_backward(outputs, nodes, tensors, ops, op_inputs, walked)
        for tensor_id, grad in grads.items():
            nodes[tensor_id]["grad"] = summarize(grad)
    for node in nodes:
        if node["kind"] == "tensor":
            node["flags"] = _flags(node)

    return {
        "format": "tinytensor-explore/1",
        "title": "",
        "nodes": nodes,
        "edges": [[ids[src], ids[dst]] for src, dst in walked_edges],
        "modules": modules.as_list(nodes),
        "steps": steps,
        "backward_note": note,
        "thresholds": {"exploding": EXPLODING_GRAD, "vanishing": VANISHING_GRAD},
        "seconds": round(time.perf_counter() - started, 3),
    }


# ---- walking and naming -----------------------------------------------------------------------


def _walk(outputs):
    """Every node reachable from `outputs`, nearest first, as (key, object) with key ("t", id)
    for tensors and ("op", id) for Functions, and the edges (source key, destination key) in
    computing order. Iterative: a deep graph does not hit the recursion limit."""
    nodes, edges, seen = [], [], set()
    queue = deque()
    for t in outputs:
        if ("t", id(t)) not in seen:
            seen.add(("t", id(t)))
            queue.append((("t", id(t)), t))
    while queue:
        key, obj = queue.popleft()
        nodes.append((key, obj))
        if key[0] == "t":
            children = [] if obj._ctx is None else [(("op", id(obj._ctx)), obj._ctx)]
            edges.extend((child_key, key) for child_key, _ in children)
        else:
            children = [(("t", id(x)), x) for x in (obj.inputs or ())]
            # reversed here and once more below: each op's input edges end in argument order
            edges.extend((child_key, key) for child_key, _ in reversed(children))
        for child_key, child in children:
            if child_key not in seen:
                seen.add(child_key)
                queue.append((child_key, child))
    edges.reverse()
    return nodes, edges


def _names(params, name):
    """(id(tensor) -> name, _ModuleNames) from `params`: a dict name -> Tensor, or a module."""
    if params is None:
        return {}, _ModuleNames()
    if isinstance(params, dict):
        return {id(t): str(n) for n, t in params.items()}, _ModuleNames()
    if not hasattr(params, "named_parameters"):
        raise TypeError(
            f"{name}: params must be a dict of name -> Tensor or a module with "
            f"named_parameters(), got {type(params).__name__}"
        )
    tensor_names = {id(p): n for n, p in params.named_parameters()}
    modules = params.named_modules() if hasattr(params, "named_modules") else ()
    return tensor_names, _ModuleNames(modules)


class _ModuleNames(dict):
    """Dotted name -> module, plus the reverse lookup by identity."""

    def __init__(self, named_modules=()):
        super().__init__(named_modules)
        self._by_id = {id(m): n for n, m in self.items()}

    def name_of(self, module):
        return self._by_id.get(id(module))


# ---- checks ----------------------------------------------------------------------------------


def _as_output_list(outputs, name):
    listed = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if not listed:
        raise ValueError(f"{name}: output is empty; pass a Tensor such as the loss")
    for t in listed:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: output must be a Tensor or a list of Tensors, got {t!r:.60}")
    return listed


def _check_not_freed(walked, name):
    for key, obj in walked:
        if key[0] == "op" and obj.inputs is None:
            raise RuntimeError(
                f"{name}: the graph through {type(obj).__name__} was already freed by backward(); "
                f"call {name}(loss, ...) before loss.backward() (it runs backward itself), or "
                "keep the graph with loss.backward(retain_graph=True)"
            )


def _parameter_list(params):
    if params is None:
        return []
    if isinstance(params, dict):
        return list(params.values())
    return [p for _, p in params.named_parameters()]


# ---- nodes -----------------------------------------------------------------------------------


def _role(t, output_ids, param_ids):
    if id(t) in output_ids:
        return "output"
    if id(t) in param_ids:
        return "parameter"
    if t._ctx is not None:
        return "intermediate"
    return "leaf" if t.requires_grad else "input"


def _tensor_node(node_id, t, role, tensor_names, outputs, modules):
    label = tensor_names.get(id(t))
    if label is None:
        if role == "output":
            label = "output" if len(outputs) == 1 else f"output {_index_of(t, outputs)}"
        elif role == "input" and t.numel() == 1:
            label = f"const {float(t.numpy().reshape(())):.4g}"
        elif role in ("input", "leaf"):
            label = role
    if role in ("intermediate", "output") and t._ctx is not None:
        module = modules.index_of(t._ctx.module)
    elif role == "parameter" and label:
        module = modules.index_of_name(label.rpartition(".")[0])
    else:
        module = None
    return {
        "id": node_id,
        "kind": "tensor",
        "role": role,
        "name": label,
        "shape": list(t.shape),
        "dtype": str(t.dtype),
        "requires_grad": bool(t.requires_grad),
        "module": module,
        "value": summarize(t.numpy()),
        "grad": None,
        "producer": None,
        "used_by": [],
    }


def _index_of(t, outputs):
    return next(i for i, o in enumerate(outputs) if o is t)


def _op_node(node_id, ctx, modules):
    return {
        "id": node_id,
        "kind": "op",
        "name": type(ctx).__name__,
        "math": _vjp_math(type(ctx)),
        "args": _op_arguments(ctx),
        "module": modules.index_of(ctx.module),
        "needs_input_grad": [bool(x) for x in ctx.needs_input_grad],
        "inputs": [],
        "output": None,
    }


def _vjp_math(cls):
    """The op's docstring, where the engine writes the forward and VJP math (first line, or the
    first lines when the VJP needs more room)."""
    doc = (inspect.getdoc(cls) or "").strip()
    return doc if len(doc) <= _MATH_CHARS else doc[:_MATH_CHARS].rstrip() + " ..."


_MATH_CHARS = 1200  # a docstring of ten lines; the page stays small with a thousand ops


def _op_arguments(ctx):
    """The op's plain settings (dim, eps, approximate, ...): the scalar attributes forward kept.

    Ops keep only what backward needs, so this is what the node still knows of its arguments;
    arrays are left out (their shapes are the inputs').
    """
    found = {}
    for key, value in vars(ctx).items():
        if key.startswith("_") or key in _OP_FIELDS_SKIPPED or value is None:
            continue
        if isinstance(value, (tuple, list)) and len(value) <= 8:
            items = [_plain(v) for v in value]
            if _NOT_PLAIN not in items:
                found[key] = items
        elif _plain(value) is not _NOT_PLAIN:
            found[key] = _plain(value)
    return found


_NOT_PLAIN = object()


def _plain(value):
    """`value` as a JSON number, bool or short string, or _NOT_PLAIN (NumPy scalars too)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return rounded(value)
    if isinstance(value, str) and len(value) <= 40:
        return value
    return None if value is None else _NOT_PLAIN


# ---- modules ---------------------------------------------------------------------------------


class _ModuleTree:
    """The modules that hold nodes, plus their ancestors, numbered in the order first met.

    With names (params is a module), "h.0.attn" has parent "h.0", whose parent is "h"; the root
    module (name "") is the page's top level, not a module of its own. Without names each module
    object is one top-level entry labelled by its class.
    """

    def __init__(self, module_names):
        self.module_names = module_names
        self.entries = []  # dicts: name, cls, parent
        self.by_key = {}

    def index_of(self, module):
        if module is None:
            return None
        name = self.module_names.name_of(module)
        if name is None:
            key = ("object", id(module))
            if key not in self.by_key:
                count = sum(e["cls"] == type(module).__name__ for e in self.entries)
                label = type(module).__name__ + (f" #{count + 1}" if count else "")
                self.by_key[key] = self._add(label, type(module).__name__, None)
            return self.by_key[key]
        return self.index_of_name(name)

    def index_of_name(self, name):
        if not name:
            return None
        key = ("name", name)
        if key not in self.by_key:
            parent = self.index_of_name(name.rpartition(".")[0])
            owner = self.module_names.get(name)
            cls = type(owner).__name__ if owner is not None else ""
            if cls in ("ModuleList", "ModuleDict"):  # a group of items, as a plain list was
                cls = ""
            self.by_key[key] = self._add(name, cls, parent)
        return self.by_key[key]

    def _add(self, name, cls, parent):
        self.entries.append({"name": name, "cls": cls, "parent": parent})
        return len(self.entries) - 1

    def as_list(self, nodes):
        """The entries with node counts and `repeat` ({"index", "count"}) for sibling modules of
        one structure (same class, same ops, same children): GPT's 48 Blocks."""
        ops = defaultdict(Counter)
        for node in nodes:
            if node["kind"] == "op" and node["module"] is not None:
                ops[node["module"]][node["name"]] += 1
        children = defaultdict(list)
        for i, e in enumerate(self.entries):
            children[e["parent"]].append(i)
        signature = {}

        def sign(i):  # children are always added after their parent: no recursion needed
            e = self.entries[i]
            kids = tuple(sorted(signature[c] for c in children[i]))
            return hash((e["cls"], tuple(sorted(ops[i].items())), kids))

        for i in reversed(range(len(self.entries))):
            signature[i] = sign(i)
        total = [sum(ops[i].values()) for i in range(len(self.entries))]
        for i in reversed(range(len(self.entries))):  # children come after their parents
            if self.entries[i]["parent"] is not None:
                total[self.entries[i]["parent"]] += total[i]
        entries = [dict(e, ops=total[i]) for i, e in enumerate(self.entries)]
        for siblings in children.values():
            alike = defaultdict(list)
            for i in siblings:
                alike[signature[i]].append(i)
            for group in alike.values():
                if len(group) > 1:
                    for k, i in enumerate(group):
                        entries[i]["repeat"] = {"index": k, "count": len(group), "first": group[0]}
        return entries


# ---- backward --------------------------------------------------------------------------------


def _run_backward(outputs, nodes, tensors, ops, op_inputs, walked):
    """Runs backward from the loss, recording it; returns (steps, grads by tensor id, note).

    The loss is the first single-element output that requires grad: `[logits, loss]` works.
    """
    from .. import autograd

    root = next((t for t in outputs if t.numel() == 1 and t.requires_grad), None)
    if root is None:
        shapes = ", ".join(f"{tuple(t.shape)}" for t in outputs)
        note = (
            f"backward was not run: no output is a single-element tensor that requires grad "
            f"(shapes {shapes}); stepping needs a loss"
        )
        return [], {}, note
    backward_trace = getattr(autograd, "backward_trace", None)
    if backward_trace is None:
        return _run_backward_without_trace(root, tensors, walked)
    with backward_trace() as trace:
        root.backward()
    grads, received, steps = {}, Counter(), []
    totals = Counter()
    for step in trace.steps:
        for x, g in zip(op_inputs[id(step.node)], step.input_grads):
            if g is not None:
                totals[tensors[id(x)]] += 1
    for step in trace.steps:
        node_id = ops[id(step.node)]
        output_id = nodes[node_id]["output"]
        grad_out = to_numpy(step.grad_output)
        grads.setdefault(output_id, grad_out)
        sends = []
        for i, (x, g) in enumerate(zip(op_inputs[id(step.node)], step.input_grads)):
            if g is None:
                continue
            x_id = tensors[id(x)]
            g = to_numpy(g)
            received[x_id] += 1
            grads[x_id] = g.copy() if x_id not in grads else grads[x_id] + g
            k, of = received[x_id], totals[x_id]
            sends.append({"input": i, "to": x_id, "grad": brief(g), "k": k, "of": of})
        steps.append({"node": node_id, "grad": brief(grad_out), "sends": sends})
    return steps, grads, f"{len(steps)} steps recorded by autograd.backward_trace()"


def _run_backward_without_trace(root, tensors, walked):
    """Until `autograd.backward_trace` exists: gradients via retain_grad, no steps."""
    before = {}
    for key, obj in walked:
        if key[0] != "t" or not obj.requires_grad:
            continue
        if obj._ctx is not None:
            obj.retain_grad()
        elif obj.grad is not None:
            before[id(obj)] = obj.grad.numpy().copy()
    root.backward()
    grads = {}
    for key, obj in walked:
        if key[0] == "t" and obj.grad is not None:
            g = obj.grad.numpy()
            grads[tensors[id(obj)]] = g - before[id(obj)] if id(obj) in before else g
    return [], grads, "this engine has no autograd.backward_trace(): gradients only, no steps"


def _flags(node):
    flags = []
    value, grad = node["value"], node["grad"]
    if value["nan"] or (grad and grad["nan"]):
        flags.append("nan")
    if value["inf"] or (grad and grad["inf"]):
        flags.append("inf")
    if grad and grad["size"] and grad["max"] is not None:
        largest = max(abs(grad["max"]), abs(grad["min"]))
        if largest > EXPLODING_GRAD:
            flags.append("exploding")
        elif largest < VANISHING_GRAD:
            flags.append("vanishing")
    return flags
