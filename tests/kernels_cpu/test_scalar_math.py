"""The kernels' float32 exp and row max (kernels/cpu/scalar_math.py) against float64 NumPy, over a
dense grid of their whole range and at the special values."""

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="numba is not installed: no fused kernels to test")

from tinytensor.kernels.cpu.scalar_math import fast_exp, max_of  # noqa: E402

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


@numba.njit(**_JIT)
def _row_maxima(x, ends):
    out = np.empty(x.shape[0], x.dtype)
    for i in range(x.shape[0]):
        out[i] = max_of(x[i], ends[i])
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_of_is_numpys_max_over_the_span(dtype):
    """The float32 version orders the floats by their bits as int32 (so that it vectorizes):
    negatives, -0.0 against 0.0, ±inf, subnormals and spans of any length give NumPy's max."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((9, 37)) * 10.0 ** rng.integers(-40, 30, (9, 37))).astype(dtype)
    x[0] = -np.abs(x[0])  # all negative
    x[1, 5] = np.inf
    x[2] = -np.inf  # all -inf
    x[3, :4] = [-0.0, 0.0, -0.0, -1.0]
    x[4] = np.float32(1e-45)  # subnormals
    x[4, 7] = np.float32(2e-45)
    x[5, :] = -np.inf
    x[5, 20] = -3.0
    ends = np.array([37, 37, 37, 4, 37, 37, 1, 17, 37])
    got = _row_maxima(x, ends)
    want = np.array([x[i, :e].max() for i, e in enumerate(ends)], dtype)
    np.testing.assert_array_equal(got, want)
    assert _row_maxima(x[:1], np.array([0]))[0] == -np.inf  # an empty span


def test_max_of_float32_with_nan_gives_nan_or_skips_it():
    x = np.array([[1.0, np.nan, 3.0]], np.float32)
    m = _row_maxima(x, np.array([3]))[0]
    assert np.isnan(m) or m == 3.0


# ---- the standard normal's Φ and φ (exact GELU) -------------------------------------------

from scipy.special import ndtr  # noqa: E402

from tinytensor.kernels.cpu.scalar_math import normal_cdf, normal_pdf  # noqa: E402


@numba.njit(**_JIT)
def _cdf_and_pdf(x, cdf, pdf):
    for i in range(x.shape[0]):
        cdf[i] = normal_cdf(x[i])
        pdf[i] = normal_pdf(x[i])


def _normal(x):
    cdf, pdf = np.empty_like(x), np.empty_like(x)
    _cdf_and_pdf(x, cdf, pdf)
    return cdf, pdf


def test_normal_cdf_float32_against_float64():
    """Absolute error at most 2.4e-7 everywhere (a few spacings of float32 next to 1); relative
    error a few ulps around 0 and 1-2 ulps of the result in the negative tail's exponent per
    unit of x²/2, where float32's 1 + erf (the NumPy reference's formula) has none left."""
    x = np.linspace(-14, 14, 2_000_001).astype(np.float32)
    cdf, _ = _normal(x)
    exact = ndtr(x.astype(np.float64))
    assert np.abs(cdf - exact).max() <= 2.5e-7
    ulps = _ulps(cdf, exact)
    assert ulps[np.abs(x) < 1].max() <= 8
    assert ulps[(x >= -5) & (x < -1)].max() <= 24
    assert ulps[x >= 1].max() <= 2
    deep = (x >= -9) & (x < -5)  # Φ from 1e-19 to 3e-7: relative error below 1e-5
    assert (np.abs(cdf[deep] - exact[deep]) / exact[deep]).max() < 1e-5


def test_normal_pdf_float32_against_float64():
    x = np.linspace(-14, 14, 2_000_001).astype(np.float32)
    _, pdf = _normal(x)
    exact = np.exp(-0.5 * x.astype(np.float64) ** 2) / np.sqrt(2 * np.pi)
    assert np.abs(pdf - exact).max() <= 1e-7
    assert _ulps(pdf[exact > 1e-6], exact[exact > 1e-6]).max() <= 12


def test_normal_cdf_and_pdf_at_special_values():
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -40.0, 40.0], np.float32)
    cdf, pdf = _normal(x)
    np.testing.assert_array_equal(cdf[[0, 1, 3, 4, 5, 6]], [0.0, 1.0, 0.5, 0.5, 0.0, 1.0])
    np.testing.assert_array_equal(pdf[[0, 1, 5, 6]], 0.0)
    assert np.isnan(cdf[2]) and np.isnan(pdf[2])
    assert abs(pdf[3] - 1 / np.sqrt(2 * np.pi)) < 1e-7


def test_normal_cdf_and_pdf_float64_are_libm():
    x = np.linspace(-30, 30, 100_001)
    cdf, pdf = _normal(x)
    np.testing.assert_allclose(cdf, ndtr(x), rtol=1e-13, atol=0)
    np.testing.assert_allclose(pdf, np.exp(-0.5 * x**2) / np.sqrt(2 * np.pi), rtol=1e-13)
