"""Exercise 6: the VJP of GELU, exact and tanh-approximated.  Read 06_gelu.md first.

Write `GELU.backward` below, then check it:
    python examples/exercises/check.py gelu
"""

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
        """g = dL/dz. Return dL/dx, for both values of self.approximate."""
        raise NotImplementedError(
            "GELU.backward is yours to write: derive both derivatives in 06_gelu.md, then "
            "replace this `raise` with your code"
        )
