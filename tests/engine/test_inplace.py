"""In-place ops as PyTorch: version counters, in-place graph nodes, views, `.data`, `.grad` checks.

Each program is written once against a library `lib` (torch or tinytensor) and run on both; the
outcome (an error, or the gradients) must agree.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tinytensor as tt

A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def outcome(program, lib):
    """('raises', None) or ('ok', list of numpy gradients/values) of program(lib)."""
    try:
        values = program(lib)
    except RuntimeError:
        return "raises", None
    return "ok", [np.asarray(v.detach().numpy() if hasattr(v, "detach") else v) for v in values]


def assert_same_outcome(program, torch):
    expected, got = outcome(program, torch), outcome(program, tt)
    assert got[0] == expected[0], f"torch {expected[0]}, tinytensor {got[0]}"
    if expected[0] == "ok":
        for g, e in zip(got[1], expected[1], strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def leaf(lib, values=A):
    return lib.tensor(values, dtype=lib.float64, requires_grad=True)


# ---- the cases, each against torch ------------------------------------------------


def modified_saved_operand(lib):
    x = leaf(lib)
    y = x * 2
    z = (y * y).sum()
    y.mul_(0)
    z.backward()
    return [x.grad]


@pytest.mark.parametrize("fn", ["exp", "sigmoid", "tanh", "relu"])
def test_inplace_on_an_output_the_op_saved_raises(torch, fn):
    def program(lib):
        x = leaf(lib)
        y = getattr(lib, fn)(x)
        z = y.sum()
        y.mul_(2)
        z.backward()
        return [x.grad]

    assert_same_outcome(program, torch)


def test_inplace_on_a_saved_operand_raises_naming_op_and_tensor(torch):
    assert_same_outcome(modified_saved_operand, torch)
    with pytest.raises(RuntimeError, match=r"Mul needs its input \d .*modified in place.*mul_"):
        modified_saved_operand(tt)


def test_inplace_on_a_constant_input_that_was_saved_raises(torch):
    def mul_then_modify(lib):
        x, c = leaf(lib), lib.tensor(A * 3, dtype=lib.float64)
        y = (x * c).sum()
        c.mul_(0)
        y.backward()
        return [x.grad]

    def mul_then_setitem(lib):
        x, c = leaf(lib), lib.tensor(A * 3, dtype=lib.float64)
        y = (x * c).sum()
        c[0] = 100
        y.backward()
        return [x.grad]

    assert_same_outcome(mul_then_modify, torch)
    assert_same_outcome(mul_then_setitem, torch)


# ---- the modification clock: a node notes the clock, backward looks closer only if it moved ----


def unrelated_tensor_modified(lib):
    x, other = leaf(lib), lib.tensor(A, dtype=lib.float64)
    z = (x * x).sum()
    other.mul_(2)  # moves the clock; nothing the graph saved changed
    z.backward()
    return [x.grad, other]


def unsaved_input_modified(lib):
    x, c = leaf(lib), lib.tensor(A, dtype=lib.float64)
    z = (x + c).sum()  # add saves neither operand
    c.add_(1)
    z.backward()
    return [x.grad]


def modified_before_the_node(lib):
    x, c = leaf(lib), lib.tensor(A, dtype=lib.float64)
    c.mul_(3)
    c.add_(1)
    z = (x * c).sum()  # saves c at its version 2
    z.backward()
    return [x.grad]


def output_modified_through_a_view(lib):
    x = leaf(lib)
    y = x.exp()  # exp saves its output
    v = y.view(-1)
    z = y.sum()
    with lib.no_grad():
        v[1] = 5.0
    z.backward()
    return [x.grad]


def view_output_modified_through_its_base(lib):
    x = leaf(lib)
    y = x * 1
    v = y.view(-1).tanh()  # tanh saves its output, a new array: not a view of y
    w = y.view(-1)
    z = (w * w).sum() + v.sum()  # w * w saves w, a view of y's memory
    with lib.no_grad():
        y.mul_(2)
    z.backward()
    return [x.grad]


@pytest.mark.parametrize(
    "program",
    [
        unrelated_tensor_modified,
        unsaved_input_modified,
        modified_before_the_node,
        output_modified_through_a_view,
        view_output_modified_through_its_base,
    ],
)
def test_modification_clock_against_torch(torch, program):
    assert_same_outcome(program, torch)


def test_modification_clock_cases_raise_where_they_must(torch):
    # the cases above must not all pass by saying "ok": the two through views raise in torch
    assert outcome(output_modified_through_a_view, torch)[0] == "raises"
    assert outcome(view_output_modified_through_its_base, torch)[0] == "raises"
    assert outcome(unrelated_tensor_modified, torch)[0] == "ok"


def test_inplace_op_on_a_graph_tensor_is_recorded(torch):
    def program(lib):
        x = leaf(lib)
        y = x * 2
        y.mul_(3)
        y.sum().backward()
        return [x.grad]

    assert_same_outcome(program, torch)
    assert outcome(program, tt)[1][0].tolist() == [[6.0] * 3] * 2


def test_earlier_consumers_skip_a_later_inplace_op(torch):
    def program(lib):
        x = leaf(lib)
        y = x * 2
        w = y + 1  # Add saves nothing: modifying y afterwards is fine
        y.mul_(3)
        (w * 5 + y).sum().backward()
        return [x.grad]

    assert_same_outcome(program, torch)


def test_forward_with_inplace_ops_inside(torch):
    """relu(inplace=True), x += r and masked_fill_ inside a forward, as models write them."""

    def program(lib):
        x = leaf(lib)
        w = lib.tensor(A.T @ A, dtype=lib.float64, requires_grad=True)
        h = x @ w
        lib.nn.functional.relu(h, inplace=True)
        h += x
        h.masked_fill_(lib.tensor([[True, False, False], [False, False, True]]), 0.0)
        h.tanh_()
        (h * h).sum().backward()
        return [x.grad, w.grad]

    assert_same_outcome(program, torch)


def test_leaf_and_views_of_a_leaf_are_not_modified_in_place(torch):
    for op in (
        lambda x: x[0].fill_(0),
        lambda x: x.view(6).mul_(2),
        lambda x: x.add_(1),
        lambda x: x.__setitem__(0, 1.0),
        lambda x: x.__iadd__(1.0),
    ):

        def program(lib, op=op):
            op(leaf(lib))
            return []

        assert_same_outcome(program, torch)
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            program(tt)
    x = leaf(tt)
    with tt.no_grad():
        x[0].fill_(0)
    assert x.numpy()[0].tolist() == [0.0, 0.0, 0.0]


def test_optimizer_step_between_forward_and_backward_raises(torch):
    def program(lib):
        w = leaf(lib)
        opt = lib.optim.SGD([w], lr=0.1)
        loss = (w * w).sum()
        loss.backward(retain_graph=True)
        opt.step()
        loss.backward()
        return [w.grad]

    assert_same_outcome(program, torch)


def test_grad_assignment_checks_shape_dtype_and_device():
    p = tt.zeros(4, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"grad: the assigned gradient has shape \(5,\)"):
        p.grad = tt.ones(5)
    with pytest.raises(RuntimeError, match="dtype float64"):
        p.grad = tt.ones(4, 5, dtype=tt.float64)
    with pytest.raises(TypeError, match="grad: expected a Tensor or None, got ndarray"):
        p.grad = np.ones((4, 5), np.float32)
    p.grad = tt.ones(4, 5)
    assert p.grad.shape == (4, 5)


def test_inplace_result_dtype_and_shape_are_checked(torch):
    for op in (
        lambda lib: lib.arange(3).mul_(1.5),  # a float result into an integer tensor
        lambda lib: lib.zeros(3, 1).add_(lib.ones(3, 4)),  # a result larger than the tensor
    ):
        with pytest.raises(RuntimeError):
            op(torch)
        with pytest.raises(RuntimeError, match=r"(cannot be stored|does not match the shape)"):
            op(tt)


def test_writing_into_an_expanded_view_is_an_error():
    x = tt.zeros(1, 3)
    with pytest.raises(RuntimeError, match="read-only view"):
        x.expand(4, 3).add_(1)


def test_view_of_a_graph_tensor_modified_in_place_is_a_clear_error():
    y = leaf(tt) * 2
    with pytest.raises(RuntimeError, match="view in place while its base is part of a graph"):
        y[0].mul_(3)


# ---- arithmetic in place outside the graph (written straight into the tensor's memory) -------


def _values(lib, dtype_name, values):
    return lib.tensor(values, dtype=getattr(lib, dtype_name))


ARITHMETIC_IN_PLACE = {
    # name: (dtype of x, what is done to x); each returns the tensors to compare
    "float32 -= float": ("float32", lambda lib, x: [x.sub_(0.1)]),
    "float32 *= int, /= float": ("float32", lambda lib, x: [x.mul_(3).div_(7.0)]),
    "float32 += float32 row": (
        "float32",
        lambda lib, x: [x.add_(_values(lib, "float32", [1.5, -2.25, 3.0]))],
    ),
    "float32 += float64 tensor": (
        "float32",
        lambda lib, x: [x.add_(_values(lib, "float64", [0.1] * 3))],
    ),
    "float16 *= float": ("float16", lambda lib, x: [x.mul_(0.3)]),
    "int64 += int, *= int": ("int64", lambda lib, x: [x.add_(3).mul_(-2)]),
    "int64 -= int64 tensor": (
        "int64",
        lambda lib, x: [x.sub_(_values(lib, "int64", [[1, 2, 3]] * 2))],
    ),
    "int64 += float": ("int64", lambda lib, x: [x.add_(1.5)]),
    "int64 /= int": ("int64", lambda lib, x: [x.div_(2)]),
    "too small for the result": ("float32", lambda lib, x: [x[:, :1].add_(lib.ones(2, 3))]),
    "a view writes through": ("float32", lambda lib, x: [x[1:].sub_(1.0), x, x._version]),
    "alpha": ("float32", lambda lib, x: [x.add_(lib.ones(2, 3), alpha=2.0)]),
    # (0.25: PyTorch rounds a number to the tensor's dtype before alpha multiplies it; NumPy
    # multiplies the Python float, so 0.3 could differ in the last bit, before and after)
    "alpha, a number": ("float16", lambda lib, x: [x.sub_(0.25, alpha=-3)]),
    "alpha, int64": ("int64", lambda lib, x: [x.add_(_values(lib, "int64", [1, 2, 3]), alpha=-2)]),
    "a float alpha, int64": (
        "int64",
        lambda lib, x: [x.add_(_values(lib, "int64", [1, 2, 3]), alpha=0.5)],
    ),
    "the deprecated (alpha, other)": ("float32", lambda lib, x: [x.add_(-0.1, lib.ones(2, 3))]),
    "zero_ a view": ("float32", lambda lib, x: [x[:, 1].zero_(), x, x._version]),
    "fill_ float": ("float16", lambda lib, x: [x.fill_(0.1)]),
    "fill_ int64 with a float": ("int64", lambda lib, x: [x.fill_(2.7)]),
}


@pytest.mark.parametrize("name", ARITHMETIC_IN_PLACE)
def test_arithmetic_in_place_outside_the_graph_as_torch(torch, name):
    dtype_name, program = ARITHMETIC_IN_PLACE[name]
    results = {}
    for lib in (torch, tt):
        x = lib.tensor([[4, -7, 10], [1, 0, 25]], dtype=getattr(lib, dtype_name))
        try:
            results[lib.__name__] = program(lib, x) + [x, x._version]
        except RuntimeError:
            results[lib.__name__] = "raises"
    expected, got = results["torch"], results["tinytensor"]
    assert (got == "raises") == (expected == "raises"), f"torch: {expected}, tinytensor: {got}"
    if expected == "raises":
        return
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, int):
            assert g == e
            continue
        assert str(g.dtype).split(".")[-1] == str(e.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def test_arithmetic_in_place_keeps_the_leaf_rule_and_the_graph(torch):
    for lib in (torch, tt):
        p = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError):
            p.sub_(0.5)  # a leaf that requires grad, while gradients are recorded
        with lib.no_grad():
            p.sub_(0.5)
        assert p._version == 1 and p.tolist() == [0.5] * 3
        p.data -= 0.25 * lib.ones(3)  # .data: outside the graph even while recording
        y = p * 2
        y.mul_(p)  # in the graph: a node of its own, so that backward sees it
        y.sum().backward()
        assert p.grad.tolist() == [1.0] * 3, lib.__name__


# ---- .data, detach and the version counter ---------------------------------------------------


def test_data_is_an_alias_outside_the_graph(torch):
    def program(lib):
        p = leaf(lib)
        p.data.add_(1.0)
        p.data.mul_(2.0)
        q = p.data.clone()
        q.add_(100.0)  # a copy: p unchanged
        mask_count = (p != 3.0).data.sum()
        loss = (p * p).sum()
        p.data.copy_(lib.zeros(2, 3, dtype=lib.float64))  # not tracked: backward still runs
        loss.backward()
        return [p.detach(), p.grad, mask_count]

    assert_same_outcome(program, torch)
    p = tt.zeros(3, requires_grad=True)
    assert isinstance(p.data, tt.Tensor) and not p.data.requires_grad
    assert p.data._array is p._array


def test_data_setter_replaces_the_storage(torch):
    def program(lib):
        p = leaf(lib)
        p.data = lib.ones(2, 3, dtype=lib.float64)
        (p * 3).sum().backward()
        return [p.detach(), p.grad]

    assert_same_outcome(program, torch)


def test_detach_shares_the_version_counter(torch):
    def program(lib):
        x = leaf(lib)
        y = x.exp()
        y.detach().zero_()
        y.sum().backward()
        return [x.grad]

    assert_same_outcome(program, torch)


def test_version_counts_inplace_ops_and_views_share_it(torch):
    for lib in (torch, tt):
        x = lib.zeros(4, 3)
        v = x[1:]
        x.add_(1)
        v.mul_(2)
        x[0] = 5
        assert x._version == v._version == 3, lib.__name__
        assert x.numpy()[1:].tolist() == [[2.0] * 3] * 3


def test_views_made_under_no_grad_share_the_version_counter(torch):
    # no_grad takes a shorter path through Function.apply for one-input ops: views made there
    # must still know their base
    for lib in (torch, tt):
        x = lib.zeros(4, 3)
        with lib.no_grad():
            views = [x[1:], x[0], x[:, ::2], x.view(12), x.transpose(0, 1), x.unsqueeze(0)]
        x.add_(1)
        views[0].mul_(2)
        assert [v._version for v in views] == [2] * len(views) == [x._version] * 6, lib.__name__


# ---- views and copies, as PyTorch ------------------------------------------------------------

# (name, function) pairs: PyTorch returns a view for each of these.
VIEWS = [
    ("getitem", lambda x: x[1]),
    ("slice", lambda x: x[:, 1:3]),
    ("view", lambda x: x.view(12)),
    ("reshape", lambda x: x.reshape(2, 6)),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("permute", lambda x: x.permute(1, 0)),
    ("T", lambda x: x.T),
    ("t", lambda x: x.t()),
    ("squeeze", lambda x: x.unsqueeze(0).squeeze(0)),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("flatten", lambda x: x.flatten()),
    ("narrow", lambda x: x.narrow(1, 1, 2)),
    ("select", lambda x: x.select(0, 2)),
    ("split", lambda x: x.split(2, dim=0)[1]),
    ("chunk", lambda x: x.chunk(2, dim=1)[0]),
    ("unbind", lambda x: x.unbind(0)[1]),
    ("movedim", lambda x: x.movedim(0, 1)),
    ("detach", lambda x: x.detach()),
    ("data", lambda x: x.data),
    ("view_as", lambda x: x.view_as(x)),
    ("unflatten", lambda x: x.unflatten(1, (2, 2))),
    ("contiguous", lambda x: x.contiguous()),
]

# PyTorch returns new memory for each of these, whatever the arguments.
COPIES = [
    ("roll-whole-turn", lambda x: x.roll(3, 0)),
    ("roll", lambda x: x.roll(1, 0)),
    ("flip", lambda x: x.flip(0)),
    ("repeat", lambda x: x.repeat(1, 1)),
    ("clone", lambda x: x.clone()),
    ("cat-one", lambda x: x.__class__.__module__ and _cat([x])),
    ("tril", lambda x: x.tril(5)),
    ("index", lambda x: x[_index(x)]),
    ("reshape-noncontiguous", lambda x: x.t().reshape(12)),
    ("contiguous-of-transpose", lambda x: x.t().contiguous()),
    ("to-same-via-clone", lambda x: x.float().clone()),
    ("where", lambda x: _where(x)),
    ("abs", lambda x: x.abs()),
    ("add-zero", lambda x: x + 0),
    ("masked_fill-none", lambda x: x.masked_fill(x > 100, 0.0)),
]


def _lib(x):
    import sys

    return sys.modules["torch"] if type(x).__module__.startswith("torch") else tt


def _cat(xs):
    return _lib(xs[0]).cat(xs, dim=0)


def _index(x):
    return _lib(x).tensor([0, 2])


def _where(x):
    return _lib(x).where(x > 100, x * 0, x)


def _writes_through(lib, fn):
    x = lib.arange(12, dtype=lib.float32).reshape(3, 4).clone()
    before = x.clone()
    out = fn(x)
    out.add_(100)
    return not bool((x == before).all())


@pytest.mark.parametrize("name,fn", VIEWS + COPIES, ids=[n for n, _ in VIEWS + COPIES])
def test_view_or_copy_as_torch(torch, name, fn):
    expected = _writes_through(torch, fn)
    assert _writes_through(tt, fn) == expected, (
        f"{name}: torch {'shares' if expected else 'copies'} memory, tinytensor does not agree"
    )
    assert expected == (name in dict(VIEWS)), "the test's own table is wrong"


def test_no_non_view_op_returns_memory_of_its_input():
    """Every registered op case: an op not declared `may_alias` returns fresh memory."""
    from tests.engine.op_cases import CASES
    from tinytensor.function import REGISTRY

    checked = 0
    for case in CASES:
        if REGISTRY[case.op].may_alias:
            continue
        args = case.make(np.random.default_rng(0))
        with tt.no_grad():
            out = case.fn(*args)
        outs = out if isinstance(out, (tuple, list)) else [out]
        for o in outs:
            for a in args:
                if isinstance(a, tt.Tensor) and isinstance(o, tt.Tensor):
                    assert not np.shares_memory(o._array, a._array), f"{case.id} aliases its input"
        checked += 1
    assert checked > 100


def _holds_arrays(value) -> bool:
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        return True
    return isinstance(value, (tuple, list)) and any(_holds_arrays(v) for v in value)


def _graph_nodes(outputs):
    nodes, todo = [], [t._ctx for t in outputs if isinstance(t, tt.Tensor) and t._ctx]
    while todo:
        node = todo.pop()
        if node is not None and all(node is not seen for seen in nodes):
            nodes.append(node)
            todo.extend(node.parents)
    return nodes


def test_ops_that_say_they_save_no_arrays_save_none():
    """`saves_arrays = False` lets an op's nodes skip the saved-tensor check: in every op case,
    such a node's saved state holds no array (one would escape the in-place check)."""
    from tests.engine.op_cases import CASES
    from tinytensor.function import REGISTRY

    claimed = {name for name, op in REGISTRY.items() if not op.saves_arrays}
    checked = set()
    for case in CASES:
        if case.op not in claimed:
            continue
        out = case.fn(*case.make(np.random.default_rng(0)))
        for node in _graph_nodes(out if isinstance(out, (tuple, list)) else [out]):
            op = type(node).__name__  # (node.name may be a user's: a Function's class)
            if op in claimed:
                saved = {k: v for k, v in vars(node).items() if _holds_arrays(v)}
                assert not saved, f"{case.id}: {op} saves arrays {sorted(saved)}"
                checked.add(op)
    assert checked == claimed, f"no op case exercised {sorted(claimed - checked)}"


