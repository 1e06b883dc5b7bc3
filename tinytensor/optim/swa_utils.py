"""Weight averaging (torch.optim.swa_utils): stochastic weight averaging (Izmailov et al. 2018)
and exponential moving averages of a model's weights.

    swa_model = AveragedModel(model)           # EMA: multi_avg_fn=get_ema_multi_avg_fn(0.999)
    swa_scheduler = SWALR(optimizer, swa_lr=0.05)
    for epoch in range(epochs):
        train_one_epoch(model, optimizer)
        if epoch >= swa_start:
            swa_model.update_parameters(model)             # θ̄ ← θ̄ + (θ − θ̄)/(n + 1)
            swa_scheduler.step()
    update_bn(loader, swa_model)                           # BatchNorm statistics of θ̄
"""

from __future__ import annotations

import copy
import math

from ..dtypes import int64
from ..function import no_grad
from ..tensor import Tensor
from .lr_scheduler import LRScheduler


def get_swa_avg_fn():
    """The running mean: θ̄ + (θ − θ̄)/(n + 1) after n averaged models."""

    def swa_update(averaged, current, num_averaged):
        return averaged + (current - averaged) / (num_averaged + 1)

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The exponential moving average: decay·θ̄ + (1 − decay)·θ."""

    def ema_update(averaged, current, num_averaged):
        return decay * averaged + (1 - decay) * current

    return ema_update


def _in_place(avg_fn):
    def multi(averaged_params, current_params, num_averaged):
        for averaged, current in zip(averaged_params, current_params, strict=True):
            averaged.copy_(avg_fn(averaged, current, num_averaged))

    return multi


def get_swa_multi_avg_fn():
    return _in_place(get_swa_avg_fn())


def get_ema_multi_avg_fn(decay=0.999):
    return _in_place(get_ema_avg_fn(decay))


def __getattr__(name):
    # AveragedModel is an nn.Module, and nn sits above the engine (it imports optim, never the
    # reverse): the class is made on first use, `from tinytensor.optim.swa_utils import
    # AveragedModel` included
    if name != "AveragedModel":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()["AveragedModel"] = _make_averaged_model()
    return globals()["AveragedModel"]


def _make_averaged_model():
    from ..creation import tensor
    from ..nn import Module

    class AveragedModel(Module):
        """A copy of `model` whose weights average those of the models given to
        update_parameters (torch's: `module` is the copy, `n_averaged` a buffer)."""

        def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None,
                     use_buffers=False):  # fmt: skip
            super().__init__()
            if avg_fn is not None and multi_avg_fn is not None:
                raise ValueError("AveragedModel: give avg_fn or multi_avg_fn, not both")
            self.module = copy.deepcopy(model)
            if device is not None:
                self.module = self.module.to(device)
            self.register_buffer("n_averaged", tensor(0, dtype=int64))
            self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

        def forward(self, *args, **kwargs):
            return self.module(*args, **kwargs)

        def update_parameters(self, model):
            """Averages model's weights into this copy's (the first call copies them)."""
            mine, theirs = list(self.module.parameters()), list(model.parameters())
            if self.use_buffers:
                mine += list(self.module.buffers())
                theirs += list(model.buffers())
            n = int(self.n_averaged.item())
            with no_grad():
                if n == 0:
                    for a, m in zip(mine, theirs, strict=True):
                        a.copy_(m.detach())
                elif self.multi_avg_fn is not None:
                    self.multi_avg_fn([a.detach() for a in mine], [m.detach() for m in theirs],
                                      self.n_averaged)  # fmt: skip
                else:
                    update = self.avg_fn or get_swa_avg_fn()
                    for a, m in zip(mine, theirs, strict=True):
                        a.copy_(update(a.detach(), m.detach(), n))
                if not self.use_buffers:  # the buffers follow the model (update_bn redoes BN's)
                    for a, m in zip(self.module.buffers(), model.buffers(), strict=True):
                        a.copy_(m.detach())
                self.n_averaged.add_(1)

    AveragedModel.__module__ = __name__
    return AveragedModel


class SWALR(LRScheduler):
    """Anneals each group's lr to `swa_lr` over `anneal_epochs` steps (cos or linear), then
    holds it there (torch's SWALR, recursive in the current lr as torch's)."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):  # fmt: skip
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(
                f"SWALR: {len(swa_lrs)} swa_lr values for {len(groups)} parameter groups"
            )
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        return t if self.anneal_strategy == "linear" else (1 - math.cos(math.pi * t)) / 2

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        lrs = []
        for group in self.optimizer.param_groups:
            swa = group["swa_lr"]
            previous = (
                swa if prev_alpha == 1 else (group["lr"] - prev_alpha * swa) / (1 - prev_alpha)
            )
            lrs.append(swa * alpha + previous * (1 - alpha))
        return lrs


def update_bn(loader, model, device=None):
    """Recomputes the BatchNorm running statistics of `model` over `loader` (a cumulative
    average over its batches), as torch's update_bn; a batch that is a list or tuple is passed
    by its first element."""
    momenta = {}
    for module in model.modules():
        if hasattr(module, "running_mean") and hasattr(module, "reset_running_stats"):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None and isinstance(batch, Tensor):
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)
