"""The terms of a derivation: a gradient that differs from the right one by a multiple of one
or two of its terms (a product rule's, a path through a statistic) is named term by term."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np

from ..diagnosis import ATOL, RTOL
from .base import Grads, _softmax
from .elementwise import _gelu_parts
from .norms import _normalize

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


def _softmax_backward_terms(a, prm, g):
    """14 second order: x reaches gx = p∘(gy - s) through the factor p and through s."""
    dim = prm["dim"]
    p = _softmax(a["x"], dim)
    gy = a["gy"]
    s = (gy * p).sum(axis=dim, keepdims=True)

    def vjp(v):  # exercise 8's VJP, ∂/∂p taken to ∂/∂x
        return p * (v - (v * p).sum(axis=dim, keepdims=True))

    gp = (g * p).sum(axis=dim, keepdims=True)
    return {
        "x": [
            (
                "front-p",
                "the path through the factor p in front of (gy - s) (part 2, step 3)",
                vjp(g * (gy - s)),
            ),
            ("s", "the path through s = Σ gy∘p (part 2, step 3)", vjp(-gp * gy)),
        ],
        "gy": [
            ("delta", "the δᵢⱼ term of J = ∂gx/∂gy (part 2, step 2)", p * g),
            ("row-sum", "the -pᵢpⱼ term of J, a sum over the row (part 2, step 2)", -p * gp),
        ],
    }


def _relu_terms(a, p, g):
    """ReLU's slope is 1 where x > 0 and 0 where x < 0: the second "term" should be absent."""
    x = a["x"]
    return {
        "x": [
            ("positive", "the gradient where x > 0", g * (x > 0)),
            ("negative", "the gradient where x < 0", g * (x < 0), 0.0),
        ]
    }


TERMS: dict[str, Callable[[Grads, dict, np.ndarray], dict[str, list]]] = {
    "ReLU": _relu_terms,
    "GELU": _gelu_terms,
    "Softmax": _softmax_terms,
    "SoftmaxCrossEntropy": _cross_entropy_terms,
    "RMSNorm": _norm_terms(-1, False),
    "LayerNorm": _norm_terms(-1, True),
    "BatchNorm": _norm_terms(0, True),
    "SoftmaxBackward": _softmax_backward_terms,
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
    basis = [np.broadcast_to(t[2], yours.shape).reshape(-1) for t in terms]
    expected = [t[3] if len(t) > 3 else 1.0 for t in terms]  # how often each term belongs
    for size in (1, 2):
        for subset in combinations(range(len(terms)), size):
            a = np.stack([basis[i] for i in subset], axis=1)
            c = np.linalg.lstsq(a, diff, rcond=None)[0]
            if not np.allclose(a @ c, diff, rtol=RTOL, atol=ATOL) or np.any(np.abs(c) < 1e-3):
                continue
            if size == len(terms) and np.allclose(c, c[0], rtol=1e-3):
                return None  # every term scaled alike: a factor, which diagnosis names
            parts = [
                f"{terms[i][1]} {_coefficient(expected[i] + ci, case.constants)}"
                if expected[i]
                else f"{terms[i][1]} is {ci:.4g}·g where it should be 0 (the slope there)"
                for i, ci in zip(subset, c)
            ]
            key = "term:" + "+".join(terms[i][0] for i in subset)
            rest = " (the other terms are right)" if len(terms) > size else ""
            return key, "compared with the derivation, term by term: " + "; ".join(parts) + rest
    return None
