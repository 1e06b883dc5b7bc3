"""Initializers: seeded, PyTorch's bounds and scales, default layer initialization."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def test_initializers_are_seeded():
    tt.manual_seed(5)
    a = nn.Linear(20, 10).weight.numpy()
    tt.manual_seed(5)
    b = nn.Linear(20, 10).weight.numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, nn.Linear(20, 10).weight.numpy())


def test_uniform_bounds():
    w = tt.empty(200, 100)
    bound = math.sqrt(6 / 300)
    nn.init.xavier_uniform_(w)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))  # Linear's default: U(±1/√fan_in)
    assert np.abs(w.numpy()).max() <= 1 / math.sqrt(100)
    assert np.abs(w.numpy()).max() > 0.95 / math.sqrt(100)


def test_normal_scales():
    w = tt.empty(400, 300)
    nn.init.xavier_normal_(w, gain=2.0)
    assert math.isclose(w.numpy().std(), 2.0 * math.sqrt(2 / 700), rel_tol=0.03)
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert math.isclose(w.numpy().std(), math.sqrt(2) / math.sqrt(400), rel_tol=0.03)
    nn.init.normal_(w, mean=1.0, std=0.5)
    assert math.isclose(w.numpy().mean(), 1.0, abs_tol=0.01)


def test_trunc_normal_stays_in_bounds_with_the_truncated_moments():
    from scipy.stats import truncnorm

    w = tt.empty(300, 300)
    nn.init.trunc_normal_(w, mean=0.5, std=1.0, a=-1.0, b=1.5)
    values = w.numpy()
    assert values.min() >= -1.0 and values.max() <= 1.5
    dist = truncnorm(-1.5, 1.0, loc=0.5, scale=1.0)
    assert math.isclose(values.mean(), dist.mean(), abs_tol=0.01)
    assert math.isclose(values.std(), dist.std(), rel_tol=0.02)


def test_constants_and_gain():
    w = tt.empty(3, 2)
    assert np.all(nn.init.ones_(w).numpy() == 1) and np.all(nn.init.zeros_(w).numpy() == 0)
    assert np.all(nn.init.constant_(w, 0.25).numpy() == 0.25)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="at least 2 dims"):
        nn.init.xavier_uniform_(tt.empty(3))


def test_initializers_work_on_parameters_without_no_grad():
    p = nn.Parameter(tt.empty(4, 4))
    nn.init.normal_(p)
    assert p.requires_grad and p.grad is None


def test_default_layer_initialization_is_pytorchs():
    lin = nn.Linear(50, 400)
    bound = 1 / math.sqrt(50)
    assert np.abs(lin.bias.numpy()).max() <= bound
    assert math.isclose(lin.weight.numpy().std(), bound / math.sqrt(3), rel_tol=0.05)
    emb = nn.Embedding(300, 100)
    assert math.isclose(emb.weight.numpy().std(), 1.0, rel_tol=0.03)
    norm = nn.LayerNorm(5)
    assert np.all(norm.weight.numpy() == 1) and np.all(norm.bias.numpy() == 0)
