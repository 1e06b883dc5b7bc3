"""The exercises: for each, the Function(s) to look for, the shapes to try, and the engine op to
compare with.

Every case is small (the numerical gradient costs two forward passes per input element) and
drawn from a fixed seed, so a learner sees the same numbers on every run. Each exercise mixes
square shapes with non-square ones and, where the op broadcasts, broadcasting ones: a bug that
confuses two dims of the same size passes the square cases and fails the others, and the checker
says so.

Exercise 14's ops are backwards (gx as a function of x and gy): their reference is the engine's
first derivative recorded with create_graph=True, and central differences of their forward are
differences of a first derivative, the second derivatives `tt.autograd.gradgradcheck` checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import tinytensor as tt

from .mistakes.second_order import no_keepdims_error_hint


@dataclass
class Case:
    """One set of inputs for a Function: its float arrays (which get gradients) and the other
    arguments of `apply`, plus the named sizes a constant-factor mistake could come from."""

    arrays: dict[str, np.ndarray]
    params: dict = field(default_factory=dict)
    constants: dict[str, float] = field(default_factory=dict)
    square: bool | None = None  # None: worked out from the shapes

    def __post_init__(self):
        if self.square is None:
            sizes = {n for a in self.arrays.values() for n in a.shape if n > 1}
            self.square = len(sizes) <= 1

    def describe(self) -> str:
        parts = [f"{name} {tuple(a.shape)}" for name, a in self.arrays.items()]
        for key, value in self.params.items():
            if isinstance(value, np.ndarray):
                parts.append(f"{key} {value.tolist()}")
            else:
                parts.append(f"{key}={value!r}")
        return ", ".join(parts)

    def astype(self, dtype) -> Case:
        arrays = {name: a.astype(dtype) for name, a in self.arrays.items()}
        return Case(arrays, dict(self.params), dict(self.constants), self.square)


@dataclass(frozen=True)
class Part:
    """One Function the learner writes `backward` for."""

    function: str  # the class name in the learner's file
    reference_name: str  # the engine op it is compared with, for messages
    reference: Callable  # (tensors: list[Tensor], params: dict) -> Tensor, with engine ops
    cases: Callable  # (rng) -> list[Case]
    extra_hint: Callable | None = None  # (input name, yours, expected, case) -> str | None
    error_hint: Callable | None = None  # (exception, case) -> (cause, hint) | None


@dataclass(frozen=True)
class Exercise:
    number: int
    name: str
    title: str
    parts: tuple[Part, ...]
    reduce_by_hand: bool = False  # the learner's Function must not set `broadcasts = True`

    @property
    def stem(self) -> str:
        """The file name without extension: 08_softmax."""
        return f"{self.number:02d}_{self.name}"


# ---- inputs -------------------------------------------------------------------------------


def _normal(rng, *shape):
    return rng.standard_normal(shape)


def _away_from_zero(rng, *shape):
    """Values with |x| ≥ 0.1: central differences across ReLU's kink at 0 would be meaningless."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.1, 2.0, size=shape)


def _positive(rng, *shape):
    return rng.uniform(0.5, 1.5, size=shape)


# ---- references: the same maths with the engine's own ops ---------------------------------


def _batch_norm_composite(tensors, params):
    """BatchNorm (training) from engine ops: mean and biased variance over the batch dim."""
    x, weight, bias = tensors
    mean = x.mean(dim=0, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dim=0, keepdim=True)
    return centered / (var + params.get("eps", 1e-5)).sqrt() * weight + bias


# ---- extra hints for one exercise -----------------------------------------------------------


def _embedding_hint(name, yours, expected, case):
    """Repeated ids: `gw[ids] += g` writes a repeated row once instead of adding every copy."""
    ids = case.params["ids"].reshape(-1)
    values, counts = np.unique(ids, return_counts=True)
    repeated = set(values[counts > 1].tolist())
    wrong_rows = {
        int(v) for v in range(expected.shape[0]) if not np.allclose(yours[v], expected[v])
    }
    if repeated and wrong_rows and wrong_rows <= repeated:
        return (
            f"only the rows of ids that appear more than once are wrong ({sorted(wrong_rows)}): "
            "with `gw[ids] += g` NumPy writes each repeated index once; every occurrence must "
            "add its gradient (look up np.add.at)"
        )
    return None


