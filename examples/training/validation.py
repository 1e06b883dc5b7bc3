"""Checking the training scripts' flags before any work: one line, exit status 2, no traceback.

    parser = ScriptParser(description=...)              # parser.error prints one line
    parser.add_argument("--n-layer", type=positive_int)  # "must be a positive integer, got -1"
    ...
    args = parser.parse_args(argv)
    check_divisible(parser, args, "n_embd", "n_head")    # checks across flags
    check_out_dir(parser, args.out_dir)                  # writable, without creating it

Every type below is an argparse `type=`: it parses the text and checks the range, raising
`argparse.ArgumentTypeError`, which argparse reports as `argument --flag: <message>`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys


class ScriptParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr, `prog: error: message`, exit 2.

    NOTE: argparse's own `error` prints the usage first (a dozen lines for these scripts),
    which buries the one line that says what is wrong; --help still shows the usage.
    """

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            sys.stderr.write(message)
        sys.exit(status)


def _number(text: str, kind, wanted: str):
    """`kind(text)`, or the usage error `must be {wanted}, got {text!r}`."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
    return value


def _int_in_range(text: str, low: int, high: int, wanted: str) -> int:
    value = _number(text, int, wanted)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
    return value


# NOTE: an upper bound on every size: a typo such as `--n-embd 1280000` should be a usage error,
# not a process that allocates until the machine kills it (the memory check is per script).
MAX_SIZE = 2**31 - 1


def positive_int(text: str) -> int:
    """An integer >= 1 (sizes, step counts, intervals)."""
    return _int_in_range(text, 1, MAX_SIZE, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0 (warmup steps, characters to sample)."""
    return _int_in_range(text, 0, MAX_SIZE, "a non-negative integer")


def seed(text: str) -> int:
    """A random seed: NumPy's generators take integers in [0, 2**63)."""
    return _int_in_range(text, 0, 2**63 - 1, "an integer in [0, 2**63)")


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rate, gradient clip, minutes)."""
    value = _number(text, float, "a finite positive number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (weight decay, sampling temperature)."""
    value = _number(text, float, "a finite number >= 0")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def dropout_probability(text: str) -> float:
    """A probability in [0, 1): dropout 1 would zero every activation."""
    value = _number(text, float, "a probability in [0, 1)")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be a probability in [0, 1), got {text}")
    return value


def open_fraction(text: str) -> float:
    """A fraction in (0, 1) (the held-out share of the text: both parts must be non-empty)."""
    value = _number(text, float, "a fraction in (0, 1)")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1), got {text}")
    return value


def selection_probability(text: str) -> float:
    """A probability in (0, 1] (a share of tokens selected for prediction: none would teach
    nothing)."""
    value = _number(text, float, "a probability in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a probability in (0, 1], got {text}")
    return value


def non_empty_text(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


# ---- checks across flags -------------------------------------------------------------------------


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_divisible(parser: argparse.ArgumentParser, args, width: str, heads: str) -> None:
    """The model width must split evenly into attention heads."""
    w, h = getattr(args, width), getattr(args, heads)
    if w % h:
        parser.error(
            f"argument {_flag(width)}: {w} is not divisible by {_flag(heads)} {h} "
            "(each head gets width / heads channels)"
        )


def check_at_least(parser: argparse.ArgumentParser, args, name: str, low: int, why: str) -> None:
    value = getattr(args, name)
    if value < low:
        parser.error(f"argument {_flag(name)}: must be at least {low} ({why}), got {value}")


def check_at_most(parser: argparse.ArgumentParser, args, name: str, high: int, why: str) -> None:
    value = getattr(args, name)
    if value > high:
        parser.error(f"argument {_flag(name)}: must be at most {high} ({why}), got {value}")


def check_memory(
    parser: argparse.ArgumentParser, what: str, n_params: int, activations: int = 0
) -> None:
    """Refuses a run whose weights, gradients and AdamW moments (4 float32 copies of the
    `n_params` parameters) and one step's `activations` (float32 values kept for backward)
    cannot fit in this machine's memory, before anything is allocated."""
    needed = 4 * (4 * n_params + activations)
    try:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every platform
        return
    if needed > available:
        parser.error(
            f"{what}: {n_params:,} parameters and {activations:,} activations per step need "
            f"{needed / 2**30:,.1f} GiB (weights, gradients, AdamW state, activations); this "
            f"machine has {available / 2**30:,.1f} GiB"
        )


def transformer_activations(tokens: int, n_layer: int, width: int, heads: int, length: int,
                            vocab: int) -> int:  # fmt: skip
    """Values a Transformer step keeps for backward: per token and layer ~34·width plus the
    attention maps' 5·heads·length (Korthikanti et al., 2022), plus the logits and their
    softmax."""
    return tokens * (n_layer * (34 * width + 5 * heads * length) + 2 * vocab)


def check_out_dir(parser: argparse.ArgumentParser, out_dir: str) -> None:
    """--out-dir must be a directory, or creatable as one, that this process may write to.
    Nothing is created here: the Trainer makes the directory when it first writes."""
    path = os.path.abspath(out_dir)
    if os.path.exists(path) and not os.path.isdir(path):
        parser.error(f"argument --out-dir: {out_dir!r} exists and is not a directory")
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        parser.error(f"argument --out-dir: cannot create {out_dir!r}: {existing!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        parser.error(f"argument --out-dir: {existing!r} is not writable")
