"""`Function`: one node of the computation graph, and the switch that turns graph building off.

An op is a small subclass with `forward(*arrays, **params) -> array` and
`backward(grad) -> one gradient per input` (None where `needs_input_grad[i]` is false), both on raw
backend arrays. `Op.apply(*tensors, **params)` runs forward and, when a gradient is needed, records
the node so that `Tensor.backward` can find it. An op of one tensor may be given its options by
position instead, in forward's order: `Op.apply_unary(x, *options)` (the hot path of reshape,
transpose, softmax, sum, ..., where keywords cost a fifth of the op).

The same `backward` serves create_graph=True (higher-order gradients): written against
`xp = get_array_module(g)` and operators, it runs on Tensors there and records its own graph;
linear ops say `linear = True`, fused ones give a `composite` (docs/higher_order.md).
"""

from __future__ import annotations

import functools

from .inplace import note_saved
from .tensor import Tensor, devices_mismatch_error

_grad_enabled = True
# modules currently running their forward (innermost last), for viz; nn.Module.__call__ pushes
# and pops it directly (a `with module_scope(...)` costs ~0.5 µs of every module call)
module_stack: list = []

REGISTRY: dict[str, type] = {}  # every op of the engine by name, so that tests cover each one


class Function:
    """Base class of every op: see the module docstring.

    Class attributes an op may set:
        broadcasts: the op broadcasts its inputs like NumPy, so the engine sums each input
            gradient back to that input's shape (the one place broadcasting is undone).
        differentiable: False for ops with no gradient (argmax, comparisons): they never
            record a graph node.
        saves_arrays: False for ops whose forward keeps only shapes and options for backward,
            no arrays (reshape, sum, cat): their nodes skip the saved-tensor bookkeeping of
            `inplace.note_saved` (0.2-0.5 µs of a 3 µs small op). tests/engine/test_inplace.py
            checks the claim on every op case.
    """

    # needs_input_grad: which inputs want a gradient (() when no node is recorded); a slot, so
    # that an op's __dict__ holds only what its forward saved (inplace.note_saved)
    __slots__ = ("needs_input_grad", "__dict__")

    broadcasts = False
    differentiable = True
    saves_arrays = True
    may_alias = False  # forward may return a view of input 0 (reshape, permute, getitem, ...)
    # Under create_graph=True each node's VJP is itself recorded (higher_order.vjp), in one of
    # three ways, chosen by these:
    #   linear: the op is linear in its float inputs and its backward reads none of their
    #     values (reshape, indexing, sums, cat): its VJP becomes a node of its own whose VJP is
    #     the op again (forward's options are kept in `replay` for that)
    #   composite(self, *inputs): a fused op's value as differentiable ops; create_graph
    #     differentiates that instead of running the fused backward
    #   otherwise the same `backward`, handed Tensors: the gradient, and the inputs and output
    #     it saved; `constants` names saved float arrays that are not functions of the inputs
    runs_on_tensors = False  # backward takes Tensors itself (autograd.Function's nodes)
    linear = False
    linear_part = None  # an affine op's options for its linear part: {"value": 0} of a fill
    composite = None
    constants = ()
    inputs = None  # the input Tensors while the node is alive; None once backward freed it
    parents = ()  # each input's producing node when this one was recorded (None for leaves)
    saved_at = None  # set when forward saved arrays: what backward checks them against (inplace)
    saved_versions = ()  # (which, version, counter) of each tensor whose memory backward reads
    output_memory = None  # the output's memory id, once saved_versions replaced saved_at
    module = None  # the nn.Module whose forward created this node, if any (graph drawing)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("tinytensor."):
            REGISTRY[cls.__name__] = cls

    def forward(self, *arrays, **params):
        raise NotImplementedError(f"{type(self).__name__} must implement forward")

    def backward(self, grad):
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    @classmethod
    def apply(cls, *inputs, **params):
        """Runs the op on Tensors `inputs` (non-tensor options go in `params`)."""
        # NOTE: the hot path of every op, so plain loops (a list comprehension costs a function
        # call in Python 3.11), and a node's bookkeeping only where a node is recorded: under
        # no_grad (generation, evaluation) an op costs its arrays, its forward and its output
        ctx = cls()
        n = len(inputs)
        # NOTE: one, two and three inputs (nearly every op) without the loop: 0.1-0.2 µs of a
        # 2 µs op
        if n == 1:
            x = inputs[0]
            arrays = (x._array,)
            records = x.requires_grad and _grad_enabled and cls.differentiable
        elif n == 2:
            x, y = inputs
            arrays = (x._array, y._array)
            if arrays[0].__class__ is not arrays[1].__class__:
                raise devices_mismatch_error(cls.__name__, inputs)
            records = (x.requires_grad or y.requires_grad) and _grad_enabled and cls.differentiable
        elif n == 3:  # linear with a bias, layer_norm with weight and bias
            x, y, z = inputs
            arrays = (x._array, y._array, z._array)
            if not (arrays[0].__class__ is arrays[1].__class__ is arrays[2].__class__):
                raise devices_mismatch_error(cls.__name__, inputs)
            records = (
                (x.requires_grad or y.requires_grad or z.requires_grad)
                and _grad_enabled
                and cls.differentiable
            )
        else:
            kind = inputs[0]._array.__class__
            arrays = []
            wanted = False
            for t in inputs:
                a = t._array
                if a.__class__ is not kind:
                    raise devices_mismatch_error(cls.__name__, inputs)
                arrays.append(a)
                if t.requires_grad:
                    wanted = True
            records = wanted and _grad_enabled and cls.differentiable
        if records:  # set before forward, so an op can save only what backward reads
            needs, parents = [], []
            for t in inputs:
                needs.append(t.requires_grad)
                parents.append(t._ctx)
            ctx.needs_input_grad = tuple(needs)
            if cls.linear:
                ctx.replay = params  # forward's options (a dict; apply_unary's: a tuple)
        else:
            ctx.needs_input_grad = ()
        try:
            # NOTE: a call of fixed arity where it can be: `f(*arrays, **params)` builds a tuple
            # and a dict and binds by name, 0.1-0.2 µs of a 1.5 µs op
            if params:
                out = ctx.forward(*arrays, **params)
            elif n == 1:
                out = ctx.forward(arrays[0])
            elif n == 2:
                out = ctx.forward(arrays[0], arrays[1])
            elif n == 3:
                out = ctx.forward(arrays[0], arrays[1], arrays[2])
            else:
                out = ctx.forward(*arrays)
        except (ValueError, TypeError, IndexError) as e:
            if getattr(e, "names_the_call", False):  # already phrased for the user (see below)
                raise
            raise _op_error(cls.__name__, inputs, e) from e
        result = _wrap(out, records, ctx if records else None)
        if cls.may_alias and out.__class__ is arrays[0].__class__ and shares_memory(out, arrays[0]):
            _mark_view(result, inputs[0])
        if records:
            _record(cls, ctx, inputs, tuple(parents), out, result)
        return result

    @classmethod
    def apply_unary(cls, x, *options):
        """`apply` for an op of one input Tensor `x`, with forward's options passed by position,
        in forward's order: `Softmax.apply_unary(x, axis)`, `Sum.apply_unary(x, axes, keepdim)`.

        The hot path of the one-input ops with options (reshape, transpose, softmax, sum...).
        NOTE: options by keyword cost 0.3-0.4 µs of a 1.5-3 µs op: `**params` makes a dict on
        the way in and another on the way to forward, and binds them by name.
        """
        ctx = cls()
        a = x._array
        records = x.requires_grad and _grad_enabled and cls.differentiable
        ctx.needs_input_grad = (True,) if records else ()
        if records and cls.linear:
            ctx.replay = options
        k = len(options)
        try:
            if k == 1:
                out = ctx.forward(a, options[0])
            elif k == 2:
                out = ctx.forward(a, options[0], options[1])
            else:
                out = ctx.forward(a, *options)
        except (ValueError, TypeError, IndexError) as e:
            if getattr(e, "names_the_call", False):  # already phrased for the user (see below)
                raise
            raise _op_error(cls.__name__, (x,), e) from e
        result = _wrap(out, records, ctx if records else None)
        if cls.may_alias and out.__class__ is a.__class__ and shares_memory(out, a):
            _mark_view(result, x)
        if records:
            _record(cls, ctx, (x,), (x._ctx,), out, result)
        return result

    def release(self):
        """Drops the saved arrays and the links to the inputs (after backward)."""
        self.__dict__.clear()

    @property
    def name(self) -> str:
        return type(self).__name__


