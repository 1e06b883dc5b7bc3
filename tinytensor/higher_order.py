"""create_graph=True: every op's vector-Jacobian product as recorded ops, differentiable again.

A first-order backward runs each op's `backward` on raw arrays (the fast path, fused kernels
included). Under create_graph the engine calls `vjp(node, g)` here instead, with `g` a Tensor,
and the VJP is computed in one of three ways, chosen by the op's class:

- **the same backward, on Tensors.** An op's backward is written against
  `xp = get_array_module(g)` and Python's operators, so handed Tensors (`g`, and the inputs and
  output that forward saved, swapped for the Tensors they belong to) the same lines run as
  recorded ops (`xp` is then `tinytensor.tensor_xp`, NumPy's names on Tensors). Mul's
  `g * self.y` becomes a Mul node of g and y: its derivative with respect to y is there.
- **linear ops** (`linear = True`: reshape, permute, indexing, sums, cat, ...): y = L x, so the
  VJP is g ↦ Lᵀ g, linear in g and independent of x. It becomes one `LinearVJP` node that runs
  the op's own backward on arrays, and whose VJP is L again: the op's forward, replayed with
  the options it was called with. Nothing per op is written twice.
- **fused ops** (`composite`): the op's value written as differentiable ops (layer_norm as
  (x - μ)/σ·w + b, cross_entropy as logsumexp - the target's logit, ...). create_graph
  differentiates the composite, so the fused kernels stay first-order only and the second
  derivatives come from ops that have them; the composite's values are the op's own (tested).
"""

from __future__ import annotations

from .backend import get_array_module
from .function import Function
from .tensor import Tensor

_wrap = Tensor._wrap
_autograd = None  # tinytensor.autograd (imports this module): bound on first use


def vjp(node, g, needs):
    """The input gradients of `node` for output gradient `g` (a Tensor), as recorded ops;
    `needs` says which inputs want one."""
    cls = node.__class__
    if cls.runs_on_tensors:  # a custom autograd.Function's node: the user's backward records
        return node.backward(g)
    if cls is LinearVJP:
        return (node.transposed(g),)
    if cls.composite is not None:
        return _composite_vjp(node, g, needs)
    if cls.linear:
        return tuple(
            LinearVJP.apply(g, node=node, slot=i) if need else None for i, need in enumerate(needs)
        )
    view = _with_saved_tensors(node, needs, g.shape)
    grads = view.backward(g)
    depends = _depends_on(node, view)
    if not depends:
        return grads
    if grads.__class__ is not tuple:
        return _connected(grads, depends)
    return tuple(_connected(gx, depends) for gx in grads)


# ---- the same backward, on Tensors ----------------------------------------------------------


def _depends_on(node, view):
    """The Tensors a backward read that require grad, when it read them only through masks or
    tie shares (relu's z > 0, max's ties): its result is constant in them, but, as in torch,
    it stays on the graph, and their second derivative is 0 rather than "not used"."""
    if node.constants:
        return [x for x in node.inputs if x.requires_grad]
    return [v for v in view.__dict__.values() if v.__class__ is Tensor and v.requires_grad]


def _connected(gx, depends):
    if gx is None or (gx.__class__ is Tensor and gx.requires_grad):
        return gx
    if gx.__class__ is not Tensor:
        gx = _wrap(gx, False, None)
    return Connect.apply(gx, *depends)


class Connect(Function):
    """z = g, recorded with the tensors g depends on only piecewise constantly (see
    _depends_on): its VJP is h for g and zeros for them."""

    linear = True
    saves_arrays = False
    may_alias = True

    def forward(self, g, *depends):
        self.kinds = tuple((d.shape, d.dtype) for d in depends)
        return g

    def backward(self, h):
        xp = get_array_module(h)
        return (h, *(xp.zeros(shape, dtype) for shape, dtype in self.kinds))


def _is_array(value) -> bool:
    return value.__class__ is not Tensor and hasattr(value, "__array_namespace__")


def _root_id(array) -> int:
    return id(array if array.base is None else array.base)


def _output(node, value, out_shape):
    """The node's output as a Tensor on the node, in the shape forward saved it (a keepdims
    array whose view is the output: LogSumExp, VectorNorm)."""
    out = _wrap(value.reshape(out_shape), True, node)
    return out if value.shape == out_shape else out.reshape(value.shape)


def _with_saved_tensors(node, needs, out_shape):
    """A copy of `node` whose saved arrays are the Tensors they came from: each input's array
    its input Tensor, the output the output (a new Tensor on `node`), constants (masks,
    indices, anything not floating) as they are."""
    view = object.__new__(node.__class__)
    view.needs_input_grad = needs
    inputs = {id(x._array): x for x in node.inputs}
    out_memory = node.saved_at[2] if node.saved_at is not None else node.output_memory
    saved = view.__dict__
    for key, value in node.__dict__.items():
        if value.__class__ is tuple or value.__class__ is list:
            saved[key] = value.__class__(
                _as_tensor(node, key, v, inputs, out_memory, out_shape) for v in value
            )
        else:
            saved[key] = _as_tensor(node, key, value, inputs, out_memory, out_shape)
    return view


