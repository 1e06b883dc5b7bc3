"""Higher-order gradients (create_graph=True): every registered op twice differentiable, checked
numerically (gradgradcheck, float64) from the same table as gradcheck, so a new op is covered by
construction; the double-backward values against PyTorch's on the table of test_vs_torch.py;
third derivatives of the elementwise ops; and the engine's behaviour around create_graph."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.function import REGISTRY

from . import test_vs_torch as table
from .op_cases import CASES
from .reference import check_double_backward


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_op_is_twice_differentiable(case):
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    inputs = case.make(rng)
    shapes = [tuple(x.shape) if isinstance(x, tt.Tensor) else x for x in inputs]
    try:
        assert tt.autograd.gradgradcheck(case.fn, inputs, **case.options)
    except tt.GradcheckError as e:
        raise AssertionError(f"{case.id} with inputs of shapes {shapes}: {e}") from None


def _projected_gradients(fn, inputs, create_graph):
    """∂(Σ fn(x)·r)/∂x for the inputs that require grad, as arrays."""
    outs = fn(*inputs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    rng = np.random.default_rng(7)
    loss = sum(
        (o * tt.tensor(rng.standard_normal(o.shape), dtype=o.dtype)).sum()
        for o in outs
        if o.requires_grad
    )
    xs = [x for x in inputs if isinstance(x, tt.Tensor) and x.requires_grad]
    grads = tt.autograd.grad(loss, xs, create_graph=create_graph, materialize_grads=True)
    return [g.detach().numpy() for g in grads]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_create_graph_gives_the_first_order_gradients(case):
    """The gradients a create_graph backward records (a composite's, a LinearVJP's) are the
    first-order backward's, special cases included (constant rows, ignored targets, ties)."""

    def fresh():  # (an input may be made by ops: one walk frees their graph)
        return case.make(np.random.default_rng(zlib.crc32(case.id.encode())))

    plain = _projected_gradients(case.fn, fresh(), create_graph=False)
    recorded = _projected_gradients(case.fn, fresh(), create_graph=True)
    for i, (a, b) in enumerate(zip(recorded, plain)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{case.id}: input {i}")


def _tensors_of(out):
    """Every tensor of the graph behind `out` that a node made."""
    found, stack, seen = [], [out], set()
    while stack:
        t = stack.pop()
        if t._ctx is None or id(t) in seen:
            continue
        seen.add(id(t))
        found.append(t)
        stack.extend(t._ctx.inputs)
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_composites_have_the_fused_ops_values(case):
    inputs = case.make(np.random.default_rng(zlib.crc32(case.id.encode())))
    outs = case.fn(*inputs)
    checked = 0
    for out in outs if isinstance(outs, (tuple, list)) else (outs,):
        for t in _tensors_of(out):
            node = t._ctx
            if node.composite is not None:
                with tt.no_grad():
                    value = node.composite(*node.inputs)
                np.testing.assert_allclose(
                    value.numpy(), t.numpy(), rtol=1e-12, atol=1e-12, err_msg=node.name
                )
                checked += 1
    if REGISTRY[case.op].composite is not None:
        assert checked, f"{case.id}: no {case.op} node with a composite was found"


TORCH_TABLE = table.ELEMENTWISE + table.REDUCTIONS + table.MOVEMENT + table.LINALG + table.NN
TORCH_TABLE += table.ATTENTION


@pytest.mark.parametrize("inputs, ours, theirs, options", TORCH_TABLE)
def test_double_backward_matches_torch(torch, request, inputs, ours, theirs, options):
    # torch's fused CPU attention has no double backward: its math formulation does
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        check_double_backward(
            torch, inputs, ours, theirs, label=request.node.callspec.id, **options
        )


THIRD_ORDER = {
    "exp": lambda x: x.exp(),
    "log": lambda x: (x.abs() + 0.5).log(),
    "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(),
    "sin": lambda x: x.sin(),
    "cube": lambda x: x * x * x,
    "pow-2.5": lambda x: (x.abs() + 0.5) ** 2.5,
    "sqrt": lambda x: (x * x + 1).sqrt(),
    "gelu": lambda x: tt.nn.functional.gelu(x),
    "gelu-tanh": lambda x: tt.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda x: tt.nn.functional.silu(x),
    "softplus": lambda x: tt.nn.functional.softplus(x),
    "erf": lambda x: x.erf(),
}


@pytest.mark.parametrize("name", sorted(THIRD_ORDER))
def test_third_derivatives_of_elementwise_ops(torch, name):
    """d³/dx³ of f elementwise, three create_graph backwards, against torch's."""
    x_np = np.linspace(-1.7, 1.9, 7)
    results = []
    for lib in (tt, torch):
        x = lib.tensor(x_np, requires_grad=True)
        f = THIRD_ORDER[name] if lib is tt else _torch_twin(torch, name)
        y = f(x)
        for _ in range(3):
            (y,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        results.append(y.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9, atol=1e-9)


def _torch_twin(torch, name):
    F = torch.nn.functional
    twins = {
        "gelu": F.gelu,
        "gelu-tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu,
        "softplus": F.softplus,
    }
    return twins.get(name, THIRD_ORDER[name])


# ---- the engine around create_graph ----------------------------------------------------------


def test_backward_create_graph_gives_grads_on_a_graph():
    x = tt.tensor([0.5, -1.0, 2.0], dtype=tt.float64, requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad._ctx is not None
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.numpy() ** 2)
    g = x.grad
    x.grad = None
    g.sum().backward()  # d/dx Σ 3x² = 6x
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.numpy())


def test_grad_touches_no_grad_and_skips_what_leads_nowhere():
    w = tt.tensor(np.ones((3, 3)), requires_grad=True)
    x = tt.tensor(np.arange(3.0), requires_grad=True)
    w.grad = tt.ones(3, 3, dtype=w.dtype)
    with tt.autograd.backward_trace() as trace:
        (gx,) = tt.autograd.grad((x @ w).sum(), x)
    assert w.grad.tolist() == [[1.0] * 3] * 3 and x.grad is None
    (step,) = trace.steps[-1:]
    assert step.input_grads[1] is None  # the weight's gradient was not computed
    np.testing.assert_allclose(gx.numpy(), np.full(3, 3.0))


def test_backward_inputs_accumulates_into_those_only():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    b = tt.tensor([3.0, 4.0], requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    assert a.grad.tolist() == [3.0, 4.0] and b.grad is None


def test_grad_of_a_non_leaf_and_of_several_outputs(torch):
    out = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64, requires_grad=True)
        h = x * x
        y1, y2 = h.sum(), (h * x).sum()
        gh, gx = lib.autograd.grad([y1, y2], [h, x], create_graph=True)
        (hx,) = lib.autograd.grad(gx.sum(), x)
        out.append([gh.detach().numpy(), gx.detach().numpy(), hx.numpy()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b)


def test_materialize_grads_and_allow_unused():
    x, z = tt.ones(2, requires_grad=True), tt.ones(2, requires_grad=True)
    gx, gz = tt.autograd.grad((x * 2).sum(), [x, z], materialize_grads=True)
    assert gz.tolist() == [0.0, 0.0] and gx.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="input 1 was not used"):
        tt.autograd.grad((x * 2).sum(), [x, z])


def test_hooks_see_the_gradient_on_the_graph():
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.requires_grad) or g * 2)
    (gx,) = tt.autograd.grad((x**2).sum(), x, create_graph=True)
    assert seen == [True]
    np.testing.assert_allclose(gx.detach().numpy(), 4 * x.numpy())  # the hook doubled 2x
    (hx,) = tt.autograd.grad(gx.sum(), x)  # d/dx Σ 4x = 4, doubled again, as torch does
    np.testing.assert_allclose(hx.numpy(), [8.0, 8.0])


