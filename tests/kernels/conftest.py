"""Fixtures for the kernel tests: the CPU executor builds of the attention kernels (cached)."""

import shutil

import pytest

from tinytensor.kernels.cpu_executor import CpuModule
from tinytensor.kernels.flash_attention import FlashAttentionKernels, kernel_source

SCHEDULES = ("ascending", "descending", "random")


def require_gxx():
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed, so the CUDA kernels cannot run on the CPU executor")


@pytest.fixture(scope="session")
def executor_kernels():
    """{schedule: FlashAttentionKernels running flash_attention.cu on the CPU executor}."""
    require_gxx()
    code = kernel_source()
    return {
        s: FlashAttentionKernels(CpuModule(code, schedule=s, seed=7, name="flash_attention"))
        for s in SCHEDULES
    }
