"""The data the explorer page is written from: values, gradients, modules, and the backward steps,
each compared with the tensors and with an independent run of the engine."""

import inspect
import json

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.explore import graph

from .models import module_names, tiny_gpt


def stats_of(array):
    a = np.asarray(array, dtype=np.float64).reshape(-1)
    return {"min": a.min(), "max": a.max(), "mean": a.mean(), "std": a.std()}


def assert_stats_match(summary, array, what):
    for key, expected in stats_of(array).items():
        assert summary[key] == pytest.approx(expected, rel=1e-5, abs=1e-9), (what, key)


@pytest.fixture(scope="module")
def explored():
    model, idx, targets, loss = tiny_gpt()
    data = graph.extract(loss, model)
    return model, idx, loss, data


def by_name(data):
    return {n["name"]: n for n in data["nodes"] if n["kind"] == "tensor" and n["name"]}


def test_every_parameter_value_and_gradient_matches_the_tensor(explored):
    model, _, _, data = explored
    named = by_name(data)
    for name, p in model.named_parameters():
        node = named[name]
        assert node["role"] == "parameter" and node["shape"] == list(p.shape)
        assert_stats_match(node["value"], p.numpy(), name)
        # explore ran the real backward: .grad is what that backward accumulated
        assert_stats_match(node["grad"], p.grad.numpy(), name + ".grad")


def test_intermediate_gradients_match_retain_grad_on_an_independent_run(explored):
    _, _, _, data = explored
    model, idx, targets, _ = tiny_gpt()  # the same numbers, built again
    embedded = model.wte(idx) + model.wpe(idx.shape[1], 0)  # GPT.forward's first intermediate
    embedded.retain_grad()
    x = embedded
    for block in model.blocks:
        x = block(x, is_causal=True)
    logits = model.ln_f(x) @ model.wte.weight.T
    loss = tt.nn.functional.cross_entropy(logits.reshape(-1, 50), targets.reshape(-1))
    loss.backward()
    first_add = next(
        n for n in data["nodes"] if n["kind"] == "op" and n["name"] == "Add" and n["module"] is None
    )
    node = data["nodes"][first_add["output"]]
    assert_stats_match(node["value"], embedded.numpy(), "wte(idx) + wpe")
    assert_stats_match(node["grad"], embedded.grad.numpy(), "d loss / d(wte(idx) + wpe)")
    # the page's loss is this loss
    root = next(n for n in data["nodes"] if n.get("role") == "output")
    assert root["value"]["mean"] == pytest.approx(loss.item(), rel=1e-6)


def test_backward_steps_follow_the_engines_order_in_an_independent_run(explored):
    _, _, _, data = explored
    model, _, _, loss = tiny_gpt()
    names = module_names(model)
    module_of = {}  # backward frees the nodes (and their .module), so read it before
    stack = [loss._ctx]
    while stack:
        node = stack.pop()
        if id(node) not in module_of:
            module_of[id(node)] = names.get(id(node.module)) or ""
            stack.extend(x._ctx for x in node.inputs if x._ctx is not None)
    with tt.autograd.backward_trace() as trace:
        loss.backward()
    expected = [(type(s.node).__name__, module_of[id(s.node)]) for s in trace.steps]
    got = []
    for step in data["steps"]:
        node = data["nodes"][step["node"]]
        module = "" if node["module"] is None else data["modules"][node["module"]]["name"]
        got.append((node["name"], module))
    assert len(got) == len(expected) > 30
    assert got == expected
    # each step's arriving gradient is what the engine handed that node
    for step, engine in zip(data["steps"], trace.steps):
        g = np.asarray(engine.grad_output, dtype=np.float64)
        assert step["grad"]["norm"] == pytest.approx(np.linalg.norm(g), rel=1e-5)


def test_a_tensor_used_twice_accumulates_two_contributions():
    x = tt.randn(3, 4, requires_grad=True)
    y = x * 2.0
    loss = (y * y + y).sum()  # y feeds Mul twice (as both inputs) and Add once
    data = graph.extract(loss, {"x": x, "y": y})
    y_id = next(n["id"] for n in data["nodes"] if n.get("name") == "y")
    sends = [s for step in data["steps"] for s in step["sends"] if s["to"] == y_id]
    assert [s["k"] for s in sends] == [1, 2, 3] and {s["of"] for s in sends} == {3}
    y_node = data["nodes"][y_id]
    expected = 2 * y.numpy() + 1  # d/dy (y² + y)
    assert_stats_match(y_node["grad"], expected, "dL/dy")
    x_node = next(n for n in data["nodes"] if n.get("name") == "x")
    assert_stats_match(x_node["grad"], 2 * expected, "dL/dx")


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt")
def test_nan_and_exploding_gradients_are_flagged():
    x = tt.tensor([1.0, -1.0, 4.0], requires_grad=True)
    loss = (tt.sqrt(x) * 1e6).sum()  # sqrt(-1) is NaN; the 1e6 makes dL/dsqrt explode
    data = graph.extract(loss, {"x": x})
    flags = {n["name"] or n["role"]: n["flags"] for n in data["nodes"] if n["kind"] == "tensor"}
    assert "nan" in flags["x"]
    sqrt_op = next(n for n in data["nodes"] if n["kind"] == "op" and n["name"] == "Sqrt")
    assert "exploding" in data["nodes"][sqrt_op["output"]]["flags"]
    assert data["nodes"][sqrt_op["output"]]["value"]["nan"] == 1


