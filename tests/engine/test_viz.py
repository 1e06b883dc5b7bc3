"""Graph drawing (tinytensor/viz.py): what the DOT source holds for small graphs of known shape.

The expected counts and labels come from the structure of each graph (n ops on a chain give
2n + 1 nodes, ...) and from gradients known in closed form, not from running draw_graph.
"""

import shutil

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.function import module_scope
from tinytensor.viz import draw_graph, save_graph

from .dot_parser import by_label, graph_of, parse_dot


def mlp_like():
    """relu(x @ w + b).sum(): 3 leaves, 4 ops, 3 intermediates, 1 output."""
    x = tt.randn(4, 3)
    w = tt.randn(3, 2, requires_grad=True)
    b = tt.randn(2, requires_grad=True)
    loss = (x @ w + b).relu().sum()
    return x, w, b, loss


# ---- structure and labels ---------------------------------------------------------------------


def test_node_and_edge_counts_match_the_graph():
    x, w, b, loss = mlp_like()
    nodes, edges, clusters = graph_of(loss)
    # tensors: x, w, b, x@w, +b, relu, sum = 7; ops: MatMul, Add, Relu, Sum = 4
    assert len(nodes) == 11
    # every op has one edge per input plus one to its output: 2 + 2 + 1 + 1 inputs, 4 outputs
    assert len(edges) == 10
    assert clusters == {}
    ops = [n["label"] for n in nodes.values() if n["shape"] == "ellipse"]
    assert sorted(ops) == ["Add", "MatMul", "Relu", "Sum"]


def test_edges_run_from_inputs_through_ops_to_outputs():
    x, w, _, _ = mlp_like()
    y = x @ w
    nodes, edges, _ = graph_of(y, params={"x": x, "w": w})
    ids = {n["label"].split("\\n")[0]: i for i, n in nodes.items()}
    assert (ids["x"], ids["MatMul"]) in edges
    assert (ids["w"], ids["MatMul"]) in edges
    assert (ids["MatMul"], ids["output"]) in edges
    # DOT order follows the computation: the op's inputs are listed in argument order
    assert edges.index((ids["x"], ids["MatMul"])) < edges.index((ids["w"], ids["MatMul"]))


def test_labels_name_ops_shapes_dtypes_and_parameters():
    x, w, b, loss = mlp_like()
    nodes, _, _ = graph_of(loss, params={"fc.weight": w, "fc.bias": b})
    labels = " | ".join(n["label"] for n in nodes.values())
    for op in ("MatMul", "Add", "Relu", "Sum"):
        assert op in labels
    assert by_label(nodes, "fc.weight")[0]["label"] == "fc.weight\\n(3, 2) float32"
    assert by_label(nodes, "fc.bias")[0]["label"] == "fc.bias\\n(2,) float32"
    assert by_label(nodes, "input")[0]["label"] == "input\\n(4, 3) float32"
    assert len(by_label(nodes, "(4, 2) float32")) == 3  # x@w, +b, relu
    assert by_label(nodes, "output")[0]["label"] == f"output\\n() float32\\n= {loss.item():.4g}"


def test_fused_op_names_appear():
    logits = tt.randn(5, 3, requires_grad=True)
    target = tt.tensor([0, 2, 1, 1, 0])
    loss = tt.cross_entropy(tt.layer_norm(logits, (3,)), target)
    nodes, _, _ = graph_of(loss)
    assert by_label(nodes, "CrossEntropy") and by_label(nodes, "LayerNorm")


def test_kinds_of_tensors_are_styled_apart():
    x = tt.randn(2, 2)  # input, no grad
    w = tt.nn.Parameter(tt.randn(2, 2))  # parameter
    h = tt.randn(2, 2, requires_grad=True)  # leaf that requires grad, not a parameter
    out = ((x @ w) * h * 3.0).sum()  # 3.0 becomes a 0-d constant
    nodes, _, _ = graph_of(out, params={"w": w, "h": h})
    kinds = {
        "input": by_label(nodes, "input")[0],
        "parameter": by_label(nodes, "w\\n")[0],
        "leaf": by_label(nodes, "h\\n")[0],
        "constant": by_label(nodes, "const 3")[0],
        "intermediate": [n for n in nodes.values() if n["label"] == "(2, 2) float32"][0],
        "output": by_label(nodes, "output")[0],
        "op": by_label(nodes, "MatMul")[0],
    }
    looks = {k: (n["shape"], n.get("fillcolor"), n.get("style")) for k, n in kinds.items()}
    assert len(set(looks.values())) == len(looks), looks
    assert kinds["output"]["peripheries"] == "2"


