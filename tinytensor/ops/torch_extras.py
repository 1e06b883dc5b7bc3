"""PyTorch-named ops that a ported script reaches for beyond the core set.

A few are new `Function`s (log1p, expm1, erf, cumsum, the rounding family); the rest are
compositions of core ops (their gradients come from those ops' VJPs) or plain aliases, so that
`torch.X(...)` / `x.X(...)` can be written as `tt.X(...)` / `x.X(...)` with the same arguments.
"""

from __future__ import annotations

import builtins
import math

from ..backend import get_array_module, is_cupy_array
from ..function import Function, shares_memory
from ..tensor import Tensor
from . import elementwise as ew
from . import movement as mv
from . import reduce as rd
from ._checks import (
    check_distinct_dims,
    check_finite,
    check_indices_in_range,
    check_int,
    check_real,
    check_tensor,
    index_tensor,
)
from ._checks import sizes as checked_sizes
from ._util import binary_operands, floating, normalize_dim, normalize_dims
from .linalg import matmul


def _erf(x):
    if is_cupy_array(x):
        from cupyx.scipy.special import erf
    else:
        from scipy.special import erf
    return erf(x)


# ---- new Functions ------------------------------------------------------------------------


class Softplus(Function):
    """z = log(1 + e^(βx))/β, or x where βx > threshold (as PyTorch);
    dL/dx = g·σ(βx), or g where βx > threshold.

    NOTE: computed as max(βx, 0) + log1p(e^(-|βx|)), which neither overflows nor loses the
    tail; one op, so the gradient at 0 is σ(0) = 1/2 (a composition of relu and |x| gave 0).
    """

    def forward(self, x, beta=1.0, threshold=20.0):
        xp = get_array_module(x)
        self.bz, self.beta, self.threshold = x * beta, beta, threshold
        smooth = (xp.maximum(self.bz, 0) + xp.log1p(xp.exp(-xp.abs(self.bz)))) / beta
        return xp.where(self.bz > threshold, x, smooth).astype(x.dtype, copy=False)

    def composite(self, x):
        # log(1 + eᵗ) as two branches, each fed only the t it is exact for (so neither an
        # overflow nor a 0·∞ reaches the gradient): t + log(1 + e⁻ᵗ) for t > 0, else log(1 + eᵗ)
        t = x * self.beta
        positive = t > 0
        above = ew.where(positive, t, 0.0)
        below = ew.where(positive, 0.0, t)
        smooth = ew.where(positive, above + log1p(ew.exp(-above)), log1p(ew.exp(below)))
        return ew.where(t > self.threshold, x, smooth / self.beta)

    def backward(self, g):
        slope = ew.stable_sigmoid(self.bz)
        return g * get_array_module(g).where(self.bz > self.threshold, 1, slope)


class VectorNorm(Function):
    """n = (Σ|x|^p)^(1/p) over `axes`;  dL/dx = g·sign(x)·|x|^(p-1) / n^(p-1),
    and 0 where n = 0 (PyTorch's subgradient at the zero vector, not 0/0 = NaN)."""

    def forward(self, x, p=2.0, axes=None, keepdims=False):
        xp = get_array_module(x)
        self.x, self.p, self.axes, self.keepdims = x, p, axes, keepdims
        ax = xp.abs(x)
        self.n = (
            (ax * ax).sum(axis=axes, keepdims=True) ** 0.5
            if p == 2
            else ((ax**p).sum(axis=axes, keepdims=True) ** (1.0 / p))
        )
        return (
            self.n
            if keepdims
            else self.n.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))
        )

    def backward(self, g):
        xp = get_array_module(g)
        g = g if self.keepdims else g.reshape(self.n.shape)
        safe = xp.where(self.n > 0, self.n, 1)
        if self.p == 2:
            scale = self.x / safe
        else:
            scale = xp.sign(self.x) * (xp.abs(self.x) / safe) ** (self.p - 1)
        return xp.where(self.n > 0, g * scale, 0)


class Log1p(Function):
    """z = log(1 + x);  dL/dx = g / (1 + x)."""

    def forward(self, x):
        self.x = x
        return get_array_module(x).log1p(x)

    def backward(self, g):
        return g / (1 + self.x)


class Expm1(Function):
    """z = eˣ - 1;  dL/dx = g·(z + 1)."""

    def forward(self, x):
        self.z = get_array_module(x).expm1(x)
        return self.z

    def backward(self, g):
        return g * (self.z + 1)


