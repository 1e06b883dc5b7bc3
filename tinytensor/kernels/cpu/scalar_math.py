"""exp and the row max for the kernels' inner loops, as code the compiler can vectorize.

numba calls libm's scalar expf per element, 3x slower than NumPy's SIMD loop. For float32 this
version is plain arithmetic, which LLVM vectorizes without fastmath: Cephes' expf. x = n·ln2 + r
with |r| <= ln2/2 (ln2 split in two parts so r is exact), exp(r) by a degree-6 polynomial, times
2^n built from exponent bits (no table, so the loop vectorizes without gathers). Max error 1.3 ulp;
exp(-inf) = 0, and results below float32's smallest normal (x < -87.33654) are 0 rather than
subnormal (softmax's tail: harmless). (~1.5x NumPy's SIMD exp per element on one core; numba's own
exp is ~8x.) GELU's tanh is 2/(1 + exp(-2u)) - 1 on top of it (gelu.py). The row max: see
`max_of`.
NOTE: numba's cache does not see edits to this file from the kernels that inline it: after
changing it, delete tinytensor/kernels/cpu/__pycache__/*.nbi and *.nbc.
float64 keeps libm's exp (accuracy first: float64 is for checks, not speed).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

_F = np.float32
_EXP_LO, _EXP_HI = _F(-87.33654), _F(88.72283)  # exp underflows to 0 / overflows to inf beyond


@intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose IEEE-754 bits are the low 32 bits of the integer `bits` (a bitcast)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = args[0] if bits.bitwidth == 32 else builder.trunc(args[0], ir.IntType(32))
        return builder.bitcast(low, ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def _bits_of_float32(typingctx, value):
    """The IEEE-754 bits of the float32 `value`, as an int32 (a bitcast)."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(value), codegen


def fast_exp(x):
    """exp(x); compiled by the overload below."""
    return math.exp(x)


@overload(fast_exp, inline="always")
def _fast_exp_impl(x):
    if x != types.float32:
        return lambda x: math.exp(x)

    def expf(x):
        xc = x if x > _EXP_LO else _EXP_LO  # NOTE: selects, not branches
        xc = xc if xc < _EXP_HI else _EXP_HI
        # n = round(x / ln 2) through an int conversion: exact under any fastmath licence
        # (the 1.5·2^23 trick would be folded away by reassociation)
        t = xc * _F(1.44269504088896341)
        k = np.int32(t + _F(0.5)) if t >= _F(0.0) else np.int32(t - _F(0.5))
        n = _F(k)
        r = xc - n * _F(0.693359375)
        r = r + n * _F(2.12194440e-4)
        z = r * r
        y = _F(1.9875691500e-4) * r + _F(1.3981999507e-3)
        y = y * r + _F(8.3334519073e-3)
        y = y * r + _F(4.1665795894e-2)
        y = y * r + _F(1.6666665459e-1)
        y = y * r + _F(5.0000001201e-1)
        y = y * z + r + _F(1.0)
        # y·2^n for n = -126..128 in two exact-range steps, h = n//2: y·2^h by adding h to y's
        # exponent bits (y is in [0.7, 1.5], so the result stays normal), then one multiply by
        # 2^(n-h), the only rounding (a subnormal result at n = -126 rounds once, n = 128 gives
        # no spurious inf). NOTE: not two float multiplies, which reassociation may fold into
        # y·(2^h·2^(n-h)) = y·inf at n = 128.
        h = k >> 1
        y = _float32_from_bits(_bits_of_float32(y) + (h << 23))
        y = y * _float32_from_bits((k - h + 127) << 23)
        y = y if x >= _EXP_LO else _F(0.0)  # exp(-inf) and results below the normals: 0
        y = y if x <= _EXP_HI else _F(math.inf)  # overflow (and +inf) gives inf
        return y if x == x else x  # NaN stays NaN

    return expf


def max_of(s, end):
    """max(s[:end]) of a 1-D array, -inf for end = 0; compiled by the overload below."""
    m = -math.inf
    for j in range(end):
        m = max(m, s[j])
    return m


