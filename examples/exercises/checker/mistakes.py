"""The wrong derivations learners really write, as gradients the checker can recognise.

For every exercise this file lists the classic mistakes (statistics held constant, the softmax
Jacobian's diagonal alone, Σg for Σg·p, a sum over the wrong axis, a missing transpose or 1/N,
N−1 for N, ...). Each `Mistake` computes, from the case's inputs, the gradient that mistake
gives; when a learner's gradient equals it, the checker says which mistake it is, in words, and
points at the step of the exercise's .md where the missing term comes from. Two more are tried
on every exercise: the gradients returned in the wrong order, and g returned unchanged.

The hints name the mistake and the term that is missing; they never print the right formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.special import erf

from .diagnosis import ATOL, RTOL, _named_factor

Grads = dict[str, np.ndarray]


@dataclass(frozen=True)
class Mistake:
    """One wrong derivation: `grads(arrays, params, g, right)` gives the gradient it produces
    for the inputs it gets wrong ({input name: array}); `says` is the hint."""

    key: str  # a short name, for tests and autograders: "softmax-diagonal-only"
    says: str
    grads: Callable[[Grads, dict, np.ndarray, Grads], Grads]


def _t(a):
    return a.swapaxes(-1, -2)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _rows(a):
    """Every dim but the last: the dims a per-feature weight is broadcast over."""
    return tuple(range(a.ndim - 1))


# ---- 1 ReLU, 2 sigmoid, 6 GELU: elementwise chain rules ------------------------------------

RELU = (
    Mistake(
        "relu-inverted-mask",
        "the mask is upside down: your gradient flows where x < 0 and is blocked where x > 0. "
        "Step 2 of 01_relu.md: which side of 0 has slope 1?",
        lambda a, p, g, right: {"x": g * (a["x"] < 0)},
    ),
    Mistake(
        "relu-times-output",
        "you multiplied g by the output max(x, 0); the chain rule (step 1 of 01_relu.md) "
        "needs the slope dz/dx, which is a constant on each side of 0, not z itself",
        lambda a, p, g, right: {"x": g * np.maximum(a["x"], 0)},
    ),
    Mistake(
        "relu-on-g",
        "you applied ReLU to g (kept g's positive entries); which entries pass must depend on "
        "x, the input forward saw (step 2 of 01_relu.md)",
        lambda a, p, g, right: {"x": np.maximum(g, 0)},
    ),
    Mistake(
        "relu-sign",
        "you multiplied g by the sign of x, so where x < 0 the gradient is -g; the slope of "
        "max(x, 0) there is 0, not -1 (step 2 of 01_relu.md)",
        lambda a, p, g, right: {"x": g * np.sign(a["x"])},
    ),
    Mistake(
        "relu-times-x",
        "you multiplied g by x; the slope of max(x, 0) is a constant on each side of 0 "
        "(step 2 of 01_relu.md)",
        lambda a, p, g, right: {"x": g * a["x"]},
    ),
)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


SIGMOID = (
    Mistake(
        "sigmoid-missing-one-minus-z",
        "your dz/dx is z alone: a factor is missing. Redo step 2 of 02_sigmoid.md: σ'(x) "
        "written with z is a product of two factors",
        lambda a, p, g, right: {"x": g * _sigmoid(a["x"])},
    ),
    Mistake(
        "sigmoid-missing-z",
        "your dz/dx is (1 - z) alone: a factor is missing. Redo step 2 of 02_sigmoid.md: "
        "σ'(x) written with z is a product of two factors",
        lambda a, p, g, right: {"x": g * (1 - _sigmoid(a["x"]))},
    ),
    Mistake(
        "sigmoid-with-x",
        "you wrote the derivative with x where the output z = σ(x) belongs: step 2 of "
        "02_sigmoid.md rewrites σ'(x) in terms of z (forward saved self.z)",
        lambda a, p, g, right: {"x": g * a["x"] * (1 - a["x"])},
    ),
    Mistake(
        "sigmoid-derivative-at-z",
        "you evaluated σ' at z, σ'(z) = σ(z)(1 - σ(z)); the derivative is taken at x, and "
        "step 2 of 02_sigmoid.md writes σ'(x) with z = σ(x) itself, no second σ",
        lambda a, p, g, right: {
            "x": g * _sigmoid(_sigmoid(a["x"])) * (1 - _sigmoid(_sigmoid(a["x"])))
        },
    ),
    Mistake(
        "sigmoid-divides",
        "you divided g by the derivative; the chain rule multiplies (step 3 of 02_sigmoid.md)",
        lambda a, p, g, right: {"x": g / (_sigmoid(a["x"]) * (1 - _sigmoid(a["x"])))},
    ),
    Mistake(
        "sigmoid-tanh-derivative",
        "1 - z² is the derivative of tanh, not of σ: redo step 1 of 02_sigmoid.md",
        lambda a, p, g, right: {"x": g * (1 - _sigmoid(a["x"]) ** 2)},
    ),
)

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu_parts(x):
    """Φ(x), φ(x), t = tanh(u) and du/dx of the tanh form."""
    cdf = 0.5 * (1 + erf(x / math.sqrt(2)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    t = np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3))
    du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    return cdf, pdf, t, du


def _gelu(variant_exact, variant_tanh):
    """A mistake in one of GELU's two forms: the other form's gradient is left right."""

    def grads(a, p, g, right):
        x = a["x"]
        cdf, pdf, t, du = _gelu_parts(x)
        if p["approximate"] == "tanh":
            return {"x": g * variant_tanh(x, t, du)} if variant_tanh else {}
        return {"x": g * variant_exact(x, cdf, pdf)} if variant_exact else {}

    return grads


def _gelu_other_form(a, p, g, right):
    """The exact form's derivative where the tanh form was asked for, and the other way round."""
    x = a["x"]
    cdf, pdf, t, du = _gelu_parts(x)
    exact = cdf + x * pdf
    tanh = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du
    return {"x": g * (exact if p["approximate"] == "tanh" else tanh)}


