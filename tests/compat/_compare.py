"""Shared helpers for the compat programs: the same weights in both libraries, and comparisons of
everything a training step produces (outputs, loss, every gradient, the parameters after a step).
"""

import contextlib

import numpy as np
import torch

import tinytensor as tt


def as_numpy(t):
    """A torch or tinytensor tensor (or a Python number) as a NumPy array."""
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    if isinstance(t, tt.Tensor):
        return t.detach().numpy()
    return np.asarray(t)


def copy_weights(torch_model, tt_model):
    """Loads torch_model's state_dict into tt_model (the same names in both, checked)."""
    state = torch_model.state_dict()
    assert list(state) == list(tt_model.state_dict()), "state_dict keys differ"
    tt_model.load_state_dict({k: tt.tensor(as_numpy(v)) for k, v in state.items()})


def to_tt(t):
    return tt.tensor(as_numpy(t))


def max_diff(a, b):
    a, b = as_numpy(a), as_numpy(b)
    assert a.shape == b.shape, f"shapes differ: {a.shape} vs {b.shape}"
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))


def grads_by_name(model):
    return {n: p.grad for n, p in model.named_parameters()}


def params_by_name(model):
    return {n: p for n, p in model.named_parameters()}


def assert_same_named(torch_tensors, tt_tensors, atol, what):
    """Every named tensor matches (same names, same order); returns the largest difference."""
    assert list(torch_tensors) == list(tt_tensors), f"{what}: names differ"
    worst = 0.0
    for name in torch_tensors:
        a, b = torch_tensors[name], tt_tensors[name]
        assert (a is None) == (b is None), f"{what} {name}: one is None"
        if a is None:
            continue
        d = max_diff(a, b)
        assert d <= atol, f"{what} {name}: max abs difference {d:.3g} > {atol}"
        worst = max(worst, d)
    return worst


def assert_curves_close(torch_losses, tt_losses, rtol=1e-4):
    a, b = np.asarray(torch_losses), np.asarray(tt_losses)
    assert a.shape == b.shape
    assert np.all(np.isfinite(b)), b
    rel = np.max(np.abs(a - b) / np.abs(a))
    assert rel <= rtol, f"float32 loss curves differ by {rel:.3g} (relative): {a} vs {b}"
    return float(rel)


@contextlib.contextmanager
def default_dtype(name):
    """Both libraries' default dtype set to `name` (how a float32 program is run in float64)."""
    before = torch.get_default_dtype(), tt.get_default_dtype()
    torch.set_default_dtype(getattr(torch, name))
    tt.set_default_dtype(getattr(tt, name))
    try:
        yield
    finally:
        torch.set_default_dtype(before[0])
        tt.set_default_dtype(before[1])
