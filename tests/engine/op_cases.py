"""Sample cases for every differentiable op in `tinytensor.function.REGISTRY`.

Each `OpCase` names the registered `Function` it exercises, builds its inputs (float64 tensors that
require grad, plus integer/bool arguments) from a seeded generator, and says how to call the op
through the public, PyTorch-named API. `test_gradcheck.py` runs every case through `tt.gradcheck`
and fails if a registered differentiable op has no case, so a new op is covered by construction.

Inputs of ops with kinks (abs, relu, clamp, max, maximum) are drawn away from the kink, where
central differences are valid; the behaviour *at* the kinks is tested by hand in test_gradcheck.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tinytensor.nn.functional as F

import tinytensor as tt
from tinytensor.ops import merge_heads, split_heads, to_device
from tinytensor.ops.elementwise import Cast


@dataclass
class OpCase:
    """One way of calling one registered op.

    op: the `Function` class name in the registry that this case exercises.
    label: what is special about the case (shows in the test id).
    make: rng -> the list of arguments (float tensors that require grad are gradchecked).
    fn: the arguments -> a Tensor (or a tuple of Tensors).
    options: extra keyword arguments for `tt.gradcheck` (tolerances, eps).
    """

    op: str
    label: str
    make: Callable
    fn: Callable
    options: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.label}"


def _set(x, index, value):
    """x[index] = value on a copy (the recorded in-place op behind Tensor.__setitem__)."""
    y = x * 1.0
    y[index] = value
    return y


def leaf(rng, *shape, low=-2.0, high=2.0, grad=True):
    """A float64 leaf of uniform values in [low, high)."""
    return tt.tensor(rng.uniform(low, high, size=shape), dtype=tt.float64, requires_grad=grad)


def away_from_zero(rng, *shape, margin=0.2, high=2.0):
    """Values in ±[margin, high): no element sits at a kink at 0."""
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    values = sign * rng.uniform(margin, high, size=shape)
    return tt.tensor(values, dtype=tt.float64, requires_grad=True)


def distinct(rng, *shape, spacing=0.1):
    """A random permutation of well-separated values: no ties, so max/min are differentiable."""
    n = int(np.prod(shape))
    values = (rng.permutation(n) - n / 2) * spacing
    return tt.tensor(values.reshape(shape), dtype=tt.float64, requires_grad=True)


def ids(rng, high, *shape):
    return tt.tensor(rng.integers(0, high, size=shape), dtype=tt.int64)


def mask(rng, *shape, p=0.5):
    return tt.tensor(rng.random(shape) < p)


def _case(op, label, make, fn, **options):
    return OpCase(op, label, make, fn, options)


CASES: list[OpCase] = []


def add(*cases):
    CASES.extend(cases)


# ---- elementwise arithmetic --------------------------------------------------------------

add(
    _case("Add", "same", lambda r: [leaf(r, 3, 4), leaf(r, 3, 4)], lambda x, y: x + y),
    _case("Add", "bcast", lambda r: [leaf(r, 3, 1), leaf(r, 1, 4)], lambda x, y: x + y),
    _case("Add", "scalar", lambda r: [leaf(r, 2, 3)], lambda x: 2.5 + x),
    _case("Sub", "bcast", lambda r: [leaf(r, 2, 3, 4), leaf(r, 4)], lambda x, y: x - y),
    _case("Sub", "rsub", lambda r: [leaf(r, 3)], lambda x: 1.0 - x),
    _case("Mul", "bcast", lambda r: [leaf(r, 3, 4), leaf(r, 4)], lambda x, y: x * y),
    _case("Mul", "self", lambda r: [leaf(r, 2, 3)], lambda x: x * x),
    _case(
        "Div",
        "bcast",
        lambda r: [leaf(r, 3, 4), leaf(r, 3, 1, low=0.5, high=2.0)],
        lambda x, y: x / y,
    ),
    _case("Div", "rdiv", lambda r: [leaf(r, 4, low=0.5, high=2.0)], lambda x: 2.0 / x),
    _case("Neg", "plain", lambda r: [leaf(r, 2, 3)], lambda x: -x),
    _case(
        "Pow",
        "tensor-exponent",
        lambda r: [leaf(r, 3, 4, low=0.5, high=2.0), leaf(r, 3, 4)],
        lambda x, y: x**y,
    ),
    _case(
        "Pow",
        "bcast",
        lambda r: [leaf(r, 3, 1, low=0.5, high=2.0), leaf(r, 4)],
        lambda x, y: tt.pow(x, y),
    ),
    _case("Pow", "rpow", lambda r: [leaf(r, 5)], lambda y: 2.0**y),
    _case("PowScalar", "square", lambda r: [leaf(r, 3, 4)], lambda x: x**2),
    _case("PowScalar", "cube", lambda r: [leaf(r, 3, 4)], lambda x: x**3),
    _case("PowScalar", "sqrt", lambda r: [leaf(r, 5, low=0.5)], lambda x: x**0.5),
    _case("PowScalar", "negative", lambda r: [leaf(r, 5, low=0.5)], lambda x: x.pow(-1.5)),
)

# ---- unary math and activations ----------------------------------------------------------

add(
    _case("Exp", "plain", lambda r: [leaf(r, 3, 4)], tt.exp),
    _case("Log", "positive", lambda r: [leaf(r, 3, 4, low=0.2)], tt.log),
    _case("Log1p", "above--1", lambda r: [leaf(r, 3, 4, low=-0.8)], tt.log1p),
    _case("Expm1", "plain", lambda r: [leaf(r, 3, 4)], tt.expm1),
    _case("Erf", "plain", lambda r: [leaf(r, 3, 4)], tt.erf),
    _case("CumSum", "dim1", lambda r: [leaf(r, 3, 4)], lambda x: tt.cumsum(x, dim=1)),
    _case(
        "Einsum",
        "batched-matmul",
        lambda r: [leaf(r, 2, 3, 4), leaf(r, 2, 4, 2)],
        lambda a, b: tt.einsum("bij,bjk->bik", a, b),
    ),
    _case(
        "Einsum",
        "ellipsis-and-index-only-in-one",
        lambda r: [leaf(r, 2, 3, 4), leaf(r, 5, 4)],
        lambda a, b: tt.einsum("...ij,kj->...k", a, b),
    ),
    _case("CumSum", "dim-neg3d", lambda r: [leaf(r, 2, 3, 2)], lambda x: x.cumsum(-2)),
    _case("Sqrt", "positive", lambda r: [leaf(r, 3, 4, low=0.2)], tt.sqrt),
    _case("Rsqrt", "positive", lambda r: [leaf(r, 3, 4, low=0.2)], tt.rsqrt),
    _case("Abs", "away-from-0", lambda r: [away_from_zero(r, 3, 4)], tt.abs),
    _case("Sin", "plain", lambda r: [leaf(r, 3, 4)], tt.sin),
    _case("Cos", "plain", lambda r: [leaf(r, 3, 4)], tt.cos),
    _case("Tanh", "plain", lambda r: [leaf(r, 3, 4)], tt.tanh),
    _case("Sigmoid", "plain", lambda r: [leaf(r, 3, 4, low=-4, high=4)], tt.sigmoid),
    _case("Sigmoid", "tails", lambda r: [leaf(r, 6, low=-40, high=40)], lambda x: x.sigmoid()),
    _case("Relu", "away-from-0", lambda r: [away_from_zero(r, 3, 4)], F.relu),
    _case("Gelu", "exact", lambda r: [leaf(r, 3, 4, low=-3, high=3)], F.gelu),
    _case(
        "Gelu",
        "tanh",
        lambda r: [leaf(r, 3, 4, low=-3, high=3)],
        lambda x: F.gelu(x, approximate="tanh"),
    ),
    _case("Silu", "plain", lambda r: [leaf(r, 3, 4, low=-4, high=4)], F.silu),
)

# ---- two-way selection -------------------------------------------------------------------


def _apart(r, *shape):
    """Two tensors whose elements differ by at least 0.2 everywhere (no ties)."""
    x = leaf(r, *shape)
    gap = away_from_zero(r, *shape)
    y = tt.tensor(x._array + gap._array, requires_grad=True)
    return [x, y]


add(
    _case("Maximum", "no-ties", lambda r: _apart(r, 3, 4), tt.maximum),
    _case(
        "Maximum",
        "bcast",
        lambda r: [distinct(r, 3, 1), distinct(r, 4, spacing=0.13) + 0.02],
        tt.maximum,
    ),
    _case("Minimum", "no-ties", lambda r: _apart(r, 3, 4), tt.minimum),
    _case(
        "Minimum",
        "bcast",
        lambda r: [distinct(r, 2, 3, 1), distinct(r, 4, spacing=0.13) + 0.02],
        lambda x, y: x.minimum(y),
    ),
    _case(
        "Clamp", "both", lambda r: [away_from_zero(r, 4, 5)], lambda x: x.clamp(min=-1.1, max=1.1)
    ),
    _case("Clamp", "min-only", lambda r: [away_from_zero(r, 4, 5)], lambda x: tt.clamp(x, min=0.0)),
    _case(
        "Clamp", "max-only", lambda r: [away_from_zero(r, 4, 5)], lambda x: tt.clamp(x, max=-0.05)
    ),
    _case(
        "Where",
        "bcast",
        lambda r: [mask(r, 3, 4), leaf(r, 3, 4), leaf(r, 4)],
        lambda c, x, y: tt.where(c, x, y),
    ),
    _case(
        "Where",
        "scalar-other",
        lambda r: [mask(r, 2, 1, 4), leaf(r, 3, 4)],
        lambda c, x: tt.where(c, x, 0.0),
    ),
    _case(
        "MaskedFill",
        "bcast-mask",
        lambda r: [leaf(r, 3, 4), mask(r, 1, 4)],
        lambda x, m: x.masked_fill(m, -5.0),
    ),
)

# ---- dtype, device, copies ---------------------------------------------------------------

add(
    _case("Cast", "float64", lambda r: [leaf(r, 3, 4)], lambda x: Cast.apply(x, dtype=tt.float64)),
    # NOTE: a float32 round trip rounds to ~1e-7; a large step keeps that rounding far below
    # the tolerance (the function is linear, so the step itself adds no error).
    _case(
        "Cast",
        "to-float32",
        lambda r: [leaf(r, 3, 4)],
        lambda x: x.to(tt.float32) * 3.0,
        eps=1e-2,
        atol=1e-4,
    ),
    _case("ToDevice", "cpu", lambda r: [leaf(r, 3, 4)], lambda x: to_device(x, tt.device("cpu"))),
    _case("Clone", "plain", lambda r: [leaf(r, 3, 4)], lambda x: x.clone() * x),
)

# ---- reductions --------------------------------------------------------------------------

add(
    _case("Sum", "all", lambda r: [leaf(r, 3, 4)], lambda x: x.sum()),
    _case("Sum", "dim", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.sum(1)),
    _case("Sum", "dims-keepdim", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.sum((0, -1), True)),
    _case("Sum", "tt.sum", lambda r: [leaf(r, 2, 3)], lambda x: tt.sum(x, dim=-1, keepdim=True)),
    _case("Mean", "all", lambda r: [leaf(r, 3, 4)], lambda x: x.mean()),
    _case("Mean", "dims", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.mean(dim=(0, 2))),
    _case("Mean", "keepdim", lambda r: [leaf(r, 2, 3)], lambda x: tt.mean(x, 1, keepdim=True)),
    _case("Var", "correction1", lambda r: [leaf(r, 3, 5)], lambda x: x.var(dim=1)),
    _case("Var", "correction0", lambda r: [leaf(r, 3, 5)], lambda x: x.var(dim=0, correction=0)),
    _case("Var", "unbiased-false", lambda r: [leaf(r, 4, 3)], lambda x: x.var(unbiased=False)),
    _case("Var", "keepdim", lambda r: [leaf(r, 2, 3, 4)], lambda x: tt.var(x, (1, 2), True)),
    _case("Std", "dim", lambda r: [leaf(r, 3, 5)], lambda x: x.std(dim=-1)),
    _case("Std", "all-correction0", lambda r: [leaf(r, 3, 5)], lambda x: x.std(correction=0)),
    _case("Std", "keepdim", lambda r: [leaf(r, 2, 3, 4)], lambda x: tt.std(x, (0, 2), True)),
    _case("Max", "all", lambda r: [distinct(r, 3, 4)], lambda x: x.max()),
    _case("Max", "dim", lambda r: [distinct(r, 3, 4)], lambda x: x.max(dim=1).values),
    _case("Max", "keepdim", lambda r: [distinct(r, 2, 3, 4)], lambda x: x.max(0, keepdim=True)[0]),
    _case("Max", "amax", lambda r: [distinct(r, 2, 3, 4)], lambda x: x.amax(dim=(0, 2))),
    _case("Min", "all", lambda r: [distinct(r, 3, 4)], lambda x: tt.min(x)),
    _case("Min", "dim", lambda r: [distinct(r, 3, 4)], lambda x: x.min(dim=-1).values),
    _case("Min", "amin", lambda r: [distinct(r, 2, 3, 4)], lambda x: tt.amin(x, dim=1)),
    _case("LogSumExp", "dim", lambda r: [leaf(r, 3, 4)], lambda x: x.logsumexp(1)),
    _case(
        "LogSumExp",
        "large-keepdim",
        lambda r: [leaf(r, 3, 4, low=500, high=510)],
        lambda x: tt.logsumexp(x, (0, 1), keepdim=True),
    ),
)

# ---- movement ----------------------------------------------------------------------------

add(
    _case("Reshape", "reshape", lambda r: [leaf(r, 3, 4)], lambda x: x.reshape(2, -1, 2) * x[0, 0]),
    _case("Reshape", "view-tuple", lambda r: [leaf(r, 2, 6)], lambda x: x.view((4, 3))),
    _case("Reshape", "squeeze", lambda r: [leaf(r, 3, 1, 4)], lambda x: x.squeeze(1)),
    _case("Reshape", "unsqueeze", lambda r: [leaf(r, 3, 4)], lambda x: x.unsqueeze(-1)),
    _case("Reshape", "flatten", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.flatten(1)),
    _case("Permute", "permute", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.permute(2, 0, 1)),
    _case("Permute", "transpose", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.transpose(0, -1)),
    _case("Permute", "T", lambda r: [leaf(r, 3, 4)], lambda x: x.T),
    _case("Permute", "T-3d", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.T),
    _case("Permute", "mT", lambda r: [leaf(r, 2, 3, 4)], lambda x: x.mT),
    _case(
        "SplitHeads",
        "split",
        lambda r: [leaf(r, 2, 3, 6)],
        lambda x: split_heads(x, 3) * x[0, 0, 0],
    ),
    _case(
        "SplitHeads",
        "non-contiguous",
        lambda r: [leaf(r, 2, 6, 3)],
        lambda x: split_heads(x.transpose(1, 2), 2),
    ),
    _case(
        "MergeHeads",
        "merge",
        lambda r: [leaf(r, 2, 3, 4, 2)],
        lambda x: merge_heads(x) * x[0, 0, 0, 0],
    ),
    _case("MergeHeads", "one-step", lambda r: [leaf(r, 2, 3, 1, 2)], lambda x: merge_heads(x)),
    _case("Expand", "expand", lambda r: [leaf(r, 3, 1)], lambda x: x.expand(2, 3, 4)),
    _case("Expand", "minus-one", lambda r: [leaf(r, 1, 4)], lambda x: x.expand(3, -1)),
    _case(
        "Expand",
        "repeat_interleave",
        lambda r: [leaf(r, 2, 3)],
        lambda x: x.repeat_interleave(2, 0),
    ),
)

add(
    _case("GetItem", "int", lambda r: [leaf(r, 3, 4)], lambda x: x[1]),
    _case("SetItem", "slice", lambda r: [leaf(r, 3, 4), leaf(r, 4)], lambda x, v: _set(x, 1, v)),
    _case(
        "SetItem", "broadcast", lambda r: [leaf(r, 3, 4), leaf(r, 1)], lambda x, v: _set(x, 0, v)
    ),
    _case(
        "SetItem",
        "int-array",
        lambda r: [leaf(r, 5, 2), leaf(r, 2, 2)],
        lambda x, v: _set(x, tt.tensor([0, 3]), v),
    ),
    _case("GetItem", "neg-int", lambda r: [leaf(r, 3, 4)], lambda x: x[-1, 2]),
    _case("GetItem", "slices", lambda r: [leaf(r, 4, 5)], lambda x: x[1:, ::2]),
    _case("GetItem", "neg-step", lambda r: [leaf(r, 5)], lambda x: x[::-2]),
    _case("GetItem", "none", lambda r: [leaf(r, 3, 4)], lambda x: x[:, None, 1:3]),
    _case("GetItem", "ellipsis", lambda r: [leaf(r, 2, 3, 4)], lambda x: x[..., 1]),
    _case("GetItem", "ellipsis-none", lambda r: [leaf(r, 2, 3)], lambda x: x[None, ..., None]),
    _case(
        "GetItem",
        "int-array-duplicates",
        lambda r: [leaf(r, 4, 3)],
        lambda x: x[tt.tensor([0, 2, 2, 0, 3])],
    ),
    _case("GetItem", "list-duplicates", lambda r: [leaf(r, 4, 3)], lambda x: x[:, [1, 1, 0]]),
    _case(
        "GetItem",
        "two-arrays",
        lambda r: [leaf(r, 4, 3)],
        lambda x: x[tt.tensor([0, 1, 1]), tt.tensor([2, 2, 2])],
    ),
    _case("GetItem", "bool-mask", lambda r: [leaf(r, 3, 4), mask(r, 3, 4)], lambda x, m: x[m]),
    _case(
        "GetItem",
        "bool-rows",
        lambda r: [leaf(r, 4, 3)],
        lambda x: x[tt.tensor([True, False, True, True])],
    ),
    _case("GetItem", "split", lambda r: [leaf(r, 5, 2)], lambda x: x.split(2)),
    _case("GetItem", "split-sizes", lambda r: [leaf(r, 2, 6)], lambda x: tt.split(x, [1, 3, 2], 1)),
    _case("GetItem", "chunk", lambda r: [leaf(r, 7, 2)], lambda x: x.chunk(3)),
    _case("GetItem", "chunk-dim", lambda r: [leaf(r, 2, 4)], lambda x: tt.chunk(x, 2, dim=-1)),
    _case(
        "Gather",
        "dim1-duplicates",
        lambda r: [leaf(r, 3, 4), ids(r, 4, 3, 5)],
        lambda x, i: x.gather(1, i),
    ),
    _case(
        "Gather",
        "dim0",
        lambda r: [leaf(r, 3, 4), ids(r, 3, 2, 4)],
        lambda x, i: tt.gather(x, 0, i),
    ),
    _case(
        "Cat",
        "dim0",
        lambda r: [leaf(r, 2, 3), leaf(r, 1, 3), leaf(r, 3, 3)],
        lambda a, b, c: tt.cat([a, b, c]),
    ),
    _case(
        "Cat", "dim-neg", lambda r: [leaf(r, 2, 3), leaf(r, 2, 1)], lambda a, b: tt.cat((a, b), -1)
    ),
    _case("Cat", "same-twice", lambda r: [leaf(r, 2, 2)], lambda a: tt.cat([a, a * 2], 1)),
    _case("Stack", "dim0", lambda r: [leaf(r, 2, 3), leaf(r, 2, 3)], lambda a, b: tt.stack([a, b])),
    _case(
        "Stack",
        "dim-last",
        lambda r: [leaf(r, 2, 3), leaf(r, 2, 3), leaf(r, 2, 3)],
        lambda a, b, c: tt.stack([a, b, c], dim=-1),
    ),
    _case("Triangle", "tril", lambda r: [leaf(r, 4, 4)], lambda x: x.tril()),
    _case("Triangle", "triu-nonsquare", lambda r: [leaf(r, 3, 5)], lambda x: x.triu(1)),
    _case("Triangle", "tril-batched", lambda r: [leaf(r, 2, 4, 3)], lambda x: tt.tril(x, -1)),
    _case("Triangle", "triu-neg", lambda r: [leaf(r, 4, 2)], lambda x: tt.triu(x, diagonal=-1)),
)

# ---- linear algebra ----------------------------------------------------------------------

add(
    _case("MatMul", "2d", lambda r: [leaf(r, 3, 4), leaf(r, 4, 2)], lambda a, b: a @ b),
    _case("MatMul", "vec-mat", lambda r: [leaf(r, 4), leaf(r, 4, 2)], lambda a, b: a @ b),
    _case("MatMul", "mat-vec", lambda r: [leaf(r, 3, 4), leaf(r, 4)], lambda a, b: tt.matmul(a, b)),
    _case("MatMul", "vec-vec", lambda r: [leaf(r, 4), leaf(r, 4)], lambda a, b: a.matmul(b)),
    _case(
        "MatMul",
        "batch-bcast",
        lambda r: [leaf(r, 2, 1, 3, 4), leaf(r, 3, 4, 2)],
        lambda a, b: a @ b,
    ),
    _case("MatMul", "batch-vec", lambda r: [leaf(r, 4), leaf(r, 2, 4, 3)], lambda a, b: a @ b),
    _case(
        "Linear",
        "bias",
        lambda r: [leaf(r, 2, 3, 4), leaf(r, 5, 4), leaf(r, 5)],
        lambda x, w, b: F.linear(x, w, b),
    ),
    _case("Linear", "no-bias", lambda r: [leaf(r, 3, 4), leaf(r, 2, 4)], F.linear),
)

# ---- fused nn ops ------------------------------------------------------------------------

add(
    _case("Softmax", "last", lambda r: [leaf(r, 3, 4)], lambda x: x.softmax(-1)),
    _case("Softmax", "dim0", lambda r: [leaf(r, 3, 4, 2)], lambda x: F.softmax(x, dim=0)),
    _case("LogSoftmax", "last", lambda r: [leaf(r, 3, 4)], lambda x: x.log_softmax(-1)),
    _case("LogSoftmax", "dim1", lambda r: [leaf(r, 2, 3, 4)], lambda x: F.log_softmax(x, 1)),
    _case(
        "LogSoftmax",
        "large",
        lambda r: [leaf(r, 2, 4, low=900, high=910)],
        lambda x: F.log_softmax(x, -1),
    ),
)


def _ce(**kw):
    return lambda z, t: F.cross_entropy(z, t, **kw)


add(
    _case("CrossEntropy", "ids-mean", lambda r: [leaf(r, 4, 5), ids(r, 5, 4)], _ce()),
    _case("CrossEntropy", "ids-sum", lambda r: [leaf(r, 4, 5), ids(r, 5, 4)], _ce(reduction="sum")),
    _case(
        "CrossEntropy", "ids-none", lambda r: [leaf(r, 4, 5), ids(r, 5, 4)], _ce(reduction="none")
    ),
    _case(
        "CrossEntropy",
        "ignore-index",
        lambda r: [leaf(r, 5, 3), tt.tensor([0, -100, 2, -100, 1])],
        _ce(),
    ),
    _case(
        "CrossEntropy",
        "ignore-custom-none",
        lambda r: [leaf(r, 4, 3), tt.tensor([0, 2, 1, 2])],
        _ce(ignore_index=2, reduction="none"),
    ),
    _case(
        "CrossEntropy",
        "smoothing",
        lambda r: [leaf(r, 4, 5), ids(r, 5, 4)],
        _ce(label_smoothing=0.2),
    ),
    _case(
        "CrossEntropy",
        "smoothing-ignore-sum",
        lambda r: [leaf(r, 4, 5), tt.tensor([1, -100, 4, 0])],
        _ce(label_smoothing=0.1, reduction="sum"),
    ),
    _case(
        "CrossEntropy",
        "probabilities",
        lambda r: [leaf(r, 3, 4), leaf(r, 3, 4).softmax(-1).detach().requires_grad_()],
        _ce(),
    ),
    _case(
        "CrossEntropy",
        "probabilities-smoothing-none",
        lambda r: [leaf(r, 3, 4), leaf(r, 3, 4).softmax(-1).detach().requires_grad_()],
        _ce(label_smoothing=0.3, reduction="none"),
    ),
    _case("CrossEntropy", "spatial", lambda r: [leaf(r, 2, 3, 4), ids(r, 3, 2, 4)], _ce()),
    _case("CrossEntropy", "unbatched", lambda r: [leaf(r, 5), tt.tensor(3)], _ce()),
)

add(
    _case(
        "LayerNorm",
        "affine",
        lambda r: [leaf(r, 3, 5), leaf(r, 5), leaf(r, 5)],
        lambda x, w, b: F.layer_norm(x, (5,), w, b),
    ),
    _case(
        "LayerNorm",
        "no-affine",
        lambda r: [leaf(r, 2, 3, 4)],
        lambda x: F.layer_norm(x, 4),
    ),
    _case(
        "LayerNorm",
        "two-dims-weight-only",
        lambda r: [leaf(r, 2, 3, 4), leaf(r, 3, 4)],
        lambda x, w: F.layer_norm(x, (3, 4), w),
    ),
    _case(
        "RMSNorm",
        "weight",
        lambda r: [leaf(r, 3, 5), leaf(r, 5)],
        lambda x, w: F.rms_norm(x, (5,), w),
    ),
    _case("RMSNorm", "no-weight", lambda r: [leaf(r, 2, 3, 4)], lambda x: F.rms_norm(x, 4)),
    _case(
        "Embedding",
        "repeated-ids",
        lambda r: [tt.tensor([[0, 2, 2], [3, 0, 2]]), leaf(r, 5, 3)],
        F.embedding,
    ),
    # (padding_idx deliberately gives its row no gradient, unlike central differences: it is
    # compared with PyTorch in test_vs_torch.py instead)
    # NOTE: a fresh generator with a fixed seed per call, so every evaluation that gradcheck
    # makes uses the same mask.
    _case(
        "Dropout",
        "fixed-mask",
        lambda r: [leaf(r, 4, 5)],
        lambda x: F.dropout(x, 0.4, generator=tt.Generator(3)),
    ),
)


# ---- attention ---------------------------------------------------------------------------


def _qkv(r, batch=(2, 2), nq=3, nk=4, d=3, hkv=None, dv=None):
    kv_batch = batch if hkv is None else batch[:-1] + (hkv,)
    return [
        leaf(r, *batch, nq, d),
        leaf(r, *kv_batch, nk, d),
        leaf(r, *kv_batch, nk, dv or d),
    ]


sdpa = F.scaled_dot_product_attention


def _with_seed(seed, fn):
    """Calls fn after seeding the global generator (the attention dropout draws from it)."""

    def seeded(*args):
        tt.manual_seed(seed)
        return fn(*args)

    return seeded


def _fully_masked_row():
    m = np.ones((3, 4), dtype=bool)
    m[1] = False  # query 1 may attend to nothing
    return tt.tensor(m)


add(
    _case("ScaledDotProductAttention", "plain-nonsquare", lambda r: _qkv(r, dv=2), sdpa),
    _case(
        "ScaledDotProductAttention",
        "bias-grad-bcast",
        lambda r: _qkv(r) + [leaf(r, 1, 2, 3, 4)],
        lambda q, k, v, b: sdpa(q, k, v, attn_mask=b),
    ),
    _case(
        "ScaledDotProductAttention",
        "bool-mask",
        lambda r: _qkv(r) + [tt.tensor(np.tril(np.ones((3, 4), dtype=bool), 1))],
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
    ),
    _case(
        "ScaledDotProductAttention",
        "causal-bottom-right",
        lambda r: _qkv(r, nq=2, nk=5),
        lambda q, k, v: sdpa(q, k, v, is_causal=True),
    ),
    _case(
        "ScaledDotProductAttention",
        "causal-square-scale",
        lambda r: _qkv(r, nq=4, nk=4),
        lambda q, k, v: sdpa(q, k, v, is_causal=True, scale=1.0),
    ),
    _case(
        "ScaledDotProductAttention",
        "gqa",
        lambda r: _qkv(r, batch=(2, 4), hkv=2),
        lambda q, k, v: sdpa(q, k, v, enable_gqa=True),
    ),
    _case(
        "ScaledDotProductAttention",
        "fully-masked-row",
        lambda r: _qkv(r) + [_fully_masked_row()],
        lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
    ),
    _case(
        "ScaledDotProductAttention",
        "key-lengths",
        lambda r: _qkv(r),
        lambda q, k, v: sdpa(q, k, v, key_lengths=tt.tensor([2, 4])),
    ),
    _case(
        "ScaledDotProductAttention",
        "dropout-fixed-seed",
        lambda r: _qkv(r),
        _with_seed(5, lambda q, k, v: sdpa(q, k, v, dropout_p=0.3)),
    ),
    _case(
        "ScaledDotProductAttention",
        "unbatched-2d",
        lambda r: [leaf(r, 3, 2), leaf(r, 4, 2), leaf(r, 4, 3)],
        sdpa,
    ),
)


def _tiled(spec_options, block_q=2, block_k=3):
    """The tiled (FlashAttention-2) op with tiles of 2 queries x 3 keys, so tiles split rows."""
    from tinytensor.ops.attention_tiled import AttentionSpec, FlashAttention, NumpyTiles

    def run(q, k, v, *bias):
        spec = AttentionSpec(**spec_options)
        return FlashAttention.apply(q, k, v, *bias, spec=spec, runner=NumpyTiles(block_q, block_k))

    return run


add(
    _case(
        "FlashAttention",
        "tiled-causal-gqa-bias-bcast",
        lambda r: _qkv(r, batch=(2, 4), nq=3, nk=5, hkv=2) + [leaf(r, 1, 4, 3, 5)],
        _tiled({"scale": 0.7, "groups": 2, "causal": True}),
    ),
    _case(
        "FlashAttention",
        "tiled-key-lengths-fully-masked",
        lambda r: _qkv(r, nq=5, nk=4),
        _tiled({"scale": 0.5, "key_lengths": np.array([0, 3])}),
    ),
    _case(
        "FlashAttention",
        "tiled-bool-mask",
        lambda r: _qkv(r, nq=3, nk=4),
        _tiled({"scale": 0.5, "mask": np.tril(np.ones((1, 1, 3, 4), dtype=bool), 1)}),
    ),
)


# ---- ordering, writing at indices, diagonal (ops/sorting.py, scatter.py, diagonal.py) -------


def _perm_ids(rng, rows, n, k):
    """Distinct indices per row (scatter's written positions must not repeat)."""
    return tt.tensor(np.stack([rng.permutation(n)[:k] for _ in range(rows)]))


add(
    _case("Gather", "sort-values", lambda r: [distinct(r, 3, 5)], lambda x: x.sort(dim=1)[0]),
    _case("Gather", "topk", lambda r: [distinct(r, 4, 6)], lambda x: x.topk(3, dim=0).values),
    _case(
        "Scatter",
        "dim1",
        lambda r: [leaf(r, 3, 5), leaf(r, 3, 4), _perm_ids(r, 3, 5, 2)],
        lambda x, s, i: x.scatter(1, i, s),
    ),
    _case(
        "ScatterAdd",
        "dim0-duplicates",
        lambda r: [leaf(r, 3, 4), leaf(r, 5, 4), ids(r, 3, 5, 4)],
        lambda x, s, i: x.scatter_add(0, i, s),
    ),
    _case(
        "IndexAdd",
        "dim1-alpha",
        lambda r: [leaf(r, 3, 5), leaf(r, 3, 4)],
        lambda x, s: x.index_add(1, tt.tensor([4, 0, 4, 2]), s, alpha=2.5),
    ),
    _case(
        "IndexFill",
        "dim0",
        lambda r: [leaf(r, 4, 3)],
        lambda x: x.index_fill(0, tt.tensor([1, 3]), -1.0),
    ),
    _case("Diagonal", "main", lambda r: [leaf(r, 4, 4)], lambda x: x.diagonal()),
    _case(
        "Diagonal",
        "offset-batched",
        lambda r: [leaf(r, 2, 3, 5)],
        lambda x: x.diagonal(offset=1, dim1=1, dim2=2),
    ),
    _case("Diagonal", "negative-offset", lambda r: [leaf(r, 4, 3)], lambda x: x.diagonal(-1)),
    _case("Diagonal", "trace", lambda r: [leaf(r, 3, 3)], lambda x: x.trace()),
)


add(
    _case(
        "Softplus", "beta2", lambda r: [leaf(r, 3, 4)], lambda x: tt.nn.functional.softplus(x, 2.0)
    ),
    _case(
        "Softplus", "logsigmoid", lambda r: [leaf(r, 5)], lambda x: tt.nn.functional.logsigmoid(x)
    ),
    _case("VectorNorm", "p2-dim1", lambda r: [leaf(r, 3, 4)], lambda x: x.norm(dim=1)),
    _case(
        "VectorNorm", "p3-keepdim", lambda r: [leaf(r, 2, 5)], lambda x: x.norm(3, 1, keepdim=True)
    ),
    _case("VectorNorm", "all", lambda r: [leaf(r, 2, 3)], lambda x: tt.linalg.norm(x)),
)


def _vjp_of(fn):
    """(x, v) -> ∂(Σ fn(x)·v)/∂x computed with create_graph: a case whose graph is a backward."""

    def vjp(x, v):
        with tt.enable_grad():  # gradcheck's numerical passes run under no_grad
            (g,) = tt.autograd.grad(fn(x), x, v, create_graph=True)
        return g

    return vjp


# the nodes of a backward under create_graph (tinytensor/higher_order.py)
add(
    _case(
        "LinearVJP",
        "getitem-duplicates",
        lambda r: [leaf(r, 5, 3), leaf(r, 4, 3)],
        _vjp_of(lambda x: x[tt.tensor([0, 2, 2, 4])]),
    ),
    _case(
        "LinearVJP",
        "expand-sum",
        lambda r: [leaf(r, 3, 1), leaf(r, 3)],
        _vjp_of(lambda x: x.expand(3, 4).sum(1)),
    ),
    _case(
        "StandIn",
        "layer-norm",
        lambda r: [leaf(r, 3, 4), leaf(r, 3, 4)],
        _vjp_of(lambda x: F.layer_norm(x, (4,))),
    ),
    _case(
        "StandIn",
        "self-attention-q-is-k-is-v",
        lambda r: [leaf(r, 1, 2, 3, 4), leaf(r, 1, 2, 3, 4)],
        _vjp_of(lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True)),
    ),
)
add(
    _case(
        "Connect",
        "relu-mask-of-x",
        lambda r: [away_from_zero(r, 3, 4)],
        # the gradient of Σ relu(x) is relu's mask: constant in x, yet on the graph (as torch)
        lambda x: _vjp_of(tt.nn.functional.relu)(x, tt.ones(3, 4, dtype=tt.float64)) * x,
    ),
    _case(
        "Connect",
        "max-ties-share",
        lambda r: [leaf(r, 3, 5)],
        lambda x: _vjp_of(lambda y: y.amax(dim=1))(x, tt.ones(3, dtype=tt.float64)) * x,
    ),
)


class _Cube(tt.autograd.Function):
    """A user Function (tt.autograd.Function, torch's form) with one output."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


class _SinCos(tt.autograd.Function):
    """A user Function with two outputs, in torch 2's setup_context form."""

    @staticmethod
    def forward(x):
        return x.sin(), x.cos()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g_sin, g_cos):
        (x,) = ctx.saved_tensors
        return g_sin * x.cos() - g_cos * x.sin()


add(
    _case("CustomFunction", "cube", lambda r: [leaf(r, 3, 4)], _Cube.apply),
    _case(
        "CustomFunctionOutput",
        "sin-cos",
        lambda r: [leaf(r, 5)],
        lambda x: (lambda s, c: s * c + s)(*_SinCos.apply(x)),
    ),
)