GELU = (
    Mistake(
        "gelu-missing-x-pdf",
        "only Φ(x): GELU is the product x·Φ(x), and the product rule of step 1 in 06_gelu.md "
        "gives a second term, with Φ'(x) = φ(x)",
        _gelu(lambda x, cdf, pdf: cdf, None),
    ),
    Mistake(
        "gelu-pdf-without-x",
        "the second term of the product rule lost its factor x: differentiate x·Φ(x) again, "
        "one factor at a time (step 1 of 06_gelu.md)",
        _gelu(lambda x, cdf, pdf: cdf + pdf, None),
    ),
    Mistake(
        "gelu-pdf-unnormalised",
        "your φ(x) misses its normalising 1/√(2π): step 1 of 06_gelu.md gives the density",
        _gelu(lambda x, cdf, pdf: cdf + x * np.exp(-0.5 * x * x), None),
    ),
    Mistake(
        "gelu-pdf-exponent",
        "your φ(x) has e^(-x²) where the density has e^(-x²/2) (step 1 of 06_gelu.md)",
        _gelu(lambda x, cdf, pdf: cdf + x * np.exp(-x * x) / math.sqrt(2 * math.pi), None),
    ),
    Mistake(
        "gelu-tanh-missing-second-term",
        "tanh form: only ½(1 + t). z = ½x·(1 + tanh(u)) is a product of x and a function of "
        "x, so the product rule of step 2 in 06_gelu.md gives a second term through tanh(u)",
        _gelu(None, lambda x, t, du: 0.5 * (1 + t)),
    ),
    Mistake(
        "gelu-tanh-one-minus-t",
        "tanh form: d/du tanh(u) is 1 - tanh²(u), not 1 - tanh(u) (step 2 of 06_gelu.md)",
        _gelu(None, lambda x, t, du: 0.5 * (1 + t) + 0.5 * x * (1 - t) * du),
    ),
    Mistake(
        "gelu-tanh-du-missing-3",
        "tanh form: du/dx misses the 3 of d/dx x³ = 3x² (step 2 of 06_gelu.md)",
        _gelu(
            None,
            lambda x, t, du: (
                0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 0.044715 * x * x)
            ),
        ),
    ),
    Mistake(
        "gelu-tanh-du-missing-sqrt",
        "tanh form: du/dx lost the constant √(2/π) that multiplies u (step 2 of 06_gelu.md)",
        _gelu(None, lambda x, t, du: 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du / SQRT_2_OVER_PI),
    ),
    Mistake(
        "gelu-tanh-missing-half",
        "tanh form: the second term lost the ½ of z = ½x·(1 + tanh(u))",
        _gelu(None, lambda x, t, du: 0.5 * (1 + t) + x * (1 - t * t) * du),
    ),
    Mistake(
        "gelu-one-formula-for-both",
        "you used one form's derivative for both values of self.approximate: the tanh form "
        "is a different function, with its own derivative (step 3 of 06_gelu.md: branch on "
        "self.approximate)",
        _gelu_other_form,
    ),
)


# ---- 3 broadcasting add, 4 sum and mean ----------------------------------------------------


def _broadcast_dims(shape, gshape):
    """(dims broadcasting added in front, dims it stretched from size 1), as axes of g."""
    lead = len(gshape) - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and gshape[lead + i] != 1)
    return tuple(range(lead)), stretched


def _reduce_with(how):
    """A wrong reduction of g to each input's shape: how(g, shape, added, stretched)."""

    def grads(a, p, g, right):
        out = {}
        for name, x in a.items():
            added, stretched = _broadcast_dims(x.shape, g.shape)
            out[name] = how(g, x.shape, added, stretched)
        return out

    return grads


BROADCAST_ADD = (
    Mistake(
        "add-mean-not-sum",
        "you averaged over the broadcast dims; a value used n times collects the *sum* of its "
        "n gradients (step 2 of 03_broadcast_add.md)",
        _reduce_with(
            lambda g, s, added, stretched: g.mean(axis=added).mean(
                axis=tuple(i - len(added) for i in stretched), keepdims=True
            )
        ),
    ),
    Mistake(
        "add-no-keepdims",
        "right values, but the dims broadcasting stretched from size 1 were summed away: "
        "case (b) of step 3 in 03_broadcast_add.md keeps them as size 1 (keepdims=True)",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=added + stretched)),
    ),
    Mistake(
        "add-only-leading",
        "you summed the dims broadcasting added in front (case (a) of step 3 in "
        "03_broadcast_add.md) but not the ones it stretched from size 1 (case (b))",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=added)),
    ),
    Mistake(
        "add-only-stretched",
        "you summed the dims broadcasting stretched from size 1 (case (b) of step 3 in "
        "03_broadcast_add.md) but not the ones it added in front (case (a))",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=stretched, keepdims=True)),
    ),
    Mistake(
        "add-leading-kept",
        "the dims broadcasting added in front must be summed *away* (case (a) of step 3 in "
        "03_broadcast_add.md); you kept them as size 1",
        _reduce_with(lambda g, s, added, stretched: g.sum(axis=added + stretched, keepdims=True)),
    ),
    Mistake(
        "add-sum-everything",
        "you summed g over every dim, also those where the input has elements of its own; "
        "only the dims broadcasting added or stretched are summed (step 3 of "
        "03_broadcast_add.md)",
        lambda a, p, g, right: {n: np.full(x.shape, g.sum()) for n, x in a.items()},
    ),
)


def _expand_at(g, axis, keepdim, shape):
    """g put back at `axis` (when the dim was removed) and broadcast to `shape`; None if it
    does not broadcast (that mistake then raises in the learner's code, no fingerprint)."""
    try:
        return np.broadcast_to(g if keepdim else np.expand_dims(g, axis), shape)
    except ValueError:
        return None


def _expanded_elsewhere(x, p, g, scale):
    """g put back at dim 0 or -1 where forward reduced another dim (the first that fits)."""
    if p["keepdim"]:
        return {}
    for axis in (0, -1):
        if axis % x.ndim != p["dim"] % x.ndim:
            spread = _expand_at(g, axis, False, x.shape)
            if spread is not None:
                return {"x": spread * scale}
    return {}


def _reduce_grads(scale, axis=None):
    """The gradient of a sum over p["dim"] times scale(x, dim, g), g put back at `axis`."""

    def grads(a, p, g, right):
        x, dim = a["x"], p["dim"]
        spread = _expand_at(g, dim if axis is None else axis, p["keepdim"], x.shape)
        return {} if spread is None else {"x": spread * scale(x, dim, g)}

    return grads


SUM = (
    Mistake(
        "sum-expanded-at-wrong-dim",
        "g was put back at the wrong dim: np.expand_dims(g, dim) must put the size-1 dim "
        "where forward removed it (step 3 of 04_sum_mean.md)",
        lambda a, p, g, right: _expanded_elsewhere(a["x"], p, g, 1.0),
    ),
)

MEAN = (
    Mistake(
        "mean-missing-1/N",
        "this is the gradient of the *sum*: the mean's constant 1/N is missing (step 4 of "
        "04_sum_mean.md)",
        _reduce_grads(lambda x, dim, g: 1.0),
    ),
    Mistake(
        "mean-times-N",
        "you multiplied by N where the mean divides by it (step 4 of 04_sum_mean.md)",
        _reduce_grads(lambda x, dim, g: x.shape[dim]),
    ),
    Mistake(
        "mean-divides-by-size",
        "you divided by x.size, every element of x; the mean averages only the N = "
        "x.shape[dim] elements of one slice (step 4 of 04_sum_mean.md)",
        _reduce_grads(lambda x, dim, g: 1 / x.size),
    ),
    Mistake(
        "mean-N-from-last-dim",
        "N is x.shape[dim], the size of the averaged dim; you divided by x.shape[-1]",
        _reduce_grads(lambda x, dim, g: 1 / x.shape[-1]),
    ),
    Mistake(
        "mean-N-from-first-dim",
        "N is x.shape[dim], the size of the averaged dim; you divided by x.shape[0]",
        _reduce_grads(lambda x, dim, g: 1 / x.shape[0]),
    ),
    Mistake(
        "mean-N-from-g",
        "you divided by the size of g (the output); N is x.shape[dim], the number of elements "
        "each mean averages",
        _reduce_grads(lambda x, dim, g: 1 / max(len(g) if g.ndim else 1, 1)),
    ),
    Mistake(
        "mean-expanded-at-wrong-dim",
        "g was put back at the wrong dim: np.expand_dims(g, dim) must put the size-1 dim "
        "where forward removed it (step 3 of 04_sum_mean.md)",
        lambda a, p, g, right: _expanded_elsewhere(a["x"], p, g, 1 / a["x"].shape[p["dim"]]),
    ),
)