_wrap = Tensor._wrap


def _mark_view(result, x):
    """`result` is a view of input `x`: it knows its base (PyTorch's `._base`), whose version
    counter it shares."""
    result._base = x if x._base is None else x._base


def _record(cls, ctx, inputs, parents, out, result) -> None:
    """Completes a recorded node `ctx` of op `cls`: its inputs, their producing nodes, the
    module it ran in, and the versions of what forward saved (the engine's fields are slots, so
    ctx.__dict__ holds only forward's own)."""
    if ctx.__dict__ and cls.saves_arrays:
        note_saved(ctx, out, result)
    ctx.inputs = inputs
    ctx.parents = parents
    if module_stack:
        ctx.module = module_stack[-1]


def shares_memory(a, b) -> bool:
    """Whether two backend arrays are views of one storage (NumPy/CuPy collapse view chains)."""
    root_a = a if a.base is None else a.base
    return root_a is (b if b.base is None else b.base)


def _op_error(name, inputs, error):
    """An error from inside an op's forward, restated with the op and its inputs' shapes.

    An op that checks its input inside forward (where a kernel's pass finds the problem for
    free) raises an error already phrased for the user, marked `error.names_the_call = True`;
    `apply` passes that one on as it is."""
    kind = next(k for k in (IndexError, ValueError, TypeError) if isinstance(error, k))
    shapes = ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in inputs)
    return kind(f"{name}: {error} (inputs: {shapes})")


def is_grad_enabled() -> bool:
    return _grad_enabled


class _GradMode:
    """Context manager and decorator that sets whether ops record the graph."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.previous = []

    def __enter__(self):
        global _grad_enabled
        self.previous.append(_grad_enabled)
        _grad_enabled = self.enabled

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self.previous.pop()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _GradMode(self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def no_grad():
    """`with tt.no_grad():` builds no graph (inference, optimizer steps). Also a decorator."""
    return _GradMode(False)


def enable_grad():
    """Turns graph building back on inside a `no_grad` block."""
    return _GradMode(True)


def inference_mode(mode: bool = True):
    """PyTorch's inference_mode: here the same as no_grad (no graph is built); a decorator too."""
    return _GradMode(not mode)


def set_grad_enabled(mode: bool):
    return _GradMode(bool(mode))


class module_scope:
    """While active, new graph nodes remember `module` (nn.Module.__call__ enters one)."""

    __slots__ = ("module",)

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        module_stack.append(self.module)

    def __exit__(self, *exc):
        module_stack.pop()
