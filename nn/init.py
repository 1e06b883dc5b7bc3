"""Weight initializers, as `torch.nn.init`: each fills a tensor in place (no graph) and returns it.

Random draws come from tinytensor's seeded generator (`tt.manual_seed`), or `generator=` when
given, so a seed gives the same weights on every run and device.

    w = nn.Parameter(tt.empty(64, 32))
    nn.init.xavier_uniform_(w)
"""

from __future__ import annotations

import math

import numpy as np

from tinytensor.backend import move_array
from tinytensor.function import no_grad
from tinytensor.ops._checks import check_finite, check_real
from tinytensor.random import _rng, normal_array, uniform_array
from tinytensor.tensor import Tensor


def _check(tensor, name):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"init.{name}: expected a Tensor, got {type(tensor).__name__}")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended std multiplier for a nonlinearity, as `torch.nn.init.calculate_gain`."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor, where="init"):
    """fan_in = size(1)·receptive field, fan_out = size(0)·receptive field (PyTorch's rule)."""
    if tensor.ndim < 2:
        raise ValueError(
            f"{where}: fan in and fan out need a tensor with at least 2 dims, got shape "
            f"{tensor.shape}"
        )
    receptive = math.prod(tensor.shape[2:]) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode, where):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, where)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{where}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


@no_grad()
def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills with samples of U(a, b)."""
    _check(tensor, "uniform_")
    check_finite(a, "uniform_", "a"), check_finite(b, "uniform_", "b")
    if a > b:
        raise ValueError(f"uniform_: need a <= b, got a={a}, b={b}")
    tensor._array[...] = uniform_array(tensor.shape, tensor.dtype, tensor.device, a, b, generator)
    return tensor


@no_grad()
def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills with samples of N(mean, std²)."""
    _check(tensor, "normal_")
    check_finite(mean, "normal_", "mean"), check_finite(std, "normal_", "std", low=0.0)
    tensor._array[...] = normal_array(
        tensor.shape, tensor.dtype, tensor.device, mean, std, generator
    )
    return tensor


@no_grad()
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills with N(mean, std²) truncated to [a, b] (absolute bounds, as PyTorch), by inverting
    the normal CDF on a uniform draw between CDF(a) and CDF(b)."""
    from scipy.special import erf, erfinv

    _check(tensor, "trunc_normal_")
    check_finite(mean, "trunc_normal_", "mean")
    check_finite(std, "trunc_normal_", "std", low=0.0, low_open=True)
    if not a < b:
        raise ValueError(f"trunc_normal_: need a < b, got a={a}, b={b}")
    lo = 0.5 * (1 + erf((a - mean) / (std * math.sqrt(2))))
    hi = 0.5 * (1 + erf((b - mean) / (std * math.sqrt(2))))
    u = _rng(generator).uniform(lo, hi, size=tensor.shape)
    values = mean + std * math.sqrt(2) * erfinv(2 * u - 1)
    values = np.clip(values, a, b)  # NOTE: erfinv can round just outside the bounds
    tensor._array[...] = move_array(values.astype(tensor.dtype), tensor.device)
    return tensor


@no_grad()
def constant_(tensor, val):
    _check(tensor, "constant_")
    if not isinstance(val, (bool, Tensor)):
        check_real(val, "constant_", "val")
    tensor._array[...] = val
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain·√(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_uniform_")
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std²) with std = gain·√(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_normal_")
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain·√(3 / fan) (He et al., 2015)."""
    gain = calculate_gain(nonlinearity, a)
    bound = gain * math.sqrt(3.0 / _fan(tensor, mode, "kaiming_uniform_"))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std²) with std = gain / √fan."""
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(_fan(tensor, mode, "kaiming_normal_")), generator)