# ---- 5 matrix products -----------------------------------------------------------------------


def _try(fn):
    """fn() or None when its shapes do not fit (the learner's code would raise there)."""
    try:
        return fn()
    except (ValueError, IndexError):
        return None


def _some(**grads):
    return {k: v for k, v in grads.items() if v is not None}


def _batch_reduced(full, shape, how):
    """`full` (the broadcast batch shape) brought back to `shape` with how = np.sum/np.mean."""
    added, stretched = _broadcast_dims(shape, full.shape)
    return how(full, axis=added + stretched, keepdims=True).reshape(shape)


MATMUL = (
    Mistake(
        "matmul-gx-missing-transpose",
        "∂L/∂x uses y without its transpose: in step 1 of 05_matmul.md x_ip meets y_pj, so "
        "the sum runs over j, the second index of y. The shapes of step 4 decide",
        lambda a, p, g, right: _some(x=_try(lambda: g @ a["y"])),
    ),
    Mistake(
        "matmul-gy-missing-transpose",
        "∂L/∂y uses x without its transpose: y_pj meets x_ip, so the sum runs over i, the "
        "first index of x (step 3 of 05_matmul.md). The shapes of step 4 decide",
        lambda a, p, g, right: _some(y=_try(lambda: a["x"] @ g)),
    ),
    Mistake(
        "matmul-factors-swapped",
        "the right factors in the wrong order: a matrix product does not commute. Write the "
        "shape of each factor under it (step 4 of 05_matmul.md)",
        lambda a, p, g, right: _some(
            x=_try(lambda: _t(a["y"]) @ g) if a["y"].shape[-1] != 1 else None,
            y=_try(lambda: g @ _t(a["x"])),
        ),
    ),
    Mistake(
        "matmul-g-transposed",
        "g enters transposed: ∂L/∂x must have x's shape (m, k), and g (m, n) already has m "
        "in front; only y needs a transpose (step 4 of 05_matmul.md)",
        lambda a, p, g, right: _some(x=_try(lambda: _t(g) @ a["y"])),
    ),
    Mistake(
        "matmul-elementwise",
        "you multiplied elementwise (*); the gradient of a matrix product is itself a matrix "
        "product (step 2 of 05_matmul.md)",
        lambda a, p, g, right: _some(x=_try(lambda: g * a["y"]), y=_try(lambda: g * a["x"])),
    ),
)

BATCHED_MATMUL = (
    Mistake(
        "bmm-batch-not-reduced",
        "this input was broadcast over batch dims (like y in exercise 3): each batch's "
        "product is right, but the batches that used the same matrix must be summed back to "
        "its shape (the batched-matmul section of 05_matmul.md)",
        lambda a, p, g, right: {"x": g @ _t(a["y"]), "y": _t(a["x"]) @ g},
    ),
    Mistake(
        "bmm-batch-averaged",
        "the batches that used the same matrix each add their gradient: sum them, do not "
        "average (the batched-matmul section of 05_matmul.md)",
        lambda a, p, g, right: {
            "x": _batch_reduced(g @ _t(a["y"]), a["x"].shape, np.mean),
            "y": _batch_reduced(_t(a["x"]) @ g, a["y"].shape, np.mean),
        },
    ),
    *MATMUL,
)


# ---- 7 embedding -----------------------------------------------------------------------------


def _scattered_rows(a, p, rows):
    gw = np.zeros_like(a["weight"])
    np.add.at(gw, p["ids"].reshape(-1), rows)
    return {"weight": gw}


def _written_once(a, p, g, right):
    gw = np.zeros_like(a["weight"])
    gw[p["ids"]] += g  # the trap itself: a repeated id is written once
    return {"weight": gw}


def _scattered_into(start):
    def grads(a, p, g, right):
        gw = start(a["weight"]).astype(g.dtype)
        np.add.at(gw, p["ids"].reshape(-1), g.reshape(-1, gw.shape[-1]))
        return {"weight": gw}

    return grads


EMBEDDING = (
    Mistake(
        "embedding-written-once",
        "`gw[ids] += g` (or `= g`) writes a repeated id once: every occurrence must add its "
        "gradient (step 2 and 'The NumPy trap' in 07_embedding.md; look up np.add.at)",
        _written_once,
    ),
    Mistake(
        "embedding-returned-g",
        "you returned g, the gradient of the looked-up rows; ∂L/∂W has the table's shape "
        "(V, D), with each row of g added into the row of W it came from (step 2 of "
        "07_embedding.md)",
        lambda a, p, g, right: {"weight": g},
    ),
    Mistake(
        "embedding-table-too-small",
        "your table has max(ids) + 1 rows; ∂L/∂W has all the V rows of W "
        "(self.weight_shape): rows never looked up stay 0 (step 2 of 07_embedding.md)",
        lambda a, p, g, right: _scattered_into(
            lambda w: np.zeros((int(p["ids"].max()) + 1, w.shape[1]))
        )(a, p, g, right),
    ),
    Mistake(
        "embedding-rows-scrambled",
        "g was reshaped into rows the wrong way: g.reshape(-1, D) keeps each position's D "
        "values together; reshape(D, -1) followed by a transpose mixes positions (step 2 and "
        "'The NumPy trap' of 07_embedding.md)",
        lambda a, p, g, right: _scattered_rows(a, p, g.reshape(a["weight"].shape[1], -1).T),
    ),
    Mistake(
        "embedding-started-from-weights",
        "your table of gradients starts from the weights W; it starts from zeros (a row never "
        "looked up gets 0, step 2 of 07_embedding.md)",
        _scattered_into(lambda w: w.copy()),
    ),
    Mistake(
        "embedding-started-from-ones",
        "your table of gradients starts from ones; it starts from zeros (a row never looked "
        "up gets 0, step 2 of 07_embedding.md)",
        _scattered_into(np.ones_like),
    ),
)


# ---- 8 softmax, 9 softmax + cross-entropy ----------------------------------------------------


SOFTMAX_WORDS = "step 2 of 08_softmax.md"


def _softmax_wrong(ds):
    """A softmax mistake for exercise 8: ds(p, g, dim) is the wrong ∂L/∂x."""
    return lambda a, prm, g, right: _some(
        x=_try(lambda: ds(_softmax(a["x"], prm["dim"]), g, prm["dim"]))
    )


def _axis_other_than(dim, ndim, axis):
    return axis % ndim != dim % ndim


