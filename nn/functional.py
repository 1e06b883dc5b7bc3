"""`tinytensor.nn.functional` (import as F): the functional forms, as `torch.nn.functional`.

The fused ops live in the engine (`tinytensor/ops`); this module gathers them under PyTorch's
names, next to the losses and helpers that nn adds on top (composed from engine ops, so their
gradients come from the ops' VJPs).
"""

from __future__ import annotations

import math

import numpy as np

from tinytensor.creation import arange, ones_like, zeros_like
from tinytensor.ops import (  # noqa: F401 - re-exported
    clamp,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    one_hot,
    rms_norm,
    scaled_dot_product_attention,
    sigmoid,
    silu,
    softmax,
    stack,
    tanh,
)
from tinytensor.ops import cross_entropy as _fused_cross_entropy
from tinytensor.ops import relu as _relu
from tinytensor.ops import where as _where
from tinytensor.ops._checks import check_finite, check_real, check_tensor
from tinytensor.ops._util import normalize_dim
from tinytensor.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(losses, reduction, op):
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated `size_average`/`reduce` flags, where a program still passes them:
    reduce=False -> 'none', size_average=False -> 'sum', otherwise 'mean'."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is not None and not reduce:
        return "none"
    return "sum" if size_average is not None and not size_average else "mean"


def _check_pair(input, target, op):  # noqa: A002 - PyTorch's argument name
    for name, t in (("input", input), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: input must be floating point, got {input.dtype}")
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"{op}: input shape {tuple(input.shape)} and target shape {tuple(target.shape)} "
            "differ (broadcasting a loss is almost always a bug)"
        )


def _weighted_reduce(losses, weight, reduction, op):
    """PyTorch's weighted mse/l1: weight has the input's shape; 'mean' is Σ w·loss / Σ w."""
    if weight is None:
        return _reduce(losses, reduction, op)
    if not isinstance(weight, Tensor) or tuple(weight.shape) != tuple(losses.shape):
        raise ValueError(
            f"{op}: weight must have the input's shape {tuple(losses.shape)}, got "
            f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
        )
    weighted = losses * weight
    if reduction == "mean":
        return weighted.sum() / weight.sum()
    return _reduce(weighted, reduction, op)


def mse_loss(
    input,  # noqa: A002 - PyTorch's argument name
    target,
    size_average=None,
    reduce=None,
    reduction="mean",
    weight=None,
):
    """Mean squared error: (input - target)², reduced ('mean', 'sum' or 'none'); with `weight`
    (input's shape) w·(input - target)², and 'mean' divides by Σ w (as PyTorch)."""
    _check_pair(input, target, "mse_loss")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    diff = input - target
    return _weighted_reduce(diff * diff, weight, reduction, "mse_loss")


def l1_loss(
    input,  # noqa: A002 - PyTorch's argument name
    target,
    size_average=None,
    reduce=None,
    reduction="mean",
    weight=None,
):
    """Mean absolute error: |input - target|, reduced; `weight` as `mse_loss`.
    NOTE: d|x|/dx at 0 is 0 (as PyTorch)."""
    _check_pair(input, target, "l1_loss")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _weighted_reduce((input - target).abs(), weight, reduction, "l1_loss")


