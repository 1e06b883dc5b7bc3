"""Drawing the computation graph: `draw_graph(loss)` returns a graphviz Digraph.

Tensors and ops are the nodes; an edge runs from each input tensor to the op that used it and
from the op to the tensor it made, so the picture reads top to bottom in the order things were
computed. Leaves, parameters, outputs and intermediates each get their own shape and colour (a
legend says which), and the ops run inside an nn.Module's forward are boxed into one cluster per
module, nested like the module tree.

    loss = model(x, y)
    g = tt.draw_graph(loss, params=model, show_grad=False)
    save_graph(g, "runs/graph.svg")     # writes graph.dot, and graph.svg where `dot` exists
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path

import numpy as np

from .tensor import Tensor

# fill colours and shapes for each kind of node; the legend shows the same styles
_STYLES = {
    "op": dict(shape="ellipse", style="filled", fillcolor="#cfe2f3", color="#3d6e99"),
    "parameter": dict(shape="box", style="filled", fillcolor="#d9ead3", color="#38761d"),
    "leaf (requires grad)": dict(shape="box", style="filled", fillcolor="#fff2cc", color="#bf9000"),
    "input / constant": dict(shape="box", style="filled", fillcolor="#eeeeee", color="#888888"),
    "intermediate": dict(
        shape="box", style="rounded", color="#999999", fontsize="9", fontcolor="#444444"
    ),
    "output": dict(
        shape="box", style="filled,bold", fillcolor="#f4cccc", color="#990000", peripheries="2"
    ),
}
_TRUNCATED_STYLE = dict(shape="note", style="dashed", color="#888888", fontcolor="#555555")
_LINE_BREAK = "\\n"  # DOT's own escape: keeps each node statement on one line of the source
_TINY = 4  # tensors with at most this many elements show their gradient values, not the norm


def draw_graph(
    output,
    params=None,
    show_grad: bool = False,
    max_nodes: int = 200,
    group_modules: bool = True,
    name: str | None = None,
    legend: bool = True,
):
    """The computation graph that produced `output`, as a `graphviz.Digraph`.

    Args:
        output: a Tensor, or a list/tuple of Tensors drawn together (e.g. logits and loss).
        params: names for tensors: a dict name -> Tensor (any tensor may be named this way,
            inputs too), or a module with `named_parameters()`; a module that also has
            `named_modules()` names the clusters ("h.0.attn" inside "h.0" inside "h").
        show_grad: annotate each tensor that has a `.grad` with its norm (or its values when it
            has at most 4 elements). Leaves get `.grad` from `backward()`; for an intermediate
            tensor call `t.retain_grad()` before backward. Backward frees the graph as it walks
            it unless `retain_graph=True`, so either draw before backward or keep the graph:
            `loss.backward(retain_graph=True)`. Ops whose graph was freed are marked "freed".
        max_nodes: at most this many tensor and op nodes are drawn, those nearest the outputs
            first; the rest become one "... N more nodes" node.
        group_modules: box the ops (and their outputs) of each nn.Module's forward into a
            cluster; nodes record their module when `nn.Module.__call__` runs the forward.
        name: a title written above the graph.
        legend: add a small legend of the node styles.

    Returns:
        A `graphviz.Digraph`; `.source` is the DOT text, `save_graph` writes it to files.

    Example:
        >>> x = tt.randn(2, 3, requires_grad=True)
        >>> g = tt.draw_graph((x @ x.T).relu().sum())
        >>> "MatMul" in g.source
        True
    """
    import graphviz

    outputs = list(output) if isinstance(output, (list, tuple)) else [output]
    for t in outputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"draw_graph: expected a Tensor or a list of Tensors, got {t!r:.60}")
    if not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"draw_graph: max_nodes must be a positive int, got {max_nodes!r}")

    tensor_names, module_names = _names(params)
    nodes, edges = _walk(outputs)
    drawn = nodes[:max_nodes]
    ids = {key: f"n{i}" for i, (key, _) in enumerate(drawn)}
    output_ids = {id(t) for t in outputs}
    param_ids = {id(t) for t in _parameters(params)}

    graph = graphviz.Digraph(name=name or "graph")
    graph.attr(rankdir="TB", nodesep="0.25", ranksep="0.35")
    graph.attr("node", fontname="Helvetica", fontsize="10", margin="0.08,0.04", height="0.3")
    graph.attr("edge", color="#666666", arrowsize="0.6")
    if name:
        graph.attr(label=name, labelloc="t", fontname="Helvetica-Bold", fontsize="14")

    # Each drawn node: (dot id, label, style, cluster path or ()).
    placed = []
    for key, obj in drawn:
        if key[0] == "op":
            label = _op_label(obj)
            cluster = _cluster_path(obj.module, module_names) if group_modules else ()
            placed.append((ids[key], label, _STYLES["op"], cluster))
            continue
        if id(obj) in output_ids:
            kind = "output"
        elif id(obj) in param_ids:
            kind = "parameter"
        elif obj._ctx is not None:
            kind = "intermediate"
        elif obj.requires_grad:
            kind = "leaf (requires grad)"
        else:
            kind = "input / constant"
        label = _tensor_label(obj, kind, tensor_names.get(id(obj)), outputs, show_grad)
        cluster = ()
        if group_modules and kind == "intermediate":
            cluster = _cluster_path(obj._ctx.module, module_names)
        elif group_modules and kind == "parameter":
            owner = tensor_names.get(id(obj), "").rpartition(".")[0]
            cluster = _cluster_path(module_names.get(owner), module_names) if owner else ()
        placed.append((ids[key], label, _STYLES[kind], cluster))
    _emit_clusters(graph, placed)

    hidden = len(nodes) - len(drawn)
    if hidden:
        graph.node("truncated", f"... {hidden} more nodes", **_TRUNCATED_STYLE)
    for src, dst in edges:
        if src in ids and dst in ids:
            graph.edge(ids[src], ids[dst])
        elif dst in ids:  # an input beyond max_nodes feeds a drawn op
            graph.edge("truncated", ids[dst], style="dashed")
    if legend:
        _add_legend(graph)
    return graph


def save_graph(digraph, path) -> list[Path]:
    """Writes `digraph` as DOT source next to `path` and renders it where graphviz's `dot` exists.

    Args:
        digraph: what `draw_graph` returned.
        path: the file to make, e.g. "runs/graph.svg" or "runs/graph.png" (the suffix picks the
            format, SVG by default); "runs/graph.dot" is always written beside it.
    Returns:
        The paths written: the .dot file, then the rendered file if `dot` was found.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "svg"
    if fmt == "dot":
        fmt = "svg"
    path.parent.mkdir(parents=True, exist_ok=True)
    dot_path = path.with_suffix(".dot")
    dot_path.write_text(digraph.source, encoding="utf-8")
    written = [dot_path]
    dot = shutil.which("dot")
    if dot is None:
        print(
            f"save_graph: graphviz's `dot` program is not installed, so only the DOT source was "
            f"written to {dot_path}; install graphviz (e.g. `apt-get install graphviz`) to "
            f"render {fmt.upper()}",
            file=sys.stderr,
        )
        return written
    out = path.with_suffix("." + fmt)
    done = subprocess.run(
        [dot, f"-T{fmt}", str(dot_path), "-o", str(out)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"save_graph: `dot -T{fmt}` failed on {dot_path}: {done.stderr}")
    written.append(out)
    return written


# ---- walking the graph ------------------------------------------------------------------------


def _walk(outputs):
    """Every node reachable from `outputs` (breadth first, so the nearest come first) as
    (key, object) with key ("t", id) for tensors and ("op", id) for Functions, plus the edges
    as (source key, destination key) pairs. Iterative: deep graphs do not recurse."""
    nodes, edges, seen = [], [], set()
    queue = deque()
    for t in outputs:
        key = ("t", id(t))
        if key not in seen:
            seen.add(key)
            queue.append((key, t))
    while queue:
        key, obj = queue.popleft()
        nodes.append((key, obj))
        if key[0] == "t":
            ctx = obj._ctx
            if ctx is None:
                continue
            children = [(("op", id(ctx)), ctx)]
            edges.append((children[0][0], key))
        else:
            children = [(("t", id(x)), x) for x in (obj.inputs or ())]
            # reversed here and again below: each op's input edges end up in argument order
            edges.extend((child_key, key) for child_key, _ in reversed(children))
        for child_key, child in children:
            if child_key not in seen:
                seen.add(child_key)
                queue.append((child_key, child))
    edges.reverse()  # inputs before outputs: DOT then lays out the graph in computing order
    return nodes, edges


def _parameters(params):
    if params is None:
        return []
    if isinstance(params, dict):
        return list(params.values())
    return [p for _, p in params.named_parameters()]


def _names(params):
    """(id(tensor) -> name, dotted module name -> module) from `params` (see draw_graph)."""
    if params is None:
        return {}, _ModuleNames()
    if isinstance(params, dict):
        return {id(t): str(n) for n, t in params.items()}, _ModuleNames()
    if not hasattr(params, "named_parameters"):
        raise TypeError(
            "draw_graph: params must be a dict of name -> Tensor or a module with "
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


# ---- labels -----------------------------------------------------------------------------------


def _op_label(ctx):
    label = type(ctx).__name__
    if ctx.inputs is None:
        label += _LINE_BREAK + "(freed by backward)"
    return label


def _tensor_label(t, kind, name, outputs, show_grad):
    if name is None:
        if kind == "output":
            name = "output" if len(outputs) == 1 else f"output {_index_of(t, outputs)}"
        elif kind == "input / constant" and t._array.size == 1:
            name = f"const {_format_numbers(t._array)}"
        elif kind == "input / constant":
            name = "input"
        elif kind == "leaf (requires grad)":
            name = "leaf"
    lines = [name] if name else []
    device = "" if t.device.type == "cpu" else f" {t.device}"
    lines.append(f"{tuple(t.shape)} {t.dtype}{device}")
    if t._array.size == 1 and kind != "input / constant":  # e.g. the loss: show its value
        lines.append(f"= {_format_numbers(t.numpy().reshape(()))}")
    if show_grad and t.grad is not None:
        g = t.grad.numpy()
        if g.size <= _TINY:
            lines.append(f"grad {_format_numbers(g)}")
        else:
            lines.append(f"grad ‖g‖={np.linalg.norm(g.astype(np.float64)):.3g}")
    return _LINE_BREAK.join(lines)


def _index_of(t, outputs):
    return next(i for i, o in enumerate(outputs) if o is t)


def _format_numbers(array):
    values = [f"{v:.4g}" for v in np.asarray(array, dtype=np.float64).reshape(-1)]
    return values[0] if np.ndim(array) == 0 else "[" + ", ".join(values) + "]"


# ---- module clusters --------------------------------------------------------------------------


def _cluster_path(module, module_names):
    """The nested clusters a node created in `module` belongs to, outermost first.

    With names, "h.0.attn" lies in ("h", "h.0", "h.0.attn") and the root module (name "") in no
    cluster; without, each module is one cluster labelled by its class.
    """
    if module is None:
        return ()
    name = module_names.name_of(module)
    if name is None:  # not in the given tree: one flat cluster per module object
        return ((f"m{id(module)}", type(module).__name__),)
    if name == "":
        return ()
    parts = name.split(".")
    path = []
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        owner = module_names.get(prefix)
        label = f"{prefix} ({type(owner).__name__})" if owner is not None else prefix
        path.append((prefix, label))
    return tuple(path)


def _emit_clusters(graph, placed):
    """Adds the nodes to `graph`, each inside its (nested) cluster subgraph."""
    tree = {"nodes": [], "children": {}}
    for node_id, label, style, path in placed:
        branch = tree
        for key, cluster_label in path:
            branch = branch["children"].setdefault(
                key, {"label": cluster_label, "nodes": [], "children": {}}
            )
        branch["nodes"].append((node_id, label, style))
    counter = iter(range(1 << 30))

    def emit(target, branch, depth):
        for node_id, label, style in branch["nodes"]:
            target.node(node_id, label, **style)
        for child in branch["children"].values():
            with target.subgraph(name=f"cluster_{next(counter)}") as sub:
                sub.attr(
                    label=child["label"],
                    style="rounded,filled",
                    fillcolor=_CLUSTER_FILLS[depth % len(_CLUSTER_FILLS)],
                    color="#b7b7b7",
                    fontname="Helvetica",
                    fontsize="10",
                    labeljust="l",
                )
                emit(sub, child, depth + 1)

    emit(graph, tree, 0)


_CLUSTER_FILLS = ("#f7f7f7", "#ececec", "#e0e0e0")  # nested clusters darken step by step


def _add_legend(graph):
    with graph.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", style="dashed", color="#bbbbbb", fontname="Helvetica")
        legend.attr("node", fontsize="9", height="0.25")
        previous = None
        for kind, style in _STYLES.items():
            node_id = "legend_" + kind.split(" ")[0]
            legend.node(node_id, kind, **style)
            if previous is not None:  # invisible edges keep the legend in one column
                legend.edge(previous, node_id, style="invis")
            previous = node_id