SOFTMAX_DS = {  # key: (what the mistake computes for dS from P and dP along `dim`, the words)
    "diagonal-only": (
        lambda p, g, dim: g * p * (1 - p),
        "you kept only the diagonal of the Jacobian (i = j): pⱼ(1 - pⱼ)·gⱼ. Every pᵢ depends "
        "on every xⱼ, so the i ≠ j entries, -pᵢpⱼ, add a second term: a sum over the row",
    ),
    "sum-of-g": (
        lambda p, g, dim: p * (g - g.sum(axis=dim, keepdims=True)),
        "your row sum is Σᵢ gᵢ alone: the i ≠ j entries of the Jacobian carry a factor pᵢ, "
        "and it stays in that sum",
    ),
    "mean-not-sum": (
        lambda p, g, dim: p * (g - (g * p).mean(axis=dim, keepdims=True)),
        "the row term is a sum over the row, not a mean: the Jacobian's entries bring no 1/n",
    ),
    "missing-outer-p": (
        lambda p, g, dim: g - (g * p).sum(axis=dim, keepdims=True),
        "the outer factor p is missing: substitute ∂pᵢ/∂xⱼ = pᵢ(δᵢⱼ - pⱼ) again, both "
        "terms of the sum keep a pⱼ",
    ),
    "p-on-one-term": (
        lambda p, g, dim: p * g - (g * p).sum(axis=dim, keepdims=True),
        "the row-sum term must be multiplied by pⱼ too: both terms come from ∂pᵢ/∂xⱼ, which "
        "carries a pⱼ in the i ≠ j entries as well",
    ),
    "no-keepdims": (
        lambda p, g, dim: p * (g - (g * p).sum(axis=dim)),
        "the row sum was taken without keepdims=True, so NumPy broadcast it along the wrong "
        "dim: each row got another row's sum",
    ),
    "last-axis": (
        lambda p, g, dim: (
            p * (g - (g * p).sum(axis=-1, keepdims=True))
            if _axis_other_than(dim, p.ndim, -1)
            else None
        ),
        "the row sum runs over the last axis, but the softmax was taken along self.dim: sum "
        "over that dim",
    ),
    "sum-over-everything": (
        lambda p, g, dim: p * (g - (g * p).sum()) if p.ndim > 1 else None,
        "the row sum runs over the whole array (no axis): each row of the softmax has its own "
        "sum, over self.dim with keepdims=True",
    ),
    "diagonal-plus-row-sum": (
        lambda p, g, dim: p * (1 - p) * g - p * (g * p).sum(axis=dim, keepdims=True),
        "the diagonal pⱼ(1 - pⱼ) and the full row sum together count the i = j entry's -pⱼ² "
        "twice: the sum over i already includes i = j",
    ),
    "extra-p": (
        lambda p, g, dim: p * p * (g - (g * p).sum(axis=dim, keepdims=True)),
        "an extra factor p: the outer pⱼ comes once, from ∂pᵢ/∂xⱼ = pᵢ(δᵢⱼ - pⱼ)",
    ),
    "extra-one-minus-p": (
        lambda p, g, dim: p * (g - (g * p).sum(axis=dim, keepdims=True)) * (1 - p),
        "an extra factor (1 - p): the diagonal's pⱼ(1 - pⱼ) is already accounted for once "
        "the δᵢⱼ term and the row sum are both there",
    ),
    "first-axis": (
        lambda p, g, dim: (
            p * (g - (g * p).sum(axis=0, keepdims=True))
            if _axis_other_than(dim, p.ndim, 0)
            else None
        ),
        "the row sum runs over axis 0, but the softmax was taken along self.dim: sum over that dim",
    ),
}

SOFTMAX = tuple(
    Mistake(f"softmax-{key}", f"{words} ({SOFTMAX_WORDS})", _softmax_wrong(ds))
    for key, (ds, words) in SOFTMAX_DS.items()
)


def _cross_entropy(fn):
    def grads(a, p, g, right):
        z, target = a["logits"], p["target"]
        n, c = z.shape
        probs = _softmax(z, -1)
        onehot = np.zeros_like(probs)
        onehot[np.arange(n), target] = 1
        return {"logits": fn(probs, onehot, target, n, c) * g}

    return grads


def _every_row_every_target(probs, onehot, target, n, c):
    grad = probs.copy()
    grad[:, target] -= 1  # the classic: every row, at every row's target column
    return grad / n


def _rows_by_target(probs, onehot, target, n, c):
    grad = probs.copy()
    grad[target] -= 1  # rows picked by the class numbers
    return grad / n


def _true_class_set_to_minus_one(probs, onehot, target, n, c):
    grad = probs.copy()
    grad[np.arange(n), target] = -1  # = where -= belongs
    return grad / n


CROSS_ENTROPY = (
    Mistake(
        "ce-missing-1/N",
        "the loss is a mean over the N rows: each row's gradient gets the 1/N of that mean "
        "(step 3 of 09_softmax_cross_entropy.md)",
        _cross_entropy(lambda p, y, t, n, c: p - y),
    ),
    Mistake(
        "ce-divides-by-C",
        "you divided by C, the number of classes; the loss averages over the N rows (step 3 "
        "of 09_softmax_cross_entropy.md)",
        _cross_entropy(lambda p, y, t, n, c: (p - y) / c),
    ),
    Mistake(
        "ce-divides-by-NC",
        "you divided by N·C; the loss averages over the N rows only, not over the classes "
        "(step 3 of 09_softmax_cross_entropy.md)",
        _cross_entropy(lambda p, y, t, n, c: (p - y) / (n * c)),
    ),
    Mistake(
        "ce-every-row-target",
        "`p[:, target] -= 1` subtracts 1 in *every* row at every target column; each row i "
        "needs it only at its own target: index one element per row, p[np.arange(N), target]",
        _cross_entropy(_every_row_every_target),
    ),
    Mistake(
        "ce-rows-by-target",
        "`p[target] -= 1` picks *rows* by the target classes; each row i needs the -1 at "
        "its own target column: p[np.arange(N), target]",
        _cross_entropy(_rows_by_target),
    ),
    Mistake(
        "ce-sets-minus-one",
        "you *set* the true class's entry to -1; the -1 of onehot(y) is added to p there, "
        "p[y] - 1 (step 2 of 09_softmax_cross_entropy.md): use -= rather than =",
        _cross_entropy(_true_class_set_to_minus_one),
    ),
    Mistake(
        "ce-minus-one-everywhere",
        "you subtracted 1 from every entry; only the true class of each row gets the -1 of "
        "onehot(y) (step 2 of 09_softmax_cross_entropy.md): p[np.arange(N), target]",
        _cross_entropy(lambda p, y, t, n, c: (p - 1) / n),
    ),
    Mistake(
        "ce-missing-onehot",
        "only the softmax term: the -log p[y] of the true class also depends on z[y] directly "
        "(step 1 of 09_softmax_cross_entropy.md: log p[c] = z[c] - log Σ e^z)",
        _cross_entropy(lambda p, y, t, n, c: p / n),
    ),
    Mistake(
        "ce-onehot-only",
        "only the -onehot(y) term: log Σⱼ e^(z[j]) depends on every logit too (step 1 of "
        "09_softmax_cross_entropy.md)",
        _cross_entropy(lambda p, y, t, n, c: -y / n),
    ),
    Mistake(
        "ce-gradient-wrt-p",
        "that is the gradient with respect to the probabilities p; the input is the logits z "
        "(step 1 of 09_softmax_cross_entropy.md writes log p with z)",
        _cross_entropy(lambda p, y, t, n, c: -y / np.where(y > 0, p, 1) / n),
    ),
)


