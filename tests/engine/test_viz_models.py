"""Graphs of whole models (tinytensor/viz.py, viz_fold.py, viz_ops.py): folding by the module tree,
tensor roles, op arguments, integer inputs, freed graphs.

Expected counts come from the model's structure (a GPT block has 6 Linear layers and one
attention; a run of n blocks is drawn once) and expected labels from the arguments the test
passes, never from running draw_graph.
"""

import shutil

import numpy as np
import pytest
from tinytensor.models import GPT, GPTConfig

import tinytensor as tt
from tinytensor import nn
from tinytensor.ops import merge_heads, split_heads
from tinytensor.viz import draw_graph

from .dot_parser import by_label, graph_of

F = nn.functional


def tiny_gpt(n_layer, dropout=0.0):
    tt.manual_seed(0)
    config = GPTConfig(vocab_size=12, block_size=8, n_layer=n_layer, n_head=2, n_embd=16,
                       dropout=dropout, bos_token_id=None, eos_token_id=None)  # fmt: skip
    model = GPT(config)
    rng = np.random.default_rng(0)
    idx = tt.tensor(rng.integers(0, 12, size=(1, 4)))
    targets = tt.tensor(rng.integers(0, 12, size=(1, 4)))
    return model, idx, model(idx, targets).loss


def ops_named(nodes, name):
    return [
        n for n in nodes.values() if n["shape"] == "ellipse" and n["label"].split("\\n")[0] == name
    ]


def assert_well_formed(nodes, edges):
    """Every edge joins drawn nodes, and every drawn node but the output has an edge."""
    assert all(src in nodes and dst in nodes for src, dst in edges)
    touched = {n for edge in edges for n in edge}
    assert set(nodes) <= touched | {k for k, n in nodes.items() if "output" in n["label"]}


# ---- runs of identical blocks and collapsed modules -------------------------------------------


def test_a_deep_gpt_draws_one_block_marked_with_the_number_of_blocks():
    model, idx, loss = tiny_gpt(40)
    block = type(model.blocks[0]).__name__
    nodes, edges, clusters = graph_of(loss, params=model)  # default max_nodes=200
    assert len(nodes) <= 200
    labels = [label for label, _ in clusters.values()]
    assert f"blocks.0–39 ({block}) ×40" in labels
    assert not any(label.startswith("blocks.1 ") for label in labels)
    # one block drawn op by op: q, k, v, out, fc_in, fc_out and one attention; and the LM head
    linears = ops_named(nodes, "Linear")
    assert len(linears) == 7 and sum(not n["clusters"] for n in linears) == 1
    assert len(ops_named(nodes, "ScaledDotProductAttention")) == 1
    # outside the blocks: the token embedding, and the positions' rows (a slice of wpe)
    assert len(ops_named(nodes, "Embedding")) == 1
    assert [n["clusters"] for n in ops_named(nodes, "GetItem")] == [
        ["wpe (LearnedPositionalEmbedding)"]
    ]
    assert_well_formed(nodes, edges)


def test_a_gpt_that_fits_is_drawn_whole():
    model, _, loss = tiny_gpt(2)
    nodes, edges, clusters = graph_of(loss, params=model, max_nodes=10_000)
    assert len(ops_named(nodes, "ScaledDotProductAttention")) == 2
    assert not any("×" in label for label, _ in clusters.values())


def test_small_max_nodes_collapses_modules_into_boxes_with_shapes_and_parameter_counts():
    model, _, loss = tiny_gpt(40)
    block = type(model.blocks[0]).__name__
    nodes, edges, _ = graph_of(loss, params=model, max_nodes=25)
    assert len(nodes) <= 25
    run = by_label(nodes, f"blocks.0–39 ({block}) ×40")
    assert len(run) == 1 and run[0]["shape"] == "box3d"
    per_block = model.blocks[0].num_parameters()
    assert run[0]["label"].split("\\n")[1:] == [
        "(1, 4, 16) → (1, 4, 16)",
        f"{per_block:,} parameters each",
    ]
    ln_f = by_label(nodes, "ln_f (LayerNorm)")[0]["label"]
    assert ln_f.endswith(f"{2 * 16} parameters")
    assert not ops_named(nodes, "ScaledDotProductAttention")  # hidden inside the run's box
    assert_well_formed(nodes, edges)


