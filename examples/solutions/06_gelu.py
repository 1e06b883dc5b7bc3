"""Solution to exercise 6: the VJP of GELU, exact (erf) and tanh-approximated."""

import math

import numpy as np
from scipy.special import erf

import tinytensor as tt

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


class GELU(tt.Function):
    """z = x·Φ(x), Φ the standard normal CDF; or its tanh approximation
    z = x/2·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)."""

    def forward(self, x, approximate="none"):
        self.x, self.approximate = x, approximate  # kept for backward
        if approximate == "tanh":
            self.t = np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3))
            return 0.5 * x * (1 + self.t)
        self.cdf = 0.5 * (1 + erf(x / math.sqrt(2)))
        return x * self.cdf

    def backward(self, g):
        """exact: dL/dx = g·(Φ(x) + x·φ(x)), φ(x) = e^(-x²/2)/√(2π);
        tanh:  dL/dx = g·(½(1 + t) + ½x·(1 - t²)·√(2/π)·(1 + 3·0.044715·x²))."""
        x = self.x
        if self.approximate == "tanh":
            t = self.t
            du_dx = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx)
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        return g * (self.cdf + x * pdf)