# ---- 10 RMSNorm, 11 LayerNorm, 12 BatchNorm --------------------------------------------------


def _normalize(x, axis, center, ddof=0):
    """(x̂, r, x - μ) with statistics over `axis`."""
    xc = x - x.mean(axis=axis, keepdims=True) if center else x
    if center:
        var = (xc * xc).sum(axis=axis, keepdims=True) / (x.shape[axis] - ddof)
    else:
        var = (x * x).mean(axis=axis, keepdims=True)
    eps = 1e-5 if center else 1e-6
    r = 1 / np.sqrt(var + eps)
    return xc * r, r, xc


def _norm(fn, axis, center):
    """A wrong ∂L/∂x of a normalization: fn(gh, xhat, r, mean, g, xc) with means over `axis`."""

    def grads(a, p, g, right):
        x, w = a["x"], a["weight"]
        if x.shape[axis] < 2:
            return {}
        xhat, r, xc = _normalize(x, axis, center)

        def mean(v, over=axis):
            return v.mean(axis=over, keepdims=True)

        return _some(x=_try(lambda: fn(g * w, xhat, r, mean, g, xc)))  # None: not this case

    return grads


def _weight_outside(axis, center):
    """∂L/∂x derived with g where ĝ = g·w belongs, then multiplied by w at the end."""

    def grads(a, p, g, right):
        xhat, r, _ = _normalize(a["x"], axis, center)
        centered_g = g - g.mean(axis=axis, keepdims=True) if center else g
        gx = r * (centered_g - xhat * (g * xhat).mean(axis=axis, keepdims=True))
        return {"x": gx * a["weight"]}

    return grads


def _norm_params(fn, axis):
    """Wrong ∂L/∂w and ∂L/∂b: fn(g, xhat, x) -> {name: array}."""

    def grads(a, p, g, right):
        x = a["x"]
        xhat = _normalize(x, axis, "bias" in a)[0]
        return fn(g, xhat, x)

    return grads


def _norm_mistakes(exercise, axis, center, stat_axis_words):
    """The mistakes of a normalization's ∂L/∂x, one list for the three exercises."""
    md = f"{exercise}.md"
    n = "N" if axis == 0 else "D"
    inside = "σ² + ε" if center else "mean(x²) + ε"  # what r is the inverse square root of
    mistakes = [
        Mistake(
            f"{exercise[3:]}-statistics-constant",
            "you treated the statistics as constants: "
            + ("r depends" if not center else "μ and r depend")
            + f" on the whole {stat_axis_words} of x, so x reaches the loss along more paths "
            f"than x̂ alone (step 2 of {md})"
            + (
                ". This is the eval-mode gradient; in training mode the batch statistics "
                "depend on x"
                if axis == 0
                else ""
            ),
            _norm(lambda gh, xhat, r, mean, g, xc: gh * r, axis, center),
        ),
        Mistake(
            f"{exercise[3:]}-forgot-weight",
            f"the gradient reaching x̂ is g·w (ĝ in {md}); you used g without w",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (g - (mean(g) if center else 0) - xhat * mean(g * xhat))
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-weight-missing-in-correction",
            f"the term through the statistic uses g where ĝ = g·w belongs: every path starts "
            f"from the gradient that reaches x̂ ({md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0) - xhat * mean(g * xhat))
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-correction-extra-r",
            f"the term through the statistic carries one r too many: with x̂ written in, r³ "
            f"becomes r (step 3 of {md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0)) - r * r * xhat * mean(gh * xhat)
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-sum-not-mean",
            f"a 1/{n} is missing: the statistics are means, so each ∂/∂xⱼ of them brings a "
            f"1/{n} (step 2 of {md}); your correction terms are sums",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r
                    * (
                        gh
                        - (mean(gh) * gh.shape[axis] if center else 0)
                        - xhat * mean(gh * xhat) * gh.shape[axis]
                    )
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-correction-sign",
            f"the term through the statistic has the wrong sign: d(u^(-1/2)) = -½·u^(-3/2)·du "
            f"(step 3 of {md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0) + xhat * mean(gh * xhat))
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-correction-factor-2",
            "the term through the statistic is twice too big: the 2 of d(x²)/dx and the ½ of "
            f"the power -1/2 cancel (step 3 of {md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0) - 2 * xhat * mean(gh * xhat))
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-correction-half",
            "the term through the statistic is half what it should be: the 2 of d(x²)/dx "
            f"is missing (step 3 of {md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0) - 0.5 * xhat * mean(gh * xhat))
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-correction-missing-r",
            "the term through the statistic is missing a factor r: differentiate r = "
            f"({inside})^(-1/2) once more, r³ = r·r² (step 3 of {md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0)) - xhat * mean(gh * xhat)
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-missing-r",
            f"the whole gradient is missing the factor r = 1/√({inside}) that x̂ carries ({md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    gh - (mean(gh) if center else 0) - xhat * mean(gh * xhat)
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-x-for-xhat",
            f"x where x̂ belongs in the term through the statistic: writing it with x̂ = "
            f"{'(x - μ)' if center else 'x'}·r needs the extra r² (step 3 of {md})",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh) if center else 0) - xc * mean(gh * xc))
                ),
                axis,
                center,
            ),
        ),
    ]
    if axis == -1:  # NOTE: BatchNorm's w is constant along its means' dim 0: no mistake there
        mistakes.append(
            Mistake(
                f"{exercise[3:]}-weight-outside",
                f"w multiplied at the end: ĝ = g·w is what reaches x̂, so w goes in before the "
                f"means over the {stat_axis_words.split()[0]} are taken ({md})",
                _weight_outside(axis, center),
            )
        )
    other = 0 if axis == -1 else -1
    # NOTE: over dim 0 a mean without keepdims still lines up right, (C,) against (N, C)
    mistakes += (
        []
        if axis == 0
        else [
            Mistake(
                f"{exercise[3:]}-mean-without-keepdims",
                "a mean taken without keepdims=True: NumPy then lines it up with the wrong dim "
                f"(shapes align from the right), so each {stat_axis_words.split()[0]} gets another "
                f"one's mean. Keep the reduced dim: axis={axis}, keepdims=True",
                _norm(
                    lambda gh, xhat, r, mean, g, xc: (
                        r
                        * (
                            gh
                            - (gh.mean(axis=axis) if center else 0)
                            - xhat * (gh * xhat).mean(axis=axis)
                        )
                    ),
                    axis,
                    center,
                ),
            ),
        ]
    )
    mistakes += [
        Mistake(
            f"{exercise[3:]}-mean-over-everything",
            f"your means run over the whole array (no axis); the statistics are per "
            f"{stat_axis_words}, and so are the means their paths bring: axis={axis}, "
            "keepdims=True",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh, None) if center else 0) - xhat * mean(gh * xhat, None))
                ),
                axis,
                center,
            ),
        ),
        Mistake(
            f"{exercise[3:]}-mean-over-other-axis",
            f"your means run over axis {other}; the statistics are per {stat_axis_words}, and "
            f"so are the means their paths bring: axis={axis}",
            _norm(
                lambda gh, xhat, r, mean, g, xc: (
                    r * (gh - (mean(gh, other) if center else 0) - xhat * mean(gh * xhat, other))
                    if gh.ndim > 1
                    else None
                ),
                axis,
                center,
            ),
        ),
    ]
    if center:
        mistakes += [
            Mistake(
                f"{exercise[3:]}-mean-constant",
                f"you left out the path through μ (∂μ/∂xⱼ = 1/{n} in {md}): with it comes a "
                f"mean of ĝ over the {stat_axis_words}",
                _norm(
                    lambda gh, xhat, r, mean, g, xc: r * (gh - xhat * mean(gh * xhat)),
                    axis,
                    center,
                ),
            ),
            Mistake(
                f"{exercise[3:]}-variance-constant",
                f"you left out the path through σ² (hence r), ∂σ²/∂xⱼ in {md}: with it comes "
                "a term in x̂",
                _norm(lambda gh, xhat, r, mean, g, xc: r * (gh - mean(gh)), axis, center),
            ),
            Mistake(
                f"{exercise[3:]}-unbiased-variance",
                f"N−1: forward's σ² is the biased variance, a mean with 1/{n}, so ∂σ²/∂xⱼ "
                f"has 2/{n}, not 2/({n}-1) ({md})",
                _norm(
                    lambda gh, xhat, r, mean, g, xc: (
                        r
                        * (
                            gh
                            - mean(gh)
                            - xhat * mean(gh * xhat) * gh.shape[axis] / (gh.shape[axis] - 1)
                        )
                    ),
                    axis,
                    center,
                ),
            ),
        ]
    return mistakes


