"""torch.testing: `assert_close` with torch's per-dtype tolerances and mismatch report, and
`make_tensor`.

    tt.testing.assert_close(actual, expected)        # |a - e| <= atol + rtol·|e| elementwise
    x = tt.testing.make_tensor(3, 4, dtype=tt.float32, device="cpu", low=-1, high=1)

Default tolerances (rtol, atol) by dtype, torch's: float16 (1e-3, 1e-5), float32 (1.3e-6,
1e-5), float64 (1e-7, 1e-7), integers and bool (0, 0). Tensors, numbers, sequences and
mappings of them are compared, recursively; a failure says which item.
"""

from __future__ import annotations

import collections.abc
import math

import numpy as np

from . import dtypes
from .creation import tensor as _tensor
from .random import _rng
from .tensor import Tensor

_TOLERANCES = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
    np.dtype(np.complex64): (1.3e-6, 1e-5),
    np.dtype(np.complex128): (1e-7, 1e-7),
}


def _tolerances(dtype, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"assert_close: both rtol and atol must be given, or neither: got rtol={rtol!r} "
            f"and atol={atol!r}"
        )
    if rtol is not None:
        return rtol, atol
    return _TOLERANCES.get(np.dtype(dtype), (0.0, 0.0))


def assert_close(
    actual,
    expected,
    *,
    allow_subclasses=True,
    rtol=None,
    atol=None,
    equal_nan=False,
    check_device=True,
    check_dtype=True,
    check_layout=True,
    check_stride=False,
    msg=None,
):
    """Raises AssertionError, as torch.testing.assert_close, unless actual is close to expected."""
    _compare(actual, expected, (), rtol, atol, equal_nan, check_device, check_dtype, msg)


def _where(path):
    if not path:
        return ""
    return "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)


def _compare(actual, expected, path, rtol, atol, equal_nan, check_device, check_dtype, msg):
    if isinstance(expected, collections.abc.Mapping) and not isinstance(expected, Tensor):
        if not isinstance(actual, collections.abc.Mapping) or set(actual) != set(expected):
            raise AssertionError(
                f"The keys of the mappings do not match{_where(path)}: "
                f"{sorted(map(repr, actual)) if isinstance(actual, dict) else actual!r} != "
                f"{sorted(map(repr, expected))}"
            )
        for key in expected:
            _compare(actual[key], expected[key], (*path, key), rtol, atol, equal_nan,
                     check_device, check_dtype, msg)  # fmt: skip
        return
    if isinstance(expected, collections.abc.Sequence) and not isinstance(expected, str):
        if not isinstance(actual, collections.abc.Sequence) or len(actual) != len(expected):
            raise AssertionError(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}"
                f"{_where(path)}"
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, (*path, i), rtol, atol, equal_nan, check_device, check_dtype, msg)
        return
    if isinstance(expected, Tensor) or isinstance(actual, Tensor):
        _compare_tensors(actual, expected, path, rtol, atol, equal_nan, check_device,
                         check_dtype, msg)  # fmt: skip
        return
    _compare_scalars(actual, expected, path, rtol, atol, equal_nan, msg)


def _attribute_mismatch(name, a, e, path):
    return AssertionError(
        f"The values for attribute '{name}' do not match: {a} != {e}.{_where(path)}"
    )


def _compare_tensors(actual, expected, path, rtol, atol, equal_nan, check_device, check_dtype, msg):
    if not isinstance(actual, Tensor) or not isinstance(expected, Tensor):
        raise TypeError(
            f"assert_close: comparing a {type(actual).__name__} with a "
            f"{type(expected).__name__}{_where(path)}; both must be Tensors here"
        )
    if tuple(actual.shape) != tuple(expected.shape):
        raise _attribute_mismatch("shape", tuple(actual.shape), tuple(expected.shape), path)
    if check_device and actual.device != expected.device:
        raise _attribute_mismatch("device", actual.device, expected.device, path)
    a, e = actual.detach().cpu().numpy(), expected.detach().cpu().numpy()
    if check_dtype and a.dtype != e.dtype:
        raise _attribute_mismatch("dtype", f"tinytensor.{a.dtype}", f"tinytensor.{e.dtype}", path)
    common = np.result_type(a, e)
    rtol, atol = _tolerances(common, rtol, atol)
    a, e = a.astype(common), e.astype(common)
    exact = rtol == 0 and atol == 0
    close = _close(a, e, rtol, atol, equal_nan)
    if close.all():
        return
    if msg is not None:
        raise AssertionError(msg(_report(a, e, close, rtol, atol, exact)) if callable(msg) else msg)
    raise AssertionError(_report(a, e, close, rtol, atol, exact) + _where(path))


