"""torch.autograd.Function: a user's op with a hand-written backward, in torch's form.

    class Exp(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x):               # or forward(x) plus setup_context(ctx, inputs, output)
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):           # one gradient per forward input (None: no gradient)
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

forward runs without recording (on Tensors, as the user wrote it); apply records one graph node,
`CustomFunction`, whose backward calls the user's with Tensors. Under create_graph=True that call
records, so a backward written in tensor ops is differentiable again (`once_differentiable`
says it is not). A forward with several outputs records one `CustomFunctionOutput` node per
output over the function's node: their gradients reach the user's backward together, in one call.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import function as engine_function
from ..backend import get_array_module
from ..function import Function as Node
from ..function import enable_grad, no_grad
from ..inplace import counter_of, version_counter
from ..tensor import Tensor

_wrap = Tensor._wrap


class FunctionCtx:
    """What forward leaves for backward (torch's ctx): saved tensors, flags, any attribute."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad  # one flag per forward argument
        self.materialize_grads = True
        self._saved = None  # [(tensor, version)] while the graph lives; False once freed
        self._dirty = ()
        self._non_differentiable = ()
        self._function = "Function"
        self._create_graph = False
        self._inputs = ()  # the Tensors it was applied to (once_differentiable's graph)

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save tensors (or None), argument {i} is "
                    f"{type(t).__name__}"
                )
        self._saved = [(t, None if t is None else _version(t)) for t in tensors]

    @property
    def saved_tensors(self):
        if self._saved is False:
            raise RuntimeError(
                f"{self._function}: its saved tensors were freed after backward; pass "
                "retain_graph=True to the first backward to go through it twice"
            )
        saved = self._saved or []
        for i, (t, version) in enumerate(saved):
            if t is not None and _version(t) != version:
                raise RuntimeError(
                    f"{self._function}: saved tensor {i} (shape {tuple(t.shape)}) was modified "
                    f"in place since save_for_backward (version {version}, now {_version(t)}); "
                    "save a .clone() or use the out-of-place op"
                )
        return tuple(t for t, _ in saved)

    def mark_dirty(self, *tensors):
        """These inputs were modified in place by forward (and are returned as outputs)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """These outputs get no gradient (integer indices, masks)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool):
        """False: backward gets None, not zeros, for outputs that received no gradient."""
        self.materialize_grads = bool(value)


def _version(t) -> int:
    counter = counter_of(t)
    return 0 if counter is None else counter.value


class Function:
    """Base class of user functions with a custom backward (see the module docstring)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must implement forward")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """torch 2's form: forward(*inputs) without ctx, then this saves what backward needs."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must implement backward")

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple(
            isinstance(a, Tensor) and a.requires_grad and engine_function.is_grad_enabled()
            for a in args
        )
        ctx = FunctionCtx(needs)
        ctx._function = cls.__name__
        with no_grad():
            if cls.setup_context is not Function.setup_context:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not any(needs):
            return output
        return _record(cls, ctx, args, output)


def once_differentiable(backward):
    """For a backward not written in tensor ops: it runs without recording, and a second
    derivative through it is an error that says so (torch's decorator)."""

    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with no_grad():
            results = backward(ctx, *grads)
        if not ctx._create_graph:
            return results
        single = not isinstance(results, tuple)
        # on the graph of what it was computed from, through a node that refuses a backward
        depends = [t for t in (*ctx._inputs, *grads) if isinstance(t, Tensor) and t.requires_grad]
        marked = tuple(
            _OnceDifferentiable.apply(r, *depends, name=ctx._function)
            if isinstance(r, Tensor) and depends
            else r
            for r in ((results,) if single else results)
        )
        return marked[0] if single else marked

    return wrapper


# ---- the graph nodes --------------------------------------------------------------------------


class CustomFunction(Node):
    """The graph node of one `Function.apply`: its backward is the user's."""

    # higher_order.vjp calls its backward as it is: under create_graph the user's backward records
    runs_on_tensors = True

    def __init__(self, fn, ctx, positions, n_outputs):
        self.fn, self.ctx, self.positions, self.n_outputs = fn, ctx, positions, n_outputs

    @property
    def name(self) -> str:
        return self.fn.__name__ if "fn" in self.__dict__ else "CustomFunction"

    def backward(self, g):
        graph = g.__class__ is Tensor or (g.__class__ is _Slots and g.holds_tensors())
        grads = g.values(self.n_outputs) if g.__class__ is _Slots else [g]
        like = self.outputs_like
        tensors = []
        for i, gi in enumerate(grads):
            if gi is None and self.ctx.materialize_grads:
                shape, dtype, kind = like[i]
                gi = kind.zeros(shape, dtype)
            if gi is not None and gi.__class__ is not Tensor:
                gi = _wrap(gi, False, None)
            tensors.append(gi)
        self.ctx._create_graph = graph
        with enable_grad() if graph else no_grad():
            results = self.fn.backward(self.ctx, *tensors)
        return self._per_input(results, graph)

    def _per_input(self, results, graph):
        if not isinstance(results, tuple):
            results = (results,)
        if len(results) < len(self.positions) or len(results) > self.n_args:
            raise RuntimeError(
                f"{self.fn.__name__}.backward returned {len(results)} gradients, but forward "
                f"took {self.n_args} arguments (one gradient each, None for those without)"
            )
        grads = []
        for x, position in zip(self.inputs, self.positions):
            r = results[position] if position < len(results) else None
            if r is None:
                grads.append(None)
                continue
            if not isinstance(r, Tensor):
                raise TypeError(
                    f"{self.fn.__name__}.backward returned a {type(r).__name__} for argument "
                    f"{position}; a gradient is a Tensor (or None)"
                )
            if tuple(r.shape) != tuple(x.shape):
                raise RuntimeError(
                    f"{self.fn.__name__}.backward returned a gradient of shape "
                    f"{tuple(r.shape)} for argument {position}, whose shape is {tuple(x.shape)}"
                )
            grads.append(r if graph else r._array)
        return tuple(grads)

    def release(self):
        if "ctx" in self.__dict__:
            self.ctx._saved = False
        super().release()