def _param_mistakes(exercise, axis):
    """Wrong ∂L/∂w; `axis` is the statistics' axis (the weight's gradient sums over the rest)."""
    md = f"{exercise}.md"
    reduce = (lambda v: v.sum(axis=0)) if axis == 0 else (lambda v: v.sum(_rows(v)))
    over_features = [
        Mistake(
            f"{exercise[3:]}-params-over-features",
            f"{'∂L/∂w' if 'rms' in exercise else '∂L/∂w and ∂L/∂b'} sum over the rows, every "
            f"dim but the last, one value per feature; yours sum over the last dim, the "
            f"features (step 1 of {md})",
            lambda a, p, g, right: {
                "weight": (g * _normalize(a["x"], -1, "bias" in a)[0]).sum(axis=-1),
                **({"bias": g.sum(axis=-1)} if "bias" in a else {}),
            },
        )
    ]
    return (over_features if axis == -1 else []) + [
        Mistake(
            f"{exercise[3:]}-weight-grad-with-x",
            f"∂L/∂w sums g times x̂ (what w multiplies), not times x (step 1 of {md})",
            _norm_params(lambda g, xhat, x: {"weight": reduce(g * x)}, axis),
        ),
        Mistake(
            f"{exercise[3:]}-weight-grad-without-xhat",
            f"∂L/∂w: w multiplies x̂, so each term is g times x̂ (step 1 of {md})",
            _norm_params(lambda g, xhat, x: {"weight": reduce(g)}, axis),
        ),
    ]


RMSNORM = (
    *_norm_mistakes("10_rmsnorm", -1, False, "row"),
    *_param_mistakes("10_rmsnorm", -1),
)

LAYERNORM = (
    *_norm_mistakes("11_layernorm", -1, True, "row"),
    *_param_mistakes("11_layernorm", -1),
)


def _layer_norm_axes(own_statistics):
    """BatchNorm's ∂L/∂x with LayerNorm's means (over the last dim): with BatchNorm's saved x̂
    and r (LayerNorm's backward copied), or with statistics of its own over the last dim."""

    def grads(a, p, g, right):
        x, w = a["x"], a["weight"]
        xhat, r, _ = _normalize(x, -1 if own_statistics else 0, True)
        gh = g * w
        gx = r * (gh - gh.mean(-1, keepdims=True) - xhat * (gh * xhat).mean(-1, keepdims=True))
        return {"x": gx}

    return grads


LAYER_NORM_AXES = (
    "these are LayerNorm's axes: your means run over each sample's features (the last "
    "dim). BatchNorm's statistics are over the batch, dim 0, and so are the means their "
    "paths bring (step 2 of 12_batchnorm.md)"
)


BATCHNORM = (
    Mistake("batchnorm-layernorm-axes", LAYER_NORM_AXES, _layer_norm_axes(False)),
    Mistake("batchnorm-layernorm-axes", LAYER_NORM_AXES, _layer_norm_axes(True)),
    Mistake(
        "batchnorm-params-wrong-axis",
        "∂L/∂w and ∂L/∂b sum over the batch dim 0 (one value per channel, shape (C,)); "
        "yours sum over the channels (step 1 of 12_batchnorm.md)",
        lambda a, p, g, right: {
            "weight": (g * _normalize(a["x"], 0, True)[0]).sum(axis=1),
            "bias": g.sum(axis=1),
        },
    ),
    *_norm_mistakes("12_batchnorm", 0, True, "batch (dim 0)"),
    *_param_mistakes("12_batchnorm", 0),
)


# ---- 13 attention ----------------------------------------------------------------------------


def _attention(fn):
    """A wrong (dQ, dK, dV): fn(q, k, v, p, g, tau, ds_right) -> {name: array}."""

    def grads(a, prm, g, right):
        q, k, v = a["q"], a["k"], a["v"]
        t, d = q.shape[-2], q.shape[-1]
        tau = 1 / math.sqrt(d)
        s = np.where(np.tri(t, t, dtype=bool), (q @ _t(k)) * tau, -np.inf)
        p = _softmax(s, -1)
        dp = g @ _t(v)
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
        return {n: x for n, x in fn(q, k, v, p, g, tau, dp, ds).items() if x is not None}

    return grads


def _softmax_ds(p, dp):
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def _dp_without_transpose(q, k, v, p, g, tau, dp, ds):
    wrong = _try(lambda: g @ v)  # fits only where dv = T
    if wrong is None:
        return {}
    ds = _softmax_ds(p, wrong)
    return {"q": (ds @ k) * tau, "k": (_t(ds) @ q) * tau}


def _dp_from_g_transposed(q, k, v, p, g, tau, dp, ds):
    wrong = _try(lambda: _t(g) @ v)  # fits only where dv = T
    if wrong is None or wrong.shape != p.shape:
        return {}
    ds = _softmax_ds(p, wrong)
    return {"q": (ds @ k) * tau, "k": (_t(ds) @ q) * tau}


def _unmasked_p(q, k, v, p, g, tau, dp, ds):
    p = _softmax((q @ _t(k)) * tau, -1)  # P recomputed without the causal mask
    ds = _softmax_ds(p, g @ _t(v))
    return {"q": (ds @ k) * tau, "k": (_t(ds) @ q) * tau, "v": _t(p) @ g}


