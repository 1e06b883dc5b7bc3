"""Gradients at the points where compositions go wrong, and half-precision norms, against torch."""

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt

POINTS = np.array([-30.0, -2.0, -1e-8, 0.0, 1e-8, 2.0, 19.9, 25.0])


@pytest.mark.parametrize(
    "name,fn",
    [
        ("softplus", lambda lib, x: lib.nn.functional.softplus(x)),
        ("softplus-beta", lambda lib, x: lib.nn.functional.softplus(x, beta=2.0, threshold=5.0)),
        ("logsigmoid", lambda lib, x: lib.nn.functional.logsigmoid(x)),
        ("norm-zero-vector", lambda lib, x: (x * 0).norm()),
        (
            "norm-rows-one-zero",
            lambda lib, x: (x.reshape(2, 4) * lib.tensor([[0.0], [1.0]])).norm(dim=1),
        ),
        ("norm-p3-zero", lambda lib, x: (x * 0).norm(p=3)),
        ("linalg-norm", lambda lib, x: lib.linalg.norm(x)),
    ],
)
def test_values_and_gradients_match_torch(torch, name, fn):
    results = []
    for lib in (torch, tt):
        x = lib.tensor(POINTS, requires_grad=True)
        y = fn(lib, x)
        y.sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12, atol=1e-300)
    assert not np.isnan(results[1][1]).any()


def test_softplus_and_logsigmoid_slope_at_zero_is_one_half():
    x = tt.tensor([0.0], requires_grad=True)
    F.softplus(x).sum().backward()
    assert x.grad.item() == 0.5
    x.grad = None
    F.logsigmoid(x).sum().backward()
    assert x.grad.item() == 0.5


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_half_precision_norms_compute_statistics_in_float32(torch, norm):
    values = np.full((2, 8), 300.0)
    values[0, 0] = 310.0  # x² = 96,100 overflows float16 (max 65,504)
    outs = []
    for lib in (torch, tt):
        x = lib.tensor(values, dtype=lib.float16)
        fn = getattr(lib.nn.functional, norm)
        y = fn(x, (8,), eps=1e-5)
        assert str(y.dtype).endswith("float16")
        outs.append(y.float().numpy())
    np.testing.assert_allclose(outs[1], outs[0], atol=2e-3)
    assert np.abs(outs[1]).max() > 0.5  # not the zeros an overflowed variance gives


def test_triangles_of_infinite_masks_and_log_zero_match_torch(torch, recwarn):
    for lib in (torch, tt):
        mask = lib.full((3, 3), float("-inf")).triu(1)
        assert not bool(mask.isnan().any()) if lib is torch else not bool(tt.isnan(mask).any())
        lower = lib.log(lib.tril(lib.ones(3, 3)))  # word_language_model's causal mask
        assert float(lower[0, 1]) == float("-inf") and float(lower[1, 0]) == 0.0
    assert not [w for w in recwarn if "divide by zero" in str(w.message)]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize(
    ("shape", "dim"), [((7, 333), 1), ((5, 1000), None), ((3, 4, 513), (0, 2))]
)
def test_mean_is_numpys_mean_bit_for_bit(dtype, shape, dim):
    # the forward divides a sum by the count itself (NumPy's mean, minus its Python wrapper):
    # the same pairwise sum and the same division, so the same bits, and float16 still
    # accumulates in float32 as NumPy does
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype) * 100 + 3
    got = tt.tensor(x).mean(dim).numpy()
    want = x.mean(axis=dim)
    assert got.dtype == want.dtype and np.array_equal(got, want)
