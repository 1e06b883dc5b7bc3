"""A small training loop that does what a user expects of one.

    trainer = Trainer(model, optimizer, scheduler, batches, compute_loss, evaluate, config)
    trainer.resume(path)          # optional: continue a checkpointed run exactly
    result = trainer.fit()        # progress bar, periodic validation, checkpoints, loss curve

- A tqdm bar shows the loss, the validation loss, the learning rate, tokens/s and the ETA.
- Every `eval_every` steps (and at the end) `evaluate(model)` runs in eval mode without a graph.
- Every `checkpoint_every` steps (and at the end) one checkpoint is written atomically with
  `tt.save`: model, optimizer, scheduler, the batch sampler's RNG, tinytensor's global RNG
  (dropout), the step and the history. `resume` restores all of it, so the resumed run's losses
  are the ones an uninterrupted run with the same seed would have produced.
- Ctrl-C finishes the current step, writes a checkpoint and returns with `interrupted=True`
  (a second Ctrl-C stops at once). `max_minutes` stops the same way when the time is up.
- Data parallel (training/parallel.py: under mpiexec, with a DDP-wrapped model): the loss shown
  is the mean over ranks, rank 0 alone evaluates, prints and writes, the checkpoint holds every
  rank's RNG state, and the ranks agree on when to stop.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import tinytensor as tt

from . import parallel
from .checkpoint import load_checkpoint, save_checkpoint


@dataclass
class TrainConfig:
    steps: int  # optimizer steps in the whole run (a resumed run continues up to this)
    out_dir: str  # checkpoint, loss curve and metrics go here
    eval_every: int = 200  # validate every this many steps (and at the end)
    checkpoint_every: int = 500  # write a checkpoint every this many steps (and at the end)
    grad_clip: float | None = 1.0  # clip the global gradient norm to this (None: no clipping)
    tokens_per_step: int = 0  # for the tokens/s readout (0: not shown)
    max_minutes: float | None = None  # stop (and checkpoint) after this much training time
    stop_at_step: int | None = None  # stop (and checkpoint) after this step: a run in pieces
    progress: bool = True  # show the tqdm bar
    plot: bool = True  # write loss.png at the end
    desc: str = "train"  # the progress bar's label

    @classmethod
    def from_args(cls, args, tokens_per_step: int, desc: str) -> TrainConfig:
        """The config of an example script's parsed flags (training/cli.py add_training_flags)."""
        return cls(
            steps=args.steps,
            out_dir=args.out_dir,
            eval_every=args.eval_every,
            checkpoint_every=args.checkpoint_every,
            grad_clip=args.grad_clip,
            tokens_per_step=tokens_per_step,
            max_minutes=args.max_minutes,
            stop_at_step=getattr(args, "stop_at_step", None),
            progress=not args.no_progress,
            plot=not args.no_plot,
            desc=desc,
        )


@dataclass
class TrainResult:
    step: int  # steps completed in total
    history: dict  # "step"/"train_loss" per step, "eval_step" + one list per metric per eval
    interrupted: bool = False  # stopped by Ctrl-C
    timed_out: bool = False  # stopped by max_minutes
    paused: bool = False  # stopped by stop_at_step
    seconds: float = 0.0  # training time of all runs up to `step` (resumed ones added up)
    tokens_per_second: float = 0.0  # over those runs
    # this run after its first step, which also loads the compiled kernels (about 2 s per
    # process): the rate a longer run approaches, what benchmarks compare
    steady_tokens_per_second: float = 0.0
    checkpoint_path: str = ""
    plot_path: str = ""
    last_eval: dict = field(default_factory=dict)


class _InterruptFlag:
    """Turns the first Ctrl-C into a flag checked between steps, so that a step (whose optimizer
    update must not be cut in half) always completes before the checkpoint is written."""

    def __init__(self):
        self.raised = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.raised:  # a second Ctrl-C: the user wants out now
            raise KeyboardInterrupt
        self.raised = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