def _close(a, e, rtol, atol, equal_nan):
    if a.dtype.kind in "biu":
        return a == e
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(a - e) <= atol + rtol * np.abs(e)
    close |= a == e  # infinities of one sign
    if equal_nan:
        close |= np.isnan(a) & np.isnan(e)
    return close


def _report(a, e, close, rtol, atol, exact):
    kind = "equal" if exact else "close"
    total, bad = close.size, int((~close).sum())
    float_kind = a.dtype if a.dtype.kind in "fc" else dtypes.get_default_dtype()
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = (
            np.abs(a.astype(float_kind) - e.astype(float_kind))
            if a.dtype.kind != "b"
            else (a != e).astype(float_kind)
        )
        relative = diff / np.abs(e.astype(float_kind))
    diff_shown = np.where(close, 0, diff)
    relative_shown = np.where(close, 0, np.nan_to_num(relative, nan=np.inf))
    i_abs = np.unravel_index(int(np.argmax(diff_shown)), a.shape) if a.shape else ()
    i_rel = np.unravel_index(int(np.argmax(relative_shown)), a.shape) if a.shape else ()
    greatest_abs = diff[i_abs]
    greatest_abs = int(greatest_abs) if a.dtype.kind in "biu" else float(greatest_abs)
    lines = [
        f"Tensor-likes are not {kind}!",
        "",
        f"Mismatched elements: {bad} / {total} ({100 * bad / total:.1f}%)",
        f"Greatest absolute difference: {greatest_abs} at index {tuple(int(k) for k in i_abs)}"
        + ("" if exact else f" (up to {atol} allowed)"),
        f"Greatest relative difference: {float(relative[i_rel])} at index "
        f"{tuple(int(k) for k in i_rel)}" + ("" if exact else f" (up to {rtol} allowed)"),
    ]
    return "\n".join(lines)


def _compare_scalars(actual, expected, path, rtol, atol, equal_nan, msg):
    if not isinstance(actual, (int, float, complex)) or not isinstance(
        expected, (int, float, complex)
    ):
        if actual == expected:
            return
        raise AssertionError(f"Objects are not equal: {actual!r} != {expected!r}{_where(path)}")
    if isinstance(expected, bool) or (isinstance(expected, int) and isinstance(actual, int)):
        if actual == expected:
            return
        raise AssertionError(
            f"Scalars are not equal!\n\nExpected {expected} but got {actual}.\nAbsolute "
            f"difference: {abs(actual - expected)}\nRelative difference: "
            f"{abs(actual - expected) / abs(expected) if expected else math.inf}{_where(path)}"
        )
    rtol, atol = (1e-7, 1e-7) if rtol is None else (rtol, atol)
    if abs(actual - expected) <= atol + rtol * abs(expected) or actual == expected:
        return
    if equal_nan and math.isnan(actual) and math.isnan(expected):
        return
    if msg is not None:
        raise AssertionError(msg)
    diff = abs(actual - expected)
    raise AssertionError(
        f"Scalars are not close!\n\nExpected {expected} but got {actual}.\nAbsolute difference: "
        f"{diff} (up to {atol} allowed)\nRelative difference: "
        f"{diff / abs(expected) if expected else math.inf} (up to {rtol} allowed){_where(path)}"
    )


def make_tensor(
    *shape,
    dtype,
    device=None,
    low=None,
    high=None,
    requires_grad=False,
    noncontiguous=False,
    exclude_zero=False,
    memory_format=None,
    generator=None,
):
    """A random tensor of `shape` (torch.testing.make_tensor): uniform in [low, high), by default
    [-9, 9) for floats, [-9, 10) for signed integers, [0, 10) for unsigned ones, bools at random;
    exclude_zero replaces zeros by the smallest positive value (floats) or 1."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dtype = np.dtype(dtype)
    rng = _rng(generator)
    if dtype.kind == "b":
        values = rng.random(shape) < 0.5
    elif dtype.kind in "iu":
        lo = (0 if dtype.kind == "u" else -9) if low is None else math.ceil(low)
        hi = 10 if high is None else math.ceil(high)
        values = rng.integers(lo, hi, size=shape)
    else:
        lo, hi = (-9.0 if low is None else low), (9.0 if high is None else high)
        if lo >= hi:
            raise ValueError(f"make_tensor: low ({lo}) must be less than high ({hi})")
        values = rng.uniform(lo, hi, size=shape)
    values = np.asarray(values).astype(dtype)
    if exclude_zero:
        tiny = np.finfo(dtype).tiny if dtype.kind == "f" else 1
        values = np.where(values == 0, np.asarray(tiny, dtype), values)
    result = _tensor(values, dtype=dtype, device=device)
    if noncontiguous and result.numel() > 1:  # the same values in every other element
        doubled = _tensor(np.repeat(values[..., None], 2, axis=-1), dtype=dtype, device=device)
        result = doubled[..., 0]
    if requires_grad:
        result.requires_grad_(True)
    return result