def _embedding_error_hint(error, case):
    """ids of 2 or more dims: np.add.at pairs each id with a row of g only when both are flat."""
    if case.params["ids"].ndim > 1 and isinstance(error, (ValueError, IndexError)):
        return (
            "ids-not-flattened",
            f"here ids is {case.params['ids'].shape} and g {case.params['ids'].shape + (-1,)}: "
            "flatten both the same way (ids to (P,), g to (P, D)) so that each id meets its own "
            "row of g",
        )
    return None


# ---- the exercises, easy to hard ----------------------------------------------------------


def _relu_cases(rng):
    return [
        Case({"x": _away_from_zero(rng, 6)}),
        Case({"x": _away_from_zero(rng, 3, 4)}),
        Case({"x": _away_from_zero(rng, 2, 3, 4)}),
    ]


def _sigmoid_cases(rng):
    big = np.array([-30.0, -5.0, -0.5, 0.0, 0.5, 5.0, 30.0])  # both tails and the middle
    return [
        Case({"x": _normal(rng, 3, 4)}),
        Case({"x": big}),
        Case({"x": 3 * _normal(rng, 2, 3, 4)}),
    ]


def _add_cases(rng):
    shapes = [
        ((3, 4), (4,)),  # y added to every row
        ((3, 1), (1, 4)),  # an outer sum: both stretched
        ((2, 3, 4), (3, 1)),  # a missing leading dim and a stretched one
        ((4,), ()),  # a scalar
        ((3, 3), (3, 1)),
        ((2, 5), (2, 5)),  # no broadcasting at all
    ]
    return [Case({"x": _normal(rng, *a), "y": _normal(rng, *b)}) for a, b in shapes]


def _reduce_cases(rng):
    cases = []
    for shape, dim, keepdim in [
        ((3, 4), 1, False),
        ((3, 4), 0, False),
        ((2, 3, 4), 1, True),
        ((2, 3, 4), -1, False),
        ((4, 4), 0, False),
    ]:
        n = shape[dim]
        cases.append(
            Case(
                {"x": _normal(rng, *shape)},
                {"dim": dim, "keepdim": keepdim},
                {"N": n},
                square=len(set(shape)) == 1,
            )
        )
    return cases


def _reduce_reference(op):
    return lambda t, p: getattr(tt, op)(t[0], p["dim"], p["keepdim"])


def _matmul_cases(rng):
    shapes = [((3, 3), (3, 3)), ((2, 4), (4, 3)), ((4, 2), (2, 5)), ((1, 3), (3, 1))]
    return [
        Case({"x": _normal(rng, *a), "y": _normal(rng, *b)}, constants=_sizes(a, b))
        for a, b in shapes
    ]


def _sizes(a, b):
    """The sizes of x (m, k) @ y (k, n), by name, for a factor that comes from one of them."""
    return {"k": a[-1], "m": a[-2], "n": b[-1]}


def _batched_matmul_cases(rng):
    shapes = [
        ((2, 3, 3), (2, 3, 3)),  # one square product per batch
        ((2, 3, 4), (2, 4, 5)),
        ((2, 3, 4), (4, 2)),  # y is shared by both batches, like a weight
        ((3, 1, 2, 4), (2, 4, 3)),  # x stretched along dim 1, y missing dim 0
        ((1, 4, 4), (3, 4, 4)),  # square matrices, x shared by 3 batches
    ]
    return [
        Case(
            {"x": _normal(rng, *a), "y": _normal(rng, *b)},
            constants=_sizes(a, b),
            square=len({a[-2], a[-1], b[-1]}) == 1,
        )
        for a, b in shapes
    ]


def _gelu_cases(rng):
    return [
        Case({"x": 2 * _normal(rng, 3, 4)}, {"approximate": "none"}),
        Case({"x": 2 * _normal(rng, 2, 5)}, {"approximate": "tanh"}),
        Case({"x": 2 * _normal(rng, 2, 3, 2)}, {"approximate": "none"}),
        Case({"x": 2 * _normal(rng, 3, 3)}, {"approximate": "tanh"}),
    ]


