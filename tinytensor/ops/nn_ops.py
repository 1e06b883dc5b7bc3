"""Fused neural-network ops: each is one graph node with a hand-derived VJP.

Fewer, larger nodes are faster (less Python per element) and easier to read in a drawn graph.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..backend import get_array_module, is_cupy_array
from ..function import Function
from ..kernels.cpu.dispatch import kernels_for, kernels_for_array
from ..tensor import Tensor
from ._checks import (
    check_finite,
    check_indices_in_range,
    check_int,
    check_probability,
    check_tensor,
    sizes,
)
from ._util import normalize_dim
from .reduce import logsumexp

# compared as dtypes: a comparison with np.float16 (a type) costs 0.1 µs more
_FLOAT16, _INT64 = np.dtype(np.float16), np.dtype(np.int64)


def _softmax(x, axis):
    """NOTE: subtracts the row max first, so exp never overflows."""
    xp = get_array_module(x)
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis):
    """NOTE: log softmax = (x - m) - log Σ exp(x - m) with m the row max: no overflow, no log 0."""
    xp = get_array_module(x)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


class Softmax(Function):
    """p = softmax(x) along `axis`;  dL/dx = p ∘ (g - Σ g∘p)."""

    def forward(self, x, axis=-1):
        self.axis = axis
        # the fused kernel (kernels/cpu/softmax.py) where it applies: last dim, NumPy float
        fused = kernels_for_array("softmax", x) if axis == x.ndim - 1 else None
        self.p = fused.softmax_forward(x) if fused else _softmax(x, axis)
        return self.p

    def backward(self, g):
        p = self.p
        fused = kernels_for("softmax", p, g) if self.axis == p.ndim - 1 else None
        if fused:
            return fused.softmax_backward(p, np.ascontiguousarray(g))
        xp = get_array_module(g)  # (Tensors under create_graph: p is then the output)
        return p * (g - xp.sum(g * p, axis=self.axis, keepdims=True))


class LogSoftmax(Function):
    """z = log softmax(x) along `axis`;  dL/dx = g - softmax(x)·Σ g."""

    def forward(self, x, axis=-1):
        self.axis = axis
        fused = kernels_for_array("softmax", x) if axis == x.ndim - 1 else None
        self.z = fused.log_softmax_forward(x) if fused else _log_softmax(x, axis)
        return self.z

    def backward(self, g):
        fused = kernels_for("softmax", self.z, g) if self.axis == g.ndim - 1 else None
        if fused:
            return fused.log_softmax_backward(self.z, g)
        xp = get_array_module(g)  # (Tensors under create_graph: z is then the output)
        return g - xp.exp(self.z) * xp.sum(g, axis=self.axis, keepdims=True)


def _check_class_ids(ids, ignore_index, c):
    """Raises IndexError naming the first id that is neither in [0, c) nor `ignore_index`."""
    # NOTE: the usual case (every id in range) costs one reduction: int64 ids read as unsigned
    # make every negative id (ignore_index too) huge, so max < c says all are in range; the
    # full test runs only when one is negative or too large
    if not ids.size or ids.view(np.uint64).max() < c:
        return
    bad = (ids != ignore_index) & ((ids < 0) | (ids >= c))
    if bool(bad.any()):
        error = IndexError(
            f"cross_entropy: target id {int(ids[bad][0])} is out of range for {c} classes"
        )
        error.names_the_call = True  # Function.apply passes it on unchanged
        raise error


class CrossEntropy(Function):
    """Cross-entropy of logits z (M, C) against targets: class ids (M,) or probabilities (M, C).

    With q the (label-smoothed) target distribution and p = softmax(z):
        loss_i = -Σ_c q_ic log p_ic,        dL/dz_i = g_i (p_i - q_i)
    Rows whose id is `ignore_index` contribute nothing. The logit gradient is formed directly as
    p - q, never by differentiating through log(softmax).
    """

    def forward(self, z, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        # the target is an input (class ids get no gradient), so that a drawn graph holds it
        probs, target = (target, None) if target.dtype.kind == "f" else (None, target)
        xp = get_array_module(z)
        m, c = z.shape
        eps = label_smoothing
        self.reduction, self.eps, self.ignore_index = reduction, eps, ignore_index
        self.fused = kernels_for_array("softmax", z) if probs is None else None
        if self.fused:  # one pass over the logits, keeping only each row's log-sum-exp
            self.z, self.q, self.log_p, self.target = z, None, None, target
            stats, kept, bad, loss_sum = self.fused.cross_entropy_forward(
                z, target, ignore_index, eps
            )
            if bad:
                _check_class_ids(target, ignore_index, c)
            self.count, self.lse = kept, stats[1]  # the count: a Python int
            if reduction == "none":
                return stats[0].astype(z.dtype)
            # the kernel's float64 sum of the losses: no NumPy pass (a third of a small call);
            # the mean in float64 too, rounded once into a 0-d array (NumPy scalars of the
            # logits' dtype and their division cost 1.3 µs of a 8 µs call); every target
            # ignored gives nan, as PyTorch
            if reduction == "mean":
                loss_sum = loss_sum / kept if kept else math.nan
            return np.asarray(loss_sum, z.dtype)
        if probs is None:
            _check_class_ids(target, ignore_index, c)
        log_p = _log_softmax(z, axis=1)
        if probs is not None:  # class probabilities (an input: they get a gradient too)
            q = probs * (1 - eps) + eps / c if eps else probs
            self.keep = None
            losses = -(q * log_p).sum(axis=1)
            self.count = m
        else:
            self.keep = target != ignore_index
            safe = xp.where(self.keep, target, 0)
            picked = log_p[xp.arange(m), safe]  # 3x cheaper than take_along_axis here
            losses = -(1 - eps) * picked
            if eps:
                losses = losses - eps * log_p.mean(axis=1)
            losses = losses * self.keep
            # NOTE: the count in the logits' dtype: dividing by an int64 count would promote a
            # float32 loss to float64
            self.count = self.keep.sum().astype(z.dtype)
            q = None
            self.target = safe
        self.q, self.log_p = q, log_p
        return self._reduce(losses)

    def _reduce(self, losses, total=None):
        """The losses reduced as asked; `total`, when given, is their sum already."""
        if self.reduction == "none":
            return losses
        if total is None:
            total = losses.sum()
        if self.reduction == "sum":
            return total
        if not self.count:  # NOTE: every target ignored: the mean is nan, as in PyTorch
            return total * get_array_module(losses).nan
        return total / self.count

    def composite(self, z, target):
        log_p = z - logsumexp(z, 1, keepdim=True)
        m, c = z.shape
        eps = self.eps
        ids = target._array
        if ids.dtype.kind == "f":  # class probabilities
            q = target * (1 - eps) + eps / c if eps else target
            losses = -(q * log_p).sum(1)
            count = m
        else:
            xp = get_array_module(ids)
            keep = ids != self.ignore_index
            picked = log_p[xp.arange(m), xp.where(keep, ids, 0)]
            losses = -(1 - eps) * picked
            if eps:
                losses = losses - eps * log_p.mean(1)
            losses = losses * Tensor._wrap(keep.astype(z._array.dtype), False, None)
            count = int(keep.sum())
        if self.reduction == "none":
            return losses
        total = losses.sum()
        if self.reduction == "sum":
            return total
        # NOTE: every target ignored: the loss is nan, its gradient 0 (as backward gives)
        return total / count if count else total + float("nan")

    def backward(self, g):
        xp = get_array_module(g)
        if self.fused:
            if self.reduction == "none":
                scale = g.astype(np.float64)
            else:
                k = g / xp.maximum(self.count, 1) if self.reduction == "mean" else g
                scale = np.full(self.z.shape[0], float(k))
            grad = self.fused.cross_entropy_backward(
                self.z, self.target, self.ignore_index, self.lse, self.eps, scale
            )
            return grad, None
        p = xp.exp(self.log_p)
        m, c = p.shape
        if self.q is not None:
            grad = p - self.q
        else:
            grad = p
            grad[xp.arange(m), self.target] -= 1 - self.eps
            if self.eps:
                grad -= self.eps / c
            grad *= self.keep[:, None]
        # dL/dprobs = -(1 - ε)·log p, scaled like the logits' gradient
        g_probs = -(1 - self.eps) * self.log_p if self.q is not None else None
        if self.reduction == "none":
            g = g[:, None]
        elif self.reduction == "mean":
            # NOTE: every target ignored: the loss is nan (0/0) but the gradient 0, as PyTorch
            g = g / (self.count if self.q is not None else xp.maximum(self.count, 1))
        if g_probs is None or not self.needs_input_grad[1]:
            return grad * g, None
        return grad * g, g_probs * g


class LayerNorm(Function):
    """y = x̂·w + b with x̂ = (x - μ)·r, r = 1/√(σ² + eps) over the last `n` dims.

    dL/dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ∘x̂)) with ĝ = g·w;  dL/dw = Σ g∘x̂;  dL/db = Σ g.
    """

    def forward(self, x, weight=None, bias=None, n=1, eps=1e-5):
        # (also what graph labels show)
        self.axes = axes = (x.ndim - 1,) if n == 1 else tuple(range(x.ndim - n, x.ndim))
        self.weight, self.eps = weight, eps
        self.fused = kernels_for_array("norms", x, weight, bias) if n == 1 and x.size else None
        if self.fused:  # keeps x and each row's mean and 1/σ; backward recomputes x̂
            y, self.stats = self.fused.layer_norm_forward(x, weight, bias, eps)
            self.x = x
            return y
        xp = get_array_module(x)
        # NOTE: sum·(1/n) instead of mean: NumPy's mean costs twice a sum on small rows
        count = 1
        for a in axes:
            count *= x.shape[a]
        self.inv_n = inv_n = 1.0 / count if count else float("nan")
        mu = x.sum(axis=axes, keepdims=True) * inv_n
        centered = x - mu
        var = (centered * centered).sum(axis=axes, keepdims=True) * inv_n
        self.r = 1 / xp.sqrt(var + eps)
        self.xhat = centered * self.r
        y = self.xhat
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y

    def composite(self, x, weight=None, bias=None):
        centered = x - x.mean(self.axes, keepdim=True)
        y = centered * ((centered * centered).mean(self.axes, keepdim=True) + self.eps).rsqrt()
        if weight is not None:
            y = y * weight
        return y if bias is None else y + bias

    def backward(self, g):
        needs = self.needs_input_grad
        if self.fused:  # the kernel reads rows: a strided g (e.g. from a transpose) is copied once
            g = np.ascontiguousarray(g, dtype=self.x.dtype)
            gx, gw, gb = self.fused.layer_norm_backward(
                self.x, self.weight, g, self.stats, needs[0]
            )
            gw = gw if len(needs) > 1 and needs[1] else None
            return gx, gw, (gb if len(needs) > 2 and needs[2] else None)
        axes, xhat = self.axes, self.xhat
        batch_axes = tuple(range(g.ndim - len(axes)))
        gw = (g * xhat).sum(axis=batch_axes) if len(needs) > 1 and needs[1] else None
        gb = g.sum(axis=batch_axes) if len(needs) > 2 and needs[2] else None
        gx = None
        if needs[0]:
            gh = g * self.weight if self.weight is not None else g
            inv_n = self.inv_n
            gx = self.r * (
                gh
                - gh.sum(axis=axes, keepdims=True) * inv_n
                - xhat * ((gh * xhat).sum(axis=axes, keepdims=True) * inv_n)
            )
        return gx, gw, gb


class RMSNorm(Function):
    """y = x̂·w with x̂ = x·r, r = 1/√(mean(x²) + eps) over the last `n` dims (no mean, no bias).

    dL/dx = r·(ĝ - x̂·mean(ĝ∘x̂)) with ĝ = g·w;  dL/dw = Σ g∘x̂.
    """

    def forward(self, x, weight=None, n=1, eps=1e-6):
        xp = get_array_module(x)
        axes = tuple(range(x.ndim - n, x.ndim))
        self.axes, self.weight, self.eps = axes, weight, eps
        self.fused = kernels_for_array("norms", x, weight) if n == 1 and x.size else None
        if self.fused:  # keeps x and each row's 1/rms; backward recomputes x̂
            y, self.r = self.fused.rms_norm_forward(x, weight, eps)
            self.x = x
            return y
        self.r = 1 / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
        self.xhat = x * self.r
        return self.xhat * weight if weight is not None else self.xhat

    def composite(self, x, weight=None):
        y = x * ((x * x).mean(self.axes, keepdim=True) + self.eps).rsqrt()
        return y if weight is None else y * weight

    def backward(self, g):
        needs = self.needs_input_grad
        if self.fused:
            g = np.ascontiguousarray(g, dtype=self.x.dtype)
            gx, gw = self.fused.rms_norm_backward(self.x, self.weight, g, self.r, needs[0])
            return gx, (gw if len(needs) > 1 and needs[1] else None)
        axes, xhat = self.axes, self.xhat
        gw = None
        if len(needs) > 1 and needs[1]:
            gw = (g * xhat).sum(axis=tuple(range(g.ndim - len(axes))))
        gx = None
        if needs[0]:
            gh = g * self.weight if self.weight is not None else g
            gx = self.r * (gh - xhat * (gh * xhat).mean(axis=axes, keepdims=True))
        return gx, gw


class Embedding(Function):
    """z = W[ids];  dL/dW = scatter-add of g into the rows `ids` (repeated ids add up).

    The `padding_idx` row gets no gradient. The integer ids are an input (without gradient)
    rather than an option, so that the graph holds them: a drawn graph shows the token ids.
    """

    def forward(self, weight, ids, padding_idx=None):
        self.ids, self.shape, self.padding_idx = ids, weight.shape, padding_idx
        return weight[ids]

    def composite(self, weight, ids):
        if self.padding_idx is not None:  # the padding row's value, without its gradient
            xp = get_array_module(ids._array)
            padding = xp.zeros((self.shape[0], 1), dtype=bool)
            padding[self.padding_idx] = True
            weight = weight.detach().where(Tensor._wrap(padding, False, None), weight)
        return weight[ids._array]

    def backward(self, g):
        fused = kernels_for("embedding", g)
        if fused:
            gw = fused.embedding_backward(self.ids, g, self.shape[0])
            if self.padding_idx is not None:
                gw[self.padding_idx] = 0
            return gw, None
        xp = get_array_module(g)
        gw = xp.zeros(self.shape, dtype=g.dtype)
        rows, flat = self.ids.reshape(-1), g.reshape(-1, self.shape[1])
        if is_cupy_array(gw):
            import cupyx

            cupyx.scatter_add(gw, rows, flat)
        else:
            np.add.at(gw, rows, flat)
        if self.padding_idx is not None:
            gw[self.padding_idx] = 0
        return gw, None


class Dropout(Function):
    """z = x·m/(1-p) with m ~ Bernoulli(1-p) drawn once per call;  dL/dx = g·m/(1-p)."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, keep=None):
        self.keep = keep
        return x * keep

    def backward(self, g):
        return g * self.keep


