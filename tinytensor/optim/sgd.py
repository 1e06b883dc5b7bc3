"""Stochastic gradient descent with momentum (heavy ball or Nesterov), as `torch.optim.SGD`."""

from __future__ import annotations

from ..kernels.cpu.dispatch import kernels_for
from ..tensor import Tensor
from .optimizer import Optimizer


class SGD(Optimizer):
    """Stochastic gradient descent, with PyTorch's exact update.

    With g = grad (+ weight_decay * p, an L2 penalty; negated if `maximize`), the buffer
    b = g on the first step, then b = momentum * b + (1 - dampening) * g; the step direction is
    d = g + momentum * b for Nesterov, b otherwise (g when momentum is 0); p = p - lr * d.

    Args:
        params: iterable of Tensors or of parameter-group dicts.
        lr: learning rate (PyTorch's default, 1e-3).
        momentum: momentum factor (0 disables the buffer).
        dampening: how much of the new gradient enters the buffer is (1 - dampening).
        weight_decay: L2 penalty added to the gradient.
        nesterov: Nesterov momentum (needs momentum > 0 and dampening = 0).
        maximize: ascend the objective instead of descending.

    Example:
        >>> opt = tt.optim.SGD(params, lr=0.1, momentum=0.9)
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0.0,
        dampening=0.0,
        weight_decay=0.0,
        nesterov=False,
        *,
        maximize=False,
    ):
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group):
        for key in ("lr", "momentum", "weight_decay"):
            if group[key] < 0:
                raise ValueError(f"SGD: invalid {key} {group[key]} (must be >= 0)")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum > 0 and zero dampening")

    def _update_group(self, group):
        if self._update_group_fused(group):
            return
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        maximize = group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = -p.grad._array if maximize else p.grad._array
            if weight_decay != 0:
                g = g + weight_decay * p._array
            if momentum != 0:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = Tensor._wrap(g.copy(), False, None)
                else:
                    buf._array *= momentum
                    buf._array += (1 - dampening) * g
                g = g + momentum * buf._array if nesterov else buf._array
            p._array -= lr * g

    def _update_group_fused(self, group) -> bool:
        """The same update for every parameter of the group in one parallel pass
        (kernels/cpu/optimizers.py); False where the kernels do not apply."""
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return True
        arrays = [p._array for p in params]
        grads = [p.grad._array for p in params]
        fused = kernels_for("optimizers", *arrays, *grads)
        if fused is None:
            return False
        momentum = group["momentum"]
        buffers, fresh = arrays, [False] * len(params)  # no momentum: the kernel ignores them
        if momentum != 0:
            states = [self.state.setdefault(p, {}) for p in params]
            saved = [
                s["momentum_buffer"]._array for s in states if s.get("momentum_buffer") is not None
            ]
            if saved and kernels_for("optimizers", *arrays, *saved) is None:
                return False  # e.g. buffers loaded from a checkpoint in another dtype or layout
            buffers = []
            for k, state in enumerate(states):
                if state.get("momentum_buffer") is None:  # the kernel sets it to g this step
                    state["momentum_buffer"] = Tensor._wrap(arrays[k].copy(), False, None)
                    fresh[k] = True
                buffers.append(state["momentum_buffer"]._array)
        lists = self.__dict__.setdefault("_fused_lists", {}).setdefault(
            id(group), fused.FlatLists()
        )
        hyper = {k: group[k] for k in ("lr", "momentum", "dampening", "weight_decay")}
        hyper.update(nesterov=group["nesterov"], maximize=group["maximize"])
        fused.sgd_update(lists, arrays, grads, buffers, fresh, hyper)
        return True
