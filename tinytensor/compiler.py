"""`tt.compile`: the name `torch.compile` has, for programs that call it (nanoGPT-style training
scripts do by default).

tinytensor has no graph compiler: its ops already run as NumPy/CuPy calls (and fused kernels
where installed), so `tt.compile(model)` returns `model` itself. The results are the same as
without it, which is also what torch.compile promises; only the speed-up is absent. Unlike
torch's wrapper, the returned object is the module itself, so its state_dict keys carry no
`_orig_mod.` prefix (scripts that strip that prefix on loading find nothing to strip).
"""

from __future__ import annotations

import builtins

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(  # noqa: A001 - PyTorch's name
    model=None,
    *,
    fullgraph: bool = False,
    dynamic=None,
    backend="inductor",
    mode=None,
    options=None,
    disable: bool = False,
):
    """Returns `model` unchanged (see the module docstring); with no model, a decorator.

    Example:
        >>> model = tt.compile(model)          # the same Module
        >>> @tt.compile(mode="max-autotune")   # the same function
        ... def step(x): ...
    """
    if mode not in _MODES:
        raise ValueError(f"tt.compile: unknown mode {mode!r}; expected one of {_MODES[1:]}")
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                  mode=mode, options=options, disable=disable)  # fmt: skip
    if not builtins.callable(model):
        raise TypeError(
            f"tt.compile: model must be a Module or a function, got {type(model).__name__}"
        )
    return model