def test_a_double_backward_graph_can_be_drawn():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    (gx,) = tt.autograd.grad(tt.nn.functional.gelu(x).sum(), x, create_graph=True)
    dot = tt.draw_graph(gx.sum()).source
    assert "Erf" in dot  # the composite the double backward differentiates


def test_embedding_padding_row_has_no_second_derivative_either(torch):
    """padding_idx: the row gets no gradient, and so no Hessian-vector product (the VJP's own
    VJP must not send the padding row's cotangent back through the ids)."""
    ids_np = np.array([[0, 2, 1], [2, 2, 3]])
    w_np = np.random.default_rng(3).standard_normal((4, 3))
    u_np = np.random.default_rng(4).standard_normal((4, 3))
    out = []
    for lib in (tt, torch):
        w = lib.tensor(w_np, requires_grad=True)
        e = lib.nn.functional.embedding(lib.tensor(ids_np), w, padding_idx=2)
        (g,) = lib.autograd.grad((e**3).sum(), w, create_graph=True)
        (hu,) = lib.autograd.grad((g * lib.tensor(u_np)).sum(), w)
        out.append((g.detach().numpy(), hu.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert not out[0][1][2].any()


# ---- bad input, as torch: an error that says which and how to fix it ------------------------


def test_grad_of_a_non_scalar_asks_for_grad_outputs():
    x = tt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"autograd.grad \(output 0\).*pass grad_outputs\[0\]"):
        tt.autograd.grad(x * 2, x)


def test_grad_through_a_freed_graph_says_retain_graph():
    x = tt.ones(3, requires_grad=True)
    y = (x * x).sum()
    tt.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="already freed.*retain_graph=True"):
        tt.autograd.grad(y, x)


