"""`Tensor`: one backend array plus what autograd needs to send gradients back to it.

    x = tt.tensor([[1.0, 2.0]], requires_grad=True)
    y = (x * x).sum()
    y.backward()          # x.grad == 2 * x

A tensor holds `_array` (the numpy or cupy array; `.data` is PyTorch's alias Tensor outside the
graph), `.requires_grad`, `.grad` (a Tensor, accumulated across backward calls until zeroed) and
`_ctx`, the `Function` node that made it (None for leaves).
The operators and methods below are thin: the ops themselves live in `tinytensor/ops/`.
"""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes
from .backend import Device, array_module_for, device_of, get_array_module, move_array


def _as_array(data, dtype=None, device=None):
    """Turns user data (nested lists, scalars, arrays) into a backend array of a supported dtype."""
    if isinstance(data, Tensor):
        data = data._array
    elif isinstance(data, (list, tuple)) and builtins.any(isinstance(d, Tensor) for d in data):
        # torch.tensor([loss1, loss2]): one-element tensors count as their Python numbers
        data = [d.item() if isinstance(d, Tensor) else d for d in data]
    xp = array_module_for(device) if device is not None else get_array_module(data)
    dtype = dtypes.to_dtype(dtype)
    from_array = hasattr(data, "dtype") and hasattr(data, "shape")
    try:
        arr = xp.asarray(data) if dtype is None else xp.asarray(data, dtype=dtype)
    except (ValueError, TypeError) as e:
        if "inhomogeneous" in str(e) or "sequence" in str(e):
            raise ValueError(
                f"tensor: the nested lists have ragged lengths, so they do not form a "
                f"rectangular array ({e})"
            ) from None
        raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__}: {e}") from None
    if arr.dtype == object:
        raise ValueError("tensor: the nested lists are ragged or hold non-numbers")
    if arr.dtype.kind not in "biuf":  # strings, complex, dates: no tinytensor dtype holds them
        raise TypeError(f"tensor: cannot make a tensor from data of dtype {arr.dtype}")
    if dtype is None:
        if arr.dtype.kind == "f" and not from_array:
            arr = arr.astype(dtypes.get_default_dtype())  # Python floats: the default dtype
        elif arr.dtype.kind in "iu" and not from_array:
            arr = arr.astype(np.int64)
        elif arr.dtype not in dtypes._SUPPORTED:
            arr = arr.astype(dtypes.float64 if arr.dtype.kind == "f" else dtypes.int64)
    return arr


def devices_mismatch_error(op_name, tensors) -> RuntimeError:
    found = sorted({str(t.device) for t in tensors})
    return RuntimeError(
        f"{op_name}: expected all tensors on one device, found tensors on {' and '.join(found)}; "
        "move them with .to(device) first"
    )


_new_object = object.__new__  # (Tensor._wrap)
_ndarray = np.ndarray


