"""`Dropout`: zeroes activations at random while training (inverted dropout)."""

from __future__ import annotations

from tinytensor.ops import dropout

from .module import Module


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) in training;
    the identity in eval (`model.eval()`), as `torch.nn.Dropout`."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
