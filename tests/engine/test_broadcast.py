"""Every binary op on a shared matrix of broadcast shape pairs, against PyTorch (float64, values
and gradients) and central differences; then random broadcastable shapes with hypothesis.

The engine undoes broadcasting in one place (`autograd.sum_to`), so these tests are what guard it:
each input's gradient must come back summed to exactly that input's shape.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinytensor as tt

from .reference import check_op

SHAPE_PAIRS = [
    ((), ()),
    ((), (3, 4)),
    ((4,), ()),
    ((4,), (3, 4)),
    ((3, 4), (4,)),
    ((3, 4), (1, 4)),
    ((3, 1), (3, 4)),
    ((3, 1), (1, 4)),
    ((1, 4), (3, 1)),
    ((2, 1, 4), (3, 1)),
    ((2, 1, 4), (2, 3, 4)),
    ((2, 3, 4), (3, 4)),
    ((1,), (2, 3, 4)),
    ((2, 3, 1), (1, 1, 4)),
]


def _values(rng, shape, positive=False):
    if positive:
        return rng.uniform(0.5, 2.0, size=shape)
    return rng.uniform(-2.0, 2.0, size=shape)


# name -> (the op on (a, b), whether a must be positive, whether b must be positive)
BINARY_OPS = {
    "add": (lambda m, a, b: a + b, False, False),
    "sub": (lambda m, a, b: a - b, False, False),
    "mul": (lambda m, a, b: a * b, False, False),
    "div": (lambda m, a, b: a / b, False, True),
    "pow": (lambda m, a, b: a**b, True, False),
    "maximum": (lambda m, a, b: m.maximum(a, b), False, False),
    "minimum": (lambda m, a, b: m.minimum(a, b), False, False),
    "where": (lambda m, a, b: m.where(a > 0, a, b), False, False),
}


def _inputs(name, shapes, seed=0):
    _, a_positive, b_positive = BINARY_OPS[name]
    rng = np.random.default_rng(seed)
    return [_values(rng, shapes[0], a_positive), _values(rng, shapes[1], b_positive)]


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("name", list(BINARY_OPS))
def test_binary_op_broadcasts_like_torch(torch, name, shapes):
    fn = BINARY_OPS[name][0]
    outs = check_op(torch, _inputs(name, shapes), lambda m, F, a, b: fn(m, a, b), label=name)
    assert outs[0].shape == np.broadcast_shapes(*shapes)


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("name", list(BINARY_OPS))
def test_binary_op_broadcast_gradcheck(name, shapes):
    fn = BINARY_OPS[name][0]
    a, b = (tt.tensor(v, requires_grad=True) for v in _inputs(name, shapes, seed=1))
    assert tt.gradcheck(lambda a, b: fn(tt, a, b), (a, b), names=(f"{name} a", f"{name} b"))


MATMUL_PAIRS = [
    ((3, 4), (4, 2)),
    ((2, 3, 4), (4, 2)),
    ((3, 4), (2, 4, 2)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (2, 4, 2)),
    ((2, 1, 3, 4), (1, 2, 4, 2)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
]


@pytest.mark.parametrize("shapes", MATMUL_PAIRS, ids=str)
def test_matmul_batch_dims_broadcast_like_torch(torch, shapes):
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(s) for s in shapes]
    check_op(torch, inputs, lambda m, F, a, b: a @ b, label=f"matmul {shapes}")
    a, b = (tt.tensor(v, requires_grad=True) for v in inputs)
    assert tt.gradcheck(lambda a, b: a @ b, (a, b))


@pytest.mark.parametrize("shapes", [((3, 4), (2, 3, 4)), ((1, 4), (3, 1)), ((), (2, 3))], ids=str)
def test_masked_fill_and_where_condition_broadcast(torch, shapes):
    rng = np.random.default_rng(3)
    x, cond = rng.standard_normal(shapes[0]), rng.random(shapes[1]) < 0.5
    check_op(torch, [x, cond], lambda m, F, x, c: x.masked_fill(c, 7.0))
    check_op(torch, [x, cond], lambda m, F, x, c: m.where(c, x, -x))


# ---- random broadcastable shapes ---------------------------------------------------------

RANDOM_OPS = ["add", "sub", "mul", "div", "maximum"]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3))
def test_random_broadcast_shapes_match_torch(torch, shapes):
    for name in RANDOM_OPS:
        fn = BINARY_OPS[name][0]
        inputs = _inputs(name, shapes.input_shapes, seed=4)
        outs = check_op(
            torch, inputs, lambda m, F, a, b, fn=fn: fn(m, a, b), label=f"{name} {shapes}"
        )
        assert outs[0].shape == shapes.result_shape


@settings(max_examples=25, deadline=None)
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3))
def test_sum_to_undoes_broadcasting(shapes):
    from tinytensor.autograd import sum_to

    rng = np.random.default_rng(5)
    for shape in shapes.input_shapes:
        g = rng.standard_normal(shapes.result_shape)
        # the gradient of a broadcast is the sum over the broadcast positions: <g, bcast(x)>
        # must equal <sum_to(g), x> for every x of the input's shape
        x = rng.standard_normal(shape)
        reduced = sum_to(g, shape)
        assert reduced.shape == tuple(shape)
        np.testing.assert_allclose(
            (reduced * x).sum(), (g * np.broadcast_to(x, shapes.result_shape)).sum()
        )
