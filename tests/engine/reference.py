"""`check_op`: run the same computation in tinytensor and PyTorch (float64) and compare the
forward values and the gradients of every float input.

Inputs are given as NumPy arrays (or plain Python values): float arrays become leaves that require
grad in both libraries, integer and bool arrays become plain tensors, anything else is passed as is.
Both sides backpropagate the same random projection of their outputs.
"""

from __future__ import annotations

import numpy as np
import tinytensor.nn.functional as tt_functional

import tinytensor as tt


def _to_tt(value, dtype):
    if isinstance(value, np.ndarray):
        grad = value.dtype.kind == "f"
        return tt.tensor(value, dtype=dtype if grad else None, requires_grad=grad)
    return value


def _to_torch(torch, value, dtype):
    if isinstance(value, np.ndarray):
        t = torch.from_numpy(value.copy())
        if value.dtype.kind == "f":
            t = t.to(dtype).requires_grad_(True)
        return t
    return value


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _run_both(torch, inputs, ours, theirs, dtype, atol, rtol, where):
    """Both libraries' inputs, outputs (values compared) and Σ outputs·r for a shared random r."""
    theirs = theirs or ours
    tt_dtype, torch_dtype = getattr(tt, dtype), getattr(torch, dtype)
    ins_tt = [_to_tt(v, tt_dtype) for v in inputs]
    ins_torch = [_to_torch(torch, v, torch_dtype) for v in inputs]
    outs_tt = _as_list(ours(tt, tt_functional, *ins_tt))
    outs_torch = _as_list(theirs(torch, torch.nn.functional, *ins_torch))
    assert len(outs_tt) == len(outs_torch), f"{where}{len(outs_tt)} outputs vs {len(outs_torch)}"
    rng = np.random.default_rng(0)
    loss_tt = loss_torch = 0
    for i, (a, b) in enumerate(zip(outs_tt, outs_torch)):
        b_np = b.detach().numpy()
        assert tuple(a.shape) == tuple(b.shape), f"{where}output {i}: {a.shape} vs {b.shape}"
        if b_np.dtype.kind == "f":
            assert a.dtype == tt_dtype, f"{where}output {i} is {a.dtype}, torch's is {b.dtype}"
            np.testing.assert_allclose(a.numpy(), b_np, atol=atol, rtol=rtol, err_msg=where)
            if a.requires_grad and b.requires_grad:
                r = rng.standard_normal(a.shape)
                loss_tt = loss_tt + (a * tt.tensor(r, dtype=tt_dtype)).sum()
                loss_torch = loss_torch + (b * torch.tensor(r, dtype=torch_dtype)).sum()
        else:
            np.testing.assert_array_equal(a.numpy(), b_np, err_msg=where)
    return ins_tt, ins_torch, outs_tt, loss_tt, loss_torch


def check_op(
    torch,
    inputs,
    ours,
    theirs=None,
    dtype="float64",
    atol=1e-10,
    rtol=1e-7,
    grad=True,
    label="",
):
    """Compares `ours(lib, F, *inputs)` with `theirs(torch, torch.nn.functional, *inputs)`.

    `theirs` defaults to `ours`: most calls are written once, since the API has PyTorch's names.
    Returns the tinytensor outputs (a list) for any extra checks.
    """
    where = f"{label}: " if label else ""
    tt_dtype = getattr(tt, dtype)
    ins_tt, ins_torch, outs_tt, loss_tt, loss_torch = _run_both(
        torch, inputs, ours, theirs, dtype, atol, rtol, where
    )
    if not grad or isinstance(loss_tt, int):
        return outs_tt
    loss_tt.backward()
    loss_torch.backward()
    for i, (x, y) in enumerate(zip(ins_tt, ins_torch)):
        if isinstance(x, tt.Tensor) and x.requires_grad:
            expected = np.zeros(y.shape) if y.grad is None else y.grad.numpy()
            assert x.grad is not None or not expected.any(), f"{where}input {i} got no gradient"
            got = np.zeros(x.shape) if x.grad is None else x.grad.numpy()
            if x.grad is not None:
                assert x.grad.dtype == tt_dtype, f"{where}grad of input {i} is {x.grad.dtype}"
            np.testing.assert_allclose(
                got, expected, atol=atol * 10, rtol=rtol * 10, err_msg=f"{where}grad of input {i}"
            )
    return outs_tt


def _derivatives(lib, loss, xs, us, skip):
    """The first derivatives ∂loss/∂x (recorded with create_graph) and the second, ∂/∂x of
    Σ (∂loss/∂x)·u over the inputs not in `skip`: zeros where nothing depends on an input."""
    firsts = lib.autograd.grad(loss, xs, create_graph=True, allow_unused=True)
    total = 0
    for i, (g, u) in enumerate(zip(firsts, us)):
        if g is not None and g.requires_grad and i not in skip:
            total = total + (g * u).sum()
    zeros = [np.zeros(tuple(x.shape)) for x in xs]
    firsts_np = [z if g is None else g.detach().numpy() for g, z in zip(firsts, zeros)]
    if isinstance(total, int):
        return firsts_np, zeros
    seconds = lib.autograd.grad(total, xs, allow_unused=True)
    return firsts_np, [
        zero if s is None or getattr(s, "_is_zerotensor", lambda: False)() else s.detach().numpy()
        for s, zero in zip(seconds, zeros)
    ]


def check_double_backward(
    torch, inputs, ours, theirs=None, dtype="float64", atol=1e-10, rtol=1e-7, label="", **_
):
    """As `check_op`, for the second derivatives: Hessian-vector products of the projected
    loss, ∂/∂x (Σ ∂L/∂x·u), with the same random u on both sides."""
    where = f"{label}: " if label else ""
    ins_tt, ins_torch, _, loss_tt, loss_torch = _run_both(
        torch, inputs, ours, theirs, dtype, atol, rtol, where
    )
    if isinstance(loss_tt, int):
        return
    pairs = [
        (x, y) for x, y in zip(ins_tt, ins_torch) if isinstance(x, tt.Tensor) and x.requires_grad
    ]
    rng = np.random.default_rng(1)
    us = [rng.standard_normal(tuple(x.shape)) for x, _ in pairs]
    torch_firsts, torch_seconds = _derivatives(
        torch, loss_torch, [y for _, y in pairs], [torch.tensor(u) for u in us], skip=()
    )
    # NOTE: a NaN first derivative (the variance of one element) has no second to compare
    skip = {i for i, g in enumerate(torch_firsts) if np.isnan(g).all()}
    tt_us = [tt.tensor(u, dtype=getattr(tt, dtype)) for u in us]
    firsts, seconds = _derivatives(tt, loss_tt, [x for x, _ in pairs], tt_us, skip)
    for i, (got, expected) in enumerate(zip(firsts, torch_firsts)):
        np.testing.assert_allclose(
            got, expected, atol=atol * 10, rtol=rtol * 10, err_msg=f"{where}grad of input {i}"
        )
    for i, (got, expected) in enumerate(zip(seconds, torch_seconds)):
        np.testing.assert_allclose(
            got, expected, atol=atol * 100, rtol=rtol * 100, err_msg=f"{where}Hv of input {i}"
        )
