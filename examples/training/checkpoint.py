"""Checkpoints: one file per run, written atomically by `tt.save`, read back by `tt.load`."""

from __future__ import annotations

import os

import tinytensor as tt


def save_checkpoint(state: dict, path: str) -> None:
    """Writes `state` (nested dicts/lists of tensors, arrays, numbers, strings) to `path`.

    NOTE: tt.save writes to a temporary file and renames it over `path`, so a crash or Ctrl-C
    while saving leaves the previous checkpoint intact rather than a truncated one.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tt.save(state, path)


def load_checkpoint(path: str) -> dict:
    """Reads a checkpoint written by `save_checkpoint`; a clear error if there is none."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no checkpoint at {path!r} to resume from (train without --resume first, or pass "
            "the --out-dir of the run to continue)"
        )
    return tt.load(path)
