"""RMSprop (Hinton's lecture 6e; centered variant from Graves 2013), as `torch.optim.RMSprop`."""

from __future__ import annotations

from ..backend import get_array_module
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """RMSprop: the gradient divided by a running RMS of recent gradients.

    With g = grad (+ weight_decay * p; negated if `maximize`), v = alpha v + (1 - alpha) g²;
    centered: m = alpha m + (1 - alpha) g and the denominator is sqrt(v - m²) + eps, otherwise
    sqrt(v) + eps. With momentum: b = momentum b + g / denom, p = p - lr b; otherwise
    p = p - lr g / denom.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr: learning rate.
        alpha: decay rate of the running averages.
        eps: added to the root (outside it, as PyTorch).
        weight_decay: L2 penalty added to the gradient.
        momentum: momentum factor (0 disables the buffer).
        centered: normalize by an estimate of the gradient's variance instead of its second
            moment.
        maximize: ascend the objective instead of descending.

    Example:
        >>> opt = tt.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.99)
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0.0,
        momentum=0.0,
        centered=False,
        capturable=False,
        foreach=None,
        maximize=False,
    ):
        # NOTE: `capturable` and `foreach` select PyTorch kernels (CUDA graphs, multi-tensor);
        # they are accepted and have no effect here
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group):
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay", "momentum", "alpha"):
            if group[key] < 0:
                raise ValueError(f"{name}: invalid {key} {group[key]} (must be >= 0)")

    def _update_group(self, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        momentum, centered = group["momentum"], group["centered"]
        buffers = ("square_avg",) + (("momentum_buffer",) if momentum > 0 else ())
        buffers += ("grad_avg",) if centered else ()
        for p, g, state in self._gradients(group, buffers):
            xp = get_array_module(p._array)
            v = state["square_avg"]._array
            v *= alpha
            v += (1 - alpha) * (g * g)
            if centered:
                m = state["grad_avg"]._array
                m += (1 - alpha) * (g - m)  # = alpha m + (1 - alpha) g, as PyTorch's lerp
                denom = xp.sqrt(v - m * m) + eps
            else:
                denom = xp.sqrt(v) + eps
            if momentum > 0:
                b = state["momentum_buffer"]._array
                b *= momentum
                b += g / denom
                p._array -= lr * b
            else:
                p._array -= lr * (g / denom)
