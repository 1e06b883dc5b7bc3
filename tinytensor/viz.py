"""Drawing the computation graph: `draw_graph(loss)` returns a graphviz Digraph.

Tensors and ops are the nodes; an edge runs from each input tensor to the op that used it and
from the op to the tensor it made, so the picture reads top to bottom in the order things were
computed. Tensors are coloured by their role (parameter, input, constant, intermediate, output;
a legend says which), ops show their arguments ("Softmax dim=3"), and the ops run inside an
nn.Module's forward are boxed into one cluster per module, nested like the module tree.

A whole model is drawn whole: above `max_nodes`, a run of identical blocks is drawn once with
"×N" and modules are collapsed into one box each (name, class, shapes, parameter count), from the
innermost up, until the picture fits (see tinytensor/viz_fold.py); `expand=` opens chosen ones.

    out = model(idx, targets)
    g = tt.draw_graph(out.loss, params=model)          # in Jupyter, `g` shows itself
    save_graph(g, "runs/graph.svg")     # writes graph.dot, and graph.svg where `dot` exists
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from .tensor import Tensor
from .viz_fold import Box, Folder, ModuleTree, fold, infer_root, walk_graph
from .viz_ops import op_arguments

# fill colours and shapes for each kind of node; the legend shows the same styles
_STYLES = {
    "op": dict(shape="ellipse", style="filled", fillcolor="#cfe2f3", color="#3d6e99"),
    "module": dict(shape="box", style="filled,rounded,bold", fillcolor="#e6dcf2", color="#674ea7"),
    "parameter": dict(shape="box", style="filled", fillcolor="#d9ead3", color="#38761d"),
    "leaf (requires grad)": dict(shape="box", style="filled", fillcolor="#fff2cc", color="#bf9000"),
    "input": dict(shape="box", style="filled", fillcolor="#fce5cd", color="#b45f06"),
    "constant": dict(shape="box", style="filled", fillcolor="#eeeeee", color="#888888"),
    "intermediate": dict(
        shape="box", style="rounded", color="#999999", fontsize="9", fontcolor="#444444"
    ),
    "output": dict(
        shape="box", style="filled,bold", fillcolor="#f4cccc", color="#990000", peripheries="2"
    ),
}
# a run of N identical modules collapsed into one box: drawn as a stack
_STYLES["module run"] = dict(_STYLES["module"], shape="box3d", style="filled,bold")
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
    expand=None,
):
    """The computation graph that produced `output`, as a `graphviz.Digraph`.

    Args:
        output: a Tensor, or a list/tuple of Tensors drawn together (e.g. logits and loss).
        params: names for tensors and modules: a module (its `named_parameters()` and
            `named_modules()` name the parameters and the clusters, "h.0.attn" inside "h.0"),
            or a dict name -> Tensor (any tensor may be named this way, inputs too). Names do
            not change a tensor's role: only a leaf that requires grad and is an
            `nn.Parameter` (or a parameter of the model) is drawn as a parameter. Without a
            module, the model is found from the modules that recorded the graph's nodes.
        show_grad: annotate each tensor that has a `.grad` with its norm (or its values when it
            has at most 4 elements). Leaves get `.grad` from `backward()`; for an intermediate
            tensor call `t.retain_grad()` before backward. Backward frees the graph as it walks
            it unless `retain_graph=True`: draw before backward, or keep the graph with
            `loss.backward(retain_graph=True)`; drawing a freed graph raises RuntimeError.
        max_nodes: the most nodes to draw. A graph above it is folded by its module tree: a
            run of identical blocks (blocks.0 ... blocks.39) is drawn once, marked "×40", and
            then modules are collapsed into one box each (name, class, input and output
            shapes, parameter count), innermost first, until it fits (the top level is drawn
            even if it does not). A graph with no modules is cut instead: the nodes nearest
            the outputs are kept and the rest become one "... N more nodes" node.
        group_modules: box the ops (and their outputs) of each nn.Module's forward into a
            cluster; nodes record their module when `nn.Module.__call__` runs the forward.
        name: a title written above the graph.
        legend: add a small legend of the node styles.
        expand: a module name or a list of them ("blocks.3", "blocks.3.self_attn"): these
            modules are drawn op by op, whatever `max_nodes` would fold.

    Returns:
        A `graphviz.Digraph`: Jupyter displays it inline, `.source` is the DOT text,
        `save_graph(g, "graph.svg")` writes it to files.

    Raises:
        RuntimeError: the graph was freed by `backward()`.

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

    walk = walk_graph(outputs)
    _check_not_freed(walk.nodes.items())
    model = _Model(params, [obj for key, obj in walk.nodes.items() if key[0] == "op"])
    output_ids = {id(t) for t in outputs}
    roles = {
        key: model.role(obj, output_ids, walk.producer[key] is None)
        for key, obj in walk.nodes.items()
        if key[0] == "t"
    }
    expanded = _expand_names(expand, model.tree)
    folder = Folder(walk, model.tree, model.tensor_names, roles, outputs)
    view = fold(folder, max_nodes, expanded)
    drawn = list(view.nodes.items())
    drawn = drawn if view.folded else drawn[:max_nodes]
    ids = {key: f"n{i}" for i, (key, _) in enumerate(drawn)}

    graph = graphviz.Digraph(name=name or "graph")
    graph.attr(rankdir="TB", nodesep="0.25", ranksep="0.35")
    graph.attr("node", fontname="Helvetica", fontsize="10", margin="0.08,0.04", height="0.3")
    graph.attr("edge", color="#666666", arrowsize="0.6")
    if name:
        graph.attr(label=name, labelloc="t", fontname="Helvetica-Bold", fontsize="14")

    clusters = _Clusters(model.tree, view, folder, group_modules)
    placed = []  # each drawn node: (dot id, label, kind of node, cluster path or ())
    for key, obj in drawn:
        if key[0] == "op":
            label = _op_label(obj)
            placed.append((ids[key], label, "op", clusters.of_op(key, obj)))
        elif key[0] == "box":
            kind = "module run" if obj.run is not None else "module"
            placed.append((ids[key], _box_label(obj), kind, clusters.of_box(obj)))
        else:
            kind = roles[key]
            tensor_name = model.tensor_names.get(id(obj))
            label = _tensor_label(obj, kind, tensor_name, outputs, show_grad)
            placed.append((ids[key], label, kind, clusters.of_tensor(key, obj, kind)))
    # inputs first: graphviz then orders each rank as the arguments were given (q, k, v)
    _emit_clusters(graph, placed[::-1])

    hidden = len(view.nodes) - len(drawn)
    if hidden:
        graph.node("truncated", f"... {hidden} more nodes", **_TRUNCATED_STYLE)
    cut_into = set()
    for src, dst in view.edges:
        if src in ids and dst in ids:
            graph.edge(ids[src], ids[dst])
        elif dst in ids and dst not in cut_into:  # an input beyond max_nodes feeds a drawn op
            cut_into.add(dst)
            graph.edge("truncated", ids[dst], style="dashed")
    if legend:
        _add_legend(graph, {style_kind for _, _, style_kind, _ in placed})
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
    """(nodes, edges) of the graph behind `outputs`: see `viz_fold.walk_graph`."""
    walk = walk_graph(outputs)
    return list(walk.nodes.items()), walk.edges