def test_expand_opens_the_named_modules_and_splits_the_run_around_them():
    model, _, loss = tiny_gpt(40)
    block = type(model.blocks[0]).__name__
    nodes, edges, clusters = graph_of(loss, params=model, max_nodes=25, expand="blocks.7")
    assert by_label(nodes, f"blocks.0–6 ({block}) ×7")
    assert by_label(nodes, f"blocks.8–39 ({block}) ×32")
    assert f"blocks.7 ({block})" in [label for label, _ in clusters.values()]
    attention = ops_named(nodes, "ScaledDotProductAttention")
    assert len(attention) == 1 and attention[0]["clusters"][1] == f"blocks.7 ({block})"
    assert_well_formed(nodes, edges)
    both, _, _ = graph_of(loss, params=model, max_nodes=25, expand=["blocks.2", "blocks.30"])
    assert len(ops_named(both, "ScaledDotProductAttention")) == 2


def test_expand_rejects_a_name_that_is_no_module():
    model, _, loss = tiny_gpt(2)
    with pytest.raises(ValueError, match=r"draw_graph: expand names no module 'blocks\.9'"):
        draw_graph(loss, params=model, expand="blocks.9")
    with pytest.raises(TypeError, match="expand"):
        draw_graph(loss, params=model, expand=[3])


class Stack(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths, widths[1:])])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.tanh()


def test_only_identical_neighbours_form_a_run():
    model = Stack([4, 4, 4, 4, 8, 8])  # 4->4 three times, then 4->8, then 8->8
    loss = model(tt.randn(2, 4)).sum()
    nodes, edges, _ = graph_of(loss, params=model, max_nodes=12)
    boxes = sorted(n["label"].split("\\n")[0] for n in nodes.values() if "parameters" in n["label"])
    assert boxes == ["layers.0–2 (Linear) ×3", "layers.3 (Linear)", "layers.4 (Linear)"]
    assert_well_formed(nodes, edges)


