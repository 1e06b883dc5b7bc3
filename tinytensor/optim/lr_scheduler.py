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
One consequence: two schedulers stepping the same optimizer do not multiply their effects (as
PyTorch's "chainable" ones and ChainedScheduler do); the second one's lr wins. Compose schedules
in time with `SequentialLR`, or in one function with `LambdaLR`.

    LambdaLR, StepLR, MultiStepLR, ExponentialLR, ConstantLR, LinearLR, PolynomialLR,
    CosineAnnealingLR, CosineAnnealingWarmRestarts, OneCycleLR     a function of the step
    SequentialLR                                                    schedules one after another
    ReduceLROnPlateau                                               driven by a metric
"""

from __future__ import annotations

import bisect
import math
import numbers

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "MultiStepLR",
    "ConstantLR",
    "PolynomialLR",
    "ExponentialLR",
    "LinearLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "SequentialLR",
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
        _check_settings_finite(name, vars(self))
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
        self._set_epoch(self.last_epoch + 1)

    def _set_epoch(self, epoch: int) -> None:
        """Moves the schedule to step `epoch` and sets every group's lr (our schedules are
        closed-form in the step, so this is also how SequentialLR restarts one at 0)."""
        self.last_epoch = epoch
        lrs = self.get_lr()
        for lr in lrs:  # e.g. a lr_lambda that returns NaN: the optimizer would train on it
            if isinstance(lr, numbers.Real) and not math.isfinite(lr):
                raise ValueError(
                    f"{type(self).__name__}: step {epoch} gives lr {lr}; lr must be finite"
                )
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


def _check_settings_finite(name, settings: dict) -> None:
    """A NaN or inf setting (gamma, eta_min, max_lr, ...) would make every lr after some step
    NaN without a word; refuse it at construction, naming the setting. `settings` are the
    attributes a subclass set before calling LRScheduler.__init__."""
    for key, value in settings.items():
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and not math.isfinite(v):
                raise ValueError(f"{name}: {key.lstrip('_')} must be finite, got {value}")


_LRScheduler = LRScheduler  # PyTorch's old name, still subclassed by older code


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


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (number of milestones <= last_epoch).

    Example:
        >>> sched = tt.optim.lr_scheduler.MultiStepLR(opt, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        drops = bisect.bisect_right(self.milestones, self.last_epoch)
        return [base * self.gamma**drops for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor for the first `total_iters` steps, initial_lr afterwards.

    Example:
        >>> sched = tt.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=4)
    """

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got factor={factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        factor = self.factor if self.last_epoch < self.total_iters else 1.0
        return [base * factor for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - min(last_epoch, total_iters) / total_iters) ** power.

    Example:
        >>> sched = tt.optim.lr_scheduler.PolynomialLR(opt, total_iters=1000, power=2.0)
    """

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0, last_epoch=-1):
        if int(total_iters) != total_iters or total_iters < 1:
            raise ValueError(
                f"PolynomialLR: total_iters must be a positive integer, got total_iters="
                f"{total_iters}"
            )
        self.total_iters, self.power = int(total_iters), power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        remaining = 1.0 - min(self.last_epoch, self.total_iters) / self.total_iters
        return [base * remaining**self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter 2017): cosine annealing from initial_lr to eta_min over T_i
    steps, then a restart; the first period is T_0 and each one is T_mult times the last.

        lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2

    Example:
        >>> sched = tt.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
    """

    def __init__(
        self,
        optimizer,
        T_0: int,  # noqa: N803 - PyTorch's argument names
        T_mult: int = 1,  # noqa: N803
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ):
        if int(T_0) != T_0 or T_0 < 1:
            raise ValueError(
                f"CosineAnnealingWarmRestarts: T_0 must be a positive integer, got T_0={T_0}"
            )
        if int(T_mult) != T_mult or T_mult < 1:
            raise ValueError(
                f"CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got T_mult={T_mult}"
            )
        self.T_0, self.T_mult, self.eta_min = int(T_0), int(T_mult), eta_min
        super().__init__(optimizer, last_epoch)

    def _position(self):
        """(T_cur, T_i): steps into the current period, and its length."""
        t, period = self.last_epoch, self.T_0
        if self.T_mult == 1:
            return t % period, period
        while t >= period:
            t -= period
            period *= self.T_mult
        return t, period

    def get_lr(self):
        t_cur, period = self._position()
        cosine = (1 + math.cos(math.pi * t_cur / period)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** last_epoch: decays by gamma every step.

    Example:
        >>> sched = tt.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        if not gamma > 0:
            raise ValueError(f"ExponentialLR: gamma must be positive, got gamma={gamma}")
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = initial_lr * factor, the factor going linearly from `start_factor` to `end_factor`
    over `total_iters` steps and staying there:

        factor = start + (end - start) * min(last_epoch, total_iters) / total_iters

    Example (a warmup from lr/10 over 100 steps):
        >>> sched = tt.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=100)
    """

    def __init__(
        self,
        optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if not 0 < start_factor <= 1:
            raise ValueError(
                f"LinearLR: start_factor must be in (0, 1], got start_factor={start_factor}"
            )
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got end_factor={end_factor}")
        if int(total_iters) != total_iters or total_iters < 1:
            raise ValueError(
                f"LinearLR: total_iters must be a positive integer, got total_iters={total_iters}"
            )
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        progress = min(self.last_epoch, self.total_iters) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * progress
        return [base * factor for base in self.base_lrs]


def _per_group(name, where, optimizer, value) -> list:
    """One value per parameter group: a list of that length, or one value repeated."""
    groups = optimizer.param_groups
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(
                f"{where}: expected {len(groups)} values of {name} (one per parameter group), "
                f"got {len(value)}"
            )
        return list(value)
    return [value] * len(groups)


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin 2018): lr rises from max_lr/div_factor to max_lr over
    the first `pct_start` of the steps, then anneals to max_lr/(div_factor·final_div_factor);
    momentum (or Adam's beta1) moves the opposite way, between max_momentum and base_momentum.

    Phases (as PyTorch): warm up to step pct_start·total - 1, anneal to step total - 1; with
    `three_phase`, warm up, come back down symmetrically to the initial lr, then anneal to the
    minimum. Within a phase, 'cos': end + (start - end)(1 + cos(π·pct))/2; 'linear': a line.
    Call `step()` after every batch; stepping more than `total_steps` times raises.

    Args:
        optimizer: the optimizer (its `lr` is replaced; `momentum` or `betas` must exist if
            `cycle_momentum`).
        max_lr: the peak lr, one value or one per group.
        total_steps: the number of steps, or give `epochs` and `steps_per_epoch`.
        pct_start: the fraction of the steps spent warming up.
        anneal_strategy: 'cos' or 'linear'.
        cycle_momentum, base_momentum, max_momentum: the momentum cycle (per group or one).
        div_factor: initial lr = max_lr / div_factor.
        final_div_factor: final lr = initial lr / final_div_factor.
        three_phase: the three-phase schedule above.

    Example:
        >>> sched = OneCycleLR(opt, max_lr=0.01, epochs=10, steps_per_epoch=len(loader))
    """

    def __init__(
        self,
        optimizer,
        max_lr,
        total_steps=None,
        epochs=None,
        steps_per_epoch=None,
        pct_start=0.3,
        anneal_strategy="cos",
        cycle_momentum=True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor=25.0,
        final_div_factor=1e4,
        three_phase=False,
        last_epoch=-1,
    ):
        where = "OneCycleLR"
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{where}: expected an optimizer, got {type(optimizer).__name__}")
        _check_settings_finite(
            where,
            dict(
                max_lr=max_lr,
                pct_start=pct_start,
                base_momentum=base_momentum,
                max_momentum=max_momentum,
                div_factor=div_factor,
                final_div_factor=final_div_factor,
            ),
        )
        if total_steps is not None:
            if int(total_steps) != total_steps or total_steps <= 0:
                raise ValueError(
                    f"{where}: total_steps must be a positive integer, "
                    f"got total_steps={total_steps}"
                )
            self.total_steps = int(total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if int(value) != value or value <= 0:
                    raise ValueError(
                        f"{where}: {name} must be a positive integer, got {name}={value}"
                    )
            self.total_steps = int(epochs) * int(steps_per_epoch)
        else:
            raise ValueError(f"{where}: give total_steps, or epochs and steps_per_epoch")
        if not isinstance(pct_start, (int, float)) or not 0 <= pct_start <= 1:
            raise ValueError(f"{where}: pct_start must be in [0, 1], got pct_start={pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"{where}: anneal_strategy must be 'cos' or 'linear', got "
                f"anneal_strategy={anneal_strategy!r}"
            )
        self.anneal_strategy, self.three_phase = anneal_strategy, three_phase
        # (last step of the phase, lr from, lr to, momentum from, momentum to), by group keys
        warmup_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._phases = [
                (warmup_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * warmup_end, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (warmup_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lrs = _per_group("max_lr", where, optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            defaults = getattr(optimizer, "defaults", {})
            if "momentum" not in defaults and "betas" not in defaults:
                raise ValueError(
                    f"{where}: cycle_momentum=True needs an optimizer with momentum or betas, got "
                    f"{type(optimizer).__name__} (pass cycle_momentum=False)"
                )
            self.use_beta1 = "betas" in defaults
            tops = _per_group("max_momentum", where, optimizer, max_momentum)
            bases = _per_group("base_momentum", where, optimizer, base_momentum)
            if last_epoch == -1:
                for top, base, group in zip(tops, bases, optimizer.param_groups):
                    self._set_momentum(group, top)
                    group["max_momentum"], group["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: stepped {step} times, but total_steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
                if step <= end_step or i == len(self._phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m_from], group[m_to], pct))
                    break
                start_step = end_step
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiplies the lr by `factor` when a metric has stopped improving for `patience` steps.

    Call `step(metric)` once per evaluation (e.g. with the validation loss). A value is an
    improvement when, for mode='min', it is below best·(1 - threshold) ('rel') or best -
    threshold ('abs') (above, for 'max'). After `patience` steps without one the lr becomes
    max(lr·factor, min_lr) (unchanged if that moves it by no more than `eps`), and the next
    `cooldown` steps are not counted.

    Example:
        >>> sched = ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2)
        >>> for epoch in range(epochs):
        ...     train(); sched.step(validate())
    """

    def __init__(
        self,
        optimizer,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        threshold_mode="rel",
        cooldown=0,
        min_lr=0,
        eps=1e-8,
    ):
        where = "ReduceLROnPlateau"
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{where}: expected an optimizer, got {type(optimizer).__name__}")
        _check_settings_finite(
            where, dict(factor=factor, threshold=threshold, min_lr=min_lr, eps=eps)
        )
        if factor >= 1.0:
            raise ValueError(f"{where}: factor must be < 1.0, got factor={factor}")
        if mode not in ("min", "max"):
            raise ValueError(f"{where}: mode must be 'min' or 'max', got mode={mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"{where}: threshold_mode must be 'rel' or 'abs', got threshold_mode="
                f"{threshold_mode!r}"
            )
        self.optimizer = optimizer
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.min_lrs = _per_group("min_lr", where, optimizer, min_lr)
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self.best = math.inf if mode == "min" else -math.inf
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, value, best) -> bool:
        if self.mode == "min":
            if self.threshold_mode == "rel":
                return value < best * (1.0 - self.threshold)
            return value < best - self.threshold
        if self.threshold_mode == "rel":
            return value > best * (1.0 + self.threshold)
        return value > best + self.threshold

    def step(self, metrics, epoch=None) -> None:
        """Records one value of the watched metric (a number or a one-element Tensor)."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad steps during the cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, min_lr)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores the state saved by `state_dict()` (the lr is the optimizer's to restore)."""
        self.__dict__.update(state_dict)


def _undo_initial_step(sched) -> None:
    """Takes back the step every scheduler's constructor takes (through nested sequences)."""
    if hasattr(sched, "_schedulers"):
        for inner in sched._schedulers:
            _undo_initial_step(inner)
    else:
        sched.last_epoch -= 1


class SequentialLR(LRScheduler):
    """Runs `schedulers` one after another: the i-th takes over (restarted at its step 0) at
    step `milestones[i - 1]`.

    Example (linear warmup over 100 steps, then cosine decay):
        >>> warmup = LinearLR(opt, start_factor=0.01, total_iters=100)
        >>> decay = CosineAnnealingLR(opt, T_max=900)
        >>> sched = SequentialLR(opt, [warmup, decay], milestones=[100])
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        where = "SequentialLR"
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers:
            raise ValueError(f"{where}: expected at least one scheduler, got none")
        for i, sched in enumerate(schedulers):
            if isinstance(sched, ReduceLROnPlateau):
                raise ValueError(
                    f"{where}: schedulers[{i}] is a ReduceLROnPlateau, whose step needs the "
                    "metric; it cannot run in a sequence"
                )
            if getattr(sched, "optimizer", None) is not optimizer:
                raise ValueError(
                    f"{where}: schedulers[{i}] ({type(sched).__name__}) belongs to another "
                    "optimizer; all must share the one given"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"{where}: {len(schedulers)} schedulers need {len(schedulers) - 1} milestones, "
                f"got milestones={milestones}"
            )
        self._schedulers, self._milestones = schedulers, milestones
        self.optimizer = optimizer
        self.last_epoch = last_epoch + 1
        # Each scheduler's constructor took a step; undo them and start the one in charge.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo_initial_step(self)
        first = schedulers[bisect.bisect_right(milestones, 0)]
        first._step_count = 0
        first.step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:
        self.last_epoch += 1
        i = bisect.bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            sched._set_epoch(0)  # the next scheduler starts from its own step 0
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [sched.state_dict() for sched in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for sched, sched_state in zip(self._schedulers, saved):
            sched.load_state_dict(sched_state)
        # the sequence's position decides whose lr is current
        current = self._schedulers[bisect.bisect_right(self._milestones, self.last_epoch)]
        for group, lr in zip(self.optimizer.param_groups, current.get_last_lr()):
            group["lr"] = lr
        self._last_lr = current.get_last_lr()


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
