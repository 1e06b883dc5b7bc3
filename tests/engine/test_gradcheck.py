"""Numerical gradient checks (central differences, float64) for every registered op.

The cases live in op_cases.py; `test_every_differentiable_op_has_a_case` makes a new op without a
case fail here, so every op is covered by construction. Behaviour at non-differentiable points
(ties of max/min, fully masked attention rows) and random ops (dropout) is checked against
expectations derived by hand.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt
from tinytensor.function import REGISTRY

from .op_cases import CASES


def _differentiable_ops():
    # NOTE: private bases (a leading underscore, e.g. _Extreme behind Max and Min) are not ops
    # callable on their own; their subclasses carry the cases.
    return {
        name for name, cls in REGISTRY.items() if cls.differentiable and not name.startswith("_")
    }


def test_every_differentiable_op_has_a_case():
    covered = {case.op for case in CASES}
    missing = sorted(_differentiable_ops() - covered)
    assert not missing, f"differentiable ops with no case in tests/engine/op_cases.py: {missing}"


def test_every_case_names_a_registered_op():
    unknown = sorted({case.op for case in CASES} - set(REGISTRY))
    assert not unknown, f"cases name ops that are not in the registry: {unknown}"


def test_case_ids_are_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


def _graph_ops(outputs):
    """Names of the Functions in the graph behind `outputs` (to check a case hits its op)."""
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    seen, stack, names = set(), [o._ctx for o in outputs if o._ctx is not None], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        names.add(type(node).__name__)
        stack.extend(x._ctx for x in node.inputs if x._ctx is not None)
    return names


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gradcheck(case):
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    inputs = case.make(rng)
    # The case must really exercise the op it claims to cover.
    hit = _graph_ops(case.fn(*inputs))
    assert case.op in hit or any(issubclass(REGISTRY[name], REGISTRY[case.op]) for name in hit), (
        f"{case.id}: the graph holds {sorted(hit)}, not {case.op}"
    )
    shapes = [tuple(x.shape) if isinstance(x, tt.Tensor) else x for x in inputs]
    try:
        assert tt.gradcheck(case.fn, inputs, **case.options)
    except tt.GradcheckError as e:
        raise AssertionError(f"{case.id} with inputs of shapes {shapes}: {e}") from None


# ---- max / min ties: the gradient is split evenly between the elements that attain it -----


def _grad_of(fn, values):
    x = tt.tensor(values, dtype=tt.float64, requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


def test_max_ties_split_evenly_over_all_elements():
    # max = 3 is attained twice: each copy gets 1/2.
    grad = _grad_of(lambda x: x.max(), [[1.0, 3.0], [3.0, 0.0]])
    np.testing.assert_array_equal(grad, [[0.0, 0.5], [0.5, 0.0]])


def test_max_ties_split_evenly_along_dim():
    # row 0: max 3 twice -> 1/2 each; row 1: all equal -> 1/3 each; row 2: one max -> 1.
    values = [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [5.0, 0.0, 1.0]]
    grad = _grad_of(lambda x: x.max(dim=1).values, values)
    third = 1.0 / 3.0
    np.testing.assert_allclose(grad, [[0, 0.5, 0.5], [third, third, third], [1, 0, 0]])


def test_min_ties_split_evenly_along_dim_keepdim():
    values = [[1.0, 0.0], [0.0, 4.0], [0.0, 1.0]]  # column 0: min 0 once; column 1: min 0 once
    grad = _grad_of(lambda x: x.min(dim=0, keepdim=True).values * tt.tensor([[2.0, 3.0]]), values)
    np.testing.assert_array_equal(grad, [[0, 3], [1, 0], [1, 0]])


def test_amax_over_two_dims_splits_ties():
    values = np.zeros((2, 2, 2))
    values[0, 1, 0] = values[1, 0, 0] = 7.0  # two maxima in the (0, 1) slab of column 0
    values[:, :, 1] = 5.0  # four equal maxima in column 1
    grad = _grad_of(lambda x: x.amax(dim=(0, 1)), values)
    expected = np.zeros((2, 2, 2))
    expected[0, 1, 0] = expected[1, 0, 0] = 0.5
    expected[:, :, 1] = 0.25
    np.testing.assert_array_equal(grad, expected)


def test_maximum_and_minimum_ties_split_evenly():
    x = tt.tensor([1.0, 2.0, 3.0], dtype=tt.float64, requires_grad=True)
    y = tt.tensor([1.0, 5.0, 0.0], dtype=tt.float64, requires_grad=True)
    (tt.maximum(x, y) + 10 * tt.minimum(x, y)).sum().backward()
    # element 0 ties: maximum gives 1/2 each, minimum 10/2 each
    np.testing.assert_array_equal(x.grad.numpy(), [5.5, 10.0, 1.0])
    np.testing.assert_array_equal(y.grad.numpy(), [5.5, 1.0, 10.0])


def test_relu_and_abs_have_zero_gradient_at_zero():
    x = tt.tensor([0.0, -1.0, 2.0], dtype=tt.float64, requires_grad=True)
    (x.relu() + x.abs()).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, -1.0, 2.0])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_relu_of_negatives_and_nan_is_what_pytorch_gives(torch, dtype):
    # (not -0.0: PyTorch keeps its sign, np.maximum gives +0.0, and which zero it returns for
    # equal operands differs between NumPy's dtypes; we leave that one sign alone)
    values = [-3.0, 0.0, 2.0, float("nan"), float("inf"), float("-inf")]
    ours = tt.relu(tt.tensor(values, dtype=getattr(tt, dtype))).numpy()
    theirs = torch.relu(torch.tensor(values, dtype=getattr(torch, dtype))).numpy()
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))  # -3 gives +0.0


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_relu_of_integers_keeps_their_dtype_as_pytorch(torch, dtype):
    values = [-3, 0, 7, 2] if dtype != "uint8" else [0, 7, 255]
    ours = tt.relu(tt.tensor(values, dtype=getattr(tt, dtype))).numpy()
    theirs = torch.relu(torch.tensor(values, dtype=getattr(torch, dtype))).numpy()
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_clamp_gradient_passes_at_the_bounds():
    # PyTorch's convention: the bound itself counts as inside (gradient 1).
    x = tt.tensor([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=tt.float64, requires_grad=True)
    x.clamp(-1.0, 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 1, 1, 1, 0])


# ---- dropout: a fixed mask through a seeded generator --------------------------------------


def test_dropout_gradient_is_mask_over_keep_probability():
    p = 0.25
    x = tt.tensor(np.linspace(1.0, 2.0, 200).reshape(10, 20), dtype=tt.float64, requires_grad=True)
    y = F.dropout(x, p, generator=tt.Generator(7))
    kept = y.numpy() != 0  # x has no zeros, so a zero output means a dropped element
    np.testing.assert_allclose(y.numpy(), np.where(kept, x.numpy() / (1 - p), 0.0))
    y.backward(tt.ones_like(y))
    np.testing.assert_allclose(x.grad.numpy(), kept / (1 - p))
    # the same seed draws the same mask; the fraction kept is near 1 - p
    again = F.dropout(x, p, generator=tt.Generator(7)).numpy() != 0
    np.testing.assert_array_equal(kept, again)
    assert 0.6 < kept.mean() < 0.9


def test_dropout_off_in_eval_and_for_p_zero_and_all_dropped_for_p_one():
    x = tt.randn(3, 4, requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    y = F.dropout(x, 1.0)
    assert not np.isnan(y.numpy()).any() and (y.numpy() == 0).all()


# ---- attention: a query that may attend to nothing ---------------------------------------


def test_fully_masked_attention_row_gives_zeros_and_finite_gradients():
    rng = np.random.default_rng(0)
    q = tt.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    k = tt.tensor(rng.standard_normal((2, 5, 4)), requires_grad=True)
    v = tt.tensor(rng.standard_normal((2, 5, 4)), requires_grad=True)
    allowed = np.ones((3, 5), dtype=bool)
    allowed[0] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(allowed))
    assert not np.isnan(out.numpy()).any()
    np.testing.assert_array_equal(out.numpy()[:, 0], 0.0)
    out.sum().backward()
    for t in (q, k, v):
        assert np.isfinite(t.grad.numpy()).all()
    np.testing.assert_array_equal(q.grad.numpy()[:, 0], 0.0)  # the masked query gets nothing
    # a -inf float mask on a whole row behaves the same
    bias = np.where(allowed, 0.0, -np.inf)
    out2 = F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(bias))
    np.testing.assert_allclose(out2.numpy(), out.numpy())


def test_causal_attention_with_fewer_queries_is_aligned_bottom_right():
    # Hand-derived: with Nq = 2, Nk = 4, query 0 sees keys 0..2 and query 1 sees keys 0..3.
    # With all scores equal (q = 0) each output is the mean of the values it sees.
    q = tt.zeros(2, 3, dtype=tt.float64)
    k = tt.tensor(np.arange(12.0).reshape(4, 3))
    v = tt.tensor(np.array([[1.0], [2.0], [3.0], [10.0]]))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(out.numpy(), [[2.0], [4.0]])
