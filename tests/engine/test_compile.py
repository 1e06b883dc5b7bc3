"""tt.compile: the identity where PyTorch compiles (same module, same function, same results),
in the forms training scripts call it; bad arguments are refused with a clear message."""

import numpy as np
import pytest
import torch

import tinytensor as tt


def test_returns_the_module_itself_and_trains_the_same():
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2).double()
    model = tt.nn.Linear(3, 2).double()
    model.load_state_dict({k: tt.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    unoptimized_model = model
    model = tt.compile(model)
    assert model is unoptimized_model
    assert list(model.state_dict()) == ["weight", "bias"]  # no "_orig_mod." prefix to strip
    x = np.random.default_rng(0).normal(size=(4, 3))
    loss, ref_loss = model(tt.tensor(x)).square().sum(), ref(torch.tensor(x)).square().sum()
    loss.backward()
    ref_loss.backward()
    np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(model.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-12)


def test_decorator_forms():
    @tt.compile
    def double(x):
        return 2 * x

    @tt.compile(mode="max-autotune", fullgraph=True, dynamic=False)
    def square(x):
        return x * x

    assert double(tt.tensor(3.0)).item() == 6.0 and square(tt.tensor(3.0)).item() == 9.0
    assert tt.compile(len, backend="eager", disable=True) is len


def test_bad_arguments():
    with pytest.raises(
        TypeError, match="tt.compile: model must be a Module or a function, got int"
    ):
        tt.compile(3)
    with pytest.raises(ValueError, match="tt.compile: unknown mode 'fastest'"):
        tt.compile(len, mode="fastest")
    with pytest.raises(RuntimeError):  # torch refuses an unknown mode too
        torch.compile(len, mode="fastest")
