"""torch.autograd.forward_ad: dual numbers, x + t·ε, whose tangents are Jacobian-vector products.

    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        value, jvp = fwAD.unpack_dual(y)      # jvp = J_f(primal) · tangent

The engine has no forward mode (docs/higher_order.md): a dual tensor is a recorded alias of its
primal, and `unpack_dual` computes the tangent when it is asked for, by the double-vjp
construction over the graph from the duals to y (g(w) = Jᵀw is linear in w, J·t = ∂(g(w)·t)/∂w).
The values are forward mode's; the cost is two reverse passes per unpack. `f` must run with
gradients recorded (not under no_grad).
"""

from __future__ import annotations

from collections import namedtuple

from ..creation import zeros_like
from ..function import enable_grad
from ..higher_order import StandIn
from ..tensor import Tensor
from . import engine

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_levels: list[dict] = []  # per open dual level: {id(dual): (dual, tangent)}


def enter_dual_level() -> int:
    _levels.append({})
    return len(_levels) - 1


def exit_dual_level(*, level=None) -> None:
    if not _levels:
        raise RuntimeError("exit_dual_level: no dual level is open")
    _levels.pop()


class dual_level:
    """`with dual_level():` the level that make_dual and unpack_dual work in."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def _level(fn):
    if not _levels:
        raise RuntimeError(f"{fn}: call it inside `with forward_ad.dual_level():`")
    return _levels[-1]


def make_dual(tensor, tangent, *, level=None):
    """The dual number tensor + tangent·ε (a tensor of tensor's values, whose tangent unpack_dual
    gives back). tangent must have tensor's shape."""
    duals = _level("make_dual")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual: tensor and tangent must be Tensors")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise ValueError(
            f"make_dual: the tangent has shape {tuple(tangent.shape)}, the tensor "
            f"{tuple(tensor.shape)}; they must match"
        )
    with enable_grad():
        dual = StandIn.apply(tensor) if tensor.requires_grad else tensor.detach().requires_grad_()
    duals[id(dual)] = (dual, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent): the tangent is J·t over every dual it depends on, None if none."""
    duals = _level("unpack_dual")
    if id(tensor) in duals:
        return UnpackedDualTensor(tensor, duals[id(tensor)][1])
    if not tensor.requires_grad or not duals:
        return UnpackedDualTensor(tensor, None)
    inputs = [d for d, _ in duals.values()]
    tangents = [t for _, t in duals.values()]
    with enable_grad():
        w = zeros_like(tensor).requires_grad_(True)
        g = engine.grad(tensor, inputs, w, retain_graph=True, create_graph=True, allow_unused=True)
        terms = [(gi * t).sum() for gi, t in zip(g, tangents) if gi is not None]
        if not terms:
            return UnpackedDualTensor(tensor, None)
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        if not total.requires_grad:  # J·t does not depend on w: tensor is constant in the duals
            return UnpackedDualTensor(tensor, zeros_like(tensor))
        (jvp,) = engine.grad(total, w, retain_graph=True)
    return UnpackedDualTensor(tensor, jvp)