def test_legend_lists_the_kinds_of_node_drawn():
    x, w, b, loss = mlp_like()  # an input, leaves that require grad, ops, intermediates, output
    nodes, _, clusters = parse_dot(draw_graph(loss, legend=True).source)
    legend = {n["label"]: n for name, n in nodes.items() if name.startswith("legend_")}
    assert set(legend) == {
        "op (with its arguments)",
        "leaf (requires grad)",
        "input",
        "intermediate",
        "output",
    }
    drawn = by_label(nodes, "output\\n")[0]  # the legend's sample looks like the real node
    assert (legend["output"]["fillcolor"], legend["output"]["shape"]) == (
        drawn["fillcolor"],
        drawn["shape"],
    )
    assert "legend" in {label for label, _ in clusters.values()}


def test_several_outputs_and_a_title():
    x = tt.randn(3, requires_grad=True)
    a, b = x.exp(), (x * x).sum()
    graph = draw_graph([a, b], name="two heads", legend=False)
    nodes, _, _ = parse_dot(graph.source)
    assert {n["label"].split("\\n")[0] for n in by_label(nodes, "output")} == {
        "output 0",
        "output 1",
    }
    assert len(by_label(nodes, "leaf\\n(3,) float32")) == 1  # the shared input drawn once
    assert 'label="two heads"' in graph.source


def test_a_scalar_constant_shows_its_value():
    x = tt.randn(2, requires_grad=True)
    nodes, _, _ = graph_of(x * 2.5)
    assert by_label(nodes, "const 2.5\\n() float32")


# ---- gradients --------------------------------------------------------------------------------


def test_show_grad_gives_values_of_tiny_tensors_and_norms_of_larger_ones():
    w = tt.tensor([1.0, 2.0], requires_grad=True)
    big = tt.ones(3, 4, requires_grad=True)
    c = tt.tensor([3.0, -1.0])
    hidden = w * c
    hidden.retain_grad()
    loss = hidden.sum() + (big * 0.5).sum()
    loss.backward(retain_graph=True)
    nodes, _, _ = graph_of(loss, params={"w": w, "big": big}, show_grad=True)
    # d loss / dw = c,  d loss / d hidden = 1,  d loss / d big = 0.5 everywhere: norm 0.5·√12
    assert by_label(nodes, "w\\n")[0]["label"].endswith("grad [3, -1]")
    assert by_label(nodes, "grad [1, 1]")  # the retained intermediate
    assert by_label(nodes, "big\\n")[0]["label"].endswith(f"grad ‖g‖={0.5 * np.sqrt(12):.3g}")
    plain, _, _ = graph_of(loss, params={"w": w, "big": big}, show_grad=False)
    assert not any("grad" in n["label"] for n in plain.values())


def test_a_graph_freed_by_backward_raises_and_says_how_to_keep_it():
    x = tt.randn(3, requires_grad=True)
    y = (x.exp() * 2.0).sum()
    y.backward()
    with pytest.raises(
        RuntimeError, match=r"backward\(\) already freed this graph.*retain_graph=True"
    ):
        draw_graph(y)
    kept = (x.exp() * 2.0).sum()
    kept.backward(retain_graph=True)
    nodes, _, _ = graph_of(kept)
    assert by_label(nodes, "Exp") and by_label(nodes, "Mul")


# ---- size limits ------------------------------------------------------------------------------


def test_max_nodes_truncates_with_a_count_of_the_rest():
    x = tt.randn(2, requires_grad=True)
    y = x
    for _ in range(20):  # 20 ops on a chain: 20 op nodes + 21 tensors
        y = y.tanh()
    nodes, edges, _ = graph_of(y, max_nodes=5)
    assert len(nodes) == 6  # 5 drawn + the "more" node
    assert nodes["truncated"]["label"] == "... 36 more nodes"
    # the cut falls on one edge: from the hidden rest into the deepest drawn node
    cut = [dst for src, dst in edges if src == "truncated"]
    assert len(cut) == 1 and cut[0] in nodes
    full, _, _ = graph_of(y, max_nodes=41)
    assert len(full) == 41 and "truncated" not in full


def test_a_deep_chain_draws_without_recursion():
    x = tt.randn(1, requires_grad=True)
    y = x
    for _ in range(3000):
        y = y * 1.0
    graph = draw_graph(y, max_nodes=10_000)
    assert graph.source.count("[label=Mul ") == 3000


# ---- module clusters --------------------------------------------------------------------------


class FakeModule:
    """Just what draw_graph reads from an nn.Module: named_parameters and named_modules."""

    def __init__(self, **children):
        self.children = children
        self.params = {}

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self.children.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self):
        for module_name, module in self.named_modules():
            for name, p in module.params.items():
                yield (f"{module_name}.{name}" if module_name else name), p


class Attention(FakeModule):
    pass


class Block(FakeModule):
    pass


class Stack(FakeModule):
    pass


class Model(FakeModule):
    pass


def tiny_model_tree():
    """model -> h (Stack) -> h.0, h.1 (Block) -> h.0.attn, h.1.attn (Attention)."""
    blocks = [Block(attn=Attention()) for _ in range(2)]
    model = Model(h=Stack(**{"0": blocks[0], "1": blocks[1]}))
    for block in blocks:
        block.children["attn"].params["weight"] = tt.randn(3, 3, requires_grad=True)
    return model, blocks