def smooth_l1_loss(
    input,  # noqa: A002
    target,
    size_average=None,
    reduce=None,
    reduction="mean",
    beta=1.0,
):
    """Smooth L1 (Fast R-CNN): with d = input - target,
    0.5·d²/β where |d| < β, |d| - 0.5·β elsewhere; β = 0 is the L1 loss. Reduced as `mse_loss`.

    Example:
        >>> F.smooth_l1_loss(boxes, target_boxes, beta=1.0)
    """
    _check_pair(input, target, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got beta={beta}")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    diff = (input - target).abs()
    if beta == 0:
        return _reduce(diff, reduction, "smooth_l1_loss")
    losses = _where(diff < beta, diff * diff * (0.5 / beta), diff - 0.5 * beta)
    return _reduce(losses, reduction, "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """Huber loss: with d = input - target, 0.5·d² where |d| < δ, δ·(|d| - 0.5·δ) elsewhere
    (= δ · smooth_l1_loss with β = δ). `weight` (input's shape) rescales each element.

    Example:
        >>> F.huber_loss(q_values, td_targets, delta=1.0)
    """
    _check_pair(input, target, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got delta={delta}")
    diff = (input - target).abs()
    losses = _where(diff < delta, diff * diff * 0.5, (diff - 0.5 * delta) * delta)
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != tuple(input.shape):
            raise ValueError(
                f"huber_loss: weight must have the input's shape {tuple(input.shape)}, got "
                f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
            )
        losses = losses * weight
    return _reduce(losses, reduction, "huber_loss")


def cross_entropy(
    input,  # noqa: A002
    target,
    weight=None,
    ignore_index=-100,
    reduction="mean",
    label_smoothing=0.0,
):
    """Cross-entropy of logits, as `torch.nn.functional.cross_entropy` (same argument order).

    Without `weight` this is the engine's fused op (tinytensor/ops/nn_ops.py). With a class
    weight w (C,), composed from log_softmax (as PyTorch):
        class ids:      loss_i = (1-ε)·w[y_i]·(-log p_i[y_i]) + ε/C·Σ_c w_c·(-log p_i[c]),
                        'mean' divides by Σ_i w[y_i] over the non-ignored positions;
        probabilities:  loss_i = -Σ_c w_c·q_c·log p_i[c] with q = (1-ε)·y + ε/C; 'mean' by N.
    """
    if weight is None:
        return _fused_cross_entropy(
            input,
            target,
            ignore_index=ignore_index,
            reduction=reduction,
            label_smoothing=label_smoothing,
        )
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"cross_entropy: reduction must be one of {_REDUCTIONS}, got {reduction!r}"
        )
    if not isinstance(weight, Tensor) or weight.shape != (input.shape[1 if input.ndim > 1 else 0],):
        raise ValueError(
            f"cross_entropy: weight must be a (C,) tensor for input {tuple(input.shape)}, got "
            f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
        )
    c = weight.shape[0]
    log_p = log_softmax(input, dim=1 if input.ndim > 1 else 0)
    if isinstance(target, Tensor) and target.dtype.kind == "f":
        q = target * (1 - label_smoothing) + label_smoothing / c
        shape = (c,) + (1,) * (input.ndim - 2) if input.ndim > 1 else (c,)
        losses = -(log_p * q * weight.reshape(shape)).sum(dim=1 if input.ndim > 1 else 0)
        return _reduce(losses, reduction, "cross_entropy")
    # class ids: move the class dim last, (M, C), as nll_loss wants
    flat = log_p.movedim(1, -1).reshape(-1, c) if input.ndim > 2 else log_p
    nll = nll_loss(
        flat,
        target.reshape(-1) if input.ndim > 2 else target,
        weight=weight,
        ignore_index=ignore_index,
        reduction="none",
    )
    if label_smoothing:
        keep = (target != ignore_index).to(input.dtype).reshape(nll.shape)
        smooth = -(flat * weight).sum(dim=-1) * keep
        losses = nll * (1 - label_smoothing) + smooth * (label_smoothing / c)
    else:
        losses = nll
    if reduction == "none":
        return losses.reshape(target.shape)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / _picked_weight(weight, target, ignore_index).sum()


def _picked_weight(weight, target, ignore_index):
    """w[y_i] at the non-ignored positions, 0 at the ignored ones (flattened)."""
    t = target.reshape(-1)
    keep = t != ignore_index
    ids = t._array.copy()
    ids[~keep._array] = 0
    return weight[Tensor._wrap(ids, False, None)] * keep.to(weight.dtype)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):  # noqa: A002
    """Negative log-likelihood of log-probabilities `input` (N, C) or (C,) at class ids `target`
    (N,) or (): loss_i = -w[target_i]·input[i, target_i] (w = 1 without `weight`). Positions
    whose target is `ignore_index` add nothing; 'mean' divides by Σ w[target_i] over the others
    (their count without weight), as PyTorch."""
    if not isinstance(target, Tensor) or target.dtype.kind not in "iu":
        raise TypeError("nll_loss: target must be an integer tensor of class ids")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"nll_loss: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    unbatched = input.ndim == 1
    x = input.unsqueeze(0) if unbatched else input
    t = target.reshape(1) if unbatched else target
    if x.ndim != 2 or tuple(t.shape) != (x.shape[0],):
        raise ValueError(
            f"nll_loss: expected input (N, C) and target (N,), got {tuple(input.shape)} and "
            f"{tuple(target.shape)}"
        )
    keep = t != ignore_index
    ids = t._array.copy()
    ids[~keep._array] = 0
    c = x.shape[1]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= c):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise IndexError(f"nll_loss: target id {bad} is out of range for {c} classes")
    picked = x.gather(1, Tensor._wrap(ids[:, None], False, None)).reshape(-1)  # (N,)
    picked_weight = keep.to(x.dtype)
    if weight is not None:
        picked_weight = _picked_weight(weight, t, ignore_index)
    losses = -picked * picked_weight
    if reduction == "none":
        return losses.reshape(()) if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / picked_weight.sum()  # NOTE: 0/0 = nan if all ignored, as PyTorch


def kl_div(
    input,  # noqa: A002
    target,
    size_average=None,
    reduce=None,
    reduction="mean",
    log_target=False,
):
    """Kullback-Leibler divergence KL(target ‖ model) with `input` = the model's log-probabilities:

        pointwise = target · (log target - input)          (0 where target = 0: 0·log 0 = 0)
                  = exp(target) · (target - input)          with log_target=True

    Reductions: 'batchmean' (the mathematical KL: sum / input.shape[0]), 'sum', 'none', and
    'mean' (sum / number of elements, PyTorch's default, which is *not* the KL divergence).

    Example:
        >>> F.kl_div(F.log_softmax(student, -1), F.softmax(teacher, -1), reduction="batchmean")
    """
    _check_pair(input, target, "kl_div")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_target:
        pointwise = target.exp() * (target - input)
    else:
        # NOTE: log of 1 where target is 0, so that 0·log 0 is 0 in the value and the gradient
        positive = target > 0
        safe_log = _where(positive, target, ones_like(target)).log()
        pointwise = target * (safe_log - input)
    if reduction == "batchmean":
        batch = input.shape[0] if input.ndim > 0 else 1
        return pointwise.sum() / batch
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"kl_div: reduction must be one of {_REDUCTIONS + ('batchmean',)}, got {reduction!r}"
        )
    return _reduce(pointwise, reduction, "kl_div")


def _log_sigmoid_pair(x):
    """(log σ(x), log(1 - σ(x))) = log_softmax over [0, x]; stable for any x.

    NOTE: this equals the textbook stable form max(x, 0) - x·y + log(1 + exp(-|x|)) for the loss,
    but its gradient is exact everywhere, including x = 0 where the |x| and max forms give a
    wrong subgradient (zero-initialized logits sit exactly there).
    """
    pair = log_softmax(stack([zeros_like(x), x], dim=-1), dim=-1)
    return pair[..., 1], pair[..., 0]


def binary_cross_entropy_with_logits(
    input,  # noqa: A002
    target,
    weight=None,
    reduction="mean",
    pos_weight=None,
):
    """Binary cross-entropy on logits, as `torch.nn.functional.binary_cross_entropy_with_logits`:

        loss = -(pos_weight·y·log σ(x) + (1 - y)·log(1 - σ(x))) · weight

    computed stably (never log of a rounded-off sigmoid). `pos_weight` (broadcast over the last
    dim, the classes) weighs positive examples; `weight` rescales each element.
    """
    _check_pair(input, target, "binary_cross_entropy_with_logits")
    log_p, log_not_p = _log_sigmoid_pair(input)
    positive = target * log_p
    if pos_weight is not None:
        positive = positive * pos_weight
    losses = -(positive + (1 - target) * log_not_p)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction, "binary_cross_entropy_with_logits")


def binary_cross_entropy(
    input,  # noqa: A002
    target,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """Binary cross-entropy of probabilities `input` in [0, 1]:

        loss = -weight · (y·log x + (1 - y)·log(1 - x)),  each log clamped at -100 (as PyTorch)

    The clamp keeps x = 0 or 1 finite. Prefer `binary_cross_entropy_with_logits` on logits: a
    sigmoid followed by this loss loses precision in the tails.
    """
    _check_pair(input, target, "binary_cross_entropy")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    inside = (input >= 0) & (input <= 1)
    if not bool(inside.all()):
        raise ValueError(
            "binary_cross_entropy: all elements of input should be between 0 and 1 (they are "
            f"probabilities), got values in [{input.min().item()}, {input.max().item()}]"
        )
    if not bool(((target >= 0) & (target <= 1)).all()):
        raise ValueError(
            "binary_cross_entropy: all elements of target should be between 0 and 1, got "
            f"values in [{target.min().item()}, {target.max().item()}]"
        )
    with np.errstate(divide="ignore"):  # log 0 = -inf is expected here: the clamp handles it
        log_p = clamp(input.log(), min=-100.0)
        log_not_p = clamp((1 - input).log(), min=-100.0)
    losses = -(target * log_p + (1 - target) * log_not_p)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction, "binary_cross_entropy")


def normalize(input, p=2.0, dim=1, eps=1e-12):  # noqa: A002
    """x / max(‖x‖_p, eps) along `dim`, as `torch.nn.functional.normalize`.

    NOTE: the clamp is applied to Σ|x|^p before the root, which gives the same value but keeps
    the gradient finite (zero) for an all-zero vector instead of 0·∞ = NaN.
    """
    if check_tensor(input, "normalize").dtype.kind != "f":
        raise TypeError(f"normalize: input must be floating point, got {input.dtype}")
    dim = normalize_dim(dim, input.ndim, "normalize")
    if math.isnan(check_real(p, "normalize", "p")) or p <= 0:
        raise ValueError(f"normalize: p must be a positive number, got {p}")
    check_finite(eps, "normalize", "eps", low=0.0)
    if p == 2:
        total = (input * input).sum(dim=dim, keepdim=True)
        norm = clamp(total, min=eps * eps).sqrt()
    else:
        total = (input.abs() ** p).sum(dim=dim, keepdim=True)
        norm = clamp(total, min=eps**p) ** (1.0 / p)
    return input / norm


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """cos(x1, x2) = Σ x1·x2 / (max(‖x1‖, eps) · max(‖x2‖, eps)) along `dim`, after
    broadcasting x1 and x2 (as PyTorch, each vector is normalized first: the result stays in
    [-1, 1]).

    Shape: x1 (*, D, *) and x2 broadcastable to it; the result drops `dim`.

    Example:
        >>> F.cosine_similarity(queries, keys, dim=-1)       # (N, D), (N, D) -> (N,)
    """
    for name, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"cosine_similarity: {name} must be a Tensor, got {type(t).__name__}")
    check_finite(eps, "cosine_similarity", "eps", low=0.0)
    try:
        shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise ValueError(
            f"cosine_similarity: x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} do not broadcast"
        ) from None
    if not -len(shape) <= dim < max(len(shape), 1):
        raise IndexError(
            f"cosine_similarity: dim={dim} is out of range for broadcast shape {shape}"
        )
    if tuple(x1.shape) != shape:
        x1 = x1.expand(*shape)
    if tuple(x2.shape) != shape:
        x2 = x2.expand(*shape)
    return (normalize(x1, dim=dim, eps=eps) * normalize(x2, dim=dim, eps=eps)).sum(dim=dim)


def info_nce(a, b, temperature=0.07, symmetric=True, reduction="mean"):
    """InfoNCE with in-batch negatives (van den Oord et al. 2018; CLIP's loss when symmetric).

        logits = normalize(a) · normalize(b)ᵀ / temperature     (N, N)
        loss = cross_entropy(logits, arange(N))                  row i's positive is b_i

    With `symmetric` the loss averages both directions, (CE(logits) + CE(logitsᵀ)) / 2, as CLIP.

    Args:
        a, b: (N, D) embeddings of N matching pairs (a_i, b_i); every other b_j is a negative.
        temperature: τ > 0; smaller sharpens the distribution.
    """
    if a.ndim != 2 or tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"info_nce: a and b must both be (N, D), got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    check_finite(temperature, "info_nce", "temperature", low=0.0, low_open=True)
    logits = normalize(a, dim=1) @ normalize(b, dim=1).T / temperature  # (N, N)
    labels = arange(a.shape[0], device=a.device)
    loss = cross_entropy(logits, labels, reduction=reduction)
    if symmetric:
        # logits.T (N, N): row j scores b_j against every a_i
        loss = (loss + cross_entropy(logits.T, labels, reduction=reduction)) / 2
    return loss


def pad(input, pad, mode="constant", value=0.0):  # noqa: A002 - PyTorch's argument names
    """Constant padding, as `torch.nn.functional.pad` (see tinytensor/ops/torch_extras.py)."""
    from tinytensor.ops.torch_extras import pad as _pad

    return _pad(input, pad, mode=mode, value=value)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """log(1 + e^(βx))/β, linear (x) where βx > threshold, as PyTorch (one op: ops.Softplus)."""
    from tinytensor.ops.torch_extras import softplus as _softplus

    return _softplus(input, beta, threshold)


def logsigmoid(input):  # noqa: A002
    """log σ(x) = -softplus(-x), stable in both tails."""
    return -softplus(-input)


def relu(input, inplace=False):  # noqa: A002 - PyTorch's argument name
    """max(x, 0); `inplace=True` modifies `input` (a recorded in-place op, as PyTorch)."""
    return input.relu_() if inplace else _relu(input)


def leaky_relu(input, negative_slope=0.01):  # noqa: A002
    """x for x > 0, negative_slope·x elsewhere."""
    from tinytensor.ops import where

    check_real(negative_slope, "leaky_relu", "negative_slope")
    return where(check_tensor(input, "leaky_relu") > 0, input, input * negative_slope)
