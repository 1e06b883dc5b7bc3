"""Shared test fixtures: the device parameter and the reference libraries (torch, transformers).

Comparison tests ask for the `torch` (or `transformers`) fixture. Where the library is missing they
skip with a printed reason; under TINYTENSOR_REQUIRE_REFERENCE=1 (set by scripts/test.sh, so CI)
they fail instead, so that a broken install can never pass silently.
"""

import importlib
import os

import pytest

import tinytensor as tt

REQUIRE_REFERENCE = os.environ.get("TINYTENSOR_REQUIRE_REFERENCE") == "1"


def import_reference(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if REQUIRE_REFERENCE:
            pytest.fail(f"{name} is required under TINYTENSOR_REQUIRE_REFERENCE=1 but failed: {e}")
        pytest.skip(f"{name} is not installed, so the comparison with it is skipped ({e})")


@pytest.fixture(scope="session")
def torch():
    torch = import_reference("torch")
    torch.set_default_dtype(torch.float64)
    return torch


@pytest.fixture(scope="session")
def transformers():
    import_reference("torch")
    return import_reference("transformers")


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """Runs a test on the CPU and, where CuPy sees a GPU, again on the GPU."""
    if request.param == "cuda" and not tt.cuda.is_available():
        pytest.skip("no CUDA GPU here (CuPy missing or no device): the cuda case is skipped")
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    tt.manual_seed(0)


def pytest_configure(config):
    """The kernels compile as in a user's process: with 512-bit vectors where the CPU has
    them. Set before any test module compiles numba code of its own (numba reads the target's
    features once, at its first compile, and the kernels would then get LLVM's 256-bit default)."""
    from tinytensor.kernels.cpu import dispatch

    if dispatch.fused_available():
        dispatch._prefer_wide_vectors()


def pytest_unconfigure(config):
    """The test command's last line names the machine configuration it ran under: a result that
    differs between machines can be traced to one (kernels/cpu/machine.py)."""
    from tinytensor.kernels.cpu import machine

    print(machine.describe())
