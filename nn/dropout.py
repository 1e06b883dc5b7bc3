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
        if not self.training or self.p == 0.0:
            # NOTE: the identity without the functional's checks: a Transformer block calls
            # three Dropouts, and decoding one token pays each call's fixed cost (p was checked
            # when set; an invalid p set later is never 0.0, so training still reaches them)
            return x
        return dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"  # as torch's (this Dropout never works in place)
