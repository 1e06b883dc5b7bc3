"""Mistakes in the softmax Jacobian (8, and inside 13 attention) and in softmax +
cross-entropy (9)."""

from __future__ import annotations

import numpy as np

from .base import Mistake, _softmax, _some, _try

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
