"""torch.jit as the identity: there is no TorchScript here, so `script` and `trace` return what
they are given and it runs as Python (the same results; said once in a warning)."""

from __future__ import annotations

import warnings

_warned = set()


def _once(what: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(
            f"tinytensor.jit.{what}: there is no TorchScript here; it returns its argument, which "
            "runs as Python (the same results)",
            stacklevel=3,
        )


def script(obj, *args, **kwargs):
    _once("script")
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    _once("trace")
    return func


def trace_module(mod, inputs=None, *args, **kwargs):
    _once("trace_module")
    return mod


def ignore(fn=None, *, drop=False):
    return fn if fn is not None else (lambda f: f)


def unused(fn):
    return fn


def export(fn):
    return fn


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def freeze(mod, *args, **kwargs):
    return mod


def optimize_for_inference(mod, *args, **kwargs):
    return mod