def _attention_softmax(ds_fn):
    """A softmax mistake inside attention: dS from dP is wrong, the rest is right."""

    def fn(q, k, v, p, g, tau, dp, ds):
        wrong = _try(lambda: ds_fn(p, dp, -1))
        if wrong is None:
            return {}
        return {"q": (wrong @ k) * tau, "k": (_t(wrong) @ q) * tau}

    return fn


ATTENTION = (
    Mistake(
        "attention-dk-missing-transpose",
        "dK = τ·dS·Q is missing a transpose: S = τ·Q·Kᵀ uses K transposed, so exercise 5 "
        "gives the gradient of Kᵀ first (step 4 of 13_attention.md)",
        _attention(lambda q, k, v, p, g, tau, dp, ds: {"k": _try(lambda: (ds @ q) * tau)}),
    ),
    Mistake(
        "attention-dq-transposed-ds",
        "dQ uses dSᵀ; S = τ·Q·Kᵀ has Q in front, so its gradient takes dS as it is "
        "(step 4 of 13_attention.md)",
        _attention(lambda q, k, v, p, g, tau, dp, ds: {"q": _try(lambda: (_t(ds) @ k) * tau)}),
    ),
    Mistake(
        "attention-dq-transposed-k",
        "dQ uses Kᵀ: S = τ·Q·Kᵀ is exercise 5 with y = Kᵀ, and ∂L/∂x takes y transposed: "
        "(Kᵀ)ᵀ = K (step 4 of 13_attention.md)",
        _attention(lambda q, k, v, p, g, tau, dp, ds: {"q": _try(lambda: (ds @ _t(k)) * tau)}),
    ),
    Mistake(
        "attention-dp-missing-transpose",
        "dP = g·V is missing a transpose: O = P·V is exercise 5 with y = V, and ∂L/∂x takes "
        "y transposed (step 1 of 13_attention.md)",
        _attention(_dp_without_transpose),
    ),
    Mistake(
        "attention-dp-g-transposed",
        "dP = gᵀ·V: O = P·V is exercise 5 with x = P, and ∂L/∂x = g times V transposed "
        "(step 1 of 13_attention.md); g keeps its place",
        _attention(_dp_from_g_transposed),
    ),
    Mistake(
        "attention-dv-missing-transpose",
        "dV = P·g is missing a transpose: O = P·V is exercise 5 with x = P, so dV takes P "
        "transposed (step 1 of 13_attention.md)",
        _attention(lambda q, k, v, p, g, tau, dp, ds: {"v": _try(lambda: p @ g)}),
    ),
    Mistake(
        "attention-missing-scale",
        "τ = 1/√d is missing: S = τ·Q·Kᵀ, so dQ and dK both carry τ (step 4 of 13_attention.md)",
        _attention(lambda q, k, v, p, g, tau, dp, ds: {"q": ds @ k, "k": _t(ds) @ q}),
    ),
    Mistake(
        "attention-scale-twice",
        "τ applied twice: S = τ·Q·Kᵀ brings one τ into dQ and dK (step 4 of 13_attention.md)",
        _attention(
            lambda q, k, v, p, g, tau, dp, ds: {
                "q": (ds @ k) * tau * tau,
                "k": (_t(ds) @ q) * tau * tau,
            }
        ),
    ),
    Mistake(
        "attention-scale-inverted",
        "multiplied by √d; forward multiplies the scores by τ = 1/√d (step 4 of 13_attention.md)",
        _attention(
            lambda q, k, v, p, g, tau, dp, ds: {"q": (ds @ k) / tau, "k": (_t(ds) @ q) / tau}
        ),
    ),
    Mistake(
        "attention-scale-on-dv",
        "dV has no τ: O = P·V, and τ enters only through S (steps 1 and 4 of 13_attention.md)",
        _attention(lambda q, k, v, p, g, tau, dp, ds: {"v": (_t(p) @ g) * tau}),
    ),
    Mistake(
        "attention-unmasked-p",
        "your P has no causal mask: recomputing the softmax in backward, you left out the "
        "-∞ for j > i. Use the P forward saved (self.p), masked entries 0",
        _attention(_unmasked_p),
    ),
    Mistake(
        "attention-skipped-softmax",
        "dS = dP: the softmax between S and P was skipped; step 2 of 13_attention.md runs "
        "dP back through it (exercise 8)",
        _attention(
            lambda q, k, v, p, g, tau, dp, ds: {
                "q": (dp * (p > 0) @ k) * tau,
                "k": (_t(dp * (p > 0)) @ q) * tau,
            }
        ),
    ),
    Mistake(
        "attention-skipped-softmax-unmasked",
        "dS = dP: the softmax between S and P was skipped; step 2 of 13_attention.md runs "
        "dP back through it (exercise 8)",
        _attention(
            lambda q, k, v, p, g, tau, dp, ds: {"q": (dp @ k) * tau, "k": (_t(dp) @ q) * tau}
        ),
    ),
    *(
        Mistake(
            f"attention-softmax-{key}",
            f"in the softmax step (step 2 of 13_attention.md, exercise 8): {words}",
            _attention(_attention_softmax(ds)),
        )
        for key, (ds, words) in SOFTMAX_DS.items()
        if key not in ("last-axis", "first-axis")
    ),
    Mistake(
        "attention-softmax-wrong-axis",
        "in the softmax step (step 2 of 13_attention.md): the softmax runs along each row of "
        "S (the last axis, over keys); your sum runs down the columns",
        _attention(
            _attention_softmax(lambda p, g, dim: p * (g - (g * p).sum(axis=-2, keepdims=True)))
        ),
    ),
)


# ---- the terms of a derivation: one of them missing, doubled, flipped or scaled ---------------
#
# Where the right gradient is a sum of terms with a known origin (the two terms of a product
# rule, the paths from x through μ and σ²), a gradient that differs from it by a multiple of one
# or two of those terms is named by term: "the path through μ is missing", "... has the wrong
# sign". That covers the variants of a mistake that no list foresees.


def _gelu_terms(a, p, g):
    x = a["x"]
    cdf, pdf, t, du = _gelu_parts(x)
    first = "the product rule's first term (from differentiating the factor x)"
    if p["approximate"] == "tanh":
        second = "the product rule's second term (tanh(u) differentiated through u, step 2)"
        return {
            "x": [
                ("first", first, g * 0.5 * (1 + t)),
                ("second", second, g * 0.5 * x * (1 - t * t) * du),
            ]
        }
    second = "the product rule's second term (Φ(x) differentiated, step 1)"
    return {"x": [("first", first, g * cdf), ("second", second, g * x * pdf)]}


def _cross_entropy_terms(a, p, g):
    z, target = a["logits"], p["target"]
    n = z.shape[0]
    probs = _softmax(z, -1)
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), target] = 1
    return {
        "logits": [
            ("softmax", "the term from log Σⱼ e^(z[j]) (the softmax's)", g * probs / n),
            ("true-class", "the term from z[y] (the true class's)", -g * onehot / n),
        ]
    }