# ---- functional API -----------------------------------------------------------------------


def softmax(x, dim, dtype=None):
    """`dtype` casts the input first (as PyTorch), e.g. float32 logits softmaxed in float64."""
    x = check_tensor(x, "softmax") if dtype is None else check_tensor(x, "softmax").to(dtype)
    return Softmax.apply_unary(x, normalize_dim(dim, x._array.ndim, "softmax"))


def log_softmax(x, dim, dtype=None):
    x = check_tensor(x, "log_softmax")
    x = x if dtype is None else x.to(dtype)
    return LogSoftmax.apply_unary(x, normalize_dim(dim, x._array.ndim, "log_softmax"))


def _check_float(x, op):
    if check_tensor(x, op)._array.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype}")


def cross_entropy(input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):  # noqa: A002
    """Cross-entropy between logits and targets, as `torch.nn.functional.cross_entropy`.

    Args:
        input: logits, (N, C), (C,) or (N, C, d1, ...) with classes in dim 1.
        target: class ids (N,) / (N, d1, ...) of an integer dtype, or class probabilities of
            the same shape as `input`.
        ignore_index: target id whose positions add no loss and no gradient.
        reduction: 'mean' (over non-ignored positions), 'sum' or 'none'.
        label_smoothing: ε mixes the target with the uniform distribution: (1-ε)·y + ε/C.
    Returns:
        The loss (a scalar unless reduction='none').
    """
    _check_float(input, "cross_entropy")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be mean, sum or none, got {reduction!r}")
    if label_smoothing.__class__ is not float or label_smoothing != 0.0:  # the default passes
        check_probability(label_smoothing, "cross_entropy", "label_smoothing")
    if not isinstance(target, Tensor):
        raise TypeError(f"cross_entropy: target must be a Tensor, got {type(target).__name__}")
    # NOTE: the checks read the arrays (not Tensor properties), and the class ids' range is
    # checked by the op (the fused kernel flags bad ids in its pass): this wrapper was half the
    # cost of a cross_entropy on 16x16 logits
    x_array, t_array = input._array, target._array
    # two NumPy arrays share the device; only other pairs pay for comparing devices
    if not (x_array.__class__ is t_array.__class__ is np.ndarray) and (
        target.device != input.device
    ):
        from ..tensor import devices_mismatch_error

        raise devices_mismatch_error("cross_entropy", (input, target))
    if x_array.ndim == 0:
        raise ValueError("cross_entropy: input must have a class dim, got a scalar")
    unbatched = x_array.ndim == 1
    x = input.unsqueeze(0) if unbatched else input
    t = target.unsqueeze(0) if unbatched else target
    shape = x._array.shape
    c = shape[1]
    spatial = len(shape) > 2
    x2 = x
    if spatial:  # (N, C, d...) -> (N·d..., C)
        x2 = x.permute(0, *range(2, x.ndim), 1).reshape(-1, c)
    kind = t_array.dtype.kind
    if kind == "f":
        if t_array.shape != x_array.shape:
            raise ValueError(
                f"cross_entropy: float targets are class probabilities and must have the input's "
                f"shape {tuple(input.shape)}, got {tuple(target.shape)} (for class indices use "
                "an integer tensor: target.long())"
            )
        targets = (t.permute(0, *range(2, t.ndim), 1) if spatial else t).reshape(-1, c)
    elif kind in "iu":
        expected = shape[:1] + shape[2:]
        if t._array.shape != expected:
            raise ValueError(
                f"cross_entropy: target shape {tuple(target.shape)} does not match input shape "
                f"{tuple(input.shape)} (expected class ids of shape {expected})"
            )
        targets = t
        if spatial or t_array.dtype != _INT64:  # the op reads (rows,) int64 ids
            targets = Tensor._wrap(t._array.reshape(-1).astype(np.int64, copy=False), False, None)
    else:
        raise TypeError(f"cross_entropy: target must hold integer class ids, got {target.dtype}")
    loss = CrossEntropy.apply(
        x2, targets, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction
    )
    if reduction == "none":
        if spatial:
            loss = loss.reshape(shape[:1] + shape[2:])
        if unbatched:
            loss = loss.reshape(())
    return loss