def run_model(model, blocks, x):
    """A forward that enters module_scope as nn.Module.__call__ does."""
    with module_scope(model):
        with module_scope(model.children["h"]):
            for block in blocks:
                with module_scope(block):
                    with module_scope(block.children["attn"]):
                        x = x @ block.children["attn"].params["weight"]
                    x = x.relu()  # in the block, after its attention returned
        return x.sum()  # in the root module itself


def test_one_nested_cluster_per_submodule():
    model, blocks = tiny_model_tree()
    loss = run_model(model, blocks, tt.randn(2, 3))
    nodes, _, clusters = graph_of(loss, params=model)
    labels = {label: parent for label, parent in clusters.values()}
    assert labels == {
        "h (Stack)": None,
        "h.0 (Block)": "h (Stack)",
        "h.1 (Block)": "h (Stack)",
        "h.0.attn (Attention)": "h.0 (Block)",
        "h.1.attn (Attention)": "h.1 (Block)",
    }
    matmuls = by_label(nodes, "MatMul")
    assert sorted(n["clusters"][-1] for n in matmuls) == [
        "h.0.attn (Attention)",
        "h.1.attn (Attention)",
    ]
    assert sorted(n["clusters"][-1] for n in by_label(nodes, "Relu")) == [
        "h.0 (Block)",
        "h.1 (Block)",
    ]
    assert by_label(nodes, "Sum")[0]["clusters"] == []  # the root module is the whole graph
    weight = by_label(nodes, "h.0.attn.weight")[0]  # a parameter sits in its owner's cluster
    assert weight["clusters"] == ["h (Stack)", "h.0 (Block)", "h.0.attn (Attention)"]


def test_without_params_the_model_is_found_from_the_graph():
    model, blocks = tiny_model_tree()
    loss = run_model(model, blocks, tt.randn(2, 3))
    nodes, _, clusters = graph_of(loss)  # no params: every node knows its module
    labels = sorted(label for label, _ in clusters.values())
    assert labels == [
        "h (Stack)",
        "h.0 (Block)",
        "h.0.attn (Attention)",
        "h.1 (Block)",
        "h.1.attn (Attention)",
    ]
    assert by_label(nodes, "h.1.attn.weight\\n(3, 3) float32")  # and names the parameters


class Bare:
    """A module-like object that cannot list its submodules."""


def test_modules_without_a_tree_get_one_flat_cluster_each_by_class():
    outer, inner = Bare(), Bare()
    w = tt.randn(2, 2, requires_grad=True)
    with module_scope(outer):
        h = w.exp()
        with module_scope(inner):
            h = h.tanh()
    nodes, _, clusters = graph_of(h.sum())
    assert sorted(label for label, _ in clusters.values()) == ["Bare", "Bare"]
    assert by_label(nodes, "Sum")[0]["clusters"] == []


def test_group_modules_false_draws_no_clusters():
    model, blocks = tiny_model_tree()
    loss = run_model(model, blocks, tt.randn(2, 3))
    _, _, clusters = graph_of(loss, params=model, group_modules=False)
    assert clusters == {}


# ---- errors and files -------------------------------------------------------------------------


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match="draw_graph: expected a Tensor"):
        draw_graph(np.ones(3))
    with pytest.raises(ValueError, match="max_nodes"):
        draw_graph(tt.ones(2), max_nodes=0)
    with pytest.raises(TypeError, match="named_parameters"):
        draw_graph(tt.ones(2), params=[1, 2])


def test_top_level_name_is_wired():
    assert tt.draw_graph is draw_graph


def test_save_graph_renders_svg_with_dot(tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("graphviz's `dot` is not installed here, so SVG rendering is not tested")
    loss = mlp_like()[-1]
    written = save_graph(draw_graph(loss), tmp_path / "g.svg")
    assert [p.name for p in written] == ["g.dot", "g.svg"]
    svg = (tmp_path / "g.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "MatMul" in svg and "(4, 3) float32" in svg


def test_save_graph_without_dot_writes_the_source_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    graph = draw_graph(mlp_like()[-1])
    written = save_graph(graph, tmp_path / "sub" / "g.png")
    assert written == [tmp_path / "sub" / "g.dot"]
    assert written[0].read_text() == graph.source
    err = capsys.readouterr().err
    assert "`dot`" in err and "install graphviz" in err and "PNG" in err


def test_real_nn_modules_give_named_clusters():
    """nn.Module.__call__ records each node's module, so a real model clusters by layer name."""
    nn = tt.nn
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2))
    loss = model(tt.randn(4, 2)).sum()
    nodes, _, clusters = graph_of(loss, params=model)
    assert sorted(label for label, _ in clusters.values()) == [
        "0 (Linear)",
        "1 (ReLU)",
        "2 (Linear)",
    ]
    assert by_label(nodes, "0.weight\\n(3, 2) float32")[0]["clusters"] == ["0 (Linear)"]
    assert by_label(nodes, "Relu")[0]["clusters"] == ["1 (ReLU)"]