def _check_not_freed(nodes):
    """Backward frees each node it walks through (its `inputs` become None) unless told to
    keep the graph: what is left would draw as a misleading stub."""
    for key, obj in nodes:
        if key[0] == "op" and obj.inputs is None:
            raise RuntimeError(
                f"draw_graph: backward() already freed this graph (from its {type(obj).__name__} "
                "node back): draw it before calling backward(), or keep it with "
                "loss.backward(retain_graph=True)"
            )


class _Model:
    """What `params` (or, without a module, the graph's own nodes) says about the model: its
    module tree, the names of its tensors, and which tensors are its parameters and buffers."""

    def __init__(self, params, ops):
        self.tensor_names, self.parameter_ids, self.buffer_ids = {}, set(), set()
        given = None
        if isinstance(params, dict):
            self.tensor_names = {id(t): str(n) for n, t in params.items()}
        elif params is not None:
            if not hasattr(params, "named_parameters"):
                raise TypeError(
                    "draw_graph: params must be a dict of name -> Tensor or a module with "
                    f"named_parameters(), got {type(params).__name__}"
                )
            given = params
        root = given if hasattr(given, "named_modules") else infer_root(ops)
        self.tree = ModuleTree(root.named_modules() if root is not None else ())
        for module in (given, root):  # the caller's names first
            if module is None:
                continue
            named = dict(module.named_parameters())
            self.parameter_ids.update(id(p) for p in named.values())
            if hasattr(module, "named_buffers"):
                buffers = dict(module.named_buffers())
                self.buffer_ids.update(id(b) for b in buffers.values())
                named.update(buffers)
            for n, t in named.items():
                self.tensor_names.setdefault(id(t), n)

    def role(self, t, output_ids, is_leaf) -> str:
        """parameter, leaf (requires grad), input, constant, intermediate or output."""
        if id(t) in output_ids:
            return "output"
        if not is_leaf:
            return "intermediate"
        if t.requires_grad:
            is_parameter = id(t) in self.parameter_ids or _is_parameter_class(t)
            return "parameter" if is_parameter else "leaf (requires grad)"
        if id(t) in self.buffer_ids or t.ndim == 0:
            return "constant"
        return "input"


