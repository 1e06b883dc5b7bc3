"""The import paths PyTorch programs open with, importable and doing on a CPU what torch's do
there (each checked on both libraries where torch has the same behaviour)."""

from __future__ import annotations

import importlib
import warnings

import pytest

import tinytensor as tt

PATHS = [
    "autograd.functional", "autograd.forward_ad", "autograd.function", "backends.cudnn",
    "backends.cuda", "backends.mkldnn", "backends.mps", "cuda.amp", "amp", "func", "jit",
    "testing", "utils.checkpoint", "utils.data", "nn.functional", "nn.init", "optim.lr_scheduler",
]  # fmt: skip


@pytest.mark.parametrize("path", PATHS)
def test_the_path_imports_as_torch_s(torch, path):
    importlib.import_module(f"torch.{path}")
    importlib.import_module(f"tinytensor.{path}")


def test_backend_flags_are_modules_that_keep_their_settings(torch):
    for lib in (torch, tt):
        cudnn = importlib.import_module(f"{lib.__name__}.backends.cudnn")
        saved = cudnn.benchmark
        cudnn.benchmark = True
        assert lib.backends.cudnn.benchmark is True  # the same module either way
        cudnn.benchmark = saved
        assert lib.backends.mps.is_available() is False
        lib.backends.cuda.matmul.allow_tf32 = lib.backends.cuda.matmul.allow_tf32


def test_cuda_amp_spelling_on_a_cpu(torch):
    for lib in (torch, tt):
        amp = importlib.import_module(f"{lib.__name__}.cuda.amp")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch deprecates the spelling, and has no GPU here
            scaler = amp.GradScaler(enabled=False)
            assert scaler.is_enabled() is False
            with amp.autocast(enabled=False):
                pass


def test_jit_is_the_identity_and_says_so_once():
    def f(x):
        return x * 2

    with pytest.warns(UserWarning, match="no TorchScript"):
        scripted = tt.jit.script(f)
    assert scripted is f and tt.jit.trace(f, tt.ones(2)) is f and not tt.jit.is_scripting()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tt.jit.script(f)  # said once
