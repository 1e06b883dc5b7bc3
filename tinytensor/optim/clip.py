"""Gradient clipping: `clip_grad_norm_` and `clip_grad_value_` (and the deprecated
`clip_grad_norm`), as `torch.nn.utils`.

They live with the optimizers because they act on gradients right before `step()`; nn
re-exports them as `tt.nn.utils.clip_grad_norm_` (PyTorch's location).
"""

from __future__ import annotations

import math
import warnings

from ..backend import get_array_module
from ..ops._checks import check_finite
from ..tensor import Tensor
from .optimizer import _as_param_list


def _grads(parameters, where):
    params = _as_param_list(parameters, where)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{where}: parameter {i} is a {type(p).__name__}, not a Tensor")
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite=False):
    """Scales all gradients together so that their joint norm is at most `max_norm`.

    total_norm = ||(||g_1||_p, ..., ||g_n||_p)||_p (the p-norm of all gradients concatenated);
    every gradient is multiplied by min(1, max_norm / (total_norm + 1e-6)), in place.

    Args:
        parameters: a Tensor, an iterable of Tensors, or a module (anything with
            `parameters()`); those without a gradient are skipped.
        max_norm: the largest allowed norm.
        norm_type: p of the p-norm; `float("inf")` for the largest absolute value.
        error_if_nonfinite: raise if the total norm is nan or inf (otherwise the gradients
            become nan, as in PyTorch).

    Returns:
        The total norm before clipping, a 0-d Tensor (for logging).

    Example:
        >>> loss.backward()
        >>> tt.optim.clip_grad_norm_(model.parameters(), max_norm=1.0)
        >>> opt.step()
    """
    check_finite(max_norm, "clip_grad_norm_", "max_norm", low=0.0)
    norm_type = _norm_type(norm_type, "clip_grad_norm_")
    grads = _grads(parameters, "clip_grad_norm_")
    if not grads:
        return Tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, where="clip_grad_norm_")
    _scale(grads, max_norm, total)  # (the gradients, not `parameters`: an iterator, read above)
    return total


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None, *,
                   where="get_total_norm"):  # fmt: skip
    """||(||t_1||_p, ..., ||t_n||_p)||_p: the p-norm of all tensors concatenated (a 0-d
    Tensor; norm_type inf: the largest absolute value), as torch.nn.utils.get_total_norm."""
    norm_type = _norm_type(norm_type, where)
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not tensors:
        return Tensor(0.0)
    xp = get_array_module(tensors[0]._array)
    if norm_type == math.inf:
        norms = [
            xp.abs(t._array).max() if t._array.size else xp.zeros((), t.dtype) for t in tensors
        ]
        total = xp.max(xp.stack(norms))
    else:
        norms = [xp.sum(xp.abs(t._array) ** norm_type) for t in tensors]
        total = xp.sum(xp.stack(norms)) ** (1.0 / norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"{where}: the total {norm_type}-norm of the gradients is {float(total)}; "
            "pass error_if_nonfinite=False to clip anyway"
        )
    return Tensor._wrap(xp.asarray(total), False, None)


def _norm_type(norm_type, where) -> float:
    try:
        norm_type = float(norm_type)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: norm_type must be a number (or inf), got {norm_type!r}"
        ) from None
    if math.isnan(norm_type) or norm_type <= 0:
        raise ValueError(f"{where}: norm_type must be positive, got {norm_type}")
    return norm_type


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None) -> None:
    """Scales the gradients by min(1, max_norm / (total_norm + 1e-6)), in place (the second
    half of clip_grad_norm_, given the norm: torch.nn.utils.clip_grads_with_norm_)."""
    _scale(_grads(parameters, "clip_grads_with_norm_"), max_norm, total_norm)


def _scale(grads, max_norm, total_norm) -> None:
    if not grads:
        return
    xp = get_array_module(grads[0]._array)
    total = total_norm._array if isinstance(total_norm, Tensor) else xp.asarray(total_norm)
    # NOTE: the 1e-6 keeps the division finite for zero gradients; as PyTorch, the coefficient
    # is applied even when it is 1 (so nan/inf norms propagate into the gradients).
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        g._array *= coef.astype(g.dtype)


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite=False):
    """The old name of `clip_grad_norm_` (older scripts call it); warns as PyTorch does."""
    warnings.warn(
        "`tt.nn.utils.clip_grad_norm` is now deprecated in favor of `tt.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters, clip_value: float) -> None:
    """Clamps every gradient element to [-clip_value, clip_value], in place."""
    clip_value = float(check_finite(clip_value, "clip_grad_value_", "clip_value", low=0.0))
    for g in _grads(parameters, "clip_grad_value_"):
        xp = get_array_module(g._array)
        xp.clip(g._array, -clip_value, clip_value, out=g._array)
