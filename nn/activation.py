"""Activation modules (ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax) and the
`activation_fn` lookup by name."""

from __future__ import annotations

from tinytensor.ops import gelu, log_softmax, relu, sigmoid, silu, softmax, tanh
from tinytensor.ops._checks import check_int, check_real

from .module import Module


class ReLU(Module):
    """max(x, 0). NOTE: relu'(0) = 0, as PyTorch."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace  # as PyTorch: modify x itself (a recorded in-place op)

    def forward(self, x):
        return x.relu_() if self.inplace else relu(x)


class LeakyReLU(Module):
    """x for x > 0, negative_slope·x elsewhere."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        check_real(negative_slope, "LeakyReLU", "negative_slope")
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        from .functional import leaky_relu

        return leaky_relu(x, self.negative_slope)


class Softmax(Module):
    """softmax along `dim`."""

    def __init__(self, dim=None):
        super().__init__()
        if dim is not None:
            check_int(dim, "Softmax", "dim")
        self.dim = dim

    def forward(self, x):
        return softmax(x, -1 if self.dim is None else self.dim)


class LogSoftmax(Module):
    """log_softmax along `dim`."""

    def __init__(self, dim=None):
        super().__init__()
        if dim is not None:
            check_int(dim, "LogSoftmax", "dim")
        self.dim = dim

    def forward(self, x):
        return log_softmax(x, -1 if self.dim is None else self.dim)


class GELU(Module):
    """x·Φ(x) (approximate="none") or GPT-2's tanh approximation (approximate="tanh")."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x·σ(x) (also called swish)."""

    def forward(self, x):
        return silu(x)


class Tanh(Module):
    def forward(self, x):
        return tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return sigmoid(x)


_ACTIVATIONS = {
    "relu": relu,
    "gelu": gelu,
    "gelu_tanh": lambda x: gelu(x, approximate="tanh"),
    "silu": silu,
    "tanh": tanh,
    "sigmoid": sigmoid,
}


def activation_fn(name: str):
    """The function for an activation name: relu, gelu, gelu_tanh (GPT-2's "gelu_new"), silu,
    tanh or sigmoid."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}"
        ) from None