def _is_parameter_class(t) -> bool:
    # NOTE: by name, because the engine must not import tinytensor.nn (nn depends on it)
    return any(cls.__name__ == "Parameter" for cls in type(t).__mro__)


def _expand_names(expand, tree):
    if expand is None:
        return frozenset()
    names = [expand] if isinstance(expand, str) else list(expand)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"draw_graph: expand takes module names (str), got {n!r:.60}")
        if n not in tree.by_name:
            known = [m for m in tree.by_name if m][:8]
            hint = (
                f"; modules: {', '.join(known)}, ..."
                if known
                else ("; the graph has no named modules: pass params=model")
            )
            raise ValueError(f"draw_graph: expand names no module {n!r}{hint}")
    return frozenset(names)


class _Clusters:
    """The nested clusters each drawn node sits in, outermost first, as (key, label) pairs.

    A module called in several places gets one cluster per call, so that the picture keeps the
    order things ran in."""

    def __init__(self, tree, view, folder, enabled):
        self.tree, self.view, self.folder, self.enabled = tree, view, folder, enabled

    def of_op(self, key, op):
        if not self.enabled:
            return ()
        name = self.folder.module_of.get(key)
        if name is None and op.module is not None:  # a module outside the known tree
            return ((f"m{id(op.module)}", type(op.module).__name__),)
        return self._path(name or "", key)

    def of_box(self, box):
        return self._path(box.name.rpartition(".")[0], box.op_key) if self.enabled else ()

    def of_tensor(self, key, t, kind):
        if not self.enabled:
            return ()
        if kind == "intermediate":
            producer = self.folder.producer[key]
            return self.of_op(producer, self.folder.nodes[producer])
        name = self.folder.names.get(id(t))
        if kind != "parameter" or name is None:
            return ()
        owner = self.tree.owner(name)
        users = [u for u in self.folder.consumers[key] if u in self.folder.drawn_from]
        calls = {self.folder.call_of(owner, u) for u in users}
        if len(calls) > 1:  # shared by several calls of its module: beside them, not inside
            owner = self.tree.parent.get(owner, "")
        return self._path(owner, users[0] if users else None)

    def _path(self, name, op_key):
        """ "h.0.attn" lies in ("h", "h.0", "h.0.attn"), up to the first collapsed module; the
        call of each module that ran `op_key` picks among the clusters of a module called
        several times."""
        if not name:
            return ()
        parts, path = name.split("."), []
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in self.view.cut:
                break
            run = self.view.runs.get(prefix)
            module = self.tree.get(prefix)
            if run is not None:
                label = run.label
            elif module is not None:
                label = f"{prefix} ({type(module).__name__})"
            else:
                label = prefix
            key = prefix
            if module is not None and op_key is not None:
                call, n_calls = self.folder.call_of(prefix, op_key)
                if n_calls > 1:
                    key, label = f"{prefix}#{call}", f"{label}, call {call} of {n_calls}"
            path.append((key, label))
        return tuple(path)


