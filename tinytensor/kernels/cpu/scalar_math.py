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