# ---- random programs: same gradients as torch, or an error where torch raises --------------


def random_program(seed):
    """A random sequence of out-of-place and in-place ops, as a program over `lib`."""
    rng = random.Random(seed)
    steps = []
    for _ in range(rng.randint(2, 7)):
        kind = rng.choice(["unary", "binary", "scale", "inplace", "inplace_with", "setitem"])
        steps.append(
            (
                kind,
                rng.choice(["exp", "sigmoid", "tanh", "relu"]),
                rng.choice(["mul", "add", "div"]),
                rng.random(),
                rng.random(),
            )
        )

    def program(lib):
        x = leaf(lib, A / 2)
        c = lib.tensor(A * 0.7 + 1.5, dtype=lib.float64)
        pool = [x, c]
        for kind, unary, binary, r1, r2 in steps:
            a = pool[int(r1 * len(pool))]
            b = pool[int(r2 * len(pool))]
            if kind == "unary":
                pool.append(getattr(lib, unary)(a))
            elif kind == "binary":
                pool.append(getattr(lib, binary)(a, b.abs() + 1 if binary == "div" else b))
            elif kind == "scale":
                pool.append(a * 3.0)
            elif kind == "inplace":
                getattr(a, unary + "_")(*(()))
            elif kind == "inplace_with":
                other = b.abs() + 1 if binary == "div" else b
                getattr(a, binary + "_")(other)
            else:
                a[0] = b[1] * 0.5
        loss = sum(((t * (i + 1)).sum() for i, t in enumerate(pool) if t.requires_grad), x.sum())
        loss.backward()
        return [x.grad]

    return program


def test_random_inplace_programs_match_torch(torch):
    raised = 0
    for seed in range(150):
        program = random_program(seed)
        expected = outcome(program, torch)
        got = outcome(program, tt)
        assert got[0] == expected[0], f"seed {seed}: torch {expected[0]}, tinytensor {got[0]}"
        if expected[0] == "ok":
            np.testing.assert_allclose(got[1][0], expected[1][0], rtol=1e-10, err_msg=str(seed))
        else:
            raised += 1
    assert 5 < raised < 145, f"{raised} of 150 programs raised: the mix tests too little"


def test_numpy_integer_scalars_index_like_ints(torch):
    for lib in (torch, tt):
        x = lib.arange(6.0).reshape(2, 3)
        assert x[np.int64(1)].tolist() == [3.0, 4.0, 5.0]
        assert x[np.int64(1), np.int32(2)].item() == 5.0
