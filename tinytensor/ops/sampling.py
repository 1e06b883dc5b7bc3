"""Sampling indices from categorical distributions: `multinomial` (PyTorch's)."""

from __future__ import annotations

import math

import numpy as np

from ..backend import move_array
from ..random import _rng
from ..tensor import Tensor


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Draws `num_samples` category indices per row of non-negative weights `input` (1-D or 2-D).

    With replacement: inverse-CDF sampling of uniforms. Without: the Gumbel-top-k trick
    (argtop-k of log w + Gumbel noise), which is the same distribution as drawing one at a time
    and removing what was drawn. Zero-weight categories are never drawn.
    """
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"multinomial: input must be a floating tensor, got {_kind(input)}")
    if not isinstance(replacement, (bool, np.bool_)):
        raise TypeError(f"multinomial: replacement must be a bool, got {replacement!r}")
    if input.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1-d or 2-d, got shape {tuple(input.shape)}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int):
        raise TypeError(
            f"multinomial: num_samples must be an int, got {type(num_samples).__name__} "
            f"{num_samples!r}"
        )
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    w = input.numpy().astype("float64").reshape(-1, input.shape[-1])
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        raise ValueError(
            f"multinomial: weights must be finite and non-negative, got {w[bad][0]} "
            f"(at flat position {int(np.flatnonzero(bad)[0])})"
        )
    totals = w.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError("multinomial: every row needs a positive sum of weights")
    n = w.shape[1]
    rng = _rng(generator)
    if replacement:
        cdf = w.cumsum(axis=1) / totals[:, None]
        u = rng.random((w.shape[0], num_samples))
        out = (u[:, :, None] >= cdf[:, None, :]).sum(axis=2).clip(max=n - 1)
    else:
        nonzero = (w > 0).sum(axis=1).min()
        if num_samples > nonzero:
            raise ValueError(
                f"multinomial: cannot draw {num_samples} samples without replacement from a row "
                f"with only {int(nonzero)} categories of non-zero weight (of {n})"
            )
        log_w = np.log(np.where(w > 0, w, 1.0))
        keys = np.where(w > 0, log_w + rng.gumbel(size=w.shape), -math.inf)
        out = (-keys).argsort(axis=1, kind="stable")[:, :num_samples]
    out = out.astype("int64")
    if input.ndim == 1:
        out = out[0]
    return Tensor._wrap(move_array(out, input.device), False, None)


def _kind(value):
    return f"a {value.dtype} tensor" if isinstance(value, Tensor) else type(value).__name__
