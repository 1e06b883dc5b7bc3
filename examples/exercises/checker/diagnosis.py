"""What is wrong with one gradient, and a hint when the mistake has a recognisable shape.

`diagnose` compares the gradient a learner's backward returned for one input with the engine's
exact gradient and with central differences, and returns a `Finding`: pass or fail, one line on
the problem, the worst element (index, the learner's value and the numerical value), and hints.
It never prints the expected gradient as a whole: the point is that the learner finds the fix.

The hints, in the order they are tried:
    None returned, not an array            -> what backward must return
    wrong shape                            -> transposed? a broadcast not reduced? g not expanded?
                                              a dim summed away? the sum over the wrong dims?
    wrong dtype                            -> where a float64 array sneaks in
    NaN / inf                              -> the usual causes (0/0, 0·inf, log 0, overflow)
    wrong values: all zeros, sign flipped, a constant factor (named when it is 1/N, 1/√d,
                  N/(N-1), ...),
                  transposed, an error that is constant along one dim (a missing mean/sum term)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import tinytensor as tt

# NOTE: against the engine's gradient (exact up to rounding) a correct VJP agrees to ~1e-12;
# against central differences (ε = 1e-6, float64) to ~1e-8. Both tolerances leave a wide margin
# and still catch any real mistake, which is off by far more.
ATOL, RTOL = 1e-6, 1e-5
NUMERICAL_ATOL, NUMERICAL_RTOL = 1e-5, 1e-3


@dataclass
class Finding:
    """The verdict on one gradient in one case. `kinds` names the problem and the hints that
    fired (for tests and autograders): none, type, shape, dtype, nonfinite, values, transposed,
    reduce, expand, layout, zeros, sign, factor (named: the factor is a named size), linear,
    offset, hint (an exercise's own hint). `mistakes` holds the known wrong derivations that
    give exactly this gradient, as (key, hint): see the mistakes package."""

    ok: bool
    problem: str = ""
    detail: str = ""
    hints: list[str] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    factor: float | None = None
    mistakes: list[tuple[str, str]] = field(default_factory=list)


PASS = Finding(True)


def _close(a, b) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL))


def _swap(a):
    return a.swapaxes(-1, -2)


def _index(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ("," if len(idx) == 1 else "") + ")"


def _number(v) -> str:
    return f"{float(v):.6g}"


def _broadcast_axes(small, big):
    """The axes of `big` that broadcasting `small` to `big` added or stretched, or None if
    `small` does not broadcast to `big`."""
    if len(small) > len(big):
        return None
    lead = len(big) - len(small)
    axes = list(range(lead))
    for i, n in enumerate(small):
        if n == big[lead + i]:
            continue
        if n != 1:
            return None
        axes.append(lead + i)
    return tuple(axes)


def _sum_to(a, shape, axes):
    return a.sum(axis=axes, keepdims=True).reshape(shape) if axes else a.reshape(shape)


def _dims(axes) -> str:
    if len(axes) == 1:
        return f"dim {axes[0]}"
    return "dims " + ", ".join(str(a) for a in axes[:-1]) + f" and {axes[-1]}"


def _describe_axes(axes, lead):
    """'dim 0, which broadcasting added, and dim 2, which it stretched from size 1 (...)'."""
    added = [a for a in axes if a < lead]
    stretched = [a for a in axes if a >= lead]
    words = []
    if added:
        words.append(f"{_dims(added)}, which broadcasting added in front")
    if stretched:
        words.append(
            f"{_dims(stretched)}, which it stretched from size 1 (sum with keepdims=True so "
            f"{'they stay' if len(stretched) > 1 else 'it stays'} size 1)"
        )
    return ", and ".join(words)


def _returned_wrongly(yours, like):
    """A Finding when `yours` is not an array at all, else None."""
    if yours is None:
        return Finding(
            False,
            "backward returned None for it, but it needs a gradient",
            hints=[
                "return one gradient per input, in the order of forward's arguments; None is "
                "only for inputs whose self.needs_input_grad[i] is False"
            ],
            kinds={"none"},
        )
    if isinstance(yours, tt.Tensor):
        return Finding(
            False,
            "backward returned a Tensor",
            hints=["backward works on raw NumPy arrays: compute with g and the saved arrays"],
            kinds={"type"},
        )
    if not isinstance(yours, (np.ndarray, np.generic)):
        return Finding(
            False,
            f"backward returned a {type(yours).__name__}, not a NumPy array",
            hints=[f"return an np.ndarray of shape {like.shape} (the input's shape)"],
            kinds={"type"},
        )
    return None


def _shape_finding(yours, expected, output_shape):
    """Wrong shape: say which shape it has and what that suggests."""
    finding = Finding(
        False,
        f"wrong shape: your gradient is {yours.shape}, the input is {expected.shape}",
        kinds={"shape"},
    )
    hint = None
    transposable = yours.ndim >= 2 and expected.ndim >= 2
    if transposable and yours.shape == _swap(expected).shape and _close(yours, _swap(expected)):
        finding.kinds.add("transposed")
        hint = (
            "your gradient is exactly the transpose of the right one: check the order of the "
            "factors and which one is transposed ((AB)ᵀ = BᵀAᵀ); match the shapes: "
            f"the result must be {expected.shape}"
        )
    elif (axes := _broadcast_axes(expected.shape, yours.shape)) is not None:
        finding.kinds.add("reduce")
        lead = yours.ndim - expected.ndim
        hint = (
            f"forgot to reduce a broadcast? {yours.shape} is the broadcast shape; the forward "
            f"stretched this input to it, so its gradient must be summed over "
            f"{_describe_axes(axes, lead)}, to get back to {expected.shape}"
        )
        if _close(_sum_to(yours, expected.shape, axes), expected):
            hint += ". After that sum your values would be right"
    elif yours.shape == tuple(output_shape):
        finding.kinds.add("expand")
        hint = (
            f"your gradient has the output's shape {yours.shape}; the input is {expected.shape}. "
            "Every input element needs its own gradient: put g back over the dims the forward "
            "reduced (np.expand_dims, then np.broadcast_to or multiply by an array of the "
            "input's shape)"
        )
    elif 0 < yours.ndim < expected.ndim and yours.shape == expected.shape[-yours.ndim :]:
        finding.kinds.add("reduced-away")
        lost = _dims(tuple(range(expected.ndim - yours.ndim)))
        hint = (
            f"your gradient lost {lost} of the input: a sum or mean over {lost} too many. Every "
            "element of the input gets its own gradient, so it keeps the input's shape"
        )
    elif yours.ndim == expected.ndim and sorted(yours.shape) != sorted(expected.shape):
        finding.kinds.add("wrong-dims")
        diffs = [
            f"dim {i} is {a} where the input has {b}"
            for i, (a, b) in enumerate(zip(yours.shape, expected.shape))
            if a != b
        ]
        hint = (
            "; ".join(diffs) + ": the sum (or the reshape) went over the wrong dims. Count the "
            "dims from the right: broadcasting lines shapes up at their last dim"
        )
    elif yours.size == expected.size:
        finding.kinds.add("layout")
        hint = (
            "the right number of elements in the wrong layout: a transpose or reshape too many "
            "(or too few)?"
        )
    if hint:
        finding.hints.append(hint)
    return finding


def _nonfinite_finding(yours, expected):
    bad = ~np.isfinite(yours) & np.isfinite(expected)
    if not bad.any():
        return None
    first = _index(np.argwhere(bad)[0])
    nans, infs = int(np.isnan(yours).sum()), int(np.isinf(yours).sum())
    what = " and ".join(
        s for s in (f"{nans} NaN" if nans else "", f"{infs} inf" if infs else "") if s
    )
    return Finding(
        False,
        f"{what} of {yours.size} elements (the first at index {first})",
        hints=[
            "NaN comes from 0/0, inf - inf, 0·inf (a masked -inf score times 0), sqrt or log of "
            "a negative number; inf from dividing by 0 or exp of a large number. Work with "
            "the values forward saved (softmax probabilities, 1/σ) rather than recomputing "
            "exp or dividing by something that can be 0"
        ],
        kinds={"nonfinite"},
    )


def _named_factor(c, constants):
    """Explains a factor c that equals one of the case's named sizes (or its inverse)."""
    for name, value in constants.items():
        if np.isclose(c, value, rtol=1e-3):
            return (
                f"{_number(c)} = {name}: the right gradient divides by {name} and yours does "
                f"not; did you forget a 1/{name}?"
            )
        if np.isclose(c, 1 / value, rtol=1e-3):
            return (
                f"{_number(c)} = 1/{name}: yours divides by {name} where the right gradient "
                f"does not (or divides twice)"
            )
    for name, value in constants.items():
        if value > 2 and np.isclose(c, value / (value - 1), rtol=1e-4):
            return (
                f"{_number(c)} = {name}/({name}-1): yours divides by {name}-1 where the right "
                f"gradient divides by {name} (N−1 is the unbiased variance; the forward's is "
                f"biased, 1/{name})"
            )
        if value > 2 and np.isclose(c, (value - 1) / value, rtol=1e-4):
            return f"{_number(c)} = ({name}-1)/{name}: yours has {name}-1 where {name} belongs"
    if np.isclose(c, 2, rtol=1e-3):
        return "a factor 2: a term counted twice, or a 2 from d(x²)/dx where there is none?"
    if np.isclose(c, 0.5, rtol=1e-3):
        return "a factor ½: a term missing its 2 (d(x²)/dx = 2x), or half of it counted?"
    return None


def _value_hints(yours, expected, constants):
    """Hints for an array of the right shape and dtype whose values are wrong."""
    flat_e = expected.reshape(-1)
    if not yours.any() and flat_e.any():
        return (
            ["your gradient is all zeros: g never reaches it (a mask or factor that is always 0?)"],
            {"zeros"},
            None,
        )
    if _close(yours, -expected):
        return (
            [
                "sign flipped: yours is exactly minus the right gradient. Check the sign of each "
                "term (d/dx e⁻ˣ = -e⁻ˣ, d/dx (1/u) = -u'/u², d/dx (a - b) ...)"
            ],
            {"sign"},
            -1.0,
        )
    energy = float(flat_e @ flat_e)
    if energy > 0:
        c = float(yours.reshape(-1) @ flat_e) / energy
        if _close(yours, c * expected) and not np.isclose(c, 1.0, rtol=1e-4):
            hint = f"off by a constant factor: yours is {_number(c)} × the right gradient"
            named = _named_factor(c, constants)
            kinds = {"factor", "named"} if named else {"factor"}
            return [hint + (f". {named}" if named else "")], kinds, c
    if yours.ndim >= 2 and yours.shape[-1] == yours.shape[-2] and _close(yours, _swap(expected)):
        return (
            [
                "your gradient equals the transpose of the right one: check the order of the "
                "factors and which is transposed ((AB)ᵀ = BᵀAᵀ). Square shapes hide this; on a "
                "non-square one it would be a shape error"
            ],
            {"transposed"},
            None,
        )
    error = yours - expected
    for axis in range(yours.ndim):
        if yours.shape[axis] > 1:
            along = error.mean(axis=axis, keepdims=True)
            if np.allclose(error, along, rtol=RTOL, atol=ATOL):
                return (
                    [
                        f"the error is the same for every element along dim {axis} (it changes "
                        "only across the other dims): a missing or extra term that is constant "
                        f"along dim {axis}, such as a mean or sum over dim {axis}?"
                    ],
                    {"offset"},
                    None,
                )
    return [], set(), None


def diagnose(yours, *, expected, numerical, output_shape, constants) -> Finding:
    """The verdict on `yours`, one input's gradient, against the engine's and the numerical one.

    Args:
        yours: what the learner's backward returned for this input.
        expected: the engine's gradient (float64), of the input's shape and dtype.
        numerical: central differences of the learner's forward, float64.
        output_shape: the forward output's shape (to recognise a gradient of that shape).
        constants: named sizes of the case ({"N": 4}) that a constant factor may come from.
    """
    wrong = _returned_wrongly(yours, expected)
    if wrong:
        return wrong
    yours = np.asarray(yours)
    if yours.shape != expected.shape:
        return _shape_finding(yours, expected, output_shape)
    if yours.dtype != expected.dtype:
        return dtype_finding(yours, expected.dtype)
    nonfinite = _nonfinite_finding(yours, expected)
    if nonfinite:
        return nonfinite
    excess = np.maximum(
        np.abs(yours - expected) - (ATOL + RTOL * np.abs(expected)),
        np.abs(yours - numerical) - (NUMERICAL_ATOL + NUMERICAL_RTOL * np.abs(numerical)),
    )
    bad = excess > 0
    if not bad.any():
        return PASS
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    hints, kinds, factor = _value_hints(yours, expected, constants)
    return Finding(
        False,
        "wrong values",
        f"{int(bad.sum())} of {bad.size} elements wrong; worst at index {_index(worst)}: "
        f"yours {_number(yours[worst])}, numerical {_number(numerical[worst])}",
        hints,
        {"values"} | kinds,
        factor,
    )


def dtype_finding(yours, dtype) -> Finding:
    """A gradient whose dtype differs from its input's."""
    if yours.dtype.kind == "b":
        hint = f"Yours is {yours.dtype}: did you return a mask (x > 0) without multiplying it by g?"
    elif yours.dtype.kind in "iu":
        hint = (
            f"Yours is {yours.dtype}: did you start from np.zeros_like of an integer array (the "
            "ids?) or np.zeros(..., dtype=int)?"
        )
    elif yours.dtype.kind != "f":
        hint = f"Yours is {yours.dtype}: compute it from g and the saved float arrays"
    elif yours.dtype.itemsize > np.dtype(dtype).itemsize:
        hint = (
            f"A {yours.dtype} array crept in: np.zeros(shape) and np.ones(shape) default to "
            "float64 (pass dtype=g.dtype or use np.zeros_like), and a NumPy float64 scalar such "
            "as np.sqrt(d) promotes float32 arrays (use math.sqrt for Python numbers)"
        )
    else:
        hint = "A lower-precision array crept in (an explicit astype or dtype= somewhere?)"
    return Finding(
        False,
        f"wrong dtype: your gradient is {yours.dtype}, the input is {np.dtype(dtype)}",
        hints=[f"a gradient must have its input's dtype ({np.dtype(dtype)}). " + hint],
        kinds={"dtype"},
    )
