"""Mistakes in the VJPs of a backward (14 second order): tanh's backward gx = gy·(1 - y²) and
softmax's, gx = p∘(gy - s), both as ops of (x, gy)."""

from __future__ import annotations

import re

import numpy as np

from .base import Mistake, _softmax, _some, _try

TANH_MD = "part 1 of 14_second_order.md"
SOFTMAX_MD = "part 2 of 14_second_order.md"


def _tanh(fn):
    """A wrong gradient of TanhBackward: fn(y, gy, g) -> {input name: array}."""
    return lambda a, p, g, right: fn(np.tanh(a["x"]), a["gy"], g)


def _d(y):
    return 1 - y * y


NO_GY_PATH = {
    "TanhBackward": (
        "tanh2-no-gy-path",
        "gy got no gradient, but gy is an input of this op like x, not a constant: gx changes "
        "when gy does. In a gradient penalty gy depends on the weights too, and in a "
        f"Hessian-vector product gy is the vector, so that path is needed (step 2 of {TANH_MD})",
    ),
    "SoftmaxBackward": (
        "softmax2-no-gy-path",
        "gy got no gradient, but gy is an input of this op like x, not a constant: gx = J·gy "
        f"changes when gy does (step 2 of {SOFTMAX_MD})",
    ),
}


def _zeros_for_gy(function):
    key, says = NO_GY_PATH[function]
    return Mistake(key, says, lambda a, p, g, right: {"gy": np.zeros_like(a["gy"])})


TANH_BACKWARD = (
    Mistake(
        "tanh2-dx-sign",
        "∂L/∂x has the wrong sign: 1 - y² gets smaller as y grows, so its derivative with "
        f"respect to y is negative for y > 0 (step 3 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"x": 2 * g * gy * y * _d(y)}),
    ),
    Mistake(
        "tanh2-dx-missing-2",
        "∂L/∂x is half the right one: the power rule's 2 in d(y²)/dy is missing (step 3 of "
        f"{TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -g * gy * y * _d(y)}),
    ),
    Mistake(
        "tanh2-dx-missing-chain",
        "you differentiated 1 - y² with respect to y and stopped there: the input is x, and y = "
        "tanh(x) depends on it, so the chain rule needs a second factor, dy/dx (step 3 of "
        f"{TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -2 * g * gy * y}),
    ),
    Mistake(
        "tanh2-dx-chain-factor-y",
        "your chain-rule factor dy/dx is y itself: tanh'(x) written with y is not y (that is "
        f"eˣ's derivative); it is the factor you know from tanh's backward (step 3 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -2 * g * gy * y * y}),
    ),
    Mistake(
        "tanh2-dx-chain-factor-squared",
        "your chain-rule factor dy/dx appears twice: d(1 - y²)/dy brings -2y, and dy/dx "
        f"multiplies it once (step 3 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -2 * g * gy * y * _d(y) ** 2}),
    ),
    Mistake(
        "tanh2-dx-missing-gy",
        "∂L/∂x lost the factor gy: gx = gy·(1 - y²), and with gy held fixed its derivative with "
        f"respect to x keeps gy as a factor (step 3 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -2 * g * y * _d(y)}),
    ),
    Mistake(
        "tanh2-dx-first-order",
        "for x you returned tanh's first-order VJP of g, what the forward does to gy; but this "
        "op's output is gx, and x reaches gx through 1 - y²: differentiate that (step 3 of "
        f"{TANH_MD})",
        _tanh(lambda y, gy, g: {"x": g * _d(y)}),
    ),
    Mistake(
        "tanh2-dx-both-paths",
        "∂L/∂x has ∂L/∂gy's term added to it: x and gy are two inputs, each with its own "
        f"gradient; the path through gy belongs to gy alone (steps 2 and 3 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -2 * g * gy * y * _d(y) + g * _d(y)}),
    ),
    Mistake(
        "tanh2-one-minus-y-all-squared",
        "(1 - y)**2 is not 1 - y²: the power binds tighter than the minus, so write y**2 (or "
        f"y*y) inside, 1 - y**2; both gradients use it (steps 2 and 3 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"x": -2 * g * gy * y * (1 - y) ** 2, "gy": g * (1 - y) ** 2}),
    ),
    Mistake(
        "tanh2-tanh-of-y",
        "you applied tanh to self.y, which is tanh(x) already: the derivatives are written with "
        f"y = tanh(x) itself, no second tanh (steps 2 and 3 of {TANH_MD})",
        lambda a, p, g, right: (
            lambda y, gy: {
                "x": -2 * g * gy * y * _d(y),
                "gy": g * _d(y),
            }
        )(np.tanh(np.tanh(a["x"])), a["gy"]),
    ),
    Mistake(
        "tanh2-dgy-times-gy",
        "∂L/∂gy carries an extra gy: gx is linear in gy, so its derivative with respect to gy "
        f"no longer contains gy (step 2 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"gy": g * gy * _d(y)}),
    ),
    Mistake(
        "tanh2-dgy-y",
        "∂L/∂gy is g·y: the factor that multiplies gy in the forward is not y (step 2 of "
        f"{TANH_MD})",
        _tanh(lambda y, gy, g: {"gy": g * y}),
    ),
    Mistake(
        "tanh2-dgy-second-derivative",
        "∂L/∂gy is what x should get, without gy: differentiating with respect to gy holds x "
        f"(so y) fixed, no derivative of 1 - y² is taken (step 2 of {TANH_MD})",
        _tanh(lambda y, gy, g: {"gy": -2 * g * y * _d(y)}),
    ),
    _zeros_for_gy("TanhBackward"),
)


