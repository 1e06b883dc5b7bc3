"""Mistakes in the VJP of 13 causal attention: transposes, the scale τ, the softmax step."""

from __future__ import annotations

import math

import numpy as np

from .base import Mistake, _softmax, _softmax_ds, _t, _try
from .softmax import SOFTMAX_DS


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