_MAGNITUDE = np.int32(0x7FFFFFFF)


@overload(max_of, inline="always")
def _max_of_impl(s, end):
    if s.dtype != types.float32:

        def plain(s, end):
            m = s.dtype.type(-np.inf)
            for j in range(end):
                m = s[j] if s[j] > m else m
            return m

        return plain

    def by_bits(s, end):
        # NOTE: LLVM vectorizes no float max reduction without the 'nnan' licence (1 ns per
        # element); an int32 max vectorizes (0.3 ns). Flipping the magnitude bits of negative
        # floats makes their bits ordered as int32 the way the floats are ordered. A NaN comes
        # out as the max or is passed over (by its sign bit); either way the softmax that uses
        # it is NaN, as NumPy's.
        m = np.int32(-2147483648)  # the key of -NaN's bits 0xFFFFFFFF: below every float's
        for j in range(end):
            b = _bits_of_float32(s[j])
            k = b ^ ((b >> 31) & _MAGNITUDE)
            m = k if k > m else m
        m = m ^ ((m >> 31) & _MAGNITUDE)
        return _float32_from_bits(m) if end > 0 else _F(-np.inf)

    return by_bits


# ---- the standard normal's Φ and φ, for exact GELU -------------------------------------------

# erfc(z) ≈ t·exp(-z² + P(t)), t = 1/(1 + z/2), z ≥ 0: Numerical Recipes' Chebyshev fit
# (W. H. Press et al., 2nd ed., §6.2), fractional error below 1.2e-7 for every z ≥ 0
_ERFC_FIT = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)  # fmt: skip
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def normal_cdf(x):
    """Φ(x) = P(N(0, 1) ≤ x); compiled by the overload below."""
    return 0.5 * math.erfc(-x * _SQRT_HALF)


def normal_pdf(x):
    """φ(x) = exp(-x²/2)/√(2π); compiled by the overload below."""
    return math.exp(-0.5 * x * x) * _INV_SQRT_2PI


@overload(normal_cdf, inline="always")
def _normal_cdf_impl(x):
    if x != types.float32:
        return lambda x: 0.5 * math.erfc(-x * _SQRT_HALF)

    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 = (_F(c) for c in _ERFC_FIT)

    def cdf(x):
        # NOTE: libm's erf is a scalar call per element (exact GELU ran 12x slower than
        # PyTorch's); this is arithmetic and fast_exp, which vectorize. Φ(-|x|) = ½·erfc(|x|/√2)
        # comes straight from the fit, so the negative tail keeps its relative accuracy (1 + erf
        # would cancel there); Φ(|x|) = 1 - Φ(-|x|). Error against float64: at most 2.4e-7
        # absolute, 7 ulps for |x| < 1, 21 for x in [-5, -1], growing like x² ulps further out
        # (the float32 rounding of x²/2 in the exponent), where float32's 1 + erf(x/√2), the
        # reference's and PyTorch's formula, is already 0. In float64 the polynomial costs 2x.
        a = abs(x)
        t = _F(1.0) / (_F(1.0) + _F(0.5 * _SQRT_HALF) * a)
        p = c8 + t * c9
        p = c7 + t * p
        p = c6 + t * p
        p = c5 + t * p
        p = c4 + t * p
        p = c3 + t * p
        p = c2 + t * p
        p = c1 + t * p
        p = c0 + t * p
        tail = _F(0.5) * t * fast_exp(p - _F(0.5) * a * a)  # Φ(-|x|)
        tail = _F(0.0) if a > _F(14.0) else tail  # ±inf (t = 0, inf·0); NaN passes through
        return tail if x < _F(0.0) else _F(1.0) - tail

    return cdf


@overload(normal_pdf, inline="always")
def _normal_pdf_impl(x):
    if x != types.float32:
        return lambda x: math.exp(-0.5 * x * x) * _INV_SQRT_2PI

    def pdf(x):
        return fast_exp(_F(-0.5) * x * x) * _F(_INV_SQRT_2PI)

    return pdf
