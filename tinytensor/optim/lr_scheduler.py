"""Learning-rate schedules, as `torch.optim.lr_scheduler` and HuggingFace's warmup helpers.

    opt = tt.optim.AdamW(params, lr=3e-4)
    sched = tt.optim.lr_scheduler.get_cosine_schedule_with_warmup(opt, 100, 10_000)
    for batch in batches:
        ...
        opt.step()
        sched.step()       # once per optimizer step, after it

A scheduler sets `group["lr"]` of each parameter group from the group's initial lr
(`base_lrs`) and the number of `step()` calls so far (`last_epoch`). Creating one already applies
the lr of step 0. Our schedules are closed-form functions of `last_epoch`; PyTorch computes some
of them recursively from the previous lr, which agrees with the closed form to rounding.
"""

from __future__ import annotations

import math

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "CosineAnnealingLR",
    "get_constant_schedule_with_warmup",
    "get_linear_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
]


class LRScheduler:
    """Base class: subclasses implement `get_lr()`, the lr of every group at `last_epoch`.

    Args:
        optimizer: the optimizer whose groups' lr this sets.
        last_epoch: the index of the last step taken, to resume a schedule (-1: start fresh);
            resuming needs `initial_lr` in every group, as PyTorch.
    """

    def __init__(self, optimizer, last_epoch: int = -1):
        name = type(self).__name__
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{name}: expected an optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(
                    f"{name}: resuming at last_epoch={last_epoch} needs 'initial_lr' in "
                    f"param group {i} (load the optimizer's state_dict first)"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr")

    def get_last_lr(self) -> list[float]:
        """The lr of each group as set by the last `step()`."""
        return list(self._last_lr)

    def step(self) -> None:
        """Advances the schedule by one step and sets every group's lr."""
        self._step_count += 1
        self.last_epoch += 1
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The schedule's position and settings (everything but the optimizer and callables)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores the position saved by `state_dict()` (lambdas stay as constructed).

        Also puts the saved lr back into the optimizer's groups (PyTorch leaves them as the
        new scheduler's constructor set them, which is wrong unless the optimizer's state is
        loaded afterwards).
        """
        state = {k: v for k, v in state_dict.items() if k != "lr_lambdas"}
        for key in ("base_lrs", "_last_lr"):
            if key in state:
                state[key] = list(state[key])
        self.__dict__.update(state)
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(last_epoch), one function or one per parameter group.

    Example:
        >>> sched = tt.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.95**step)
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        groups = optimizer.param_groups
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(groups):
                raise ValueError(
                    f"LambdaLR: got {len(lr_lambda)} lr_lambdas for {len(groups)} param groups"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(groups)
        if not all(callable(f) for f in self.lr_lambdas):
            raise TypeError("LambdaLR: lr_lambda must be a function of the step (or a list)")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        # NOTE: functions are not data; a resumed run rebuilds the scheduler with its lambdas
        # and then loads the position.
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (last_epoch // step_size): decays by gamma every step_size steps.

    Example:
        >>> sched = tt.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if int(step_size) != step_size or step_size < 1:
            raise ValueError(f"StepLR: step_size must be a positive integer, got {step_size}")
        self.step_size, self.gamma = int(step_size), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2.

    Reaches eta_min after T_max steps (and, past T_max, follows the cosine back up, as
    PyTorch's). SGDR's restarts are not included.

    Example:
        >>> sched = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000, eta_min=1e-5)
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):  # noqa: N803
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        cosine = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


# ---- HuggingFace's schedules (transformers.optimization), as LambdaLR multipliers ---------------


def _warmup_factor(step: int, num_warmup_steps: int) -> float:
    return float(step) / float(max(1, num_warmup_steps))


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps: int, last_epoch: int = -1):
    """lr rises linearly from 0 to the initial lr over `num_warmup_steps`, then stays there."""

    def lr_lambda(step):
        return _warmup_factor(step, num_warmup_steps) if step < num_warmup_steps else 1.0

    return LambdaLR(optimizer, lr_lambda, last_epoch)


def get_linear_schedule_with_warmup(
    optimizer, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1
):
    """Linear warmup from 0 over `num_warmup_steps`, then linear decay to 0 at
    `num_training_steps` (HuggingFace's formula):

    factor = step / warmup while step < warmup, else max(0, (total - step) / (total - warmup)).
    """

    def lr_lambda(step):
        if step < num_warmup_steps:
            return _warmup_factor(step, num_warmup_steps)
        remaining = float(num_training_steps - step)
        return max(0.0, remaining / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda, last_epoch)


def get_cosine_schedule_with_warmup(
    optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
):
    """Linear warmup from 0 over `num_warmup_steps`, then a cosine decay (HuggingFace's formula):

    progress = (step - warmup) / (total - warmup),
    factor = max(0, (1 + cos(pi * 2 * num_cycles * progress)) / 2); num_cycles=0.5 ends at 0.
    """

    def lr_lambda(step):
        if step < num_warmup_steps:
            return _warmup_factor(step, num_warmup_steps)
        progress = float(step - num_warmup_steps) / float(
            max(1, num_training_steps - num_warmup_steps)
        )
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))

    return LambdaLR(optimizer, lr_lambda, last_epoch)
