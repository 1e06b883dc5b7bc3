"""tt.utils.checkpoint: the same gradients as without it (dropout masks replayed), and the same
calls as torch.utils.checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.utils.checkpoint import checkpoint, checkpoint_sequential


def _model(lib, dropout):
    lib.manual_seed(0)
    return lib.nn.Sequential(
        lib.nn.Linear(6, 16), lib.nn.GELU(), lib.nn.Dropout(dropout),
        lib.nn.Linear(16, 16), lib.nn.Tanh(), lib.nn.Dropout(dropout), lib.nn.Linear(16, 3),
    )  # fmt: skip


def _gradients(model, x, run):
    for p in model.parameters():
        p.grad = None
    x.grad = None
    tt.manual_seed(7)
    loss = (run(model, x) ** 2).sum()
    loss.backward()
    return [loss.item(), x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]


@pytest.mark.parametrize(
    "run",
    [
        lambda m, x: checkpoint(m, x, use_reentrant=False),
        lambda m, x: checkpoint_sequential(m, 3, x, use_reentrant=False),
        lambda m, x: m[6](checkpoint(lambda h: m[3:6](checkpoint(m[:3], h)), x)),
    ],
    ids=["whole", "sequential-3", "nested"],
)
def test_checkpoint_gives_the_gradients_of_the_plain_run(run):
    model = _model(tt, dropout=0.3)  # dropout: the replayed random state must give its masks
    x = tt.tensor(np.random.default_rng(0).standard_normal((5, 6)), requires_grad=True)
    plain = _gradients(model, x, lambda m, v: m(v))
    checked = _gradients(model, x, run)
    for a, b in zip(plain, checked, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_checkpoint_keeps_no_activations_of_the_block():
    block = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    x = tt.randn(2, 4, requires_grad=True)
    y = checkpoint(block, x, use_reentrant=False)
    assert y._ctx.name == "_Checkpoint" and y._ctx.inputs == (x,)  # one node over x, no insides


def test_inputs_without_grad_still_give_the_parameters_theirs():
    block = nn.Linear(4, 2)
    checkpoint(block, tt.randn(3, 4), use_reentrant=False).sum().backward()
    assert block.weight.grad is not None


def test_same_as_torch(torch):
    import torch.utils.checkpoint as tc

    results = []
    for lib, ck, seq in ((torch, tc.checkpoint, tc.checkpoint_sequential),
                         (tt, checkpoint, checkpoint_sequential)):  # fmt: skip
        model = _model(lib, dropout=0.0)
        if lib is tt:
            from tests.compat._compare import copy_weights

            copy_weights(_model(torch, 0.0), model)  # (float64: the torch fixture's default)
        x = lib.tensor(np.random.default_rng(1).standard_normal((4, 6)), requires_grad=True,
                       dtype=lib.float64)  # fmt: skip
        y = seq(model, 2, ck(lambda v: v * 2, x, use_reentrant=False), use_reentrant=False)
        y.sum().backward()
        results.append([y.detach().numpy(), x.grad.numpy(), model[0].weight.grad.numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