def test_ops_carry_their_vjp_math_and_arguments(explored):
    _, _, _, data = explored
    ops = [n for n in data["nodes"] if n["kind"] == "op"]
    for op in ops:
        cls = tt.function.REGISTRY[op["name"]]
        assert op["math"] == inspect.getdoc(cls)  # the forward and VJP math of the op
    reshape = next(op for op in ops if op["name"] == "Reshape" and op["module"] is None)
    assert reshape["args"]["shape"] == [2, 8, 50]  # logits viewed back from (B*T, V)
    assert json.dumps(data, allow_nan=False)  # the page can embed it as is


def test_modules_nest_and_repeated_blocks_are_recognised(explored):
    model, _, _, data = explored
    modules = {m["name"]: m for m in data["modules"]}
    assert modules["blocks.0"]["parent"] == data["modules"].index(modules["blocks"])
    assert modules["blocks.1.self_attn"]["cls"] == type(model.blocks[1].self_attn).__name__
    assert modules["blocks.0"]["repeat"]["count"] == 2
    assert modules["blocks.1"]["repeat"]["index"] == 1
    assert "repeat" not in modules["ln_f"]
    ops_in_blocks = sum(
        n["kind"] == "op" and n["module"] is not None
        and data["modules"][n["module"]]["name"].startswith("blocks.")
        for n in data["nodes"]
    )  # fmt: skip
    assert modules["blocks"]["ops"] == ops_in_blocks


def test_errors_name_the_function_and_the_problem():
    x = tt.randn(2, requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match=r"explore: the graph through Sum was already freed"):
        tt.explore(loss)
    with pytest.raises(TypeError, match=r"explore: output must be a Tensor.*got 3"):
        tt.explore(3)
    with pytest.raises(TypeError, match=r"explore: params must be a dict.*got list"):
        tt.explore((x * x).sum(), params=[x])


def test_a_non_scalar_output_is_explored_without_backward(tmp_path):
    x = tt.randn(2, 3, requires_grad=True)
    result = tt.explore(x.relu(), path=tmp_path / "g.html")
    assert result.num_steps == 0 and x.grad is None
    assert "stepping needs a loss" in result.data["backward_note"]


def test_logits_and_loss_together_backward_from_the_loss():
    model, _, _, loss = tiny_gpt(n_layer=1)
    logits = loss._ctx.inputs[0]  # cross_entropy's input: the (B*T, V) logits
    data = graph.extract([logits, loss], model)
    roles = [n["role"] for n in data["nodes"] if n["kind"] == "tensor"]
    assert roles.count("output") == 2 and data["steps"]
    root = data["nodes"][data["nodes"][data["steps"][0]["node"]]["output"]]
    assert root["value"]["mean"] == pytest.approx(loss.item(), rel=1e-6)


def test_without_module_names_modules_are_labelled_by_class():
    model, _, _, loss = tiny_gpt(n_layer=1)
    data = graph.extract(loss)  # no params: no names, one entry per module object
    names = [m["name"] for m in data["modules"]]
    assert "Linear" in names and "Linear #2" in names
    assert all(m["parent"] is None for m in data["modules"])
    leaves = [n for n in data["nodes"] if n["kind"] == "tensor" and n["producer"] is None]
    assert {n["role"] for n in leaves} == {"leaf", "input"}  # unnamed: not known as parameters
    assert sum(n["role"] == "leaf" for n in leaves) == len(list(model.parameters()))


def test_without_backward_trace_gradients_come_from_retain_grad(monkeypatch):
    model, _, _, loss = tiny_gpt(n_layer=1)
    monkeypatch.delattr(tt.autograd, "backward_trace", raising=False)
    data = graph.extract(loss, model)
    assert data["steps"] == [] and "no autograd.backward_trace()" in data["backward_note"]
    named = by_name(data)
    for name, p in model.named_parameters():
        assert_stats_match(named[name]["grad"], p.grad.numpy(), name + ".grad")
