"""Adam and AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019), as `torch.optim.Adam`/`AdamW`."""

from __future__ import annotations

import math

from ..backend import get_array_module
from ..kernels.cpu.dispatch import kernels_for
from ..tensor import Tensor
from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam, with PyTorch's exact update; `weight_decay` is an L2 penalty added to the gradient.

    With g = grad (+ weight_decay * p; negated if `maximize`) at step t = 1, 2, ...:
    m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g²  (v_max = max(v_max, v) if amsgrad, used as v),
    p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr: learning rate.
        betas: decay rates (b1, b2) of the first and second moment averages.
        eps: added to the denominator, outside the square root (as PyTorch).
        weight_decay: L2 penalty coefficient (coupled: it goes through the moments; see AdamW).
        amsgrad: use the running maximum of v (Reddi et al. 2018).
        maximize: ascend the objective instead of descending.

    Example:
        >>> opt = tt.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999))
    """

    _decoupled_weight_decay = False

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        amsgrad=False,
        *,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group):
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay"):
            if group[key] < 0:
                raise ValueError(f"{name}: invalid {key} {group[key]} (must be >= 0)")
        betas = group["betas"]
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{name}: invalid betas {betas} (two numbers in [0, 1))")
        group["betas"] = tuple(betas)

    def _update_group(self, group):
        if not group["amsgrad"] and self._update_group_fused(group):
            return
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = -p.grad._array if maximize else p.grad._array
            xp = get_array_module(p._array)
            state = self.state.setdefault(p, {})
            buffers = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ())
            for key in buffers:
                if key not in state:
                    state[key] = Tensor._wrap(xp.zeros_like(p._array), False, None)
            # int(): a step saved by PyTorch is a 0-d tensor
            step = state["step"] = int(state.get("step", 0)) + 1
            if weight_decay != 0:
                if self._decoupled_weight_decay:
                    p._array *= 1 - lr * weight_decay  # AdamW: shrink p, outside the moments
                else:
                    g = g + weight_decay * p._array
            m, v = state["exp_avg"]._array, state["exp_avg_sq"]._array
            m += (1 - beta1) * (g - m)  # = b1 m + (1 - b1) g, written as PyTorch's lerp
            v *= beta2
            v += (1 - beta2) * (g * g)
            if amsgrad:
                v_max = state["max_exp_avg_sq"]._array
                xp.maximum(v_max, v, out=v_max)
                v = v_max
            step_size = lr / (1 - beta1**step)
            denom = xp.sqrt(v) / math.sqrt(1 - beta2**step) + eps
            p._array -= step_size * (m / denom)

    def _update_group_fused(self, group) -> bool:
        """The same update for every parameter of the group in one parallel pass
        (kernels/cpu/optimizers.py); False where the kernels do not apply (then the loop above
        runs)."""
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return True
        arrays = [p._array for p in params]
        grads = [p.grad._array for p in params]
        fused = kernels_for("optimizers", *arrays, *grads)
        if fused is None:
            return False
        for p, a in zip(params, arrays):
            state = self.state.setdefault(p, {})
            for key in ("exp_avg", "exp_avg_sq"):
                if key not in state:
                    state[key] = Tensor._wrap(get_array_module(a).zeros_like(a), False, None)
        moments = [self.state[p]["exp_avg"]._array for p in params]
        squares = [self.state[p]["exp_avg_sq"]._array for p in params]
        if kernels_for("optimizers", *arrays, *moments, *squares) is None:
            return False  # e.g. buffers loaded from a checkpoint in another dtype or layout
        lr, (beta1, beta2) = group["lr"], group["betas"]
        step_sizes, bias2_roots = [], []
        for p in params:
            state = self.state[p]
            step = state["step"] = int(state.get("step", 0)) + 1  # int(): PyTorch saves a tensor
            step_sizes.append(lr / (1 - beta1**step))
            bias2_roots.append(math.sqrt(1 - beta2**step))
        # the typed lists the kernel reads, kept per group across steps (not in the group dict:
        # state_dict() saves that)
        lists = self.__dict__.setdefault("_fused_lists", {}).setdefault(
            id(group), fused.FlatLists()
        )
        hyper = dict(
            lr=lr, beta1=beta1, beta2=beta2, eps=group["eps"],
            weight_decay=group["weight_decay"], decoupled=self._decoupled_weight_decay,
            maximize=group["maximize"],
        )  # fmt: skip
        fused.adam_update(lists, arrays, grads, moments, squares, step_sizes, bias2_roots, hyper)
        return True


class AdamW(Adam):
    """Adam with decoupled weight decay: p = p (1 - lr * weight_decay) before the Adam step.

    The decay does not pass through the moment estimates, so every weight shrinks at the same
    rate whatever its gradient scale (Loshchilov & Hutter 2019). Arguments as `Adam`, with
    PyTorch's default `weight_decay=1e-2`.

    Example:
        >>> opt = tt.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    """

    _decoupled_weight_decay = True

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