def _embedding_cases(rng):
    def case(v, d, ids):
        ids = np.asarray(ids, dtype=np.int64)
        return Case({"weight": _normal(rng, v, d)}, {"ids": ids}, square=(v == d))

    return [
        case(4, 4, [1, 3, 1, 2]),
        case(7, 3, [1, 3, 1, 4, 1]),  # id 1 three times; rows 5 and 6 never looked up
        case(6, 2, [[0, 5, 5], [2, 0, 3]]),  # ids of any shape
    ]


def _softmax_cases(rng):
    return [
        Case({"x": _normal(rng, 4, 4)}, {"dim": -1}),
        Case({"x": _normal(rng, 3, 5)}, {"dim": -1}),
        Case({"x": _normal(rng, 3, 5)}, {"dim": 0}),
        Case({"x": _normal(rng, 2, 3, 4)}, {"dim": 1}),
    ]


def _cross_entropy_cases(rng):
    cases = []
    for n, c in [(3, 3), (4, 3), (2, 5), (6, 2)]:
        target = rng.integers(0, c, size=n)
        cases.append(Case({"logits": _normal(rng, n, c)}, {"target": target}, {"N": n}))
    return cases


def _norm_cases(rng, with_bias):
    cases = []
    for shape in [(4, 4), (2, 5), (3, 2, 6), (7,)]:
        d = shape[-1]
        arrays = {"x": 2 * _normal(rng, *shape) + 1, "weight": _positive(rng, d)}
        if with_bias:
            arrays["bias"] = _normal(rng, d)
        cases.append(Case(arrays, {}, {"D": d}))
    return cases


def _batch_norm_cases(rng):
    cases = []
    for n, c in [(4, 4), (5, 3), (2, 6)]:
        arrays = {"x": 2 * _normal(rng, n, c) + 1, "weight": _positive(rng, c)}
        arrays["bias"] = _normal(rng, c)
        cases.append(Case(arrays, {}, {"N": n}))
    return cases


def _tanh_backward_cases(rng):
    tails = np.array([-20.0, -3.0, -0.8, 0.0, 0.8, 3.0, 20.0])  # saturated, steep and flat
    return [
        Case({"x": 1.5 * _normal(rng, 4, 4), "gy": _normal(rng, 4, 4)}),
        Case({"x": 1.5 * _normal(rng, 3, 5), "gy": _normal(rng, 3, 5)}),
        Case({"x": tails, "gy": _normal(rng, 7)}),
        Case({"x": 1.5 * _normal(rng, 2, 3, 4), "gy": _normal(rng, 2, 3, 4)}),
    ]


