"""The wrong derivations learners really write, as gradients the checker can recognise.

For every exercise this package lists the classic mistakes (statistics held constant, the softmax
Jacobian's diagonal alone, Σg for Σg·p, a sum over the wrong axis, a missing transpose or 1/N,
N−1 for N, ...). Each `Mistake` computes, from the case's inputs, the gradient that mistake
gives; when a learner's gradient equals it, the checker says which mistake it is, in words, and
points at the step of the exercise's .md where the missing term comes from. Two more are tried
on every exercise: the gradients returned in the wrong order, and g returned unchanged. Where
an exercise knows why a learner leaves an input out (14: gy taken for a constant), a None
returned for it is named too (`recognise_none`).

The hints name the mistake and the term that is missing; they never print the right formula.
"""

from __future__ import annotations

import numpy as np

from ..diagnosis import _named_factor
from .attention import ATTENTION
from .base import Mistake, _close
from .elementwise import GELU, RELU, SIGMOID
from .embedding import EMBEDDING
from .norms import BATCHNORM, LAYERNORM, RMSNORM
from .products import BATCHED_MATMUL, MATMUL
from .reductions import BROADCAST_ADD, MEAN, SUM
from .second_order import NO_GY_PATH, SOFTMAX_BACKWARD, TANH_BACKWARD
from .softmax import CROSS_ENTROPY, SOFTMAX
from .terms import _term_mistake

BY_FUNCTION: dict[str, tuple[Mistake, ...]] = {
    "ReLU": RELU,
    "Sigmoid": SIGMOID,
    "BroadcastAdd": BROADCAST_ADD,
    "SumDim": SUM,
    "MeanDim": MEAN,
    "MatMul": MATMUL,
    "BatchedMatMul": BATCHED_MATMUL,
    "GELU": GELU,
    "Embedding": EMBEDDING,
    "Softmax": SOFTMAX,
    "SoftmaxCrossEntropy": CROSS_ENTROPY,
    "RMSNorm": RMSNORM,
    "LayerNorm": LAYERNORM,
    "BatchNorm": BATCHNORM,
    "CausalAttention": ATTENTION,
    "TanhBackward": TANH_BACKWARD,
    "SoftmaxBackward": SOFTMAX_BACKWARD,
}

# A None returned for an input that needs a gradient, where an exercise knows why a learner
# leaves that input out: {(function, input name): (key, hint)}.
NONE_RETURNED: dict[tuple[str, str], tuple[str, str]] = {
    (function, "gy"): named for function, named in NO_GY_PATH.items()
}


def _rescaled(a, b) -> bool:
    """True when a is b times a constant (or zero): such a mistake cannot be told apart from
    another factor on top of it, so it is not combined with one."""
    if a.shape != b.shape:
        return False
    energy = float((b * b).sum())
    if energy == 0 or not (a * a).sum() > 0:
        return True
    return _close(a, float((a * b).sum()) / energy * b)


def recognise(function, name, returned, case, g, right) -> list[tuple[str, str]]:
    """The mistakes whose gradient for input `name` equals the one the learner returned for it
    (`returned`: every input's, by name): [(key, hint)], best first.

    A mistake counts only where it makes a difference: if its gradient equals the right one on
    this case, it says nothing here. Two mistakes are tried for every op: the gradients
    returned in the wrong order, and g returned as it came. A gradient that equals a known
    mistake times a named size (N, D, √d) is named too, with the factor."""
    yours = np.asarray(returned[name])
    found, near = [], []
    for mistake in BY_FUNCTION.get(function, ()):
        try:
            wrong = mistake.grads(case.arrays, case.params, g, right).get(name)
        except Exception:  # a mistake that does not apply to this case's shapes
            continue
        if wrong is None or _close(wrong, right[name]):
            continue
        wrong = np.asarray(wrong)
        if _close(yours, wrong):
            if mistake.key not in (k for k, _ in found):
                found.append((mistake.key, mistake.says))
        elif wrong.shape == yours.shape and not _rescaled(wrong, right[name]):
            c = float((yours * wrong).sum()) / float((wrong * wrong).sum())
            named = _named_factor(c, case.constants) if c != 1 else None
            if named and _close(yours, c * wrong):
                near.append((mistake.key, f"{mistake.says}; and on top of that, {named}"))
    for other, grad in right.items():
        if other == name or not _close(yours, grad) or _close(right[name], grad):
            continue
        theirs = returned.get(other)
        if theirs is not None and _close(np.asarray(theirs), right[name]):  # both ways round
            order = ", ".join(right)
            found.append(
                (
                    "swapped",
                    f"your gradient for {name} is exactly the right gradient for {other}, and "
                    f"the other way round: the gradients are returned in the wrong order. Return "
                    f"them in the order forward takes its inputs: {order}",
                )
            )
    swapped = [item for item in found if item[0] == "swapped"]
    if swapped:  # seen from both sides: what else the gradient resembles is a coincidence
        return swapped
    if found:  # the exercise's own mistakes
        return found
    with np.errstate(all="ignore"):
        by_term = _term_mistake(function, name, yours, case, g, right)
    if by_term:
        return [by_term]
    if g.shape == right[name].shape and _close(yours, g) and not _close(right[name], g):
        found.append(
            (
                "returned-g",
                "you returned g as it came: the chain rule multiplies it by the local "
                "derivative of the output with respect to this input",
            )
        )
    return found or near[:1]


def recognise_none(function, name) -> list[tuple[str, str]]:
    """[(key, hint)] when the exercise knows why a learner returns None for input `name`."""
    named = NONE_RETURNED.get((function, name))
    return [named] if named else []
