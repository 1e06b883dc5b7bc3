"""Fixtures for the nn tests: float64 layers, and copying our weights into torch modules."""

import numpy as np
import pytest

import tinytensor as tt


@pytest.fixture
def float64():
    """Layers built inside the test are float64 (comparisons with PyTorch and gradchecks)."""
    previous = tt.get_default_dtype()
    tt.set_default_dtype(tt.float64)
    yield
    tt.set_default_dtype(previous)


def to_torch(torch, t, requires_grad=False):
    """A float64 (or int64) torch tensor holding a copy of `t`'s values."""
    array = t.numpy() if isinstance(t, tt.Tensor) else np.asarray(t)
    out = torch.tensor(array)
    return out.requires_grad_(True) if requires_grad else out


def copy_linear(torch, ours, theirs):
    """Copies an nn.Linear's weight (and bias) into a torch.nn.Linear."""
    with torch.no_grad():
        theirs.weight.copy_(to_torch(torch, ours.weight))
        if ours.bias is not None:
            theirs.bias.copy_(to_torch(torch, ours.bias))


def assert_close(ours, theirs, atol=1e-10, rtol=1e-7, what=""):
    """Compares one of our Tensors (or arrays) with a torch tensor (or array)."""
    a = ours.numpy() if isinstance(ours, tt.Tensor) else np.asarray(ours)
    b = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, err_msg=what)
