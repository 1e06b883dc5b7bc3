"""The autograd machinery itself: accumulation, grad modes, graph freeing, deep graphs, the
Tensor basics, dtypes, seeding and the creation functions (against PyTorch's semantics)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt


def leaf(*values):
    return tt.tensor(list(values), dtype=tt.float64, requires_grad=True)


# ---- accumulation ------------------------------------------------------------------------


def test_gradients_accumulate_across_backward_calls_until_zeroed():
    x = leaf(1.0, 2.0)
    (x * x).sum().backward()  # 2x
    (3 * x).sum().backward()  # + 3
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 7.0])
    x.grad.zero_()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    x.grad = None
    x.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_grad_is_a_tensor_without_grad_of_the_leaf_dtype():
    x = tt.ones(2, 3, requires_grad=True)
    (x * 2).sum().backward()
    assert isinstance(x.grad, tt.Tensor)
    assert x.grad.shape == (2, 3) and x.grad.dtype == tt.float32
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def test_a_tensor_used_twice_gets_both_contributions():
    x = leaf(3.0)
    y = x * x + x.exp() * x  # d/dx = 2x + e^x (1 + x)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0 + np.exp(3.0) * 4.0])


def test_leaves_receiving_the_same_gradient_do_not_share_memory():
    a, b = leaf(1.0), leaf(2.0)
    (a + b).backward()
    with tt.no_grad():
        a.grad.add_(10.0)
    np.testing.assert_array_equal(b.grad.numpy(), [1.0])


def test_only_inputs_that_require_grad_get_one():
    x, c = leaf(1.0, 2.0), tt.tensor([3.0, 4.0], dtype=tt.float64)
    (x * c).sum().backward()
    assert c.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])


# ---- Function.apply and apply_unary ------------------------------------------------------


def test_apply_unary_records_the_node_that_apply_with_keywords_records():
    from tinytensor.ops.reduce import Sum

    x = tt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    by_name = Sum.apply(x * 1, axes=(1,), keepdim=True)
    by_position = Sum.apply_unary(x * 1, (1,), True)
    assert by_position.shape == by_name.shape == (2, 1)
    np.testing.assert_array_equal(by_position.numpy(), [[3.0], [12.0]])
    node = by_position.grad_fn
    assert type(node) is Sum and node.needs_input_grad == (True,)
    assert node.inputs[0].grad_fn is not None and node.parents == (node.inputs[0].grad_fn,)
    (by_position * tt.tensor([[1.0], [2.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0] * 3, [2.0] * 3])
    with tt.no_grad():
        assert Sum.apply_unary(x, (1,), True).grad_fn is None


def test_apply_unary_marks_views_and_restates_errors_like_apply():
    from tinytensor.ops.movement import Reshape

    x = tt.zeros(2, 3)
    view = Reshape.apply_unary(x, (3, 2))
    assert view._base is x
    view.add_(1.0)  # a view: the write shows through x, and counts as a change of x
    assert x.numpy().sum() == 6.0 and x._version == 1
    with pytest.raises(ValueError, match=r"^Reshape: .*\(inputs: \(2, 3\) float32\)"):
        Reshape.apply_unary(x, (4,))


# ---- grad modes --------------------------------------------------------------------------


def test_no_grad_builds_no_graph():
    x = leaf(1.0, 2.0)
    with tt.no_grad():
        y = (x * 2).exp().sum()
        assert not tt.is_grad_enabled()
    assert tt.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_no_grad_works_as_a_decorator_and_restores_the_mode_after_an_error():
    @tt.no_grad()
    def infer(x):
        return x * 3

    x = leaf(1.0)
    assert infer(x).grad_fn is None and not infer(x).requires_grad
    assert (x * 3).grad_fn is not None
    with pytest.raises(ZeroDivisionError), tt.no_grad():
        raise ZeroDivisionError
    assert tt.is_grad_enabled()


def test_enable_grad_inside_no_grad_and_set_grad_enabled():
    x = leaf(2.0)
    with tt.no_grad():
        with tt.enable_grad():
            y = x * x
        z = x * x
    assert y.requires_grad and not z.requires_grad
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0])
    with tt.set_grad_enabled(False):
        assert not (x * x).requires_grad
    with tt.set_grad_enabled(True):
        assert (x * x).requires_grad


def test_requires_grad_propagates():
    a = tt.ones(2, requires_grad=True)
    b = tt.ones(2)
    assert (a + b).requires_grad and (b * a).requires_grad
    assert not (b + b).requires_grad
    assert not (a > b).requires_grad  # comparisons have no gradient
    assert not a.argmax().requires_grad
    assert a.is_leaf and not (a + b).is_leaf
    assert (a + b).grad_fn.name == "Add"


def test_detach_shares_data_and_cuts_the_graph():
    x = leaf(1.0, 2.0)
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = (x * d).sum()  # d counts as a constant
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    e = x.detach()
    assert np.shares_memory(e.numpy(), x.numpy())


def test_requires_grad_on_integer_tensors_is_refused():
    with pytest.raises(TypeError, match="floating"):
        tt.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="int64"):
        tt.arange(3).requires_grad_()
    with pytest.raises(TypeError, match="bool"):
        tt.tensor([True]).requires_grad_(True)
    tt.arange(3).requires_grad_(False)  # turning it off is always fine


def test_inplace_update_of_a_leaf_that_requires_grad_needs_no_grad():
    w = tt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        w.add_(1.0)
    with tt.no_grad():
        w.sub_(0.5)
    np.testing.assert_array_equal(w.numpy(), [0.5, 0.5, 0.5])
    with pytest.raises(RuntimeError, match="__setitem__: a leaf"):
        w[0] = 1.0


# ---- retain_graph and freeing ------------------------------------------------------------


def test_retain_graph_allows_a_second_backward():
    x = leaf(1.0, 2.0)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])


def test_second_backward_through_a_freed_graph_raises_a_clear_error():
    x = leaf(1.0, 2.0)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True") as info:
        y.backward()
    assert "freed" in str(info.value)


def test_intermediates_are_freed_after_backward():
    x = leaf(1.0, 2.0)
    h = x * 2
    y = (h.exp() * h).sum()
    ref = weakref.ref(h)
    del h
    assert ref() is not None  # the graph still needs it
    y.backward()
    assert ref() is None  # without gc.collect(): no reference cycle keeps it alive


def test_retained_graph_keeps_intermediates_until_the_output_goes():
    x = leaf(1.0, 2.0)
    h = x * 2
    y = (h * h).sum()
    ref = weakref.ref(h)
    del h
    y.backward(retain_graph=True)
    assert ref() is not None
    del y
    assert ref() is None


def test_dropping_an_output_frees_its_graph_without_backward():
    x = leaf(1.0)
    h = x * 2
    ref = weakref.ref(h)
    y = h.exp()
    del h, y
    assert ref() is None


def test_a_chain_of_100000_ops_backwards_without_recursion_error():
    x = tt.tensor(1.0, dtype=tt.float64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y = y + 0.0
    y.backward()
    assert x.grad.item() == 1.0


def test_dropping_a_long_unbackwarded_chain_does_not_crash():
    x = tt.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 1.0
    del y
    gc.collect()


# ---- backward's arguments ----------------------------------------------------------------


def test_non_scalar_backward_without_gradient_raises():
    x = leaf(1.0, 2.0)
    with pytest.raises(RuntimeError, match=r"shape \(2,\)"):
        (x * 2).backward()


def test_backward_with_an_explicit_gradient():
    x = leaf(1.0, 2.0, 3.0)
    y = x * x
    y.backward(gradient=tt.tensor([1.0, 0.5, -1.0], dtype=tt.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, -6.0])
    z = leaf(1.0, 2.0)
    (z * 3).backward(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(z.grad.numpy(), [3.0, 3.0])
    with pytest.raises(ValueError, match=r"\(3,\)"):
        (z * 2).backward(gradient=tt.ones(3))


def test_backward_on_a_leaf_and_on_a_one_element_tensor():
    x = tt.tensor([[2.0]], requires_grad=True)
    x.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0]])
    (x * 3).backward()  # a (1, 1) output counts as a scalar
    np.testing.assert_array_equal(x.grad.numpy(), [[4.0]])


def test_retain_grad_stores_the_gradient_of_an_intermediate():
    x = leaf(1.0, 2.0)
    h = x * 3
    h.retain_grad()
    other = x * 5  # not retained
    (h * h + other).sum().backward()
    np.testing.assert_array_equal(h.grad.numpy(), [6.0, 12.0])  # 2h
    assert other.grad is None
    np.testing.assert_array_equal(x.grad.numpy(), [23.0, 41.0])  # 18x + 5


# ---- tensor basics -----------------------------------------------------------------------


def test_tensor_properties_and_conversions():
    x = tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == (2, 3) and x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert x.size() == (2, 3) and x.size(1) == 3 and len(x) == 2
    assert x.dtype == tt.float32 and x.device == "cpu" and x.device.type == "cpu"
    assert x.T.shape == (3, 2) and x.T.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert isinstance(x.numpy(), np.ndarray) and x.numpy().dtype == np.float32
    assert x[1, 2].item() == 6.0 and isinstance(x[1, 2].item(), float)
    assert tt.tensor(3).item() == 3 and isinstance(tt.tensor(3).item(), int)
    assert float(x.sum()) == 21.0 and int(tt.tensor(7)) == 7
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        x.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x > 0)
    assert bool(tt.tensor(1.0) > 0)
    assert [row.tolist() for row in x] == x.tolist()
    assert "tensor(" in repr(x) and "grad_fn=<Mul>" in repr(leaf(1.0) * 2)


@pytest.mark.parametrize(
    "data, dtype, expected",
    [
        ([1.0, 2.0], None, "float32"),
        ([1, 2], None, "int64"),
        ([True, False], None, "bool"),
        (2.5, None, "float32"),
        ([1, 2], "float64", "float64"),
        ([1.0, 2.0], "int32", "int32"),
        (np.array([1.0], dtype=np.float64), None, "float64"),  # arrays keep their dtype
        (np.array([1], dtype=np.int32), None, "int32"),
    ],
)
def test_tensor_dtypes_follow_torch(torch, data, dtype, expected):
    ours = tt.tensor(data, dtype=getattr(tt, dtype) if dtype else None)
    assert str(ours.dtype) == expected
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)  # our default; the fixture sets float64
    try:
        theirs = torch.tensor(data, dtype=getattr(torch, dtype) if dtype else None)
    finally:
        torch.set_default_dtype(previous)
    assert str(theirs.dtype) == f"torch.{expected}"


def test_default_dtype_can_be_changed():
    previous = tt.get_default_dtype()
    try:
        tt.set_default_dtype(tt.float64)
        assert tt.tensor([1.0]).dtype == tt.float64 and tt.zeros(2).dtype == tt.float64
    finally:
        tt.set_default_dtype(previous)
    assert tt.tensor([1.0]).dtype == tt.float32
    with pytest.raises(TypeError, match="floating"):
        tt.set_default_dtype(tt.int64)


def test_dtype_conversions():
    x = tt.tensor([1.5, -2.5])
    assert x.double().dtype == tt.float64 and x.long().dtype == tt.int64
    assert x.int().dtype == tt.int32 and x.bool().dtype == tt.bool and x.half().dtype == tt.float16
    assert x.to(tt.float64).float().dtype == tt.float32
    assert x.long().tolist() == [1, -2]
    assert x.type_as(tt.arange(2)).dtype == tt.int64


# ---- random numbers ----------------------------------------------------------------------


def _draws():
    x = tt.ones(50)
    return [
        tt.randn(3, 4).numpy(),
        tt.rand(5).numpy(),
        tt.randint(0, 10, (6,)).numpy(),
        F.dropout(x, 0.5).numpy(),
        tt.randn_like(x).numpy(),
    ]


def test_manual_seed_makes_random_draws_repeatable():
    tt.manual_seed(123)
    first = _draws()
    tt.manual_seed(123)
    second = _draws()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    tt.manual_seed(124)
    third = _draws()
    assert not np.array_equal(first[0], third[0])


def test_private_generators_are_independent_of_the_global_seed():
    a = tt.randn(4, generator=tt.Generator().manual_seed(1)).numpy()
    tt.manual_seed(99)
    tt.randn(10)
    b = tt.randn(4, generator=tt.Generator().manual_seed(1)).numpy()
    np.testing.assert_array_equal(a, b)


def test_random_values_have_the_right_ranges():
    tt.manual_seed(0)
    u = tt.rand(1000).numpy()
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    n = tt.randn(2000).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1.0) < 0.1
    i = tt.randint(3, 7, (1000,)).numpy()
    assert set(np.unique(i)) == {3, 4, 5, 6}
    assert set(tt.randint(4, (100,)).tolist()) == {0, 1, 2, 3}


# ---- creation functions against torch's shapes and dtypes -------------------------------

CREATION = [
    ("zeros", lambda m: m.zeros(2, 3)),
    ("zeros-tuple", lambda m: m.zeros((2, 3))),
    ("zeros-int", lambda m: m.zeros(2, dtype=m.int64)),
    ("ones", lambda m: m.ones(4)),
    ("ones-float64", lambda m: m.ones((2, 2), dtype=m.float64)),
    ("ones-scalar", lambda m: m.ones(())),
    ("full-float", lambda m: m.full((2, 3), 1.5)),
    ("full-int", lambda m: m.full((2,), 7)),
    ("full-bool", lambda m: m.full((2,), True)),
    ("full-dtype", lambda m: m.full((2,), 7, dtype=m.float32)),
    ("arange", lambda m: m.arange(5)),
    ("arange-start-step", lambda m: m.arange(2, 11, 3)),
    ("arange-float", lambda m: m.arange(0.0, 1.0, 0.25)),
    ("arange-negative-step", lambda m: m.arange(5, 0, -2)),
    ("arange-dtype", lambda m: m.arange(4, dtype=m.float32)),
    ("linspace", lambda m: m.linspace(0, 1, 5)),
    ("linspace-one", lambda m: m.linspace(2, 3, 1)),
    ("eye", lambda m: m.eye(3)),
    ("eye-rect", lambda m: m.eye(2, 4)),
    ("tensor-nested", lambda m: m.tensor([[1, 2], [3, 4]])),
    ("tensor-scalar", lambda m: m.tensor(3.0)),
    ("zeros_like", lambda m: m.zeros_like(m.ones(2, 3, dtype=m.int32))),
    ("ones_like-dtype", lambda m: m.ones_like(m.zeros(2), dtype=m.float64)),
    ("full_like", lambda m: m.full_like(m.arange(3), 4)),
    ("full_like-float", lambda m: m.full_like(m.zeros(3), 2.5)),
]


@pytest.mark.parametrize("name, make", CREATION, ids=[c[0] for c in CREATION])
def test_creation_matches_torch(torch, name, make):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)  # compare with our default dtype
    try:
        theirs = make(torch)
    finally:
        torch.set_default_dtype(previous)
    ours = make(tt)
    assert ours.shape == tuple(theirs.shape), name
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", ""), name
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    assert not ours.requires_grad


RANDOM_CREATION = [
    ("randn", lambda m: m.randn(2, 3)),
    ("randn-tuple-float64", lambda m: m.randn((2, 3), dtype=m.float64)),
    ("rand", lambda m: m.rand(4)),
    ("randint", lambda m: m.randint(0, 5, (2, 3))),
    ("randint-high-only", lambda m: m.randint(5, (3,))),
    ("randn_like", lambda m: m.randn_like(m.zeros(2, 2, dtype=m.float64))),
    ("rand_like", lambda m: m.rand_like(m.zeros(3))),
]


@pytest.mark.parametrize("name, make", RANDOM_CREATION, ids=[c[0] for c in RANDOM_CREATION])
def test_random_creation_shapes_and_dtypes_match_torch(torch, name, make):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        theirs = make(torch)
    finally:
        torch.set_default_dtype(previous)
    ours = make(tt)
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")


def test_creation_with_requires_grad_gives_leaves():
    for t in (
        tt.zeros(2, requires_grad=True),
        tt.randn(2, requires_grad=True),
        tt.tensor([1.0], requires_grad=True),
    ):
        assert t.requires_grad and t.is_leaf


def test_tensor_copies_its_input_array():
    a = np.zeros(3)
    t = tt.tensor(a)
    a[0] = 5.0
    assert t.tolist() == [0.0, 0.0, 0.0]
