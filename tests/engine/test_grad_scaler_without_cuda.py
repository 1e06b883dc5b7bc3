"""GradScaler for device "cuda" (the default, and tt.cuda.amp.GradScaler) on a machine without
CUDA: disabled with a warning, as torch does, so that scripts passing enabled=True (nanoGPT's
float16 default on the CPU) train exactly as without a scaler; device "cpu" stays enabled."""

import numpy as np
import pytest
import torch

import tinytensor as tt

pytestmark = pytest.mark.skipif(
    tt.cuda.is_available() or torch.cuda.is_available(),
    reason="CUDA is available here: the scaler stays enabled, there is nothing to disable",
)


def _one_step(lib, make_scaler):
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        scaler = make_scaler(lib)
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0], dtype=lib.float64))
    optimizer = lib.optim.SGD([p], lr=0.1)
    loss = (p * p).sum()
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    return scaler.is_enabled(), scaler.get_scale(), float(scaled), p.tolist()


@pytest.mark.parametrize(
    "make_scaler",
    [
        lambda lib: lib.cuda.amp.GradScaler(enabled=True),
        lambda lib: lib.amp.GradScaler(enabled=True),
        lambda lib: lib.amp.GradScaler("cuda", init_scale=1024.0),
    ],
    ids=["cuda.amp", "amp default device", "amp cuda"],
)
def test_disabled_without_cuda_as_torch(make_scaler):
    with np.testing.suppress_warnings() as sup:
        sup.filter(FutureWarning)  # torch.cuda.amp.GradScaler's deprecation notice
        ref = _one_step(torch, make_scaler)
    ours = _one_step(tt, make_scaler)
    assert ours == ref == (False, 1.0, 5.0, [0.8, -1.6])


def test_cpu_device_stays_enabled():
    assert tt.amp.GradScaler("cpu", init_scale=8.0).get_scale() == 8.0
