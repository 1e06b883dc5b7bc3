"""`Linear` (y = x·Wᵀ + b) and `Identity`."""

from __future__ import annotations

import math

from tinytensor.creation import empty
from tinytensor.ops import linear
from tinytensor.ops._checks import check_int

from . import init
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """y = x·Wᵀ + b, as `torch.nn.Linear`.

    Args:
        in_features, out_features: sizes of the last dim of x and y.
        bias: add the learned bias b (out_features,).
        device, dtype: where and in which float type to create the weights.

    Shape:
        x (..., in_features) -> y (..., out_features); `weight` is (out_features, in_features).

    Initialized as PyTorch: W ~ kaiming_uniform(a=√5), i.e. U(±1/√in), and b ~ U(±1/√in).

    Example:
        >>> nn.Linear(4, 2)(tt.randn(3, 4)).shape
        (3, 2)
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = check_int(in_features, "Linear", "in_features", minimum=0)
        self.out_features = check_int(out_features, "Linear", "out_features", minimum=0)
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        self.bias = Parameter(empty(out_features, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Identity(Module):
    """Returns its input unchanged (a placeholder where a layer is optional)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x
