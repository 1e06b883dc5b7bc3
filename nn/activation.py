"""Activation modules (ReLU, GELU, SiLU, Tanh, Sigmoid) and the `activation_fn` lookup by name."""

from __future__ import annotations

from tinytensor.ops import gelu, relu, sigmoid, silu, tanh

from .module import Module


class ReLU(Module):
    """max(x, 0). NOTE: relu'(0) = 0, as PyTorch."""

    def forward(self, x):
        return relu(x)


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
