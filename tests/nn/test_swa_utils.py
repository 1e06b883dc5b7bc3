"""tt.optim.swa_utils against torch.optim.swa_utils: the same SWA / EMA averages, SWALR's
learning rates step by step, and update_bn's BatchNorm statistics."""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.optim import swa_utils

from ..compat._compare import as_numpy, copy_weights


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                             lib.nn.Linear(4, 2))  # fmt: skip


def _train_and_average(lib, swa, model, averaged, steps=4):
    opt = lib.optim.SGD(model.parameters(), lr=0.5)
    sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos")
    rng = np.random.default_rng(0)
    lrs = []
    for _ in range(steps):
        x = lib.tensor(rng.standard_normal((8, 3)))
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()
        averaged.update_parameters(model)
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    batches = [lib.tensor(rng.standard_normal((6, 3))) for _ in range(3)]
    swa.update_bn(batches, averaged)
    return lrs, {k: as_numpy(v) for k, v in averaged.state_dict().items()}


@pytest.mark.parametrize("kind", ["swa", "ema"])
def test_averages_lrs_and_bn_statistics_match_torch(torch, kind):
    from torch.optim import swa_utils as theirs

    results = []
    tt.set_default_dtype(tt.float64)  # as the torch fixture's: the comparison is in float64
    try:
        for lib, swa in ((torch, theirs), (tt, swa_utils)):
            model = _model(lib)
            if lib is tt:
                copy_weights(_model(torch), model)
            extra = {} if kind == "swa" else {"multi_avg_fn": swa.get_ema_multi_avg_fn(0.9)}
            results.append(_train_and_average(lib, swa, model, swa.AveragedModel(model, **extra)))
    finally:
        tt.set_default_dtype(tt.float32)
    (lrs_t, state_t), (lrs_o, state_o) = results
    np.testing.assert_allclose(lrs_o, lrs_t, rtol=1e-12)
    assert list(state_o) == list(state_t)
    for key in state_t:
        np.testing.assert_allclose(state_o[key], state_t[key], rtol=1e-10, atol=1e-12, err_msg=key)


def test_averaged_model_is_a_module_class():
    model = tt.nn.Linear(2, 2)
    averaged = swa_utils.AveragedModel(model)
    assert isinstance(averaged, swa_utils.AveragedModel) and isinstance(averaged, tt.nn.Module)
    assert averaged(tt.ones(1, 2)).shape == (1, 2)
