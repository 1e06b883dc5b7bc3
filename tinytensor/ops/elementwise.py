"""Elementwise ops: arithmetic, activations, comparisons, selection.

Binary ops broadcast like NumPy; their VJPs return gradients of the broadcast shape and the engine
(`autograd.sum_to`) reduces them to each input's shape.
"""

from __future__ import annotations

import math

from .. import dtypes
from ..backend import get_array_module, is_cupy_array
from ..function import Function
from ..kernels.cpu.dispatch import PARALLEL_MIN_ELEMENTS, kernels_for_array, pooled_add
from ..tensor import Tensor
from ._checks import check_real, check_tensor
from ._util import as_tensor_like, binary_operands, floating, zero_of


def _erf(x):
    """erf elementwise (NumPy has none; SciPy's and CuPy's are exact to rounding)."""
    if is_cupy_array(x):
        from cupyx.scipy.special import erf
    else:
        from scipy.special import erf
    return erf(x)


# ---- arithmetic ---------------------------------------------------------------------------


class Add(Function):
    """z = x + y;  dL/dx = g,  dL/dy = g."""

    broadcasts = True

    def forward(self, x, y):
        if x.size >= PARALLEL_MIN_ELEMENTS:  # large (a residual add): on every core if it can
            z = pooled_add(x, y)
            if z is not None:
                return z
        return x + y

    def backward(self, g):
        return g, g


class Sub(Function):
    """z = x - y;  dL/dx = g,  dL/dy = -g."""

    broadcasts = True

    def forward(self, x, y):
        return x - y

    def backward(self, g):
        return g, (-g if self.needs_input_grad[1] else None)


class Mul(Function):
    """z = x * y;  dL/dx = g * y,  dL/dy = g * x."""

    broadcasts = True

    def forward(self, x, y):
        needs = self.needs_input_grad
        if needs:  # keep only what backward reads (as PyTorch: in-place changes elsewhere are fine)
            self.x = x if needs[1] else None
            self.y = y if needs[0] else None
        return x * y

    def backward(self, g):
        return (
            g * self.y if self.needs_input_grad[0] else None,
            g * self.x if self.needs_input_grad[1] else None,
        )


class Div(Function):
    """z = x / y;  dL/dx = g / y,  dL/dy = -g * x / y²."""

    broadcasts = True

    def forward(self, x, y):
        needs = self.needs_input_grad
        self.x = x if needs and needs[1] else None  # only dL/dy reads x
        self.y = y
        return x / y

    def backward(self, g):
        gx = g / self.y
        return gx, (-gx * self.x / self.y if self.needs_input_grad[1] else None)


class Neg(Function):
    """z = -x;  dL/dx = -g."""

    def forward(self, x):
        return -x

    def backward(self, g):
        return -g


class Pow(Function):
    """z = x ** y (tensor exponent);  dL/dx = g·y·x^(y-1),  dL/dy = g·z·log x."""

    broadcasts = True

    def forward(self, x, y):
        self.x, self.y = x, y
        self.z = x**y
        return self.z

    def backward(self, g):
        xp = get_array_module(g)
        gx = g * self.y * self.x ** (self.y - 1) if self.needs_input_grad[0] else None
        gy = None
        if self.needs_input_grad[1]:
            # NOTE: d/dy x^y = x^y·log x; at x = 0 that is 0 (x^y = 0 for y > 0), not nan.
            safe = xp.where(self.x > 0, self.x, 1)
            gy = g * self.z * xp.log(safe)
        return gx, gy


class PowScalar(Function):
    """z = x ** p for a Python number p;  dL/dx = g·p·x^(p-1)."""

    def forward(self, x, p):
        self.x, self.p = x, p
        return x**p

    def backward(self, g):
        if self.p == 2:
            return g * 2 * self.x
        if self.p == 0:  # NOTE: x⁰ = 1 is constant: gradient 0 even at x = 0 (not 0·0⁻¹ = nan)
            return g * 0
        return g * self.p * self.x ** (self.p - 1)


# ---- unary math ---------------------------------------------------------------------------


