"""torch.autograd's names: the backward walk (engine.py), `grad`, gradient checks, and the
functional derivatives (functional.py: jacobian, hessian, vjp, jvp, hvp, vhp).

    loss.backward()                                   # .grad of every leaf
    tt.autograd.grad(loss, [x], create_graph=True)    # gradients on a graph of their own
    tt.autograd.gradgradcheck(f, (x,))                # second derivatives, numerically
"""

from ..function import enable_grad, inference_mode, no_grad, set_grad_enabled
from ..gradcheck import gradcheck, gradgradcheck
from . import anomaly_mode, forward_ad, function, functional
from .anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .engine import BackwardStep, backward, backward_trace, grad, sum_to
from .function import Function, FunctionCtx, once_differentiable

__all__ = [
    "BackwardStep",
    "anomaly_mode",
    "Function",
    "FunctionCtx",
    "enable_grad",
    "function",
    "inference_mode",
    "no_grad",
    "once_differentiable",
    "set_grad_enabled",
    "backward",
    "detect_anomaly",
    "forward_ad",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "set_detect_anomaly",
    "backward_trace",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "sum_to",
]
