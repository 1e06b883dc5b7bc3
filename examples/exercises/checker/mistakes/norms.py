"""Mistakes in the VJPs of the normalizations: 10 RMSNorm, 11 LayerNorm, 12 BatchNorm (one
list, written once for the three, with their axes)."""

from __future__ import annotations

import numpy as np

from .base import Mistake, _rows, _some, _try


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
        Mistake(
            f"{exercise[3:]}-param-grads-times-w",
            f"the parameters' gradients take g as it comes (step 1 of {md}): ĝ = g·w is what "
            "reaches x̂, not what reaches w or b",
            lambda a, p, g, right: {
                "weight": reduce(g * a["weight"] * _normalize(a["x"], axis, "bias" in a)[0]),
                **({"bias": reduce(g * a["weight"])} if "bias" in a else {}),
            },
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