def _softmax_backward_cases(rng):
    return [
        Case(
            {"x": _normal(rng, *shape), "gy": _normal(rng, *shape)},
            {"dim": dim},
            {"n": shape[dim]},  # the size of the softmax's dim: a sum turned into a mean
        )
        for shape, dim in [((4, 4), -1), ((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1)]
    ]


def _first_derivative(op):
    """The reference of a backward-as-an-op: gx = ∂(Σ op(x)·gy)/∂x from the engine, recorded
    (create_graph=True) so that its own gradients with respect to x and gy follow."""

    def gx(tensors, params):
        x, gy = tensors
        if not x.requires_grad:  # asked for the value alone: the same numbers, on a leaf
            x = tt.tensor(x.numpy(), requires_grad=True)
        return tt.autograd.grad(op(x, params), [x], [gy], create_graph=True)[0]

    return gx


def _attention_cases(rng):
    cases = []
    for batch, t, d, dv in [((1,), 3, 3, 3), ((2,), 4, 3, 5), ((1, 2), 5, 2, 3)]:
        arrays = {
            "q": _normal(rng, *batch, t, d),
            "k": _normal(rng, *batch, t, d),
            "v": _normal(rng, *batch, t, dv),
        }
        cases.append(Case(arrays, {}, {"√d": math.sqrt(d), "d": d, "T": t}))
    return cases


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        1,
        "relu",
        "ReLU",
        (Part("ReLU", "tt.relu", lambda t, p: tt.relu(t[0]), _relu_cases),),
    ),
    Exercise(
        2,
        "sigmoid",
        "sigmoid",
        (Part("Sigmoid", "tt.sigmoid", lambda t, p: tt.sigmoid(t[0]), _sigmoid_cases),),
    ),
    Exercise(
        3,
        "broadcast_add",
        "broadcasting add",
        (Part("BroadcastAdd", "x + y", lambda t, p: t[0] + t[1], _add_cases),),
        reduce_by_hand=True,
    ),
    Exercise(
        4,
        "sum_mean",
        "sum and mean over a dimension",
        (
            Part("SumDim", "tt.sum", _reduce_reference("sum"), _reduce_cases),
            Part("MeanDim", "tt.mean", _reduce_reference("mean"), _reduce_cases),
        ),
    ),
    Exercise(
        5,
        "matmul",
        "matrix product, then a batched one",
        (
            Part("MatMul", "x @ y", lambda t, p: t[0] @ t[1], _matmul_cases),
            Part("BatchedMatMul", "x @ y", lambda t, p: t[0] @ t[1], _batched_matmul_cases),
        ),
        reduce_by_hand=True,
    ),
    Exercise(
        6,
        "gelu",
        "GELU",
        (
            Part(
                "GELU",
                "tt.gelu",
                lambda t, p: tt.gelu(t[0], approximate=p["approximate"]),
                _gelu_cases,
            ),
        ),
    ),
    Exercise(
        7,
        "embedding",
        "embedding lookup",
        (
            Part(
                "Embedding",
                "tt.embedding",
                lambda t, p: tt.embedding(tt.tensor(p["ids"]), t[0]),
                _embedding_cases,
                _embedding_hint,
                _embedding_error_hint,
            ),
        ),
    ),
    Exercise(
        8,
        "softmax",
        "softmax",
        (Part("Softmax", "tt.softmax", lambda t, p: tt.softmax(t[0], p["dim"]), _softmax_cases),),
    ),
    Exercise(
        9,
        "softmax_cross_entropy",
        "softmax + cross-entropy, fused",
        (
            Part(
                "SoftmaxCrossEntropy",
                "tt.cross_entropy",
                lambda t, p: tt.cross_entropy(t[0], tt.tensor(p["target"])),
                _cross_entropy_cases,
            ),
        ),
    ),
    Exercise(
        10,
        "rmsnorm",
        "RMSNorm",
        (
            Part(
                "RMSNorm",
                "tt.rms_norm",
                lambda t, p: tt.rms_norm(t[0], t[0].shape[-1:], t[1], eps=1e-6),
                lambda rng: _norm_cases(rng, with_bias=False),
            ),
        ),
    ),
    Exercise(
        11,
        "layernorm",
        "LayerNorm",
        (
            Part(
                "LayerNorm",
                "tt.layer_norm",
                lambda t, p: tt.layer_norm(t[0], t[0].shape[-1:], t[1], t[2]),
                lambda rng: _norm_cases(rng, with_bias=True),
            ),
        ),
    ),
    Exercise(
        12,
        "batchnorm",
        "BatchNorm (training mode)",
        (Part("BatchNorm", "mean/var/sqrt engine ops", _batch_norm_composite, _batch_norm_cases),),
    ),
    Exercise(
        13,
        "attention",
        "causal scaled dot-product attention",
        (
            Part(
                "CausalAttention",
                "tt.scaled_dot_product_attention(is_causal=True)",
                lambda t, p: tt.scaled_dot_product_attention(*t, is_causal=True),
                _attention_cases,
            ),
        ),
    ),
    Exercise(
        14,
        "second_order",
        "second order: the VJP of a backward",
        (
            Part(
                "TanhBackward",
                "tt.autograd.grad(tt.tanh(x), x, gy, create_graph=True)",
                _first_derivative(lambda x, p: tt.tanh(x)),
                _tanh_backward_cases,
            ),
            Part(
                "SoftmaxBackward",
                "tt.autograd.grad(tt.softmax(x, dim), x, gy, create_graph=True)",
                _first_derivative(lambda x, p: tt.softmax(x, p["dim"])),
                _softmax_backward_cases,
                error_hint=no_keepdims_error_hint,
            ),
        ),
    ),
)


def find(name: str) -> Exercise:
    """The exercise called `name`: its name (layernorm), number (11) or file stem (11_layernorm).

    Raises:
        KeyError with the list of exercises when nothing matches.
    """
    key = name.strip().lower().removesuffix(".py").removesuffix(".md")
    for ex in EXERCISES:
        if key in (ex.name, ex.stem, str(ex.number), f"{ex.number:02d}"):
            return ex
    raise KeyError(name)
