"""`LayerNorm` and `RMSNorm`: normalization over the trailing feature dims."""

from __future__ import annotations

from tinytensor.creation import ones, zeros
from tinytensor.ops import layer_norm, rms_norm
from tinytensor.ops._checks import check_finite, sizes

from .module import Module
from .parameter import Parameter


def _shape(normalized_shape, where):
    return sizes((normalized_shape,), where)


def _eps(eps, where):
    """eps > 0 and finite (a NaN eps makes every output NaN; a negative one can divide by 0)."""
    return None if eps is None else float(check_finite(eps, where, "eps", low=0.0))


class LayerNorm(Module):
    """y = (x - mean) / √(var + eps) · weight + bias over the last dims, as `torch.nn.LayerNorm`.

    Args:
        normalized_shape: the trailing dims to normalize over (an int for the last one).
        eps: added to the (biased) variance.
        elementwise_affine: learn `weight` (ones) and `bias` (zeros).
        bias: with elementwise_affine, whether to learn the bias (False: weight only).

    Shape:
        (*, *normalized_shape) -> same shape.
    """

    def __init__(
        self,
        normalized_shape,
        eps=1e-5,
        elementwise_affine=True,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape, "LayerNorm")
        self.eps = _eps(eps, "LayerNorm")
        self.elementwise_affine = elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(zeros(self.normalized_shape, dtype=dtype, device=device))

    def forward(self, x):
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """y = x / √(mean(x²) + eps) · weight: no centring and no bias (T5's LayerNorm, Llama).

    Args:
        normalized_shape: the trailing dims to normalize over.
        eps: added to the mean square; None (the default, as PyTorch) means the machine
            epsilon of the input's dtype. T5 and Llama pass 1e-6.
        elementwise_affine: learn `weight` (ones).

    Shape:
        (*, *normalized_shape) -> same shape.
    """

    def __init__(
        self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None
    ):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape, "RMSNorm")
        self.eps = _eps(eps, "RMSNorm")
        self.elementwise_affine = elementwise_affine
        self.weight = None
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, dtype=dtype, device=device))

    def forward(self, x):
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