class Tensor:
    """A multi-dimensional array that records the operations applied to it.

    Args:
        data: nested lists, a scalar, a numpy/cupy array or another Tensor.
        requires_grad: whether backward should compute `.grad` for this tensor.
        dtype: defaults to float32 for floats and int64 for integers.
        device: 'cpu' or 'cuda'.
    """

    __slots__ = (
        "_array",  # the numpy/cupy array (`.data` is PyTorch's alias Tensor of it)
        "requires_grad",
        "_grad",  # `.grad`, set through a property that checks shape, dtype and device
        "_ctx",  # the Function node that made this tensor; None for leaves
        "_retains_grad",
        "_version_counter",  # in-place changes of the storage, made on first need (a view: None)
        "_base",  # the tensor this one is a view of (None if it owns its storage)
        "_hooks",  # {"grad": [...], "post_accumulate": [...]} once a hook is registered
        "__weakref__",
    )
    __array_priority__ = 1000  # numpy scalars defer to our operators: np.float32(2) * x is a Tensor

    def __init__(self, *data, requires_grad=False, dtype=None, device=None):
        # PyTorch's legacy constructor: Tensor(2, 3) is an uninitialized (here: zero) float
        # tensor of that shape, and Tensor([1, 2]) holds floats; arrays keep their dtype.
        if not data:
            data = ([],)
        if all(
            isinstance(d, (builtins.int, np.integer)) and not isinstance(d, builtins.bool)
            for d in data
        ):
            data = (np.zeros(tuple(builtins.int(d) for d in data)),)
            dtype = dtype or dtypes.get_default_dtype()
        elif len(data) > 1:
            raise TypeError(
                f"Tensor: expected sizes (ints) or one data argument, got {len(data)} arguments"
            )
        elif dtype is None and isinstance(data[0], (list, tuple, builtins.float)):
            dtype = dtypes.get_default_dtype()
        self._array = _as_array(data[0], dtype, device)
        self._grad = None
        self._ctx = None
        self._retains_grad = False
        self._version_counter = self._base = self._hooks = None
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @staticmethod
    def _wrap(array, requires_grad, ctx):
        """Fast constructor for op outputs: no validation, the array is already right."""
        # NOTE: every op's output goes through here: a static method (no bound method to make),
        # a class test before the isinstance (which costs 0.1 µs) and object.__new__ looked up
        # once (_new_object: the lookup was 0.1 µs) took 0.6 µs to 0.2
        t = _new_object(Tensor)
        # NumPy returns scalars (np.float32) from full reductions; a Tensor always holds an array
        if array.__class__ is not _ndarray and isinstance(array, np.generic):
            array = np.asarray(array)
        t._array = array
        t.requires_grad = requires_grad
        t._grad = None
        t._ctx = ctx
        t._retains_grad = False
        t._version_counter = None
        t._base = None
        t._hooks = None
        return t

    # ---- .data, .grad and the version counter -----------------------------------------------

    @property
    def data(self) -> Tensor:
        """PyTorch's `.data`: a tensor sharing this one's memory, outside the graph.

        Writes through it change this tensor without autograd knowing (it has a version counter
        of its own), which is what optimizers and initializers want: `p.data.add_(-lr * g)`.
        """
        return Tensor._wrap(self._array, False, None)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
        if value._array is not self._array:  # `p.data -= x` writes back the same storage
            self._array = value._array
            # another storage: a counter of its own, and no longer a view of anything
            self._version_counter = self._base = None

    @property
    def grad(self):
        """dL/dself accumulated by backward (a Tensor of this tensor's shape), or None."""
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: expected a Tensor or None, got {type(value).__name__}")
            problem = (
                "shape"
                if value.shape != self.shape
                else "dtype"
                if value.dtype != self.dtype
                else "device"
                if value.device != self.device
                else None
            )
            if problem:
                raise RuntimeError(
                    f"grad: the assigned gradient has {problem} "
                    f"{getattr(value, problem)}, but the tensor has {problem} "
                    f"{getattr(self, problem)}; a gradient must match its tensor exactly"
                )
        self._grad = value

    @property
    def _version(self) -> int:
        """How many times this tensor's storage was modified in place (PyTorch's `_version`)."""
        counter = _inplace.counter_of(self)
        return 0 if counter is None else counter.value

    def _bump_version(self, op="an in-place update") -> None:
        """Marks the storage as modified (for code that writes into `_array` directly)."""
        _inplace.version_counter(self).bump(op)

    # ---- hooks -------------------------------------------------------------------------------

    def register_hook(self, hook):
        """hook(grad) -> new grad or None, called when dL/dself is computed (PyTorch's)."""
        if not self.requires_grad:
            raise RuntimeError(
                "register_hook: cannot register a hook on a tensor that doesn't require grad"
            )
        return self._add_hook("grad", hook)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor), called on a leaf after backward accumulated into its `.grad`."""
        if self._ctx is not None:
            raise RuntimeError(
                "register_post_accumulate_grad_hook: only leaf tensors can have this hook"
            )
        return self._add_hook("post_accumulate", hook)

    def _add_hook(self, kind, hook):
        if not callable(hook):
            raise TypeError(f"register_hook: hook must be callable, got {type(hook).__name__}")
        if self._hooks is None:
            self._hooks = {"grad": [], "post_accumulate": []}
        hooks = self._hooks[kind]
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    # ---- properties -------------------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def dtype(self):
        return self._array.dtype

    @property
    def device(self) -> Device:
        return device_of(self._array)

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self):
        """The Function node that produced this tensor (None for leaves)."""
        return self._ctx

    @property
    def T(self) -> Tensor:
        """All dimensions reversed (the matrix transpose for 2-D tensors)."""
        return _ops.movement.reverse_dims(self)

    @property
    def mT(self) -> Tensor:
        """The last two dimensions swapped (batched matrix transpose)."""
        return self.transpose(-2, -1)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return int(self._array.size)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # ---- autograd ---------------------------------------------------------------------------

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """autograd.engine.backward, which replaces this method when it loads (see there)."""
        global _autograd
        if _autograd is None:  # autograd imports this module, so it is bound on first use
            from . import autograd as _autograd
        _autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def requires_grad_(self, requires_grad=True) -> Tensor:
        if requires_grad and not dtypes.is_floating(self.dtype):
            raise TypeError(
                f"only floating-point tensors can require gradients, this one is {self.dtype}"
            )
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self) -> None:
        """Also store `.grad` on this non-leaf tensor during backward (e.g. to draw it)."""
        self._retains_grad = True

    def detach(self) -> Tensor:
        """The same memory, cut from the graph (in-place changes stay visible to autograd)."""
        out = Tensor._wrap(self._array, False, None)
        out._version_counter = _inplace.version_counter(self)
        return out

    def detach_(self) -> Tensor:
        self._ctx, self.requires_grad = None, False
        return self

    # ---- conversion -------------------------------------------------------------------------

    def item(self):
        if self._array.size != 1:
            raise ValueError(
                f"item(): only a one-element tensor converts to a Python number, shape is "
                f"{self.shape}"
            )
        return self._array.reshape(()).item()

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (copied to the host from a GPU)."""
        return move_array(self._array, "cpu")

    def tolist(self):
        return self.numpy().tolist()

    def to(self, *args, dtype=None, device=None) -> Tensor:
        """`x.to("cuda")`, `x.to(tt.float64)`, `x.to(device, dtype)` as in PyTorch."""
        for a in args:
            if isinstance(a, (str, Device)):
                device = a
            else:
                dtype = a
        out = self
        if dtype is not None and dtypes.to_dtype(dtype) != self.dtype:
            out = _ops.cast(out, dtypes.to_dtype(dtype))
        if device is not None and Device(device) != self.device:
            out = _ops.to_device(out, Device(device))
        return out

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self) -> Tensor:
        return self.to("cuda")

    def float(self) -> Tensor:
        return self.to(dtypes.float32)

    def double(self) -> Tensor:
        return self.to(dtypes.float64)

    def half(self) -> Tensor:
        return self.to(dtypes.float16)

    def long(self) -> Tensor:
        return self.to(dtypes.int64)

    def int(self) -> Tensor:
        return self.to(dtypes.int32)

    def bool(self) -> Tensor:
        return self.to(dtypes.bool)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def contiguous(self) -> Tensor:
        """self when already C-contiguous, else a copy (writing into it leaves self alone)."""
        return self if self._array.flags.c_contiguous else _ops.clone(self)

    def clone(self) -> Tensor:
        return _ops.clone(self)

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", precision=4, threshold=100)
        body = body.replace("\n", "\n" + " " * 7)
        extras = []
        if self.dtype != dtypes.get_default_dtype() and self.dtype != dtypes.int64:
            extras.append(f"dtype={self.dtype}")
        if self.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self._ctx is not None:
            extras.append(f"grad_fn=<{type(self._ctx).__name__}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"tensor({body}{''.join(', ' + e for e in extras)})"

    def __bool__(self):
        if self._array.size != 1:
            raise RuntimeError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                "use .any() or .all()"
            )
        return builtins.bool(self._array)

    def __float__(self):
        return builtins.float(self.item())

    def __format__(self, spec):
        """f"{loss:.4f}" formats a one-element tensor as its number, as PyTorch."""
        if self._array.size == 1 and spec:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __round__(self, ndigits=None):
        if self._array.size == 1:
            return builtins.round(self.item(), ndigits)
        return self.round(decimals=ndigits or 0)

    def __int__(self):
        return builtins.int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu" or self._array.size != 1:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return builtins.int(self.item())

    __hash__ = object.__hash__  # identity: tensors go in sets and dicts (e.g. optimizer state)

    # ---- in-place ops (tinytensor/inplace.py: version counters, graph nodes) --------------

    def _inplace(self, op, fn, *args, **kwargs):
        return _inplace.apply_inplace(self, op, fn, *args, **kwargs)

    def copy_(self, src) -> Tensor:
        if not isinstance(src, Tensor):
            src = Tensor._wrap(_as_array(src, self.dtype, self.device), False, None)
        if src.device != self.device:
            src = src.detach().to(self.device)
        return self._inplace("copy_", _copy_into, src)

    def fill_(self, value) -> Tensor:
        number = value.__class__ is builtins.int or value.__class__ is builtins.float
        if number and _write_in_place(self, "fill_", value):
            return self
        return self._inplace("fill_", _fill_like, value)

    def zero_(self) -> Tensor:
        if _write_in_place(self, "zero_", 0):
            return self
        return self._inplace("zero_", _fill_like, 0)

    def add_(self, other, alpha=1) -> Tensor:
        other, alpha = _scalar_first("add_", other, alpha)
        if _write_in_place(self, "add_", other, np.add, alpha):
            return self
        return self._inplace("add_", _ops.torch_extras.add, other, alpha=alpha)

    def sub_(self, other, alpha=1) -> Tensor:
        other, alpha = _scalar_first("sub_", other, alpha)
        if _write_in_place(self, "sub_", other, np.subtract, alpha):
            return self
        return self._inplace("sub_", _ops.torch_extras.sub, other, alpha=alpha)

    def addcmul_(self, *args, value=1) -> Tensor:
        """self += value·t1·t2 (also the deprecated addcmul_(value, t1, t2))."""
        (tensor1, tensor2), value = _tensors_and_value("addcmul_", args, value)
        return self._inplace("addcmul_", _ops.torch_extras.addcmul, tensor1, tensor2, value=value)

    def addcdiv_(self, *args, value=1) -> Tensor:
        """self += value·t1/t2 (also the deprecated addcdiv_(value, t1, t2))."""
        (tensor1, tensor2), value = _tensors_and_value("addcdiv_", args, value)
        return self._inplace("addcdiv_", _ops.torch_extras.addcdiv, tensor1, tensor2, value=value)

    def addcmul(self, tensor1, tensor2, *, value=1) -> Tensor:
        return _ops.torch_extras.addcmul(self, tensor1, tensor2, value=value)

    def addcdiv(self, tensor1, tensor2, *, value=1) -> Tensor:
        return _ops.torch_extras.addcdiv(self, tensor1, tensor2, value=value)

    def lerp(self, end, weight) -> Tensor:
        return _ops.torch_extras.lerp(self, end, weight)

    def tile(self, *dims) -> Tensor:
        return _ops.torch_extras.tile(self, _ops.movement._shape_arg(dims))

    def lerp_(self, end, weight) -> Tensor:
        return self._inplace("lerp_", _ops.torch_extras.lerp, end, weight)

    def mul_(self, other) -> Tensor:
        if _write_in_place(self, "mul_", other, np.multiply):
            return self
        return self._inplace("mul_", _ops.mul, other)

    def div_(self, other) -> Tensor:
        if _write_in_place(self, "div_", other, np.true_divide):
            return self
        return self._inplace("div_", _ops.div, other)

    def pow_(self, exponent) -> Tensor:
        return self._inplace("pow_", _ops.pow, exponent)

    def neg_(self) -> Tensor:
        return self._inplace("neg_", _ops.neg)

    def exp_(self) -> Tensor:
        return self._inplace("exp_", _ops.exp)

    def sqrt_(self) -> Tensor:
        return self._inplace("sqrt_", _ops.sqrt)

    def tanh_(self) -> Tensor:
        return self._inplace("tanh_", _ops.tanh)

    def sigmoid_(self) -> Tensor:
        return self._inplace("sigmoid_", _ops.sigmoid)

    def relu_(self) -> Tensor:
        return self._inplace("relu_", _ops.relu)

    def abs_(self) -> Tensor:
        return self._inplace("abs_", _ops.abs)

    def clamp_(self, min=None, max=None) -> Tensor:  # noqa: A002 - PyTorch's argument names
        return self._inplace("clamp_", _ops.clamp, min, max)

    clip_ = clamp_

    def masked_fill_(self, mask, value) -> Tensor:
        return self._inplace("masked_fill_", _ops.masked_fill, mask, value)

    def normal_(self, mean=0.0, std=1.0, generator=None) -> Tensor:
        from .random import normal_array

        values = normal_array(self.shape, self.dtype, self.device, mean, std, generator)
        return self._inplace("normal_", _fill_like, Tensor._wrap(values, False, None))

    def uniform_(self, a=0.0, b=1.0, generator=None) -> Tensor:
        from .random import uniform_array

        values = uniform_array(self.shape, self.dtype, self.device, a, b, generator)
        return self._inplace("uniform_", _fill_like, Tensor._wrap(values, False, None))

    def __setitem__(self, index, value):
        index = _ops.normalize_index(index, "__setitem__")
        if not isinstance(value, Tensor):
            value = Tensor._wrap(_as_array(value, self.dtype, self.device), False, None)
        if _inplace.needs_graph(self, "__setitem__", (value,)):
            self._inplace("__setitem__", _ops.setitem, index, value)
        else:  # a plain write of the selected elements only (loops of x[i] = v stay O(1) each)
            _inplace.write_selected(self, index, value._array, "__setitem__")

    # x += y modifies x, as in PyTorch (and so raises on a leaf that requires grad)
    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # ---- operators --------------------------------------------------------------------------
    # x + y, x - y, x * y, x / y, x ** y, x @ y, -x and x[index] are the ops themselves
    # (OPS_AS_METHODS at the end of this module); the reflected forms swap the operands here

    def __radd__(self, other):
        return _ops.add(other, self)

    def __rsub__(self, other):
        return _ops.sub(other, self)

    def __rmul__(self, other):
        return _ops.mul(other, self)

    def __rtruediv__(self, other):
        return _ops.div(other, self)

    def __rpow__(self, base):
        return _ops.pow(base, self)

    def __rmatmul__(self, other):
        return _ops.matmul(other, self)

    def __abs__(self):
        return _ops.abs(self)

    def __eq__(self, other):
        return _ops.compare(self, other, "equal")

    def __ne__(self, other):
        return _ops.compare(self, other, "not_equal")

    def __lt__(self, other):
        return _ops.compare(self, other, "less")

    def __le__(self, other):
        return _ops.compare(self, other, "less_equal")

    def __gt__(self, other):
        return _ops.compare(self, other, "greater")

    def __ge__(self, other):
        return _ops.compare(self, other, "greater_equal")

    def __invert__(self):
        return _ops.bitwise_not(self)  # ints: bitwise; bools: logical; floats: an error

    def __and__(self, other):
        return _ops.logical_and(self, other)

    def __or__(self, other):
        return _ops.logical_or(self, other)

    def __xor__(self, other):
        return _ops.logical_xor(self, other)

    # ---- methods (PyTorch names; see tinytensor/ops for the math) ---------------------------
    # reshape, view, transpose, permute, softmax, log_softmax, sum, mean, exp, log, sqrt, tanh,
    # sigmoid, relu, squeeze, unsqueeze, flatten and masked_fill are the ops themselves
    # (OPS_AS_METHODS at the end of this module)

    def add(self, other, *, alpha=1):
        return _ops.torch_extras.add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return _ops.torch_extras.sub(self, other, alpha=alpha)

    def mul(self, other):
        return _ops.mul(self, other)

    def div(self, other):
        return _ops.div(self, other)

    def pow(self, exponent):
        return _ops.pow(self, exponent)

    def matmul(self, other):
        return _ops.matmul(self, other)

    def neg(self):
        return _ops.neg(self)

    def rsqrt(self):
        return _ops.rsqrt(self)

    def abs(self):
        return _ops.abs(self)

    def sin(self):
        return _ops.sin(self)

    def cos(self):
        return _ops.cos(self)

    def clamp(self, min=None, max=None):  # noqa: A002 - PyTorch's argument names
        return _ops.clamp(self, min, max)

    clip = clamp

    def maximum(self, other):
        return _ops.maximum(self, other)

    def minimum(self, other):
        return _ops.minimum(self, other)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _ops.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        return _ops.std(self, dim, unbiased, keepdim, correction=correction)

    def max(self, dim=None, keepdim=False):
        return _ops.torch_extras.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return _ops.torch_extras.min(self, dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return _ops.amax(self, dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return _ops.amin(self, dim, keepdim)

    def logsumexp(self, dim, keepdim=False):
        return _ops.logsumexp(self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return _ops.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _ops.argmin(self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        return _ops.any(self, dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return _ops.all(self, dim, keepdim)

    def view_as(self, other):
        return _ops.reshape(self, other.shape)

    def expand(self, *sizes):
        return _ops.expand(self, *sizes)

    def expand_as(self, other):
        return _ops.expand(self, other.shape)

    def split(self, split_size_or_sections, dim=0):
        return _ops.split(self, split_size_or_sections, dim)

    def chunk(self, chunks, dim=0):
        return _ops.chunk(self, chunks, dim)

    def tril(self, diagonal=0):
        return _ops.tril(self, diagonal)

    def triu(self, diagonal=0):
        return _ops.triu(self, diagonal)

    def repeat_interleave(self, repeats, dim):
        return _ops.repeat_interleave(self, repeats, dim)

    def gather(self, dim, index):
        return _ops.gather(self, dim, index)

    # ---- more PyTorch methods (tinytensor/ops/torch_extras.py) ------------------------------

    def log1p(self):
        return _ops.torch_extras.log1p(self)

    def expm1(self):
        return _ops.torch_extras.expm1(self)

    def erf(self):
        return _ops.torch_extras.erf(self)

    def sign(self):
        return _ops.torch_extras.sign(self)

    def floor(self):
        return _ops.torch_extras.floor(self)

    def ceil(self):
        return _ops.torch_extras.ceil(self)

    def trunc(self):
        return _ops.torch_extras.trunc(self)

    def round(self, decimals=0):
        return _ops.torch_extras.round(self, decimals=decimals)

    def square(self):
        return _ops.torch_extras.square(self)

    def reciprocal(self):
        return _ops.torch_extras.reciprocal(self)

    def clamp_min(self, min):  # noqa: A002
        return _ops.clamp(self, min=min)

    def clamp_max(self, max):  # noqa: A002
        return _ops.clamp(self, max=max)

    def where(self, condition, other):
        return _ops.where(condition, self, other)

    def eq(self, other):
        return _ops.eq(self, other)

    def ne(self, other):
        return _ops.torch_extras.ne(self, other)

    def gt(self, other):
        return _ops.torch_extras.gt(self, other)

    def ge(self, other):
        return _ops.torch_extras.ge(self, other)

    def lt(self, other):
        return _ops.torch_extras.lt(self, other)

    def le(self, other):
        return _ops.torch_extras.le(self, other)

    def logical_not(self):
        return _ops.logical_not(self)

    def prod(self, dim=None, keepdim=False):
        return _ops.torch_extras.prod(self, dim, keepdim)

    def cumsum(self, dim, dtype=None):
        return _ops.torch_extras.cumsum(self, dim, dtype=dtype)

    def norm(self, p="fro", dim=None, keepdim=False):
        return _ops.torch_extras.norm(self, p, dim, keepdim)

    def t(self):
        return _ops.torch_extras.t(self)

    def swapaxes(self, dim0, dim1):
        return _ops.transpose(self, dim0, dim1)

    def movedim(self, source, destination):
        return _ops.torch_extras.movedim(self, source, destination)

    def unflatten(self, dim, sizes):
        return _ops.torch_extras.unflatten(self, dim, sizes)

    def unbind(self, dim=0):
        return _ops.torch_extras.unbind(self, dim)

    def narrow(self, dim, start, length):
        return _ops.torch_extras.narrow(self, dim, start, length)

    def select(self, dim, index):
        return _ops.torch_extras.select(self, dim, index)

    def index_select(self, dim, index):
        return _ops.torch_extras.index_select(self, dim, index)

    def flip(self, *dims):
        return _ops.torch_extras.flip(self, _ops.movement._shape_arg(dims))

    def roll(self, shifts, dims=None):
        return _ops.torch_extras.roll(self, shifts, dims)

    def repeat(self, *sizes):
        return _ops.torch_extras.repeat(self, *sizes)

    def reshape_as(self, other):
        return _ops.reshape(self, other.shape)

    def mm(self, other):
        return _ops.torch_extras.mm(self, other)

    def bmm(self, other):
        return _ops.torch_extras.bmm(self, other)

    def dot(self, other):
        return _ops.torch_extras.dot(self, other)

    def outer(self, other):
        return _ops.torch_extras.outer(self, other)

    # ---- ordering, sampling and writing at indices (ops/sorting.py, sampling.py, scatter.py) --

    def sort(self, dim=-1, descending=False, stable=False):
        return _ops.sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=False):
        return _ops.argsort(self, dim, descending, stable)

    def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's name
        return _ops.topk(self, k, dim, largest, sorted)

    def nonzero(self, *, as_tuple=False):
        return _ops.nonzero(self, as_tuple=as_tuple)

    def multinomial(self, num_samples, replacement=False, *, generator=None):
        return _ops.multinomial(self, num_samples, replacement, generator=generator)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        return _ops.diagonal(self, offset, dim1, dim2)

    def trace(self):
        return _ops.trace(self)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        return _ops.scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        return self._inplace("scatter_", _ops.scatter, dim, index, src, value=value, reduce=reduce)

    def scatter_add(self, dim, index, src):
        return _ops.scatter_add(self, dim, index, src)

    def scatter_add_(self, dim, index, src):
        return self._inplace("scatter_add_", _ops.scatter_add, dim, index, src)

    def index_add(self, dim, index, source, *, alpha=1):
        return _ops.index_add(self, dim, index, source, alpha=alpha)

    def index_add_(self, dim, index, source, *, alpha=1):
        return self._inplace("index_add_", _ops.index_add, dim, index, source, alpha=alpha)

    def index_fill(self, dim, index, value):
        return _ops.index_fill(self, dim, index, value)

    def index_fill_(self, dim, index, value):
        return self._inplace("index_fill_", _ops.index_fill, dim, index, value)

    def is_floating_point(self) -> bool:
        return self.dtype.kind == "f"

    def type(self, dtype=None):
        """`x.type()` names the legacy type ('torch.FloatTensor'); `x.type(dtype)` converts."""
        from .tensor_types import legacy_type_name, parse_legacy_type

        if dtype is None:
            return legacy_type_name(self)
        return self.to(parse_legacy_type(dtype) if isinstance(dtype, str) else dtype)

    def nelement(self) -> int:
        return self.numel()

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def _new(self, make, size, dtype, requires_grad):
        from . import creation

        size = _ops.movement._shape_arg(size)
        out = getattr(creation, make)(size, dtype=dtype or self.dtype, device=self.device)
        return out.requires_grad_(requires_grad)

    def new_zeros(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self._new("zeros", size, dtype, requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self._new("ones", size, dtype, requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self._new("zeros", size, dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, requires_grad=False) -> Tensor:
        from . import creation

        out = creation.full(size, fill_value, dtype=dtype or self.dtype, device=self.device)
        return out.requires_grad_(requires_grad)

    def new_tensor(self, data, dtype=None, requires_grad=False) -> Tensor:
        out = Tensor._wrap(_as_array(data, dtype or self.dtype, self.device), False, None)
        return out.requires_grad_(requires_grad)


class _HookHandle:
    """What register_hook returns: `.remove()` unregisters the hook."""

    __slots__ = ("hooks", "hook")

    def __init__(self, hooks, hook):
        self.hooks, self.hook = hooks, hook

    def remove(self):
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


def _scalar_first(op, other, alpha):
    """PyTorch's deprecated `x.add_(alpha, other)` (a number, then a tensor), which older
    scripts use as `p.data.add_(-lr, p.grad.data)`: same result and warning as PyTorch."""
    if isinstance(alpha, Tensor) and not isinstance(other, Tensor):
        import warnings

        warnings.warn(
            f"This overload of {op} is deprecated: {op}(Number alpha, Tensor other); use "
            f"{op}(Tensor other, *, Number alpha) instead",
            UserWarning,
            stacklevel=3,
        )
        return alpha, other
    return other, alpha


def _tensors_and_value(op, args, value):
    """(t1, t2) and value, or PyTorch's deprecated (value, t1, t2) order (older Adam code)."""
    if len(args) == 2 and all(isinstance(a, Tensor) for a in args):
        return args, value
    if len(args) == 3 and isinstance(args[1], Tensor) and isinstance(args[2], Tensor):
        import warnings

        warnings.warn(
            f"This overload of {op} is deprecated: {op}(Number value, Tensor tensor1, Tensor "
            f"tensor2); use {op}(Tensor tensor1, Tensor tensor2, *, Number value) instead",
            UserWarning,
            stacklevel=3,
        )
        return args[1:], args[0]
    raise TypeError(f"{op}: expected (tensor1, tensor2, *, value=...), got {len(args)} arguments")


def _copy_into(x, src):
    """The out-of-place op behind copy_: src broadcast to x's shape and dtype (gradient to src)."""
    if src.dtype != x.dtype:
        src = _ops.cast(src, x.dtype)
    return _ops.clone(_ops.expand(src, x.shape) if src.shape != x.shape else src)


def _fill_like(x, value):
    """The op behind fill_/zero_/normal_: x's shape filled with value (a number or tensor)."""
    if isinstance(value, Tensor) and value.requires_grad:
        return _copy_into(x, value)
    array = value._array if isinstance(value, Tensor) else value
    xp = get_array_module(x._array)
    return Tensor._wrap(xp.broadcast_to(xp.asarray(array, x.dtype), x.shape), False, None)


def _write_in_place(t, op, other, ufunc=None, alpha=1) -> bool:
    """t <- ufunc(t, alpha·other), or t filled with `other` (ufunc None), computed straight into t's
    memory, when no graph is recorded, t is a NumPy array and `other` a Python int/float or a
    NumPy tensor of t's dtype: the optimizers' and teaching loops' `p.data -= lr * p.grad`,
    `p.data.add_(p.grad, alpha=-lr)` and `p.grad.zero_()`. Returns False (nothing done)
    otherwise, or when NumPy refuses (a cast across kinds, a shape t cannot hold, a read-only
    view): the general path (`inplace.apply_inplace`) then runs, and phrases the error.

    NOTE: the general path computes out of place and copies the result in: a 64x16 `-=` took
    12 µs, this 2. The same values as that path: NumPy takes a Python number at t's dtype, as
    PyTorch does (with alpha, both multiply the Python numbers first: PyTorch rounds the number
    to t's dtype before, so float16 can differ in the last bit).
    """
    dst = t._array
    if dst.__class__ is not np.ndarray:
        return False
    kind = other.__class__
    if kind is builtins.int or kind is builtins.float:
        operand = other
    elif isinstance(other, Tensor):
        operand = other._array
        if operand.__class__ is not np.ndarray or operand.dtype != dst.dtype:
            return False
    else:
        return False
    if alpha != 1:  # alpha·other first, then the ufunc: the general path's two roundings
        if alpha.__class__ is not builtins.int and alpha.__class__ is not builtins.float:
            return False
        operand = operand * alpha
    if _inplace.needs_graph(t, op, (other,)):  # (which also applies PyTorch's leaf rule)
        return False
    counter = _inplace.version_counter(t)
    try:
        if ufunc is None:
            dst.fill(operand)
        else:
            ufunc(dst, operand, out=dst, casting="same_kind")
    except (TypeError, ValueError, OverflowError):  # raised before anything is written
        return False
    counter.bump(op)
    return True


from . import function as _function  # noqa: E402 - the grad mode, for inplace (imports Tensor)
from . import inplace as _inplace  # noqa: E402
from . import ops as _ops  # noqa: E402 - the ops import Tensor, so they come after it

_inplace.bind(Tensor, _function)

# NOTE: the most used methods are their functional ops: `x.reshape(2, 3)` calls
# ops.reshape(x, 2, 3) with no method in between, one Python call less per op (0.1-0.2 µs of a
# 2 µs op on a small tensor, paid by every op of a decoding step). Each op's parameters are the
# method's, `self` first, so keywords work too. Bound by tinytensor/ops/__init__.py once every
# op exists (the ops import Tensor).
OPS_AS_METHODS = {  # method -> the op's name in tinytensor.ops
    "__add__": "add",
    "__sub__": "sub",
    "__mul__": "mul",
    "__truediv__": "div",
    "__pow__": "pow",
    "__matmul__": "matmul",
    "__neg__": "neg",
    "__getitem__": "getitem",
    "reshape": "reshape",
    "view": "reshape",
    "transpose": "transpose",
    "permute": "permute",
    "softmax": "softmax",
    "log_softmax": "log_softmax",
    "sum": "sum",
    "mean": "mean",
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "relu": "relu",
    "squeeze": "squeeze",
    "unsqueeze": "unsqueeze",
    "flatten": "flatten",
    "masked_fill": "masked_fill",
}


def bind_ops_as_methods():
    """Makes each method of OPS_AS_METHODS the op it names."""
    for name, path in OPS_AS_METHODS.items():
        op = _ops
        for part in path.split("."):
            op = getattr(op, part)
        setattr(Tensor, name, op)


_autograd = None  # tinytensor.autograd, bound by the first Tensor.backward call