class TwoHeads(nn.Module):
    """Two identical Linear layers side by side: not a chain, so not a run."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

    def forward(self, x):
        return (self.a(x) * self.b(x)).sum()


def test_identical_modules_side_by_side_are_not_folded():
    model = TwoHeads()
    nodes, _, _ = graph_of(model(tt.randn(2, 3)), params=model, max_nodes=6)
    assert by_label(nodes, "a (Linear)") and by_label(nodes, "b (Linear)")
    assert not by_label(nodes, "×")


def test_a_graph_without_modules_is_still_cut_with_a_count():
    x = tt.randn(2, requires_grad=True)
    y = x
    for _ in range(30):
        y = y.sin()
    nodes, _, _ = graph_of(y, max_nodes=10)
    assert nodes["truncated"]["label"] == f"... {61 - 10} more nodes"


# ---- roles, names and integer inputs ----------------------------------------------------------


def style(node):
    return node["shape"], node.get("fillcolor"), node.get("style")


def test_a_named_input_is_not_drawn_as_a_parameter():
    x = tt.randn(8, 4, requires_grad=True)  # an input we want dL/dx of
    w = nn.Parameter(tt.randn(3, 4))
    bias = tt.randn(3, requires_grad=True)  # a plain leaf, as exercises write weights
    loss = F.cross_entropy(F.linear(x, w, bias), tt.randint(0, 3, (8,)))
    nodes, _, _ = graph_of(loss, params={"x": x, "w": w, "bias": bias})
    drawn = {name: by_label(nodes, name + "\\n")[0] for name in ("x", "w", "bias")}
    assert style(drawn["x"]) == style(drawn["bias"]) != style(drawn["w"])
    assert drawn["w"]["fillcolor"] == "#d9ead3"  # the legend's parameter colour


def test_parameters_of_the_model_are_parameters_even_as_plain_tensors():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(tt.ones(3))
            self.register_buffer("shift", tt.full((3,), 0.5))

        def forward(self, x):
            return (x * self.scale + self.shift).sum()

    model = Holder()
    x = tt.randn(2, 3)
    nodes, _, _ = graph_of(model(x), params=model)
    assert by_label(nodes, "scale\\n")[0]["fillcolor"] == "#d9ead3"
    shift = by_label(nodes, "shift\\n(3,) float32")[0]  # a buffer is a constant
    assert shift["fillcolor"] == "#eeeeee"
    assert by_label(nodes, "input\\n(2, 3) float32")[0]["fillcolor"] == "#fce5cd"


def test_token_ids_and_gather_indices_appear_as_inputs():
    weight = nn.Parameter(tt.randn(10, 4))
    ids = tt.tensor([[1, 2, 3], [3, 0, 9]])
    picks = tt.tensor([[0], [2]])
    out = F.embedding(ids, weight).sum(dim=1).gather(1, picks).sum()
    nodes, edges, _ = graph_of(out)
    ids_node = [k for k, n in nodes.items() if n["label"] == "input\\n(2, 3) int64"]
    index_node = [k for k, n in nodes.items() if n["label"] == "input\\n(2, 1) int64"]
    embedding = [k for k, n in nodes.items() if n["label"] == "Embedding"]
    gather = [k for k, n in nodes.items() if n["label"].startswith("Gather")]
    assert len(ids_node) == len(index_node) == len(embedding) == len(gather) == 1
    assert (ids_node[0], embedding[0]) in edges
    assert (index_node[0], gather[0]) in edges


def test_cross_entropy_targets_appear_as_inputs():
    z = tt.randn(4, 3, requires_grad=True)
    target = tt.tensor([0, 2, 1, 1])
    nodes, edges, _ = graph_of(F.cross_entropy(z, target), params={"target": target})
    drawn = [k for k, n in nodes.items() if n["label"] == "target\\n(4,) int64"]
    loss_op = [k for k, n in nodes.items() if n["label"] == "CrossEntropy"]
    assert len(drawn) == len(loss_op) == 1 and (drawn[0], loss_op[0]) in edges
    assert nodes[drawn[0]]["fillcolor"] == "#fce5cd"  # an input, though named in params=


def test_a_gpt_graph_starts_at_the_token_ids():
    model, idx, loss = tiny_gpt(2)
    nodes, edges, _ = graph_of(loss, params=model)
    ids = [k for k, n in nodes.items() if n["label"] == "input\\n(1, 4) int64"]
    embedding = [k for k, n in nodes.items() if n["label"] == "Embedding"]
    assert len(ids) == 1
    assert any((ids[0], e) in edges for e in embedding)


def test_token_ids_still_get_no_gradient_and_the_weight_the_right_one():
    weight = tt.randn(5, 2, requires_grad=True)
    ids = tt.tensor([0, 3, 3])
    F.embedding(ids, weight).sum().backward()
    expected = np.zeros((5, 2))
    expected[0], expected[3] = 1.0, 2.0  # row 3 picked twice
    np.testing.assert_allclose(weight.grad.numpy(), expected)
    assert ids.grad is None


# ---- op arguments -----------------------------------------------------------------------------


def op_label(out, name):
    nodes, _, _ = graph_of(out)
    found = ops_named(nodes, name)
    assert len(found) == 1, [n["label"] for n in nodes.values()]
    return found[0]["label"].split("\\n", 1)[1] if "\\n" in found[0]["label"] else ""


def test_op_labels_show_their_arguments():
    x = tt.randn(2, 3, 4, requires_grad=True)
    assert op_label(x.softmax(dim=-1).sum(), "Softmax") == "dim=2"
    assert op_label(x.sum(dim=1, keepdim=True), "Sum") == "dim=1, keepdim"
    assert op_label(x.mean(dim=(0, 2)), "Mean") == "dim=(0, 2)"
    assert op_label(x.permute(2, 0, 1).sum(), "Permute") == "dims=(2, 0, 1)"
    assert op_label(merge_heads(split_heads(x, 2)).sum(), "SplitHeads") == "heads=2"
    assert op_label(merge_heads(split_heads(x, 2)).sum(), "MergeHeads") == "heads=2"
    assert op_label(F.gelu(x, approximate="tanh").sum(), "Gelu") == "approximate=tanh"
    assert op_label(F.gelu(x).sum(), "Gelu") == ""
    assert op_label(F.layer_norm(x, (4,)).sum(), "LayerNorm") == "over dims 2"
    assert op_label(tt.cat([x, x], dim=1).sum(), "Cat") == "dim=1"
    assert op_label(x[:, 1:3, 0].sum(), "GetItem") == "[:, 1:3, 0]"
    tt.manual_seed(0)
    assert op_label(F.dropout(x, p=0.25).sum(), "Dropout") == "p=0.25"


def test_attention_labels_say_causal_and_scale():
    q = tt.randn(1, 2, 4, 8, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert op_label(out.sum(), "ScaledDotProductAttention") == f"causal, scale={8**-0.5:.3g}"
    plain = F.scaled_dot_product_attention(q, q, q, scale=0.5)
    assert op_label(plain.sum(), "ScaledDotProductAttention") == "scale=0.5"


def test_cross_entropy_label_shows_options_that_differ_from_the_defaults():
    z = tt.randn(4, 3, requires_grad=True)
    target = tt.tensor([0, 2, -100, 1])
    loss = F.cross_entropy(z, target, label_smoothing=0.1, reduction="sum")
    assert op_label(loss, "CrossEntropy") == "reduction=sum, label_smoothing=0.1, 1 ignored"


def test_the_output_of_the_last_block_stays_drawn_as_the_output():
    model = Stack([4, 4, 4, 4, 4])
    x = tt.randn(2, 4)
    for layer in model.layers:
        x = layer(x)  # the output is made inside the last layer: it cannot be folded away
    nodes, edges, _ = graph_of(x, params=model, max_nodes=6)
    assert by_label(nodes, "layers.0–2 (Linear) ×3")
    assert by_label(nodes, "layers.3 (Linear)")
    assert len(by_label(nodes, "output\\n(2, 4) float32")) == 1
    assert_well_formed(nodes, edges)


class SharedNorm(nn.Module):
    """One LayerNorm applied in two places, as a model reuses a dropout or tied embedding."""

    def __init__(self):
        super().__init__()
        self.norm, self.mix = nn.LayerNorm(4), nn.Linear(4, 4)

    def forward(self, x):
        return self.norm(self.mix(self.norm(x))).sum()


def test_a_module_called_twice_gives_one_box_per_call_sharing_its_weights():
    model = SharedNorm()
    nodes, edges, _ = graph_of(model(tt.randn(2, 4)), params=model, max_nodes=8)
    first = [k for k, n in nodes.items() if n["label"].startswith("norm (LayerNorm), call 1 of 2")]
    second = [k for k, n in nodes.items() if n["label"].startswith("norm (LayerNorm), call 2 of 2")]
    mix = [k for k, n in nodes.items() if n["label"].startswith("mix (Linear)")]
    assert len(first) == len(second) == len(mix) == 1
    assert (first[0], mix[0]) in edges and (mix[0], second[0]) in edges  # in the order they ran
    # the shared weight and bias are drawn once each, feeding both calls
    weight = [k for k, n in nodes.items() if n["label"].startswith("norm.weight")]
    assert len(weight) == 1
    assert (weight[0], first[0]) in edges and (weight[0], second[0]) in edges
    assert_well_formed(nodes, edges)


def test_a_module_called_twice_gives_one_cluster_per_call_when_opened():
    model = SharedNorm()
    nodes, _, clusters = graph_of(model(tt.randn(2, 4)), params=model, max_nodes=1000)
    labels = sorted(label for label, _ in clusters.values())
    assert labels == [
        "mix (Linear)",
        "norm (LayerNorm), call 1 of 2",
        "norm (LayerNorm), call 2 of 2",
    ]
    norms = ops_named(nodes, "LayerNorm")
    assert sorted(n["clusters"][0] for n in norms) == labels[1:]
    assert by_label(nodes, "norm.weight")[0]["clusters"] == []  # shared: beside both calls


def test_the_graph_displays_itself_inline_in_jupyter():
    if shutil.which("dot") is None:
        pytest.skip("graphviz's `dot` is not installed here, so inline SVG is not tested")
    x = tt.randn(2, 3, requires_grad=True)
    graph = draw_graph((x * 2.0).sum())
    svg = graph._repr_mimebundle_()["image/svg+xml"]  # what Jupyter calls to show a cell's value
    assert "<svg" in svg and "Mul" in svg


def test_an_in_place_op_is_drawn_where_it_ran():
    """y.mul_(3) after z read y: Exp reads the old y (made by x + 1), the last Add the new one."""
    x = tt.randn(3, requires_grad=True)
    y = x + 1.0
    z = y.exp()
    y.mul_(3.0)
    loss = (z + y).sum()
    nodes, edges, _ = graph_of(loss, params={"x": x})
    made_by = {dst: src for src, dst in edges if nodes[src]["shape"] == "ellipse"}

    def ops(name):
        return [k for k, n in nodes.items() if n["label"] == name]

    def inputs(op_key):
        return [src for src, dst in edges if dst == op_key]

    (x_key,) = [k for k, n in nodes.items() if n["label"].startswith("x\\n")]
    (exp,), (mul,) = ops("Exp"), ops("Mul")
    (first_add,) = [a for a in ops("Add") if x_key in inputs(a)]
    (last_add,) = [a for a in ops("Add") if a != first_add]
    old_y = [t for t, op in made_by.items() if op == first_add]
    assert len(old_y) == 1
    assert old_y[0] in inputs(exp) and old_y[0] in inputs(mul)  # both read y before mul_
    assert sorted(nodes[made_by[t]]["label"] for t in inputs(last_add)) == ["Exp", "Mul"]
    assert_well_formed(nodes, edges)