def _as_tensor(node, key, value, inputs, out_memory, out_shape):
    if not _is_array(value):
        return value
    x = inputs.get(id(value))
    if x is not None:
        return x
    if out_memory is not None and _root_id(value) == out_memory:
        return _output(node, value, out_shape)
    if value.dtype.kind not in "fc" or key in node.constants:
        return value
    raise RuntimeError(
        f"{node.name}: create_graph=True cannot differentiate its backward: forward saved "
        f"'{key}', a value computed from its inputs; the op needs a composite() (a fused op) or "
        "a backward that reads only its inputs and output"
    )


# ---- linear ops -----------------------------------------------------------------------------


class LinearVJP(Function):
    """gᵢ = Lᵢᵀ g: a linear op's VJP into its input `slot`, as a node of its own.

    Its forward runs the op's first-order backward on arrays; its VJP, h ↦ Lᵢ h, is the op's
    forward replayed on h (the op's other float inputs zero, its index inputs as they were).
    """

    def forward(self, g, node=None, slot=0):
        self.op, self.slot = node.__class__, slot
        replay = node.replay  # forward's options: apply's dict or apply_unary's tuple
        args, kwargs = (replay, {}) if replay.__class__ is tuple else ((), replay)
        if node.linear_part:
            kwargs = {**kwargs, **node.linear_part}
        self.replay = (args, kwargs)
        self.name_of_op = node.name
        # the op's inputs for the replay: floats become zeros (L is linear in them jointly)
        self.others = tuple(
            None if x._array.dtype.kind not in "fc" else (x._array.shape, x._array.dtype)
            for x in node.inputs
        )
        self.constants_in = tuple(
            x._array if x._array.dtype.kind not in "fc" else None for x in node.inputs
        )
        full = node.needs_input_grad
        node.needs_input_grad = tuple(i == slot for i in range(len(full)))
        try:
            grads = node.backward(g)
        finally:
            node.needs_input_grad = full
        gx = grads[slot] if grads.__class__ is tuple else grads
        x = node.inputs[slot]._array
        if gx.shape != x.shape and node.broadcasts:
            gx = _engine().sum_to(gx, x.shape)
        return gx if gx.dtype == x.dtype else gx.astype(x.dtype)

    @property
    def name(self) -> str:  # as PyTorch names a backward node: GetItemBackward
        return f"{self.name_of_op}Backward" if "name_of_op" in self.__dict__ else "LinearVJP"

    def _operands(self, h, zeros):
        operands = []
        for i, (other, constant) in enumerate(zip(self.others, self.constants_in)):
            if i == self.slot:
                operands.append(h)
            elif constant is not None:
                operands.append(constant)
            else:
                operands.append(zeros(*other))
        return operands

    def backward(self, h):
        xp = get_array_module(h)
        op = self.op()
        op.needs_input_grad = ()
        args, kwargs = self.replay
        operands = self._operands(h, xp.zeros)
        return op.forward(*operands, *args, **(kwargs or {}))

    def transposed(self, h):
        """The VJP under create_graph: the op itself, recorded on Tensor `h`."""
        xp = get_array_module(h._array)
        operands = self._operands(
            h, lambda shape, dtype: _wrap(xp.zeros(shape, dtype), False, None)
        )
        operands = [o if o.__class__ is Tensor else _wrap(o, False, None) for o in operands]
        args, kwargs = self.replay
        if args:
            return self.op.apply_unary(operands[0], *args)
        return self.op.apply(*operands, **(kwargs or {}))


def _engine():
    global _autograd
    if _autograd is None:
        from .autograd import engine as _autograd
    return _autograd


# ---- fused ops ------------------------------------------------------------------------------


class StandIn(Function):
    """z = x, recorded: one per input slot of a composite, so that the composite's walk stops
    there and gives each slot its own (partial) gradient, even where one tensor fills two slots
    (self-attention's q = k = v)."""

    linear = True
    saves_arrays = False
    may_alias = True

    def forward(self, x):
        return x

    def backward(self, g):
        return g


def _composite_vjp(node, g, needs):
    """The gradients of the composite at the node's inputs. An input that needs no gradient
    here is still the Tensor it is (the gradients depend on it: layer_norm's gradient for x
    depends on its weight), and the walk stops there too."""
    autograd = _engine()
    stand_ins = [StandIn.apply(x) if need else x for x, need in zip(node.inputs, needs)]
    out = node.composite(*stand_ins)
    wanted = [s for s, need in zip(stand_ins, needs) if need]
    into = autograd._Walk(wanted, capture=True)
    stop = {id(s._ctx) for s in stand_ins if s._ctx is not None}
    autograd.walk([out], [g], retain_graph=True, create_graph=True, into=into, stop=stop)
    return tuple(into.captured.get(id(s)) if need else None for s, need in zip(stand_ins, needs))