def _vjp(p, a, dim):
    """Exercise 8's VJP: a gradient with respect to p = softmax(x), taken to x."""
    return p * (a - (a * p).sum(axis=dim, keepdims=True))


def _softmax2(fn):
    """A wrong gradient of SoftmaxBackward: fn(p, gy, s, g, total, dim) -> {name: array}, with
    total(v) the sum of v over dim (keepdims)."""

    def grads(a, prm, g, right):
        dim = prm["dim"]
        p = _softmax(a["x"], dim)
        s = (a["gy"] * p).sum(axis=dim, keepdims=True)

        def total(v):
            return v.sum(axis=dim, keepdims=True)

        return _some(**(_try(lambda: fn(p, a["gy"], s, g, total, dim)) or {}))

    return grads


def _through_p(p, gy, s, g, total):
    """The right ∂L/∂p (x held out): from the factor p in front, and from s."""
    return g * (gy - s) - total(g * p) * gy


SOFTMAX_BACKWARD = (
    Mistake(
        "softmax2-s-held-constant",
        "you held s = Σ gy∘p fixed when differentiating with respect to p: s is made of p as "
        "well, so M reaches p along a second path, through s, and ∂M/∂p gets a second term "
        f"(step 3 of {SOFTMAX_MD}). A term of ∂M/∂p that is the same for every j of a row (a "
        "∂s/∂pₖ without its gyₖ) counts as missing too: exercise 8's VJP maps it to 0",
        _softmax2(lambda p, gy, s, g, total, dim: {"x": _vjp(p, g * (gy - s), dim)}),
    ),
    Mistake(
        "softmax2-front-p-missing",
        "only the path through s: p also appears as the factor in front of (gy - s), and the "
        f"product rule gives ∂M/∂p a term from it (step 3 of {SOFTMAX_MD})",
        _softmax2(lambda p, gy, s, g, total, dim: {"x": _vjp(p, -total(g * p) * gy, dim)}),
    ),
    Mistake(
        "softmax2-dp-not-through-softmax",
        "that is ∂M/∂p, the gradient with respect to the probabilities; the input is x, and p = "
        f"softmax(x): take it to x with exercise 8's VJP (step 4 of {SOFTMAX_MD})",
        _softmax2(lambda p, gy, s, g, total, dim: {"x": _through_p(p, gy, s, g, total)}),
    ),
    Mistake(
        "softmax2-dp-diagonal-only",
        "∂M/∂p went to x through the diagonal of softmax's Jacobian alone, pⱼ(1 - pⱼ); exercise "
        f"8's VJP has the row-sum term too (step 4 of {SOFTMAX_MD})",
        _softmax2(
            lambda p, gy, s, g, total, dim: {"x": p * (1 - p) * _through_p(p, gy, s, g, total)}
        ),
    ),
    Mistake(
        "softmax2-dp-times-p",
        "∂M/∂p went to x multiplied by p alone: that is the δᵢⱼ term of softmax's Jacobian; "
        f"exercise 8's VJP also subtracts a sum over the row (step 4 of {SOFTMAX_MD})",
        _softmax2(lambda p, gy, s, g, total, dim: {"x": p * _through_p(p, gy, s, g, total)}),
    ),
    Mistake(
        "softmax2-s-term-sum-of-g",
        "in the term through s, the sum over j is Σⱼ gⱼ alone: each gxⱼ = pⱼ(gyⱼ - s) carries "
        f"its factor pⱼ, and it stays in that sum (step 3 of {SOFTMAX_MD})",
        _softmax2(
            lambda p, gy, s, g, total, dim: {"x": _vjp(p, g * (gy - s) - total(g) * gy, dim)}
        ),
    ),
    Mistake(
        "softmax2-dx-first-order",
        "for x you returned softmax's first-order VJP of g, which is ∂M/∂gy; x reaches gx "
        f"through p, twice (the factor in front and s): step 3 of {SOFTMAX_MD}",
        _softmax2(lambda p, gy, s, g, total, dim: {"x": _vjp(p, g, dim)}),
    ),
    Mistake(
        "softmax2-dx-plus-first-order",
        "∂M/∂x has softmax's first-order VJP of g added to it: that is ∂M/∂gy, the path "
        f"through gy; x's gradient comes through p alone (steps 2 and 3 of {SOFTMAX_MD})",
        _softmax2(
            lambda p, gy, s, g, total, dim: {
                "x": _vjp(p, _through_p(p, gy, s, g, total), dim) + _vjp(p, g, dim)
            }
        ),
    ),
    Mistake(
        "softmax2-front-term-keeps-p",
        "the term from p's own factor kept its p: the derivative of pⱼ·(gyⱼ - s) with respect "
        "to pⱼ (s held fixed) has no pⱼ left; gx = p∘(gy - s) is not that term (step 3 of "
        f"{SOFTMAX_MD})",
        _softmax2(
            lambda p, gy, s, g, total, dim: {
                "x": _vjp(p, g * p * (gy - s) - total(g * p) * gy, dim)
            }
        ),
    ),
    Mistake(
        "softmax2-dgy-s-held-constant",
        "∂M/∂gy treats s as a constant, but s = Σ gy∘p is made of gy: gx = J·gy, and its VJP "
        f"is a whole softmax VJP (step 2 of {SOFTMAX_MD})",
        _softmax2(lambda p, gy, s, g, total, dim: {"gy": p * g}),
    ),
    Mistake(
        "softmax2-dgy-diagonal-only",
        "∂M/∂gy is the diagonal of J alone, pⱼ(1 - pⱼ)·gⱼ; J's i ≠ j entries add a sum over "
        f"the row (step 2 of {SOFTMAX_MD})",
        _softmax2(lambda p, gy, s, g, total, dim: {"gy": p * (1 - p) * g}),
    ),
    Mistake(
        "softmax2-no-keepdims",
        "a sum over self.dim was taken without keepdims=True, so NumPy broadcast it along the "
        "wrong dim: each row got another row's sum (keep the summed dim as size 1)",
        _softmax2(
            lambda p, gy, s, g, total, dim: {
                "x": (lambda gp: p * (gp - (gp * p).sum(axis=dim)))(
                    g * (gy - s) - (g * p).sum(axis=dim) * gy
                ),
                "gy": p * (g - (g * p).sum(axis=dim)),
            }
        ),
    ),
    _zeros_for_gy("SoftmaxBackward"),
)


def no_keepdims_error_hint(error, case):
    """A sum over dim without keepdims, where the shapes do not broadcast: (cause, hint)."""
    x, dim = case.arrays["x"], case.params["dim"]
    reduced = tuple(n for i, n in enumerate(x.shape) if i != dim % x.ndim)
    shapes = re.findall(r"\(([\d, ]*)\)", str(error))
    found = {tuple(int(n) for n in s.replace(",", " ").split()) for s in shapes}
    if not isinstance(error, ValueError) or "broadcast" not in str(error) or reduced not in found:
        return None
    return (
        "softmax2-no-keepdims",
        f"{reduced} is x {x.shape} with dim {dim} summed away: a sum over self.dim without "
        "keepdims=True drops that dim, and the result no longer lines up with the rows it "
        "belongs to (keep it as size 1: keepdims=True)",
    )
