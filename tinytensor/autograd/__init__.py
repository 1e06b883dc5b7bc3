"""torch.autograd's names: the backward walk (engine.py), `grad`, gradient checks, and the
functional derivatives (functional.py: jacobian, hessian, vjp, jvp, hvp, vhp).

    loss.backward()                                   # .grad of every leaf
    tt.autograd.grad(loss, [x], create_graph=True)    # gradients on a graph of their own
    tt.autograd.gradgradcheck(f, (x,))                # second derivatives, numerically
"""

from ..gradcheck import gradcheck, gradgradcheck
from . import functional
from .engine import BackwardStep, backward, backward_trace, grad, sum_to

__all__ = [
    "BackwardStep",
    "backward",
    "backward_trace",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "sum_to",
]