# ---- labels -----------------------------------------------------------------------------------


def _op_label(ctx):
    arguments = op_arguments(ctx)
    return ctx.name + (_LINE_BREAK + arguments if arguments else "")


def _box_label(box: Box) -> str:
    """name (class) [×N]; input shapes → output shapes; parameter count."""
    title = box.run.label if box.run else f"{box.name} ({type(box.module).__name__})"
    if box.n_calls > 1:  # a module used in several places: one box per call
        title += f", call {box.call} of {box.n_calls}"
    flow = f"{_shapes(box.inputs)} → {_shapes(box.outputs)}"
    count = f"{box.n_params:,} parameters" + (" each" if box.run else "")
    return _LINE_BREAK.join([title, flow, count] if box.n_params else [title, flow])


def _shapes(items):
    if not items:
        return "()"
    return ", ".join(
        str(shape) if dtype.kind == "f" else f"{shape} {dtype}" for shape, dtype in items
    )


def _tensor_label(t, kind, name, outputs, show_grad):
    if name is None:
        if kind == "output":
            name = "output" if len(outputs) == 1 else f"output {_index_of(t, outputs)}"
        elif kind == "constant" and t._array.size == 1:
            name = f"const {_format_numbers(t._array)}"
        elif kind in ("input", "constant"):
            name = kind
        elif kind == "leaf (requires grad)":
            name = "leaf"
    lines = [name] if name else []
    device = "" if t.device.type == "cpu" else f" {t.device}"
    lines.append(f"{tuple(t.shape)} {t.dtype}{device}")
    if t._array.size == 1 and kind not in ("input", "constant"):  # e.g. the loss: its value
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


def _emit_clusters(graph, placed):
    """Adds the nodes to `graph`, each inside its (nested) cluster subgraph."""
    tree = {"nodes": [], "children": {}}
    for node_id, label, kind, path in placed:
        branch = tree
        for key, cluster_label in path:
            branch = branch["children"].setdefault(
                key, {"label": cluster_label, "nodes": [], "children": {}}
            )
        branch["nodes"].append((node_id, label, kind))
    counter = iter(range(1 << 30))

    def emit(target, branch, depth):
        for node_id, label, kind in branch["nodes"]:
            target.node(node_id, label, **_STYLES[kind])
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


_CLUSTER_FILLS = ("#f7f7f7", "#ececec", "#e0e0e0")  # nested clusters darken step by step

_LEGEND = {  # what the legend calls each kind of node, in the legend's order
    "op": "op (with its arguments)",
    "module": "module, collapsed",
    "module run": "N identical modules",
    "parameter": "parameter",
    "leaf (requires grad)": "leaf (requires grad)",
    "input": "input",
    "constant": "constant",
    "intermediate": "intermediate",
    "output": "output",
}


def _add_legend(graph, kinds):
    """A column with one sample of each kind of node drawn."""
    with graph.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", style="dashed", color="#bbbbbb", fontname="Helvetica")
        legend.attr("node", fontsize="9", height="0.25")
        previous = None
        for kind, text in _LEGEND.items():
            if kind not in kinds:
                continue
            node_id = "legend_" + kind.split(" ")[0] + ("_run" if kind == "module run" else "")
            legend.node(node_id, text, **_STYLES[kind])
            if previous is not None:  # invisible edges keep the legend in one column
                legend.edge(previous, node_id, style="invis")
            previous = node_id