class CustomFunctionOutput(Node):
    """Output `slot` of a Function with several outputs: hands its gradient to the function's
    node in a `_Slots`, where the other outputs' gradients join it."""

    runs_on_tensors = True
    saves_arrays = False

    def __init__(self, slot, name):
        self.slot, self.function_name = slot, name

    @property
    def name(self) -> str:
        return f"{self.function_name}[{self.slot}]" if "slot" in self.__dict__ else "output"

    def backward(self, g):
        return _Slots({self.slot: g})


class _Slots:
    """The gradients of a Function's several outputs, by slot, on their way to its node: added
    up slot by slot where several paths meet. Shaped like the node's placeholder output (an
    empty array), so the engine's checks pass it through."""

    __slots__ = ("by_slot",)
    shape = (0,)
    size = 0
    dtype = np.dtype(np.float32)

    def __init__(self, by_slot):
        self.by_slot = by_slot

    def __add__(self, other):
        merged = dict(self.by_slot)
        for slot, g in other.by_slot.items():
            merged[slot] = g if slot not in merged else merged[slot] + g
        return _Slots(merged)

    def holds_tensors(self) -> bool:
        return any(g.__class__ is Tensor for g in self.by_slot.values())

    def values(self, n):
        return [self.by_slot.get(i) for i in range(n)]


class _OnceDifferentiable(Node):
    """z = g from a once_differentiable backward: differentiating it again is an error."""

    def forward(self, g, *depends, name="Function"):
        self.function_name = name
        return g

    def backward(self, h):
        raise RuntimeError(
            f"{self.__dict__.get('function_name', 'a Function')}.backward is marked "
            "@once_differentiable: its gradient cannot be differentiated again (write the "
            "backward in tensor ops, without the decorator, for a second derivative)"
        )


# ---- recording -------------------------------------------------------------------------------


def _record(fn, ctx, args, output):
    single = not isinstance(output, tuple)
    outputs = (output,) if single else output
    tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor)]
    node = CustomFunction(fn, ctx, tuple(i for i, _ in tensors), len(outputs))
    node.n_args = len(args)
    node.needs_input_grad = tuple(ctx.needs_input_grad[i] for i, _ in tensors)
    node.inputs = ctx._inputs = tuple(t for _, t in tensors)
    node.parents = tuple(t._ctx for _, t in tensors)
    if engine_function.module_stack:
        node.module = engine_function.module_stack[-1]
    node.outputs_like = [
        (o.shape, o._array.dtype, get_array_module(o._array)) if isinstance(o, Tensor) else None
        for o in outputs
    ]
    dirty = {id(t) for t in ctx._dirty}
    for t in ctx._dirty:
        if t._ctx is None and t.requires_grad:
            raise RuntimeError(
                f"{fn.__name__}.forward: mark_dirty on a leaf tensor that requires grad: a leaf "
                "cannot be modified in place while gradients are recorded (modify a .clone())"
            )
        version_counter(t).bump(f"{fn.__name__}.forward (mark_dirty)")
    non_differentiable = {id(t) for t in ctx._non_differentiable}
    inputs = {id(t) for _, t in tensors}
    if len(outputs) > 1:  # one placeholder output for the node, one node per real output
        placeholder = _wrap(np.empty(0, np.float32), True, node)
    results = []
    for slot, o in enumerate(outputs):
        if not isinstance(o, Tensor) or id(o) in non_differentiable:
            if isinstance(o, Tensor):
                o.requires_grad = False
            results.append(o)
            continue
        if id(o) in inputs and id(o) not in dirty:
            o = _wrap(o._array, False, None)  # an input returned as it is: a new tensor of it
        if len(outputs) == 1:
            owner = node
        else:
            owner = CustomFunctionOutput(slot, fn.__name__)
            owner.needs_input_grad = (True,)
            owner.inputs, owner.parents = (placeholder,), (node,)
        o._ctx, o.requires_grad = owner, True
        results.append(o)
    return results[0] if single else tuple(results)
