"""Command-line flags shared by the training examples, and how they are checked."""

from __future__ import annotations

import argparse
import os

import tinytensor as tt

from .checkpoint import load_checkpoint
from .validation import non_negative_float, non_negative_int, positive_float, positive_int, seed

# Flags a resumed run may change; every other flag is taken from the checkpoint so that the run
# continues exactly as it started (same model, data, schedule and seed).
# (Validation and checkpoint intervals change what is recorded, never the training losses.)
RUN_CONTROL_FLAGS = (
    "resume", "out_dir", "device", "max_minutes", "stop_at_step", "no_progress", "no_plot",
    "eval_every", "checkpoint_every", "allow_data_change",
)  # fmt: skip


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where the help already says it or there is none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def add_training_flags(parser: argparse.ArgumentParser, **defaults) -> None:
    """Adds the flags every training example has; `defaults` sets the example's own values of
    steps, batch_size, lr, warmup_steps, eval_every, checkpoint_every, out_dir (required) and
    weight_decay, grad_clip, max_minutes (optional)."""
    g = parser.add_argument_group("training")
    # (flag, type, help, default if the example sets none; None: the example must set it)
    numbers = (
        ("--steps", positive_int, "optimizer steps", None),
        ("--batch-size", positive_int, "sequences per step", None),
        ("--lr", positive_float, "peak learning rate of AdamW", None),
        ("--warmup-steps", non_negative_int, "linear warmup steps before the cosine decay",
         None),
        ("--weight-decay", non_negative_float, "AdamW weight decay on matrices", 0.1),
        ("--grad-clip", positive_float, "clip the global gradient norm to this", 1.0),
        ("--eval-every", positive_int, "validate every N steps", None),
        ("--checkpoint-every", positive_int, "write a checkpoint every N steps, and at the end",
         None),
    )  # fmt: skip
    for flag, kind, text, fallback in numbers:
        name = flag[2:].replace("-", "_")
        default = defaults[name] if fallback is None else defaults.get(name, fallback)
        g.add_argument(flag, type=kind, default=default, help=text)
    g.add_argument(
        "--out-dir",
        default=defaults["out_dir"],
        help="checkpoint, loss.png and metrics.json go here"
        + ("" if defaults["out_dir"] else " (default: runs/MODEL-TASK)"),
    )
    g.add_argument(
        "--resume",
        action="store_true",
        help="continue the run checkpointed in --out-dir exactly where it stopped "
        "(its other flags come from the checkpoint; a larger --steps trains further)",
    )
    g.add_argument(
        "--allow-data-change",
        action="store_true",
        help="with --resume: continue even if the data file differs from the one the "
        "checkpoint was trained on (or pass a new --data)",
    )
    g.add_argument(
        "--max-minutes",
        type=positive_float,
        default=defaults.get("max_minutes"),
        help="stop after this much training time, with a checkpoint",
    )
    g.add_argument(
        "--stop-at-step",
        type=positive_int,
        default=None,
        help="stop after this step, with a checkpoint; --resume continues exactly as an "
        "uninterrupted run (a run in pieces)",
    )
    g.add_argument("--seed", type=seed, default=0, help="random seed")
    g.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda needs CuPy and a GPU",
    )
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--no-plot", action="store_true", help="do not write loss.png")


def check_device(parser: argparse.ArgumentParser, device: str) -> None:
    """Exits with a clear message if `--device cuda` cannot work here."""
    if device == "cuda" and not tt.cuda.is_available():
        parser.error(
            "--device cuda: no usable CUDA GPU (needs CuPy, `pip install tinytensor[cuda]`, and "
            "a GPU with its driver); use --device cpu"
        )


def merge_resumed_args(
    args: argparse.Namespace, saved: dict, also: tuple = ()
) -> argparse.Namespace:
    """The arguments of a resumed run: the checkpoint's, except the run-control flags and the
    names in `also` (flags of the script that do not touch training, e.g. sampling)."""
    merged = dict(saved)
    for name in RUN_CONTROL_FLAGS + tuple(also):
        merged[name] = getattr(args, name)
    return argparse.Namespace(**merged)


def given_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, argv=None) -> set:
    """The names of the flags on the command line `argv` (default: sys.argv), as opposed to
    those left at their defaults. NOTE: argparse fills in a default only where the namespace it
    parses into lacks the attribute, so a namespace of sentinels shows which ones it set."""
    unset = object()
    probe = argparse.Namespace(**{name: unset for name in vars(args)})
    parser.parse_args(argv, namespace=probe)
    return {name for name, value in vars(probe).items() if value is not unset}


def resumed_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, also: tuple = (), argv=None
) -> tuple[argparse.Namespace, dict]:
    """With --resume: the run's arguments (merge_resumed_args) and the `meta` its checkpoint in
    --out-dir holds (e.g. the tokenizer). Else (args, {}). Usage errors (exit 2): no readable
    checkpoint; a flag given on the command line (`argv`, default sys.argv) that would change
    the model, data or schedule of the run; a --steps below the step the checkpoint reached.
    A larger --steps continues the run up to it (the cosine schedule stretches to the new end)."""
    if not args.resume:
        return args, {}
    path = os.path.join(args.out_dir, "checkpoint.safetensors")
    try:
        state = load_checkpoint(path)
    except FileNotFoundError as e:
        parser.error(f"argument --resume: {e}")
    except OSError as e:  # tt.load's CheckpointError (an OSError): a damaged or foreign file
        parser.error(f"argument --resume: cannot read the checkpoint: {e}")
    meta = state.get("meta") if isinstance(state, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("args"), dict):
        parser.error(f"argument --resume: {path!r} is not a checkpoint of a training script")
    saved, given = meta["args"], given_flags(parser, args, argv)
    free = set(RUN_CONTROL_FLAGS) | set(also) | {"steps"}
    if args.allow_data_change:
        free.add("data")
    for name in sorted(given - free):
        if name in saved and getattr(args, name) != saved[name]:
            hint = " (with --allow-data-change)" if name == "data" else ""
            parser.error(
                f"argument --{name.replace('_', '-')}: the checkpoint's run has "
                f"{saved[name]!r}; --resume cannot change it{hint} (start a new run in another "
                "--out-dir instead)"
            )
    kept = tuple(also) + tuple(name for name in ("steps", "data") if name in given & free)
    merged = merge_resumed_args(args, saved, kept)
    reached = int(state.get("step", 0))
    if merged.steps < reached:
        parser.error(
            f"argument --steps: the checkpoint has already reached step {reached}; pass "
            f"--steps {reached} or more to continue it (got {merged.steps})"
        )
    return merged, meta


def check_same_data(
    parser: argparse.ArgumentParser, args: argparse.Namespace, meta: dict, data_sha256: str
) -> bool:
    """With --resume: a usage error if the data's SHA-256 differs from the one the checkpoint
    recorded, unless --allow-data-change. Returns whether it changed (allowed)."""
    recorded = meta.get("data_sha256") if meta else None
    if recorded is None or recorded == data_sha256:
        return False
    source = repr(args.data) if args.data else "the default corpus"
    if not args.allow_data_change:
        parser.error(
            f"argument --resume: the data {source} has changed since the checkpoint was "
            f"written (sha256 {recorded[:12]}... then, {data_sha256[:12]}... now); pass "
            "--allow-data-change to continue on it anyway"
        )
    return True
