"""`Dropout`: zeroes activations at random while training (inverted dropout)."""

from __future__ import annotations

from tinytensor.ops import dropout
from tinytensor.ops._checks import check_probability

from .module import Module


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) in training;
    the identity in eval (`model.eval()`), as `torch.nn.Dropout`."""

    def __init__(self, p=0.5):
        super().__init__()
        check_probability(p, "Dropout")
        self.p = float(p)

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