class Exp(Function):
    """z = eˣ;  dL/dx = g·z."""

    def forward(self, x):
        self.z = get_array_module(x).exp(x)
        return self.z

    def backward(self, g):
        return g * self.z


class Log(Function):
    """z = log x;  dL/dx = g / x."""

    def forward(self, x):
        self.x = x
        xp = get_array_module(x)
        with xp.errstate(divide="ignore", invalid="ignore"):  # log 0 = -inf, log(-1) = nan: no
            return xp.log(x)  # warning, as PyTorch (masks are built as log(tril(ones)))

    def backward(self, g):
        return g / self.x


class Sqrt(Function):
    """z = √x;  dL/dx = g / (2z)."""

    def forward(self, x):
        self.z = get_array_module(x).sqrt(x)
        return self.z

    def backward(self, g):
        return g / (2 * self.z)


class Rsqrt(Function):
    """z = 1/√x;  dL/dx = -g·z³/2."""

    def forward(self, x):
        self.z = 1 / get_array_module(x).sqrt(x)
        return self.z

    def backward(self, g):
        return -0.5 * g * self.z**3


class Abs(Function):
    """z = |x|;  dL/dx = g·sign(x)  (0 at x = 0, as PyTorch)."""

    def forward(self, x):
        self.x = x
        return get_array_module(x).abs(x)

    def backward(self, g):
        return g * get_array_module(g).sign(self.x)


class Sin(Function):
    """z = sin x;  dL/dx = g·cos x."""

    def forward(self, x):
        self.x = x
        return get_array_module(x).sin(x)

    def backward(self, g):
        return g * get_array_module(g).cos(self.x)


class Cos(Function):
    """z = cos x;  dL/dx = -g·sin x."""

    def forward(self, x):
        self.x = x
        return get_array_module(x).cos(x)

    def backward(self, g):
        return -g * get_array_module(g).sin(self.x)


class Tanh(Function):
    """z = tanh x;  dL/dx = g·(1 - z²)."""

    def forward(self, x):
        self.z = get_array_module(x).tanh(x)
        return self.z

    def backward(self, g):
        return g * (1 - self.z * self.z)