def _normalized_shape(shape, op):
    return sizes((shape,), op)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """LayerNorm over the trailing dims `normalized_shape`, as `torch.nn.functional.layer_norm`."""
    # NOTE: the checks read the arrays' shapes (not the Tensor properties): this wrapper was half
    # the cost of a layer_norm on a 16x16 tensor
    _check_float(input, "layer_norm")
    shape = normalized_shape
    if shape.__class__ is not tuple or len(shape) != 1 or shape[0].__class__ is not int:
        shape = _normalized_shape(shape, "layer_norm")  # NOTE: nn.LayerNorm's (d,) skips it
    if eps.__class__ is not float or not 0.0 <= eps < math.inf:  # the usual float passes as is
        check_finite(eps, "layer_norm", "eps", low=0.0)
    x_shape = input._array.shape
    if x_shape[len(x_shape) - len(shape) :] != shape:
        raise ValueError(
            f"layer_norm: input shape {tuple(input.shape)} does not end with normalized_shape "
            f"{shape}"
        )
    # NOTE: weight and bias checked one by one, not in a loop over (name, tensor) pairs, and
    # the op applied without star-args: the wrapper is most of a one-token layer_norm
    if weight is not None and check_tensor(weight, "layer_norm", "weight")._array.shape != shape:
        raise ValueError(f"layer_norm: weight shape {tuple(weight.shape)} != {shape}")
    if bias is not None:
        if check_tensor(bias, "layer_norm", "bias")._array.shape != shape:
            raise ValueError(f"layer_norm: bias shape {tuple(bias.shape)} != {shape}")
        if weight is None:
            raise ValueError("layer_norm: a bias without a weight is not supported")
    if input._array.dtype == _FLOAT16:  # NOTE: statistics in float32, as PyTorch (x² overflows)
        args = [a.float() for a in (input, weight, bias) if a is not None]
        return LayerNorm.apply(*args, n=len(shape), eps=eps).half()
    if bias is not None:
        return LayerNorm.apply(input, weight, bias, n=len(shape), eps=eps)
    if weight is not None:
        return LayerNorm.apply(input, weight, n=len(shape), eps=eps)
    return LayerNorm.apply(input, n=len(shape), eps=eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """RMSNorm over the trailing dims: x / √(mean(x²) + eps) · weight (no centring, no bias).

    `eps=None` means the machine epsilon of the input's dtype, as `torch.nn.functional.rms_norm`.
    """
    _check_float(input, "rms_norm")
    shape = _normalized_shape(normalized_shape, "rms_norm")
    if eps is not None:
        check_finite(eps, "rms_norm", "eps", low=0.0)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise ValueError(
            f"rms_norm: input shape {tuple(input.shape)} does not end with normalized_shape {shape}"
        )
    if weight is not None and tuple(weight.shape) != shape:
        raise ValueError(f"rms_norm: weight shape {tuple(weight.shape)} != {shape}")
    if eps is None:
        eps = float(np.finfo(input.dtype).eps)
    args = [input] if weight is None else [input, weight]
    if input.dtype == dtypes.float16:  # NOTE: statistics in float32, as PyTorch (x² overflows)
        return RMSNorm.apply(*[a.float() for a in args], n=len(shape), eps=eps).half()
    return RMSNorm.apply(*args, n=len(shape), eps=eps)


def embedding(input, weight, padding_idx=None):  # noqa: A002
    """Rows of `weight` (num_embeddings, dim) picked by integer ids `input` (any shape)."""
    if not isinstance(input, Tensor) or input.dtype.kind not in "iu":
        got = input.dtype if isinstance(input, Tensor) else type(input).__name__
        raise TypeError(f"embedding: ids must be an integer tensor, got {got}")
    check_tensor(weight, "embedding", "weight")
    if input.device != weight.device:
        from ..tensor import devices_mismatch_error

        raise devices_mismatch_error("embedding", (input, weight))
    n = weight.shape[0]
    if padding_idx is not None and not -n <= check_int(padding_idx, "embedding", "padding_idx") < n:
        raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {n} embeddings")
    ids = input._array
    # NOTE: one reduction, not a min and a max: ids read as unsigned make every negative id huge
    # (a decoding step embeds one token and pays this check's fixed cost)
    if ids.size and int(ids.view(f"u{ids.itemsize}").max()) >= n:
        bad = int(ids.max()) if int(ids.max()) >= n else int(ids.min())
        raise IndexError(f"embedding: id {bad} is out of range for {n} embeddings")
    return Embedding.apply(weight, input, padding_idx=padding_idx)


def dropout(input, p=0.5, training=True, generator=None):  # noqa: A002
    """Inverted dropout: zeroes each element with probability p and scales the rest by 1/(1-p)."""
    check_probability(p, "dropout")
    if training.__class__ is not bool and not isinstance(training, np.bool_):
        raise TypeError(f"dropout: training must be a bool, got {training!r}")
    if not training or p == 0.0:
        return input
    keep = dropout_keep_mask(input.shape, p, input.dtype, input.device, generator)
    return Dropout.apply_unary(input, keep)


def dropout_keep_mask(shape, p, dtype, device, generator=None):
    """m/(1-p) with m ~ Bernoulli(1-p) per element, drawn from the seeded generator (all zeros
    for p = 1): what inverted dropout multiplies by, for activations and attention weights."""
    from ..random import uniform_array

    u = uniform_array(shape, dtype, device, 0.0, 1.0, generator)
    if p >= 1.0:
        return u * 0
    return ((u >= p) * (1.0 / (1.0 - p))).astype(dtype)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding with a new last dim of size num_classes (inferred if -1)."""
    if check_tensor(tensor, "one_hot").dtype.kind not in "iu":
        raise TypeError(f"one_hot: expected an integer tensor, got {tensor.dtype}")
    check_int(num_classes, "one_hot", "num_classes", minimum=-1)
    xp = get_array_module(tensor._array)
    if num_classes < 0:
        num_classes = int(tensor._array.max()) + 1 if tensor._array.size else 0
    check_indices_in_range(tensor._array, num_classes, "one_hot", f"{num_classes} classes")
    out = (tensor._array[..., None] == xp.arange(num_classes)).astype(dtypes.int64)
    return Tensor._wrap(out, False, None)