def test_create_graph_keeps_the_graph_by_default():
    x = tt.ones(3, requires_grad=True)
    y = (x * x).sum()
    tt.autograd.grad(y, x, create_graph=True)
    (g,) = tt.autograd.grad(y, x)  # torch's default retain_graph=create_graph
    assert g.tolist() == [2.0, 2.0, 2.0]


def test_outputs_made_under_no_grad_are_named():
    x = tt.ones(3, requires_grad=True)
    with tt.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="output 0 does not require grad.*no_grad"):
        tt.autograd.grad(y, x, create_graph=True)


def test_create_graph_inside_no_grad_still_records_as_torch():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = (x**3).sum()
    with tt.no_grad():
        (g,) = tt.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and g.tolist() == [3.0, 12.0]


def test_in_place_change_under_a_double_backward_graph_is_caught():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    (g,) = tt.autograd.grad((h**3).sum(), x, create_graph=True)
    with tt.no_grad():
        h.mul_(2.0)  # g's graph saved h (3h² depends on it)
    with pytest.raises(RuntimeError, match="modified in place"):
        g.sum().backward()


def test_retain_grad_on_a_gradient():
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    (g,) = tt.autograd.grad((x**3).sum(), x, create_graph=True)
    g.retain_grad()
    (g * g).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), 2 * g.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), 2 * g.detach().numpy() * 6 * x.detach().numpy())


def test_a_double_backward_graph_can_be_explored(tmp_path):
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    (gx,) = tt.autograd.grad(tt.nn.functional.gelu(x).sum(), x, create_graph=True)
    path = tmp_path / "graph.html"
    tt.explore(gx.sum(), path=str(path))
    html = path.read_text()
    assert "Erf" in html and "StandIn" in html


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CASES
        if sum(
            isinstance(a, tt.Tensor) and a.requires_grad for a in c.make(np.random.default_rng(0))
        )
        > 1
    ],
    ids=lambda c: c.id,
)
def test_a_gradient_for_one_input_is_differentiable_in_the_others(case):
    """∂(Σ f·v)/∂x₀ alone (autograd.grad asked for one input), differentiated in every input
    and in v: layer_norm's gradient for x depends on its weight, even when only x's is asked."""
    inputs = case.make(np.random.default_rng(zlib.crc32(case.id.encode())))
    first = next(i for i, a in enumerate(inputs) if isinstance(a, tt.Tensor) and a.requires_grad)
    n = len(inputs)
    with tt.no_grad():
        outs = case.fn(*inputs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    rng = np.random.default_rng(5)
    vs = [
        tt.tensor(rng.standard_normal(o.shape), dtype=tt.float64, requires_grad=True)
        for o in outs
        if o.dtype.kind == "f"
    ]

    def partial(*args):
        with tt.enable_grad():
            results = case.fn(*args[:n])
            results = results if isinstance(results, (tuple, list)) else (results,)
            floats = [r for r in results if r.dtype.kind == "f"]
            (g,) = tt.autograd.grad(
                floats, args[first], list(args[n:]), create_graph=True, materialize_grads=True
            )
        return g

    assert tt.gradcheck(partial, (*inputs, *vs), **case.options)


def test_grad_at_a_non_leaf_leaves_the_graph_behind_it(torch):
    out = []
    for lib in (tt, torch):
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        a = p * 2
        lib.autograd.grad((a**2).sum(), a)  # runs nothing behind a, so frees nothing there
        out.append(lib.autograd.grad((a**3).sum(), p)[0].tolist())
    assert out[0] == out[1] == [24.0, 96.0]


def test_a_gradient_constant_in_a_parameter_is_still_on_the_graph(torch):
    """relu's gradient depends on b only through its mask: torch gives zeros for ∂/∂b, and so
    must we (not "does not require grad")."""
    out = []
    for lib in (tt, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        b = lib.tensor([0.5, 0.5, -4.0], requires_grad=True)
        (g,) = lib.autograd.grad(lib.nn.functional.relu(x + b).sum(), x, create_graph=True)
        out.append((g.requires_grad, lib.autograd.grad(g.sum(), b)[0].tolist()))
    assert out[0] == out[1] == (True, [0.0, 0.0, 0.0])