def stable_sigmoid(x):
    """σ(x) = 1/(1+e⁻ˣ) for x ≥ 0 and eˣ/(1+eˣ) for x < 0.

    NOTE: computed piecewise through e^(-|x|) ∈ (0, 1], so neither tail overflows.
    """
    xp = get_array_module(x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


class Sigmoid(Function):
    """z = σ(x);  dL/dx = g·z·(1 - z)."""

    def forward(self, x):
        self.z = stable_sigmoid(x)
        return self.z

    def backward(self, g):
        return g * self.z * (1 - self.z)


class Relu(Function):
    """z = max(x, 0);  dL/dx = g·[x > 0].  NOTE: relu'(0) = 0, as PyTorch."""

    def forward(self, x):
        # NOTE: maximum, not x·[x > 0]: half the time on small tensors (no bool-to-float
        # multiply), and -3 gives 0.0 rather than -0.0, as PyTorch; NaN stays NaN. It saves its
        # output, as PyTorch does (so a relu_ on that output is caught).
        self.z = get_array_module(x).maximum(x, zero_of(x))
        return self.z

    def backward(self, g):
        return g * (self.z > zero_of(self.z))


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


class Gelu(Function):
    """z = x·Φ(x) (exact, with erf) or its tanh approximation.

    exact:  dL/dx = g·(Φ(x) + x·φ(x))
    tanh:   z = x/2·(1 + t), t = tanh(√(2/π)(x + 0.044715x³));
            dL/dx = g·(½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²))
    """

    def forward(self, x, approximate="none"):
        self.x, self.approximate = x, approximate
        self.fused = kernels_for_array("gelu", x)
        if self.fused:  # one pass (kernels/cpu/gelu.py), keeping tanh(...) or Φ(x) as below
            # (only when a node is recorded: needs_input_grad is empty otherwise)
            z, self.saved = self.fused.gelu_forward(x, approximate, bool(self.needs_input_grad))
            return z
        xp = get_array_module(x)
        if approximate == "tanh":
            # NOTE: x * x * x, not x**3: NumPy sends a float power of 3 to powf, ~50x slower.
            # In place on one fresh temporary: the same operations in the same order as
            # tanh(√(2/π)·(x + 0.044715·x·x·x)), so the same rounding, with fewer allocations.
            if x.dtype.kind != "f":  # integers promote as NumPy would (in place cannot)
                x = x.astype(xp.result_type(x, 1.0))
            u = x * x
            u *= x
            u *= 0.044715
            u += x
            u *= _SQRT_2_OVER_PI
            self.t = t = xp.tanh(u, out=u)
            z = t + 1
            z *= 0.5 * x
            return z
        self.cdf = 0.5 * (1 + _erf(x * (1 / math.sqrt(2))))
        return x * self.cdf

    def composite(self, x):
        if self.approximate == "tanh":
            return 0.5 * x * (1 + tanh((x + 0.044715 * x * x * x) * _SQRT_2_OVER_PI))
        from .torch_extras import erf

        return x * (0.5 * (1 + erf(x * (1 / math.sqrt(2)))))

    def backward(self, g):
        x = self.x
        if self.fused:
            g = get_array_module(g).ascontiguousarray(g, dtype=x.dtype)
            return self.fused.gelu_backward(x, self.saved, g, self.approximate)
        if self.approximate == "tanh":
            # NOTE: g·(½(1 + t) + ½x·(1 - t²)·√(2/π)(1 + 3·0.044715x²)) computed in place on
            # fresh temporaries, operation for operation (same rounding, ~30% faster).
            t = self.t
            inner = (3 * 0.044715) * x
            inner *= x
            inner += 1
            inner *= _SQRT_2_OVER_PI
            slope = t * t
            get_array_module(x).subtract(1, slope, out=slope)
            slope *= 0.5 * x
            slope *= inner
            dx = t + 1
            dx *= 0.5
            dx += slope
            dx *= g
            return dx
        pdf = get_array_module(x).exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
        return g * (self.cdf + x * pdf)


class Silu(Function):
    """z = x·σ(x);  dL/dx = g·σ(x)·(1 + x·(1 - σ(x)))."""

    def forward(self, x):
        self.x, self.s = x, stable_sigmoid(x)
        return x * self.s

    def composite(self, x):
        return x * sigmoid(x)

    def backward(self, g):
        return g * self.s * (1 + self.x * (1 - self.s))


# ---- two-way selection --------------------------------------------------------------------


class Maximum(Function):
    """z = max(x, y);  the gradient goes to the larger input.  NOTE: ties split it evenly."""

    broadcasts = True
    constants = ("share_x",)  # piecewise constant in x and y (create_graph)

    def forward(self, x, y):
        xp = get_array_module(x)
        self.share_x = ((x > y) + 0.5 * (x == y)).astype(x.dtype)
        return xp.maximum(x, y)

    def backward(self, g):
        return g * self.share_x, g * (1 - self.share_x)


class Minimum(Function):
    """z = min(x, y);  the gradient goes to the smaller input.  NOTE: ties split it evenly."""

    broadcasts = True
    constants = ("share_x",)  # piecewise constant in x and y (create_graph)

    def forward(self, x, y):
        xp = get_array_module(x)
        self.share_x = ((x < y) + 0.5 * (x == y)).astype(x.dtype)
        return xp.minimum(x, y)

    def backward(self, g):
        return g * self.share_x, g * (1 - self.share_x)


class Clamp(Function):
    """z = min(max(x, lo), hi);  dL/dx = g where lo ≤ x ≤ hi, else 0 (as PyTorch)."""

    def forward(self, x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
        self.inside = (x >= (min if min is not None else -math.inf)) & (
            x <= (max if max is not None else math.inf)
        )
        return get_array_module(x).clip(x, min, max)

    def backward(self, g):
        return g * self.inside


class Where(Function):
    """z = cond ? x : y;  dL/dx = g where cond,  dL/dy = g elsewhere."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    broadcasts = True

    def forward(self, x, y, condition=None):
        self.condition = condition
        return get_array_module(x).where(condition, x, y)

    def backward(self, g):
        xp = get_array_module(g)
        zero = xp.zeros((), dtype=g.dtype)
        return (
            xp.where(self.condition, g, zero) if self.needs_input_grad[0] else None,
            xp.where(self.condition, zero, g) if self.needs_input_grad[1] else None,
        )


class MaskedFill(Function):
    """z = mask ? value : x;  dL/dx = g where not mask."""

    broadcasts = True

    def forward(self, x, mask=None, value=0.0):
        xp = get_array_module(x)
        self.mask = mask
        return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)

    def backward(self, g):
        return get_array_module(g).where(self.mask, zero_of(g), g)


# ---- dtype and device ---------------------------------------------------------------------


class Cast(Function):
    """z = x as another dtype;  dL/dx = g cast back (the engine casts)."""

    def forward(self, x, dtype=None):
        return x.astype(dtype)

    def backward(self, g):
        return g


class ToDevice(Function):
    """z = x copied to another device;  dL/dx = g copied back."""

    may_alias = True  # to the device x is already on: x itself, as PyTorch

    def forward(self, x, device=None):
        from ..backend import device_of, move_array

        self.source = device_of(x)
        return move_array(x, device)

    def backward(self, g):
        from ..backend import move_array

        return move_array(g, self.source)


class Clone(Function):
    """z = a copy of x;  dL/dx = g."""

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return g


# ---- no gradient --------------------------------------------------------------------------


class Compare(Function):
    """z = x (op) y as booleans: ==, !=, <, <=, >, >=, and, or, xor. No gradient."""

    differentiable = False

    def forward(self, x, y, op="equal"):
        return getattr(get_array_module(x), op)(x, y)


class LogicalNot(Function):
    """z = not x. No gradient."""

    differentiable = False

    def forward(self, x):
        return get_array_module(x).logical_not(x)


# ---- functional API -----------------------------------------------------------------------


def add(a, b):
    # NOTE: two tensors of one dtype (nearly every call) go straight to the op: binary_operands'
    # call and the star-args cost ~0.15 µs of a 1.7 µs add
    if a.__class__ is Tensor and b.__class__ is Tensor and a._array.dtype is b._array.dtype:
        return Add.apply(a, b)
    return Add.apply(*binary_operands(a, b, "add"))


def sub(a, b):
    if a.__class__ is Tensor and b.__class__ is Tensor and a._array.dtype is b._array.dtype:
        return Sub.apply(a, b)  # as in add
    return Sub.apply(*binary_operands(a, b, "sub"))


def mul(a, b):
    if a.__class__ is Tensor and b.__class__ is Tensor and a._array.dtype is b._array.dtype:
        return Mul.apply(a, b)  # as in add
    return Mul.apply(*binary_operands(a, b, "mul"))


def div(a, b):
    a, b = binary_operands(a, b, "div")
    if a.dtype.kind != "f" and b.dtype.kind != "f":  # true division of integers gives floats
        # both: an int64 divisor would promote the default float dtype to float64
        a, b = a.to(dtypes.get_default_dtype()), b.to(dtypes.get_default_dtype())
    return Div.apply(a, b)


def neg(x):
    return Neg.apply(check_tensor(x, "neg"))


def pow(base, exponent):  # noqa: A001 - PyTorch's name
    if isinstance(base, Tensor) and not isinstance(exponent, Tensor):
        if not isinstance(exponent, (int, float)):
            raise TypeError(f"pow: exponent must be a number or a Tensor, got {exponent!r}")
        return PowScalar.apply_unary(base, exponent)
    return Pow.apply(*binary_operands(base, exponent, "pow"))


def exp(x):
    return Exp.apply(floating(check_tensor(x, "exp")))


def log(x):
    return Log.apply(floating(check_tensor(x, "log")))


def sqrt(x):
    return Sqrt.apply(floating(check_tensor(x, "sqrt")))


def rsqrt(x):
    return Rsqrt.apply(floating(check_tensor(x, "rsqrt")))


def abs(x):  # noqa: A001 - PyTorch's name
    return Abs.apply(check_tensor(x, "abs"))


def sin(x):
    return Sin.apply(floating(check_tensor(x, "sin")))


def cos(x):
    return Cos.apply(floating(check_tensor(x, "cos")))


def tanh(x):
    return Tanh.apply(floating(check_tensor(x, "tanh")))


def sigmoid(x):
    return Sigmoid.apply(floating(check_tensor(x, "sigmoid")))


def relu(x):
    return Relu.apply(check_tensor(x, "relu"))


def gelu(x, approximate="none"):
    """GELU: x·Φ(x); `approximate="tanh"` uses GPT-2's tanh formula."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return Gelu.apply_unary(check_tensor(x, "gelu"), approximate)


def silu(x):
    return Silu.apply(check_tensor(x, "silu"))


def maximum(a, b):
    check_tensor(a, "maximum", "input"), check_tensor(b, "maximum", "other")  # as PyTorch
    return Maximum.apply(*binary_operands(a, b, "maximum"))


def minimum(a, b):
    check_tensor(a, "minimum", "input"), check_tensor(b, "minimum", "other")  # as PyTorch
    return Minimum.apply(*binary_operands(a, b, "minimum"))


def clamp(x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and not isinstance(bound, Tensor):
            check_real(bound, "clamp", name)
    return Clamp.apply(check_tensor(x, "clamp"), min=min, max=max)


def where(condition, x, y):
    """Elementwise `x if condition else y`; condition is a bool tensor (no gradient)."""
    like = x if isinstance(x, Tensor) else y
    if not isinstance(like, Tensor):
        raise TypeError("where: at least one of x and y must be a Tensor")
    check_tensor(condition, "where", "condition")
    if condition.dtype != dtypes.bool:
        raise TypeError(f"where: condition must be a bool tensor, got {condition.dtype}")
    x, y = binary_operands(x, y, "where")
    if condition.device != x.device:
        from ..tensor import devices_mismatch_error

        raise devices_mismatch_error("where", (condition, x, y))
    return Where.apply(x, y, condition=condition._array)


def masked_fill(x, mask, value):
    """`value` where `mask` is True, `x` elsewhere; mask broadcasts to x's shape."""
    check_tensor(x, "masked_fill")
    mask = as_tensor_like(mask, x, "masked_fill", "mask")
    if mask.dtype != dtypes.bool:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype}")
    if mask.device != x.device:
        from ..tensor import devices_mismatch_error

        raise devices_mismatch_error("masked_fill", (x, mask))
    if isinstance(value, Tensor):
        value = value.item()
    elif not isinstance(value, (bool, int, float)):
        check_real(value, "masked_fill", "value")
    return MaskedFill.apply_unary(x, mask._array, value)


def cast(x, dtype):
    return Cast.apply_unary(x, dtype)


def to_device(x, device):
    return ToDevice.apply(x, device=device)


def clone(x):
    return Clone.apply(x)


def compare(a, b, op):
    return Compare.apply(*binary_operands(a, b, op), op=op)


def logical_not(x):
    return LogicalNot.apply(check_tensor(x, "logical_not"))


def bitwise_not(x):
    """~x: bitwise NOT of an integer tensor, logical NOT of a bool one; floats are refused (as
    PyTorch: `~float_tensor` is a TypeError, where logical_not would quietly give a mask)."""
    check_tensor(x, "bitwise_not")
    if x.dtype.kind == "f":
        raise TypeError(f"bitwise_not (~): needs an integer or bool tensor, got {x.dtype}")
    if x.dtype.kind == "b":
        return LogicalNot.apply(x)
    return Tensor._wrap(get_array_module(x._array).invert(x._array), False, None)


def logical_and(a, b):
    return compare(a, b, "logical_and")


def logical_or(a, b):
    return compare(a, b, "logical_or")


def logical_xor(a, b):
    return compare(a, b, "logical_xor")


def eq(a, b):
    return compare(a, b, "equal")


def isnan(x):
    return Tensor._wrap(get_array_module(x._array).isnan(x._array), False, None)


def isfinite(x):
    return Tensor._wrap(get_array_module(x._array).isfinite(x._array), False, None)
