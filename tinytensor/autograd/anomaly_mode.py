"""Anomaly detection (torch.autograd.detect_anomaly): which op made a NaN in backward, and where.

    with tt.autograd.detect_anomaly():
        loss = model(x).loss
        loss.backward()       # RuntimeError: Function 'Log' returned nan values in its 0th
                              # output. The forward call that created it: train.py:41 ...

While it is on, every recorded op keeps the stack of the forward call that made it (the user's
frames, not the library's), and backward checks each op's gradients for NaN. It costs the
stack per op: for debugging, as in torch. Off, it costs nothing (the recording function is
swapped in and out; backward reads one flag per call).
"""

from __future__ import annotations

import os
import traceback
import warnings

from .. import function as _function
from . import engine

_PACKAGE_DIRS = None  # tinytensor's own folders (engine, nn, models): frames shown are the user's
_plain_record = _function._record


def _library_dirs():
    global _PACKAGE_DIRS
    if _PACKAGE_DIRS is None:
        import tinytensor

        root = os.path.dirname(os.path.abspath(tinytensor.__file__))
        dirs = {root}
        for sub in ("nn", "models"):
            try:
                module = __import__(f"tinytensor.{sub}", fromlist=["_"])
                dirs.add(os.path.dirname(os.path.abspath(module.__file__)))
            except ImportError:
                pass
        _PACKAGE_DIRS = tuple(d + os.sep for d in dirs)
    return _PACKAGE_DIRS


def _record_with_stack(cls, ctx, inputs, parents, out, result):
    _plain_record(cls, ctx, inputs, parents, out, result)
    library = _library_dirs()
    ctx.forward_stack = [f for f in traceback.extract_stack() if not f.filename.startswith(library)]


def _switch(enabled: bool, check_nan: bool) -> None:
    _function._record = _record_with_stack if enabled else _plain_record
    engine._anomaly["enabled"] = enabled
    engine._anomaly["check_nan"] = enabled and check_nan


def is_anomaly_enabled() -> bool:
    return engine._anomaly["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    return engine._anomaly["check_nan"]


class set_detect_anomaly:
    """Turns anomaly detection on or off: at once, and as a context manager until its end."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.previous = (engine._anomaly["enabled"], engine._anomaly["check_nan"])
        _switch(bool(mode), bool(check_nan))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _switch(*self.previous)


class detect_anomaly:
    """`with tt.autograd.detect_anomaly():` (or as a decorator): see the module docstring."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.previous = []

    def __enter__(self):
        warnings.warn(
            "anomaly detection is on: every op keeps its forward stack and backward checks "
            "for NaN, which is slow; use it to debug",
            stacklevel=2,
        )
        self.previous.append((engine._anomaly["enabled"], engine._anomaly["check_nan"]))
        _switch(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _switch(*self.previous.pop())

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


def nan_error(node, index) -> RuntimeError:
    """The error for a NaN in gradient `index` that `node`'s backward returned."""
    stack = node.__dict__.get("forward_stack")
    where = (
        "\n\nThe forward call that created it (most recent call last):\n"
        + "".join(traceback.format_list(stack[-6:]))
        if stack
        else "\n\n(its forward ran before anomaly detection was turned on)"
    )
    return RuntimeError(
        f"Function '{node.name}' returned nan values in its {index}th output.{where}"
    )