class Trainer:
    """Trains `model` by minimising `compute_loss(model, batch)` over batches from `batches`.

    Args:
        model: has parameters(), state_dict(), load_state_dict(), train(), eval().
        optimizer: has zero_grad(), step(), state_dict(), load_state_dict().
        scheduler: a learning-rate scheduler stepped after every optimizer step, or None.
        batches: has next_batch(), state_dict(), load_state_dict() (its RNG state).
        compute_loss: (model, batch) -> scalar loss Tensor.
        evaluate: model -> dict of float metrics (e.g. {"val_loss": 1.5}); run without a graph.
        config: a TrainConfig.
        meta: extra information stored in the checkpoint (model config, tokenizer, arguments).
    """

    def __init__(
        self,
        model,
        optimizer,
        scheduler,
        batches,
        compute_loss: Callable,
        evaluate: Callable | None,
        config: TrainConfig,
        meta: dict | None = None,
    ):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.batches, self.compute_loss, self.evaluate = batches, compute_loss, evaluate
        self.config, self.meta = config, meta or {}
        self.step = 0
        self.seconds_before = 0.0  # training time of the runs this one resumes
        self._start = None  # when this process's fit() began
        self.history = {"step": [], "train_loss": [], "lr": [], "eval_step": []}
        self.checkpoint_path = os.path.join(config.out_dir, "checkpoint.safetensors")
        self.plot_path = os.path.join(config.out_dir, "loss.png")

    # ---- state ------------------------------------------------------------------------------

    def _rng_state(self) -> dict:
        return {
            "batches": self.batches.state_dict(),
            "global": tt.random.default_generator.get_state(),
        }

    def _set_rng_state(self, state: dict) -> None:
        self.batches.load_state_dict(state["batches"])
        tt.random.default_generator.set_state(state["global"])

    def save(self, rng_state: dict | None = None) -> str:
        """Writes the checkpoint (atomically; rank 0 only in a job) and returns its path."""
        rng = parallel.gather_rng_states(rng_state or self._rng_state())  # every rank takes part
        if not parallel.is_main():
            return self.checkpoint_path
        state = {
            "step": self.step,
            "train_seconds": self.seconds_before + self._seconds_here(),
            "model": parallel.unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": rng,
            "history": self.history,
            "meta": self.meta,
        }
        save_checkpoint(state, self.checkpoint_path)
        return self.checkpoint_path

    def resume(self, path: str | None = None) -> int:
        """Restores a checkpoint (default: this run's own) and returns the step it reached."""
        state = load_checkpoint(path or self.checkpoint_path)
        rng = parallel.this_ranks_rng_state(state["rng"])
        parallel.unwrap(self.model).load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self._set_rng_state(rng)
        self.step = int(state["step"])
        self.seconds_before = float(state.get("train_seconds", 0.0))
        self.history = {k: list(v) for k, v in state["history"].items()}
        return self.step

    # ---- the loop ---------------------------------------------------------------------------

    def _seconds_here(self) -> float:
        return time.perf_counter() - self._start if self._start is not None else 0.0

    def _current_lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _train_step(self) -> float:
        self.model.train()
        batch = self.batches.next_batch()
        loss = self.compute_loss(self.model, batch)
        value = parallel.mean(float(loss.item()))  # the whole batch's loss, the same everywhere
        if not math.isfinite(value):  # before the update: the last checkpoint stays usable
            raise FloatingPointError(
                f"the training loss became {value} at step {self.step + 1}; lower the learning "
                "rate (--lr) or the gradient clip (--grad-clip)"
            )
        self.optimizer.zero_grad()
        loss.backward()
        if self.config.grad_clip is not None:
            tt.optim.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return value

    def run_evaluation(self) -> dict:
        """Runs `evaluate` in eval mode without building a graph and records its metrics."""
        if self.evaluate is None or not parallel.is_main():
            return {}
        self.model.eval()
        with tt.no_grad():
            metrics = {k: float(v) for k, v in self.evaluate(parallel.unwrap(self.model)).items()}
        self.model.train()
        self.history["eval_step"].append(self.step)
        for k, v in metrics.items():
            self.history.setdefault(k, []).append(v)
        return metrics

    def fit(self) -> TrainResult:
        cfg = self.config
        os.makedirs(cfg.out_dir, exist_ok=True)
        result = TrainResult(step=self.step, history=self.history)
        bar = _progress_bar(cfg, self.step)
        self._start, steps_here = time.perf_counter(), 0
        last_eval: dict = {}
        try:
            with _InterruptFlag() as interrupt:
                while self.step < cfg.steps:
                    # NOTE: the RNG state before the step is what a checkpoint must hold if the
                    # step is cut short (a KeyboardInterrupt raised inside it): the resumed run
                    # then redraws this step's batch instead of skipping it.
                    rng_before = self._rng_state()
                    lr = self._current_lr()
                    try:
                        loss = self._train_step()
                    except KeyboardInterrupt:
                        if parallel.world_size() > 1:
                            raise  # the other ranks may wait in a collective: end the job
                        result.interrupted = True
                        result.checkpoint_path = self.save(rng_before)
                        break
                    self.step += 1
                    steps_here += 1
                    if steps_here == 1:
                        first_step_end = time.perf_counter()
                    self.history["step"].append(self.step)
                    self.history["train_loss"].append(loss)
                    self.history["lr"].append(lr)
                    elapsed = self._seconds_here()
                    postfix = {"loss": f"{loss:.3f}", "lr": f"{lr:.2e}"}
                    if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                        last_eval = self.run_evaluation()
                        if last_eval:
                            bar.write(_format_eval(self.step, last_eval))
                    if last_eval:
                        postfix.update({k: f"{v:.3f}" for k, v in last_eval.items()})
                    if cfg.tokens_per_step:
                        postfix["tok/s"] = f"{cfg.tokens_per_step * steps_here / elapsed:,.0f}"
                    bar.set_postfix(postfix, refresh=False)
                    bar.update(1)
                    if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                        result.checkpoint_path = self.save()
                    out_of_time = cfg.max_minutes is not None and elapsed > 60.0 * cfg.max_minutes
                    interrupted, out_of_time = parallel.any_rank(interrupt.raised, out_of_time)
                    if interrupted:
                        result.interrupted = True
                        result.checkpoint_path = self.save()
                        break
                    if out_of_time:
                        result.timed_out = True
                        break
                    if cfg.stop_at_step is not None and self.step >= cfg.stop_at_step:
                        result.paused = True  # (every rank is at the same step)
                        break
        finally:
            bar.close()
        end = time.perf_counter()
        result.seconds = self.seconds_before + (end - self._start)
        if cfg.tokens_per_step and (steps_here or self.seconds_before):
            result.tokens_per_second = cfg.tokens_per_step * self.step / result.seconds
        if cfg.tokens_per_step and steps_here > 1:
            after_first = end - first_step_end
            result.steady_tokens_per_second = cfg.tokens_per_step * (steps_here - 1) / after_first
        if not result.interrupted:
            if not self.history["eval_step"] or self.history["eval_step"][-1] != self.step:
                last_eval = self.run_evaluation()
                if last_eval:
                    print(_format_eval(self.step, last_eval))
            result.checkpoint_path = self.save()
        if not last_eval and self.history["eval_step"]:  # e.g. resuming a finished run
            names = [k for k in self.history if k not in ("step", "train_loss", "lr", "eval_step")]
            last_eval = {k: self.history[k][-1] for k in names if self.history[k]}
        result.step, result.history, result.last_eval = self.step, self.history, last_eval
        if cfg.plot and self.history["step"] and parallel.is_main():
            from .plotting import plot_history

            result.plot_path = plot_history(
                self.history, self.plot_path, title=f"{cfg.desc}: loss per step"
            )
        return result


def _format_eval(step: int, metrics: dict) -> str:
    return f"step {step:>6}: " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items())


def _progress_bar(cfg: TrainConfig, initial: int):
    from tqdm.auto import tqdm

    return tqdm(
        total=cfg.steps,
        initial=initial,
        desc=cfg.desc,
        unit="step",
        dynamic_ncols=True,
        disable=not cfg.progress or not parallel.is_main(),
        mininterval=0.5,
    )
