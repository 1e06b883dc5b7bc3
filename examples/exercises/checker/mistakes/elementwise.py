"""Mistakes in the elementwise chain rules: 1 ReLU, 2 sigmoid, 6 GELU."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erf

from .base import Mistake

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