class Erf(Function):
    """z = erf x;  dL/dx = g·2/√π·e^(-x²)."""

    def forward(self, x):
        self.x = x
        return _erf(x)

    def backward(self, g):
        return g * (2 / 3.141592653589793**0.5) * get_array_module(g).exp(-self.x * self.x)


class CumSum(Function):
    """z_i = Σ_{j ≤ i} x_j along `axis`;  dL/dx_j = Σ_{i ≥ j} g_i (a reversed cumsum)."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)

    def forward(self, x, axis=0):
        self.axis = axis
        return get_array_module(x).cumsum(x, axis=axis)

    def backward(self, g):
        xp = get_array_module(g)
        return xp.flip(xp.cumsum(xp.flip(g, self.axis), axis=self.axis), self.axis)


class Rounding(Function):
    """z = floor/ceil/round/trunc/sign of x. No gradient (PyTorch's is 0 almost everywhere)."""

    differentiable = False

    def forward(self, x, op="floor"):
        return getattr(get_array_module(x), op)(x)


class Einsum(Function):
    """z = einsum(equation, *xs) (no repeated index within one operand);
    dL/dx_i = einsum(out, others -> subscripts_i)(g, ...), broadcast over indices only x_i has."""

    def forward(self, *xs, subscripts=(), output=""):
        self.xs, self.subscripts, self.output = xs, subscripts, output
        return get_array_module(xs[0]).einsum(f"{','.join(subscripts)}->{output}", *xs)

    def backward(self, g):
        xp = get_array_module(g)
        grads = []
        for i, (sub, x) in enumerate(zip(self.subscripts, self.xs, strict=True)):
            if not self.needs_input_grad[i]:
                grads.append(None)
                continue
            others = [s for j, s in enumerate(self.subscripts) if j != i]
            arrays = [a for j, a in enumerate(self.xs) if j != i]
            reachable = set(self.output).union(*others)
            kept = "".join(c for c in sub if c in reachable)
            gi = xp.einsum(f"{','.join([self.output, *others])}->{kept}", g, *arrays)
            shape = tuple(n if c in reachable else 1 for c, n in zip(sub, x.shape, strict=True))
            grads.append(xp.broadcast_to(gi.reshape(shape), x.shape))
        return tuple(grads)


def einsum(equation, *operands):
    """Einstein summation, as `torch.einsum` ("bij,bjk->bik", implicit output, "..." and a
    list of operands all accepted). NOTE: an index repeated within one operand (a diagonal or
    trace, "ii->i") is not supported."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: equation must be a string, got {type(equation).__name__}")
    for i, x in enumerate(operands):
        check_tensor(x, "einsum", f"operands[{i}]")
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(operands):
        raise ValueError(f"einsum: {equation!r} names {len(subs)} operands, got {len(operands)}")
    free = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq)
    if "..." in eq:
        rank = builtins.max(
            x.ndim - len(s.replace("...", "")) for s, x in zip(subs, operands, strict=True)
        )
        dots = "".join(next(free) for _ in range(rank))
        subs = [
            s.replace("...", dots[len(dots) - (x.ndim - len(s.replace("...", ""))) :])
            for s, x in zip(subs, operands, strict=True)
        ]
        out = out.replace("...", dots) if arrow else dots + out
    if not arrow:
        letters = "".join(subs)
        out = (out if "..." in eq else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c not in out)
        )
    sizes = {}
    for s, x in zip(subs, operands, strict=True):
        if len(s) != x.ndim:
            raise ValueError(f"einsum: subscripts {s!r} do not fit an operand of shape {x.shape}")
        if len(set(s)) != len(s):
            raise NotImplementedError(f"einsum: repeated index in one operand ({s!r})")
        for c, n in zip(s, x.shape, strict=True):
            if sizes.setdefault(c, n) != n:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
    return Einsum.apply(*operands, subscripts=tuple(subs), output=out)


def log1p(x):
    return Log1p.apply(floating(check_tensor(x, "log1p")))


def expm1(x):
    return Expm1.apply(floating(check_tensor(x, "expm1")))


def erf(x):
    return Erf.apply(floating(check_tensor(x, "erf")))


def cumsum(x, dim, dtype=None):
    check_tensor(x, "cumsum")
    out = CumSum.apply(x, axis=normalize_dim(dim, x.ndim, "cumsum"))
    return out if dtype is None else out.to(dtype)


def floor(x):
    return Rounding.apply(check_tensor(x, "floor"), op="floor")


def ceil(x):
    return Rounding.apply(check_tensor(x, "ceil"), op="ceil")


def trunc(x):
    return Rounding.apply(check_tensor(x, "trunc"), op="trunc")


def sign(x):
    return Rounding.apply(check_tensor(x, "sign"), op="sign")


def round(x, decimals=0):  # noqa: A001 - PyTorch's name
    """Round half to even (as PyTorch); `decimals` rounds to that many decimal places."""
    check_tensor(x, "round")
    check_int(decimals, "round", "decimals")
    if decimals == 0:
        return Rounding.apply(x, op="round")
    scale = 10.0**decimals
    return Rounding.apply(x * scale, op="round") / scale


# ---- arithmetic with PyTorch's extra arguments ---------------------------------------------


def add(a, b, *, alpha=1):
    """a + alpha·b."""
    return ew.add(a, b if alpha == 1 else b * alpha)


def sub(a, b, *, alpha=1):
    """a - alpha·b."""
    return ew.sub(a, b if alpha == 1 else b * alpha)


def square(x):
    return check_tensor(x, "square") * x


def reciprocal(x):
    return 1 / check_tensor(x, "reciprocal")


def clip(x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    return ew.clamp(x, min=min, max=max)


def lerp(start, end, weight):
    """start + weight·(end - start)."""
    check_tensor(start, "lerp", "input"), check_tensor(end, "lerp", "end")
    if not isinstance(weight, Tensor):
        check_real(weight, "lerp", "weight")
    return start + weight * (end - start)


def addcmul(x, t1, t2, *, value=1):
    return x + value * t1 * t2


def addcdiv(x, t1, t2, *, value=1):
    return x + value * t1 / t2


# ---- comparisons (no gradient) -------------------------------------------------------------


def ne(a, b):
    return ew.compare(a, b, "not_equal")


def gt(a, b):
    return ew.compare(a, b, "greater")


def ge(a, b):
    return ew.compare(a, b, "greater_equal")


def lt(a, b):
    return ew.compare(a, b, "less")


def le(a, b):
    return ew.compare(a, b, "less_equal")


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = binary_operands(a, b, "isclose")
    xp = get_array_module(a._array)
    return Tensor._wrap(xp.isclose(a._array, b._array, rtol, atol, equal_nan), False, None)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return builtins.bool(isclose(a, b, rtol, atol, equal_nan).all().item())


def equal(a, b) -> bool:
    """True when both have the same shape and the same values."""
    return tuple(a.shape) == tuple(b.shape) and builtins.bool((a == b).all().item())


# ---- reductions ----------------------------------------------------------------------------


def max(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """`max(x)`, `max(x, dim)` -> (values, indices), or `max(x, other)` = maximum."""
    if isinstance(dim, Tensor):
        return ew.maximum(x, dim)
    return rd.max(x, dim, keepdim)


def min(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """`min(x)`, `min(x, dim)` -> (values, indices), or `min(x, other)` = minimum."""
    if isinstance(dim, Tensor):
        return ew.minimum(x, dim)
    return rd.min(x, dim, keepdim)


def prod(x, dim=None, keepdim=False):
    """Π over `dim` (or all), as exp Σ log|x| with the sign put back.

    NOTE: composed from differentiable ops so it needs no VJP of its own; an input with a zero
    gives the right value (0) but a nan gradient, unlike PyTorch. Fine for the usual positive
    scale factors; avoid for inputs that hold zeros.
    """
    axes = normalize_dims(dim, x.ndim, "prod")
    if not axes:  # a 0-d tensor
        return x
    magnitude = rd.sum(ew.log(ew.abs(x)), axes, keepdim).exp()
    negatives = rd.sum((x < 0).to(x.dtype), axes, keepdim)
    odd = negatives - 2 * floor(negatives / 2)
    return magnitude * (1 - 2 * odd)


def norm(x, p="fro", dim=None, keepdim=False):
    """‖x‖_p over `dim` (all elements by default); p = 2 / 'fro', 1, inf or any number."""
    if p == "fro":
        p = 2
    if p == float("inf"):
        return rd.amax(ew.abs(x), dim, keepdim)
    if p == 1:
        return rd.sum(ew.abs(x), dim, keepdim)
    if isinstance(p, str) or not p > 0:
        raise ValueError(f"norm: p must be 'fro', inf or a positive number, got {p!r}")
    axes = normalize_dims(dim, x.ndim, "norm")
    return VectorNorm.apply(floating(x), p=float(p), axes=axes, keepdims=keepdim)


def softplus(x, beta=1.0, threshold=20.0):
    check_tensor(x, "softplus")
    if check_finite(beta, "softplus", "beta") == 0:
        raise ValueError("softplus: beta must be nonzero (it divides), got 0.0")
    check_real(threshold, "softplus", "threshold")
    return Softplus.apply(floating(x), beta=beta, threshold=threshold)


def vector_norm(x, ord=2, dim=None, keepdim=False):  # noqa: A002 - PyTorch's argument name
    return norm(x, ord, dim, keepdim)


def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v = rd.var(x, dim, unbiased, keepdim, correction=correction)
    return v, rd.mean(x, dim, keepdim)


def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    s = rd.std(x, dim, unbiased, keepdim, correction=correction)
    return s, rd.mean(x, dim, keepdim)


# ---- movement ------------------------------------------------------------------------------


def t(x):
    """Transpose of a 0-, 1- or 2-d tensor."""
    if x.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dims, got shape {tuple(x.shape)}")
    return x if x.ndim < 2 else mv.transpose(x, 0, 1)


def movedim(x, source, destination):
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    src = [normalize_dim(d, x.ndim, "movedim") for d in src]
    dst = [normalize_dim(d, x.ndim, "movedim") for d in dst]
    check_distinct_dims(source, src, "movedim", "source")
    check_distinct_dims(destination, dst, "movedim", "destination")
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} differ in length")
    rest = iter(d for d in range(x.ndim) if d not in src)
    placed = dict(zip(dst, src, strict=True))
    order = [placed[i] if i in placed else next(rest) for i in range(x.ndim)]
    return mv.permute(x, order)


def unflatten(x, dim, sizes):
    d = normalize_dim(dim, x.ndim, "unflatten")
    sizes = checked_sizes((sizes,), "unflatten", allow_minus_one=True)
    known = math.prod(n for n in sizes if n != -1)
    n = x.shape[d]
    if sizes.count(-1) > 1 or (-1 not in sizes and known != n) or (known and n % known):
        raise ValueError(
            f"unflatten: sizes {sizes} do not multiply to {n} (dim {dim} of {x.shape})"
        )
    return mv.reshape(x, x.shape[:d] + sizes + x.shape[d + 1 :])


def unbind(x, dim=0):
    d = normalize_dim(dim, x.ndim, "unbind")
    return tuple(select(x, d, i) for i in range(x.shape[d]))


def select(x, dim, index):
    d = normalize_dim(dim, x.ndim, "select")
    n = x.shape[d]
    if not -n <= check_int(index, "select", "index") < n:
        raise IndexError(f"select: index {index} is out of range for dim {dim} of size {n}")
    return x[(slice(None),) * d + (index,)]


def narrow(x, dim, start, length):
    d = normalize_dim(dim, x.ndim, "narrow")
    n = x.shape[d]
    check_int(start, "narrow", "start"), check_int(length, "narrow", "length", minimum=0)
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dim {dim} of size {n}")
    start = start % n if start < 0 else start
    if start + length > n:
        raise IndexError(f"narrow: start {start} + length {length} exceeds dim {dim} of size {n}")
    return x[(slice(None),) * d + (slice(start, start + length),)]


def index_select(x, dim, index):
    d = normalize_dim(dim, x.ndim, "index_select")
    index_tensor(index, "index_select")
    if index.ndim > 1:
        raise ValueError(f"index_select: index must be 0-d or 1-d, got shape {tuple(index.shape)}")
    # NOTE: negative indices are out of range here, as in PyTorch (NumPy would wrap -1)
    check_indices_in_range(index._array, x.shape[d], "index_select", f"dim {dim} of {x.shape}")
    return x[(slice(None),) * d + (index.reshape(-1),)]


def flip(x, dims):
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    axes = [normalize_dim(d, x.ndim, "flip") for d in dims]
    check_distinct_dims(dims, axes, "flip", "dims")
    view = x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]
    return ew.clone(view)  # NOTE: a copy, as torch.flip (NumPy's flip would be a view)


def roll(x, shifts, dims=None):
    if dims is None:
        return roll(mv.reshape(x, -1), shifts, 0).reshape(x.shape)
    shifts = shifts if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    for s in shifts:
        check_int(s, "roll", "shifts")
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} differ in length")
    out = x
    for s, d in zip(shifts, dims, strict=True):
        d = normalize_dim(d, x.ndim, "roll")
        n = x.shape[d]
        s = s % n if n else 0
        if s:
            out = mv.cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], dim=d)
    # NOTE: a whole-turn roll is still a new tensor, as in PyTorch: writing into it leaves x alone
    return out if out is not x else ew.clone(x)


def repeat(x, *sizes):
    """Tiles x `sizes[i]` times along dim i (leading new dims allowed), as `Tensor.repeat`."""
    sizes = checked_sizes(sizes, "repeat")
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: {sizes} has fewer dims than the tensor's {tuple(x.shape)}")
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    x = mv.reshape(x, shape)
    # (r0, n0, r1, n1, ...) by broadcasting, then merge each pair
    interleaved = tuple(v for n in shape for v in (1, n))
    target = tuple(v for r, n in zip(sizes, shape, strict=True) for v in (r, n))
    tiled = mv.expand(mv.reshape(x, interleaved), target)
    out = mv.reshape(tiled, tuple(r * n for r, n in zip(sizes, shape, strict=True)))
    # NOTE: always new memory, as torch.repeat (all-one repeats would otherwise be a view of x)
    return ew.clone(out) if shares_memory(out._array, x._array) else out


def tile(x, dims):
    dims = checked_sizes((dims,), "tile")
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def hstack(tensors):
    mv._tensor_list(tensors, "hstack")
    return mv.cat(tensors, dim=0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    mv._tensor_list(tensors, "vstack")
    return mv.cat([tt if tt.ndim > 1 else tt.reshape(1, -1) for tt in tensors], dim=0)


def masked_select(x, mask):
    check_tensor(x, "masked_select")
    if check_tensor(mask, "masked_select", "mask").dtype.kind != "b":
        raise TypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype}")
    return x[mask]


def pad(input, pad, mode="constant", value=0.0):  # noqa: A002 - PyTorch's argument names
    """Constant padding as `torch.nn.functional.pad`: `pad` = (left, right) for the last dim,
    then (left, right) for the one before, ...; negative amounts crop."""
    if mode in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: only mode='constant' is supported, got {mode!r}")
    if mode != "constant":
        raise ValueError(f"pad: mode must be 'constant', got {mode!r}")
    check_tensor(input, "pad")
    check_real(value, "pad", "value")
    for amount in pad:
        check_int(amount, "pad", "pad")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: {pad} must hold pairs for at most {input.ndim} dims")
    from ..creation import full

    x = input
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before < 0:
            x, before = narrow(x, d, -before, x.shape[d] + before), 0
        if after < 0:
            x, after = narrow(x, d, 0, x.shape[d] + after), 0
        parts = []
        for amount in (before, after):
            shape = x.shape[:d] + (amount,) + x.shape[d + 1 :]
            parts.append(full(shape, value, dtype=x.dtype, device=x.device) if amount else None)
        x = mv.cat([p for p in (parts[0], x, parts[1]) if p is not None], dim=d)
    return x


# ---- linear algebra ------------------------------------------------------------------------


def mm(a, b):
    check_tensor(a, "mm"), check_tensor(b, "mm", "mat2")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"mm: expects 2-d tensors, got {tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b)


def bmm(a, b):
    check_tensor(a, "bmm"), check_tensor(b, "bmm", "mat2")
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm: expects (B, n, m) and (B, m, p), got {a.shape} and {b.shape}")
    return matmul(a, b)


def mv_(a, v):
    return matmul(a, v)


def dot(a, b):
    check_tensor(a, "dot"), check_tensor(b, "dot", "tensor")
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"dot: expects 1-d tensors, got {tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b)


def outer(a, b):
    check_tensor(a, "outer"), check_tensor(b, "outer", "vec2")
    return mv.unsqueeze(a, 1) * mv.unsqueeze(b, 0)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(x) -> int:
    return check_tensor(x, "numel").numel()


def is_floating_point(x) -> bool:
    return x.dtype.kind == "f"


__all__ = [
    name
    for name in dir()
    if not name.startswith("_")
    and name
    not in {"annotations", "builtins", "dtypes", "get_array_module", "is_cupy_array", "Function"}
    and name not in {"Tensor", "ew", "mv", "rd", "binary_operands", "normalize_dim"}
]
