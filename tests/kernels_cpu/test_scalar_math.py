"""The kernels' float32 exp (kernels/cpu/scalar_math.py) against float64 NumPy, over a
dense grid of their whole range and at the special values."""

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="numba is not installed: no fused kernels to test")

from tinytensor.kernels.cpu.scalar_math import fast_exp  # noqa: E402

# the same fastmath licences as the kernels (dispatch.JIT_OPTIONS), so the same code is tested
_JIT = dict(fastmath={"reassoc", "nsz"}, error_model="numpy")


@numba.njit(**_JIT)
def _exp_all(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


def _ulps(got, exact):
    """|got - exact| in units of the float32 spacing at the exact value."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


def test_exp_is_within_two_ulps_over_its_normal_range():
    lo, hi = -87.33654, 88.72283  # below: results under float32's smallest normal; above: inf
    x = np.linspace(lo, hi, 3_000_001).astype(np.float32)
    out = np.empty_like(x)
    _exp_all(x, out)
    exact = np.exp(x.astype(np.float64))
    normal = exact >= np.finfo(np.float32).tiny
    assert _ulps(out[normal], exact[normal]).max() <= 2.0


def test_exp_at_special_values():
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, 88.7, 89.0, -87.3, -200.0], np.float32)
    out = np.empty_like(x)
    _exp_all(x, out)
    assert out[0] == 0.0 and out[1] == np.inf and np.isnan(out[2])
    assert out[3] == 1.0 and out[4] == 1.0
    # the top of the range is finite (2^128·0.98 must not overflow on the way), beyond it inf
    assert np.isfinite(out[5]) and abs(out[5] / np.exp(np.float64(x[5])) - 1) < 1e-6
    assert out[6] == np.inf
    assert abs(out[7] / np.exp(np.float64(x[7])) - 1) < 1e-6  # 2^-126 scale: still normal
    assert out[8] == 0.0


def test_exp_float64_is_libm():
    x = np.linspace(-700, 700, 10_001)
    out = np.empty_like(x)
    _exp_all(x, out)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-15)
