"""Command-line flags shared by the training examples, and how they are checked."""

from __future__ import annotations

import argparse
import os

import tinytensor as tt

from .checkpoint import load_checkpoint

# Flags a resumed run may change; every other flag is taken from the checkpoint so that the run
# continues exactly as it started (same model, data, schedule and seed).
# (Validation and checkpoint intervals change what is recorded, never the training losses.)
RUN_CONTROL_FLAGS = (
    "resume", "out_dir", "device", "max_minutes", "no_progress", "no_plot", "eval_every",
    "checkpoint_every",
)  # fmt: skip


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where the help already says it or there is none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


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
        ("--warmup-steps", int, "linear warmup steps before the cosine decay", None),
        ("--weight-decay", float, "AdamW weight decay on matrices", 0.1),
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
        "(its other flags come from the checkpoint)",
    )
    g.add_argument(
        "--max-minutes",
        type=positive_float,
        default=defaults.get("max_minutes"),
        help="stop after this much training time, with a checkpoint",
    )
    g.add_argument("--seed", type=int, default=0, help="random seed")
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


def resumed_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, also: tuple = ()
) -> tuple[argparse.Namespace, dict]:
    """With --resume: the run's arguments (merge_resumed_args) and the `meta` its checkpoint in
    --out-dir holds (e.g. the tokenizer), or a usage error if there is none. Else (args, {})."""
    if not args.resume:
        return args, {}
    try:
        saved = load_checkpoint(os.path.join(args.out_dir, "checkpoint.safetensors"))
    except FileNotFoundError as e:
        parser.error(str(e))
    return merge_resumed_args(args, saved["meta"]["args"], also), saved["meta"]