def _softmax_terms(a, prm, g):
    p = _softmax(a["x"], prm["dim"])
    return {
        "x": [
            ("delta", "the δᵢⱼ term of ∂pᵢ/∂xⱼ (step 2)", p * g),
            (
                "row-sum",
                "the -pᵢpⱼ term of ∂pᵢ/∂xⱼ, a sum over the row (step 2)",
                -p * (g * p).sum(axis=prm["dim"], keepdims=True),
            ),
        ]
    }


def _norm_terms(axis, center):
    def terms(a, p, g):
        x, w = a["x"], a["weight"]
        xhat, r, _ = _normalize(x, axis, center)
        gh = g * w
        paths = [("direct", "the direct path, through x̂ with the statistics held fixed", r * gh)]
        if center:
            paths.append(("mean", "the path through μ", -r * gh.mean(axis=axis, keepdims=True)))
        paths.append(
            (
                "variance" if center else "r",
                "the path through σ² (hence r)" if center else "the path through r",
                -r * xhat * (gh * xhat).mean(axis=axis, keepdims=True),
            )
        )
        return {"x": paths}

    return terms


TERMS: dict[str, Callable[[Grads, dict, np.ndarray], dict[str, list]]] = {
    "GELU": _gelu_terms,
    "Softmax": _softmax_terms,
    "SoftmaxCrossEntropy": _cross_entropy_terms,
    "RMSNorm": _norm_terms(-1, False),
    "LayerNorm": _norm_terms(-1, True),
    "BatchNorm": _norm_terms(0, True),
}


def _coefficient(k: float, constants: dict) -> str:
    """How a term that should appear once appears k times, in words."""
    for name, value in constants.items():
        if value > 2 and np.isclose(k, value / (value - 1), rtol=1e-4):
            return f"is {name}/({name}-1) times what it should be: {name}-1 where {name} belongs"
        if value > 1 and np.isclose(k, value, rtol=1e-4):
            return f"is {name} times what it should be: a 1/{name} is missing"
        if value > 1 and np.isclose(k, 1 / value, rtol=1e-4):
            return f"is 1/{name} times what it should be: divided by {name} once too often"
    if abs(k) < 1e-3:
        return "is missing"
    if np.isclose(k, -1, rtol=1e-3):
        return "has the wrong sign"
    if np.isclose(k, 2, rtol=1e-3):
        return "is counted twice (or carries a stray factor 2)"
    return f"is {k:.4g} times what it should be"


def _term_mistake(function, name, yours, case, g, right):
    """(key, hint) when yours - right is a combination of one or two of the derivation's
    terms for this input; None otherwise."""
    fn = TERMS.get(function)
    terms = fn(case.arrays, case.params, g).get(name) if fn else None
    if not terms or yours.shape != right[name].shape:
        return None
    diff = (yours - right[name]).reshape(-1)
    basis = [np.broadcast_to(t, yours.shape).reshape(-1) for _, _, t in terms]
    for size in (1, 2):
        for subset in combinations(range(len(terms)), size):
            a = np.stack([basis[i] for i in subset], axis=1)
            c = np.linalg.lstsq(a, diff, rcond=None)[0]
            if not np.allclose(a @ c, diff, rtol=RTOL, atol=ATOL) or np.any(np.abs(c) < 1e-3):
                continue
            if size == len(terms) and np.allclose(c, c[0], rtol=1e-3):
                return None  # every term scaled alike: a factor, which diagnosis names
            parts = [
                f"{terms[i][1]} {_coefficient(1 + ci, case.constants)}" for i, ci in zip(subset, c)
            ]
            key = "term:" + "+".join(terms[i][0] for i in subset)
            rest = " (the other terms are right)" if len(terms) > size else ""
            return key, "compared with the derivation, term by term: " + "; ".join(parts) + rest
    return None


BY_FUNCTION: dict[str, tuple[Mistake, ...]] = {
    "ReLU": RELU,
    "Sigmoid": SIGMOID,
    "BroadcastAdd": BROADCAST_ADD,
    "SumDim": SUM,
    "MeanDim": MEAN,
    "MatMul": MATMUL,
    "BatchedMatMul": BATCHED_MATMUL,
    "GELU": GELU,
    "Embedding": EMBEDDING,
    "Softmax": SOFTMAX,
    "SoftmaxCrossEntropy": CROSS_ENTROPY,
    "RMSNorm": RMSNORM,
    "LayerNorm": LAYERNORM,
    "BatchNorm": BATCHNORM,
    "CausalAttention": ATTENTION,
}


def _rescaled(a, b) -> bool:
    """True when a is b times a constant (or zero): such a mistake cannot be told apart from
    another factor on top of it, so it is not combined with one."""
    if a.shape != b.shape:
        return False
    energy = float((b * b).sum())
    if energy == 0 or not (a * a).sum() > 0:
        return True
    return _close(a, float((a * b).sum()) / energy * b)


def _close(a, b) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL))


def recognise(function, name, yours, case, g, right) -> list[tuple[str, str]]:
    """The mistakes whose gradient for input `name` equals `yours`: [(key, hint)], best first.

    A mistake counts only where it makes a difference: if its gradient equals the right one on
    this case, it says nothing here. Two mistakes are tried for every op: the gradients
    returned in the wrong order, and g returned as it came. A gradient that equals a known
    mistake times a named size (N, D, √d) is named too, with the factor."""
    yours = np.asarray(yours)
    found, near = [], []
    for mistake in BY_FUNCTION.get(function, ()):
        try:
            wrong = mistake.grads(case.arrays, case.params, g, right).get(name)
        except Exception:  # a mistake that does not apply to this case's shapes
            continue
        if wrong is None or _close(wrong, right[name]):
            continue
        wrong = np.asarray(wrong)
        if _close(yours, wrong):
            if mistake.key not in (k for k, _ in found):
                found.append((mistake.key, mistake.says))
        elif wrong.shape == yours.shape and not _rescaled(wrong, right[name]):
            c = float((yours * wrong).sum()) / float((wrong * wrong).sum())
            named = _named_factor(c, case.constants) if c != 1 else None
            if named and _close(yours, c * wrong):
                near.append((mistake.key, f"{mistake.says}; and on top of that, {named}"))
    if found:
        return found
    with np.errstate(all="ignore"):
        by_term = _term_mistake(function, name, yours, case, g, right)
    if by_term:
        return [by_term]
    for other, grad in right.items():
        if other != name and _close(yours, grad) and not _close(right[name], grad):
            order = ", ".join(right)
            found.append(
                (
                    "swapped",
                    f"your gradient for {name} is exactly the right gradient for {other}: the "
                    f"gradients are returned in the wrong order (or {other}'s formula was used "
                    f"for {name}). Return them in the order forward takes its inputs: {order}",
                )
            )
    if g.shape == right[name].shape and _close(yours, g) and not _close(right[name], g):
        found.append(
            (
                "returned-g",
                "you returned g as it came: the chain rule multiplies it by the local "
                "derivative of the output with respect to this input",
            )
        )
    return found or near[:1]
