"""Adagrad (Duchi, Hazan & Singer 2011), as `torch.optim.Adagrad`."""

from __future__ import annotations

from ..backend import get_array_module
from ..tensor import Tensor
from .optimizer import Optimizer


class Adagrad(Optimizer):
    """Adagrad: a per-element learning rate that shrinks with the sum of squared gradients.

    With g = grad (+ weight_decay * p; negated if `maximize`) at step t = 1, 2, ...:
    lr_t = lr / (1 + (t - 1) * lr_decay),  s = s + g²,  p = p - lr_t * g / (sqrt(s) + eps),
    where s starts at `initial_accumulator_value`.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr: learning rate.
        lr_decay: decay of the learning rate with the step count.
        weight_decay: L2 penalty added to the gradient.
        initial_accumulator_value: the starting value of the sum of squares s.
        eps: added to sqrt(s) (outside the root, as PyTorch).
        maximize: ascend the objective instead of descending.

    Example:
        >>> opt = tt.optim.Adagrad(model.parameters(), lr=0.01)
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0.0,
        weight_decay=0.0,
        initial_accumulator_value=0.0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
    ):
        # NOTE: `foreach` selects one of PyTorch's kernels; it is accepted and has no effect here
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
            maximize=maximize,
        )
        super().__init__(params, defaults)
        # As PyTorch, the state exists from the start (s = initial_accumulator_value).
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        state = self.state.setdefault(p, {})
        state.setdefault("step", 0)
        if "sum" not in state:
            xp = get_array_module(p._array)
            initial = xp.full_like(p._array, group["initial_accumulator_value"])
            state["sum"] = Tensor._wrap(initial, False, None)

    def _validate_group(self, group):
        name = type(self).__name__
        for key in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            if group[key] < 0:
                raise ValueError(f"{name}: invalid {key} {group[key]} (must be >= 0)")

    def _update_group(self, group):
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        for p, g, state in self._gradients(group):
            self._init_state(p, group)  # a group added after construction
            clr = lr / (1 + (state["step"] - 1) * lr_decay)
            s = state["sum"]._array
            s += g * g
            xp = get_array_module(s)
            p._array -= clr * (g / (xp.sqrt(s) + eps))
