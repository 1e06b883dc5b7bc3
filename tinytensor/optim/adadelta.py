"""Adadelta (Zeiler 2012), as `torch.optim.Adadelta`."""

from __future__ import annotations

from ..backend import get_array_module
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """Adadelta: steps scaled by the ratio of running RMS of past updates and of gradients.

    With g = grad (+ weight_decay * p; negated if `maximize`), running averages v (of g²) and
    u (of squared updates), both starting at 0:
    v = rho v + (1 - rho) g²,  d = sqrt(u + eps) / sqrt(v + eps) * g,
    u = rho u + (1 - rho) d²,  p = p - lr * d.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr: scales the update (1.0 is the paper's algorithm).
        rho: decay rate of both running averages, in [0, 1].
        eps: added inside both square roots.
        weight_decay: L2 penalty added to the gradient.
        maximize: ascend the objective instead of descending.

    Example:
        >>> opt = tt.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    """

    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0.0,
        foreach=None,
        *,
        maximize=False,
    ):
        # NOTE: `foreach` selects one of PyTorch's kernels; it is accepted and has no effect here
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay"):
            if group[key] < 0:
                raise ValueError(f"{name}: invalid {key} {group[key]} (must be >= 0)")
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"{name}: invalid rho {group['rho']} (must be in [0, 1])")

    def _update_group(self, group):
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        for p, g, state in self._gradients(group, buffers=("square_avg", "acc_delta")):
            xp = get_array_module(p._array)
            v, u = state["square_avg"]._array, state["acc_delta"]._array
            v *= rho
            v += (1 - rho) * (g * g)
            delta = xp.sqrt(u + eps) / xp.sqrt(v + eps) * g
            u *= rho
            u += (1 - rho) * (delta * delta)
            p._array -= lr * delta
