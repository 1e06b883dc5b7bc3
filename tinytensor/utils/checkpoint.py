"""Activation checkpointing (torch.utils.checkpoint): keep a block's inputs, not its insides,
and run it again in backward.

    y = checkpoint(block, x, use_reentrant=False)       # block's activations are not kept
    y = checkpoint_sequential(model.blocks, 3, x)       # a Sequential in 3 segments

forward runs `function` without recording; backward runs it again with recording, from the
same random state (so the same dropout masks), and backpropagates through that copy: the
parameters used inside get their gradients there, the inputs' go on. Memory: one segment's
activations at a time, for one more forward of each.
"""

from __future__ import annotations

import functools

from .. import random as _random
from ..autograd import engine
from ..autograd.function import Function
from ..function import enable_grad
from ..tensor import Tensor


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, function, preserve_rng_state, *args):
        ctx.function = function
        ctx.rng_state = _random.default_generator.get_state() if preserve_rng_state else None
        # the tensors go through save_for_backward (their in-place version check), the rest here
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(a if isinstance(a, Tensor) else None for a in args))
        return function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if ctx._create_graph:
            raise RuntimeError(
                "checkpoint: a second derivative through a checkpointed block is not supported; "
                "run the block without checkpoint for create_graph=True"
            )
        args = [
            other if t is None else t.detach().requires_grad_(t.requires_grad)
            for t, other in zip(ctx.saved_tensors, ctx.others)
        ]
        if ctx.rng_state is not None:  # forward's draws again: the same dropout masks
            outer = _random.default_generator.get_state()
            _random.default_generator.set_state(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.function(*args)
        finally:
            if ctx.rng_state is not None:
                _random.default_generator.set_state(outer)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [
            (o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad
        ]
        if pairs:  # one walk from every output: into the inputs' and the parameters' .grad
            seeds = [g._array for _, g in pairs]
            engine.walk([o for o, _ in pairs], seeds, retain_graph=False)
        return (None, None, *(a.grad if isinstance(a, Tensor) else None for a in args))


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its activations recomputed in backward instead of kept.

    Args:
        function: the block (a Module or any function of Tensors).
        args: its inputs; tensors among them get gradients as usual.
        use_reentrant: accepted for torch's signature (both of torch's forms give the same
            gradients here).
        preserve_rng_state: replay the random state in backward (dropout masks equal).
        kwargs: passed to function.
    """
    if kwargs:
        function = functools.partial(function, **kwargs)
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        # no input on the graph: the block runs as it is (its parameters still get gradients;
        # torch's reentrant form would leave them None here)
        return function(*args)
    return _Checkpoint.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """A Sequential (or a list of modules) run in `segments` pieces, every piece but the last
    checkpointed (torch.utils.checkpoint.checkpoint_sequential)."""
    modules = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or not 1 <= segments <= max(len(modules), 1):
        raise ValueError(
            f"checkpoint_sequential: segments must be an int in [1, {len(modules)}], got "
            f"{segments!r}"
        )
    size = -(-len(modules) // segments)  # ceil: torch's segment size
    preserve = kwargs.get("preserve_rng_state", True)

    def run(chunk):
        def forward(x):
            for m in chunk:
                x = m(x)
            return x

        return forward

    chunks = [modules[i : i + size] for i in range(0, len(modules), size)]
    for chunk in chunks[:-1]:
        input = checkpoint(run(chunk), input, preserve_rng_state=preserve)  # noqa: A001
    return run(chunks[-1])(input)
